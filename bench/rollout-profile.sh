#!/usr/bin/env bash
# Where opsbook's own CPU goes in a verified rollout (needs root, perf and ansible-core's
# absence is fine): boots N client hosts and a server as bench/rollout-fleet.sh does, deploys
# the twin agent and shipper, then records one `configure` rollout of ROLE (`--serial 10%`,
# the built-in template with one more comment line) under `perf record` (DWARF call graphs,
# opsbook's process only) and prints its own CPU a host by phase (bench/rollout_profile.py).
#   sudo OPSBOOK_BIN=target/release/opsbook bash bench/rollout-profile.sh [N] [ROLE]
#   (N: 10 clients; ROLE: log-shipper or metrics-agent, log-shipper by default)
# With OPSBOOK_BENCH_TRACE=sessions the recorded rollout runs under strace instead, and what is
# printed is the remote sessions it asked of the hosts' masters, a host (bench/rollout_sessions.py).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
[ "${OPSBOOK_BENCH_TRACE:-}" = sessions ] || command -v perf >/dev/null || { echo "perf is needed (linux-perf)" >&2; exit 1; }
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
fi
bin="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/opsbook}"
n=${1:-10} role=${2:-log-shipper}
d=$(mktemp -d /tmp/opsbook-rollout-profile.XXXXXX)
cleanup() { python3 "$repo/bench/fleet_boot.py" down "$d" || true; rm -rf "$d"; }
trap cleanup EXIT
echo "booting the server and $n clients…" >&2
OPSBOOK_BENCH_CLIENT_UNITS=0 python3 bench/fleet_boot.py up "$d" "$n" "$bin"
python3 bench/rollout_fleet_files.py "$d" "$bin" 3 10
cd "$d/rollout"
for r in metrics-agent log-shipper; do
  "$bin" run deploy --set "service=$r" --forks 10 >"deploy-$r.txt" || { tail -40 "deploy-$r.txt" >&2; exit 1; }
done
# One rollout unrecorded (the masters started, the page cache warm), then the recorded one.
"$bin" --runbooks "$d/marks/0/runbooks" run configure --set "service=$role" --serial 10% >/dev/null
if [ "${OPSBOOK_BENCH_TRACE:-}" = sessions ]; then
  command -v strace >/dev/null || { echo "strace is needed" >&2; exit 1; }
  strace -f -qq -s 4000 -e trace=sendto -o "$d/strace.txt" \
    "$bin" --runbooks "$d/marks/1/runbooks" run configure --set "service=$role" --serial 10% >"$d/rollout.txt"
  python3 "$repo/bench/rollout_sessions.py" "$n" <"$d/strace.txt"
  exit 0
fi
perf record -q -F 2000 --call-graph dwarf,32768 -o "$d/perf.data" -- \
  "$bin" --runbooks "$d/marks/1/runbooks" run configure --set "service=$role" --serial 10% >"$d/rollout.txt"
# OPSBOOK_BENCH_SCRIPT=FILE keeps the samples' stacks for a closer look.
script=${OPSBOOK_BENCH_SCRIPT:-$d/perf.script}
perf script -i "$d/perf.data" -F comm,tid,ip,sym 2>/dev/null >"$script"
python3 "$repo/bench/rollout_profile.py" "$n" <"$script"
