#!/usr/bin/env bash
# Status of the four stack units: opsbook (one D-Bus connection) against four
# `systemctl is-active` processes, side by side in one hyperfine run, inside a private host
# (real systemd --user and journald; see tests/support/private-host.sh). Needs root.
#   bash bench/units.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
cargo build --release -q
export OPSBOOK_BIN="$PWD/target/release/opsbook" REPO="$PWD"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
unshare --mount --net --pid --fork --kill-child --mount-proc \
  bash tests/support/private-host.sh "$state" bash bench/units-inner.sh "$state"
python3 bench/medians.py "$state/units.json"
