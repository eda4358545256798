#!/usr/bin/env bash
# Builds the Debian package of opsbook: target/debian/opsbook_<version>-1_<arch>.deb (in
# $CARGO_TARGET_DIR when set). Steps: the release binary; from it, the man pages (opsbook.1
# and one per subcommand) and the bash, zsh and fish completions, generated from the clap
# definitions into the target dir (`opsbook generate man|completions DIR`), where the assets
# of [package.metadata.deb] in Cargo.toml expect them; then `cargo deb --no-build`.
#
#   bash packaging/build-deb.sh        # needs cargo-deb: cargo install --locked cargo-deb
#
# cargo-deb is looked for in PATH, then in /opt/opsbook-test-tools/bin (where .ci/run
# installs it). The package's own checks: lintian target/debian/opsbook_*.deb, and
# tests/package.rs (contents, install on a Debian 13 host, remove, purge).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

PATH=$PATH:/opt/opsbook-test-tools/bin
command -v cargo-deb >/dev/null || {
  echo "build-deb.sh: cargo-deb is missing: cargo install --locked cargo-deb" >&2
  exit 1
}

# Where cargo puts things ($CARGO_TARGET_DIR, a config's build.target-dir, else ./target).
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target" ] || { echo "build-deb.sh: cannot tell the target directory" >&2; exit 1; }

# OPSBOOK_DEB_PROFILE=dev packages the build the tests use (CI, which checks the package, not
# its speed: no second build of every crate; cargo-deb strips the binary).
profile=${OPSBOOK_DEB_PROFILE:-release}
# OPSBOOK_DEB_PREBUILT=1: the binary is built already (CI's `cargo build --workspace --tests`,
# whose features the tests' build shares; building `-p opsbook` alone would build it again).
[ -n "${OPSBOOK_DEB_PREBUILT:-}" ] || cargo build --profile "$profile" --locked -p opsbook --bin opsbook
# Cargo keeps the dev profile's output in `debug` (CI packages the build its tests use).
[ "$profile" = dev ] && profile_dir=debug || profile_dir=$profile

# Made afresh: a page of a subcommand that no longer exists must not be packaged, nor an
# older .deb picked up instead of this one.
rm -rf "$target/$profile_dir/man" "$target/$profile_dir/completions" "$target"/debian/opsbook_*.deb
"$target/$profile_dir/opsbook" generate man "$target/$profile_dir/man" >/dev/null
# Debian installs man pages compressed (cargo-deb leaves them as they are); -n keeps the
# name and time out of the file, so the same pages make the same package.
gzip -9n "$target"/$profile_dir/man/*.1
"$target/$profile_dir/opsbook" generate completions "$target/$profile_dir/completions" >/dev/null

cargo deb --no-build --profile "$profile" -p opsbook
echo "build-deb.sh: $(ls "$target"/debian/opsbook_*.deb) in $(($(date +%s) - started)) s"
