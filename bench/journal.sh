#!/usr/bin/env bash
# journal::read of 100,000 entries against `journalctl -o json` alone, side by side in one
# hyperfine run, inside a private host with a real journald. Needs root.
#   bash bench/journal.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
cargo build --release -q
export OPSBOOK_BIN="$PWD/target/release/opsbook"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
unshare --mount --net --pid --fork --kill-child --mount-proc \
  bash tests/support/private-host.sh "$state" bash bench/journal-inner.sh "$state"
python3 bench/medians.py "$state/journal.json"
