#!/usr/bin/env bash
# A healthy rollout over real private hosts (needs root): boots a server and two clients
# (bench/fleet_boot.py: each its own netns, sshd, systemd --user, journald, the twins as user
# units; the shipper batches for 1 s, the agent collects every 10 s and flushes every 1 s), then
# one hyperfine run side by side: a restart of each client component rolled out one host at a
# time (`--serial 1`: the rollback point kept, the change, its gate, the point dropped), by this
# build — whose gate is evidence made after the change — and by an earlier one, whose gate was
# the presence checks (OPSBOOK_OLD_BIN). The debug build: the time is the hosts' and the
# components' clocks, not opsbook's CPU.
#   sudo OPSBOOK_OLD_BIN=/path/to/older/opsbook bash bench/rollout.sh   (OPSBOOK_BENCH_RUNS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
old=${OPSBOOK_OLD_BIN:?give the earlier build: OPSBOOK_OLD_BIN=/path/to/opsbook}
cargo build -q --bin opsbook
bin="${CARGO_TARGET_DIR:-$repo/target}/debug/opsbook"
runs=${OPSBOOK_BENCH_RUNS:-3}
d=$(mktemp -d /tmp/opsbook-bench-rollout.XXXXXX)
trap 'python3 "$repo/bench/fleet_boot.py" down "$d" || true' EXIT
python3 bench/fleet_boot.py up "$d" 2 "$bin"
cd "$d"
for b in "$bin" "$old"; do
  "$b" run restart --hosts log-shipper --set component=log-shipper --serial 1 >/dev/null ||
    { echo "$b: the shipper's rollout does not pass" >&2; exit 1; }
done
hyperfine -N -i --runs "$runs" --export-json "$d/rollout.json" \
  -n "this build: restart log-shipper, 2 clients, --serial 1" "$bin run restart --hosts log-shipper --set component=log-shipper --serial 1" \
  -n "old build: restart log-shipper, 2 clients, --serial 1" "$old run restart --hosts log-shipper --set component=log-shipper --serial 1" \
  -n "this build: restart metrics-agent, 2 clients, --serial 1" "$bin run restart --hosts metrics-agent --set component=metrics-agent --serial 1" \
  -n "old build: restart metrics-agent, 2 clients, --serial 1" "$old run restart --hosts metrics-agent --set component=metrics-agent --serial 1" >/dev/null
python3 "$repo/bench/medians.py" "$d/rollout.json"
"$bin" run restart --hosts metrics-agent --set component=metrics-agent --serial 1 | grep -E "^(BATCH|[0-9] )|host\(s\)" || true
