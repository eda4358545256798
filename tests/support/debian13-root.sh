#!/usr/bin/env bash
# The root filesystem of the Debian 13 test hosts (tests/support/debian13.rs): a minimal
# Debian 13 (trixie) with systemd as init, D-Bus, sshd and podman (Quadlet), made once by
# debootstrap from Debian's own mirror into /opt/opsbook-test-tools/trixie (or $1), e.g.
#   bash tests/support/debian13-root.sh            # 1-3 minutes the first time, then instant
# Idempotent: a finished root has /etc/opsbook-test-root and is left as it is. The root is
# made in a temporary directory beside it and renamed into place only once complete, so an
# interrupted run leaves nothing that looks finished (its leftovers are removed next time).
# Hosts only ever read it (each boots on an overlay of its own), so nothing here is per host:
# hostname, machine id and ssh host keys are written by each host (debian13-host.sh).
set -euo pipefail
root=${1:-/opt/opsbook-test-tools/trixie}
parent=$(dirname "$root")
marker=etc/opsbook-test-root
[ -e "$root/$marker" ] && exit 0
[ "$(id -u)" = 0 ] || { echo "debian13-root.sh: must run as root (debootstrap)" >&2; exit 1; }
mkdir -p "$parent"
# Two runs at once (CI and a developer) make it once: the second waits, then finds it made.
exec 9>"$parent/.$(basename "$root").lock"
flock 9
[ -e "$root/$marker" ] && exit 0

# debootstrap from Debian's packages; apt may be busy with another install for a while.
if ! command -v debootstrap >/dev/null 2>&1; then
  for attempt in $(seq 30); do
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null && break
    [ "$attempt" = 30 ] && { echo "debian13-root.sh: cannot install debootstrap" >&2; exit 1; }
    apt-get update -qq || true
    sleep 10
  done
fi

# What an earlier, interrupted run left: its mounts (debootstrap mounts /proc and /sys into
# the target while it installs) first, so removing it never reaches into the real ones.
cleanup() {
  local dir=$1
  findmnt -rn -o TARGET | grep -F "$dir/" | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$dir"
}
for old in "$parent/.$(basename "$root").tmp."*; do
  [ -e "$old" ] && cleanup "$old"
done
[ -e "$root" ] && cleanup "$root" # a root without the marker is not ours to trust

tmp=$(mktemp -d "$parent/.$(basename "$root").tmp.XXXXXX")
trap 'cleanup "$tmp"' EXIT
started=$(date +%s)
# What an operator's host has that the tests use, and nothing more: prepare must install the
# rest itself (nftables, for one, is not here on purpose).
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,podman,runc,openssh-server,iproute2,catatonit,curl,procps \
  trixie "$tmp" >"$tmp.log" 2>&1 || {
  tail -n 30 "$tmp.log" >&2
  rm -f "$tmp.log"
  exit 1
}
rm -f "$tmp.log"

# systemd-modules-load fails without CAP_SYS_MODULE and would leave every host `degraded`.
ln -sf /dev/null "$tmp/etc/systemd/system/systemd-modules-load.service"
# Per host, not shared: each host writes its own machine id (an empty file means "none yet"
# to systemd) and its own ssh host keys.
: >"$tmp/etc/machine-id"
rm -f "$tmp"/etc/ssh/ssh_host_*
# The downloaded .deb files are installed already (about a third of the size).
rm -f "$tmp"/var/cache/apt/archives/*.deb

# mktemp made it 0700: the root directory of a host is 0755, or no other user than root gets
# anywhere (sshd's privilege separation, dbus, systemd's dynamic users).
chmod 755 "$tmp"
echo "Debian 13 test root made by tests/support/debian13-root.sh in $(($(date +%s) - started)) s" >"$tmp/$marker"
mv -T "$tmp" "$root"
trap - EXIT
echo "debian13-root.sh: $root made in $(($(date +%s) - started)) s"
