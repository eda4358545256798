#!/usr/bin/env bash
# Debian 13's own packages that the Debian 13 test root (debian13-root.sh) leaves out on purpose
# and that opsbook's prepare installs on a real host from the distribution's repository:
# nftables and what it depends on. Downloaded once from Debian's mirror into
# /opt/opsbook-test-tools/trixie-debs (or $2; the root is $1), exactly the .deb files apt
# would fetch to install them on that root, for the tests' local mirror
# (tests/support/apt_repo.rs) — the test hosts reach no network but their own.
#   bash tests/support/debian13-debs.sh            # a few seconds the first time, then instant
# Idempotent: a finished directory has `complete` and is left as it is; it is made beside
# and renamed into place, so an interrupted run leaves nothing that looks finished.
set -euo pipefail
root=${1:-/opt/opsbook-test-tools/trixie}
out=${2:-/opt/opsbook-test-tools/trixie-debs}
packages=(nftables)
[ -e "$out/complete" ] && exit 0
[ "$(id -u)" = 0 ] || { echo "debian13-debs.sh: must run as root (mounts)" >&2; exit 1; }
[ -e "$root/etc/opsbook-test-root" ] || bash "$(dirname "$0")/debian13-root.sh" "$root"
exec 9>"$(dirname "$out")/.$(basename "$out").lock"
flock 9
[ -e "$out/complete" ] && exit 0

work=$(mktemp -d "$(dirname "$out")/.$(basename "$out").tmp.XXXXXX")
trap 'umount -R "$work/root" 2>/dev/null || true; rm -rf --one-file-system "$work"' EXIT
mkdir -p "$work/upper" "$work/work" "$work/root" "$work/debs/partial"
# apt in the root itself (an overlay: the root stays as it is), with the Debian mirror its
# sources.list names (debootstrap's), in a mount namespace of its own; the network is this
# machine's.
# The script is the inner shell's: its variables expand there.
# shellcheck disable=SC2016
unshare --mount bash -euo pipefail -c '
  work=$1; root=$2; shift 2
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/work" "$work/root"
  mount -t proc proc "$work/root/proc"
  mount --bind /dev "$work/root/dev"
  mount --bind "$work/debs" "$work/root/var/cache/apt/archives"
  cp /etc/resolv.conf "$work/root/etc/resolv.conf"
  chroot "$work/root" apt-get update -qq
  chroot "$work/root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --download-only --no-install-recommends "$@"
' bash "$work" "$root" "${packages[@]}"
rm -rf "$out"
mkdir -p "$out"
cp "$work"/debs/*.deb "$out/"
echo "${packages[*]} and their dependencies for the Debian 13 test root, by tests/support/debian13-debs.sh" >"$out/complete"
ls "$out"
