#!/usr/bin/env bash
# What the gate after a change costs (needs root): inside a private host (a real systemd
# --user, journald, loopback) with the four twins installed as units under their usual names,
# configured with the components' default clocks (the agent collects and flushes every 10 s,
# the shipper batches for 1 s: bench/twin-units.sh), one hyperfine run side by side:
#   - reload-shipper and reload-agent without their verification (`--set verify=false`): the
#     change alone;
#   - the same with it: evidence made after the change (a marker through the shipper, a point
#     of this host stamped after the reload);
#   - an earlier build's runbooks, today's gate before this one, when OPSBOOK_OLD_BIN is given.
# The gate's cost is the difference of the first two; the targets: the shipper's at most its
# batch_wait + 2 s, the agent's at most its flush_interval + jitter + 2 s. The wait is the
# components' own, not opsbook's CPU, so the debug build measures it as well as a release one.
#   sudo OPSBOOK_OLD_BIN=/path/to/older/opsbook bash bench/gate.sh   (OPSBOOK_BENCH_RUNS=5)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "the private host needs root" >&2; exit 1; }
cargo build -q --bin opsbook
export OPSBOOK_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/opsbook" REPO="$PWD"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
unshare --mount --net --pid --fork --kill-child --mount-proc \
  bash tests/support/private-host.sh "$state" bash bench/gate-inner.sh "$state"
python3 bench/medians.py "$state"/*.json
cat "$state/gate.txt" 2>/dev/null || true
