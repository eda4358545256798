#!/usr/bin/env bash
# Shared by the benchmarks that need a real systemd: builds the release binary, boots a
# private host (tests/support/private-host.sh), runs bench/NAME-inner.sh inside it, and
# prints the medians of the hyperfine JSON files it leaves in the state directory.
#   bash bench/in-private-host.sh NAME
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "the private host needs root" >&2; exit 1; }
# OPSBOOK_BIN: a build to measure instead of this tree's release build (built here).
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
fi
export OPSBOOK_BIN="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/opsbook}" REPO="$PWD"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
unshare --mount --net --pid --fork --kill-child --mount-proc \
  bash tests/support/private-host.sh "$state" bash "bench/$name-inner.sh" "$state"
ls "$state"/*.json >/dev/null 2>&1 && python3 bench/medians.py "$state"/*.json
cat "$state"/*.txt 2>/dev/null | grep -v '^$' || true
