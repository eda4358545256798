#!/usr/bin/env bash
# A verified rollout at fleet size, side by side (needs root and ansible-core): boots N client
# hosts and a server (bench/fleet_boot.py: each host its own netns, sshd, systemd --user and
# journald; the server runs the twin metrics database and log store), deploys the twin agent and
# shipper on every client with opsbook (their defaults: the agent collects and flushes every
# 10 s, the shipper batches for 1 s), then measures a configuration change (the built-in
# template with one more comment line, a new one each run) rolled out with `--serial 10%`,
# taking turns (bench/fleet_measure.py: medians of OPSBOOK_BENCH_RUNS runs, 3 by default,
# after OPSBOOK_BENCH_WARMUP warm-up runs each, 1 by default):
#   - opsbook-shipper / opsbook-agent: `opsbook run configure --set service=ROLE --serial 10%
#     --forks F` — each host's rollback point kept, the change checked by the component's own
#     tool, written, reloaded, and gated by evidence made after it (a marker line read back from
#     the log store; a point of the host stamped after the change), the point dropped;
#   - old-shipper / old-agent: the same by the build before (OPSBOOK_OLD_BIN);
#   - ansible-shipper / ansible-agent: ansible-playbook doing the same change — template (the
#     same Jinja), then the reload (the shipper's /-/reload, the agent's unit) — `serial: 10%`,
#     forks F, `gather_facts: false`, pipelining and ControlPersist, verifying nothing.
# F is the fleet benchmark's Ansible forks, 50 (OPSBOOK_BENCH_FORKS). Then, not measured: one
# agent rollout's own table (each batch's time) beside one host's configure alone, for "a batch
# costs one gate". Writes the medians to target/bench/rollout-fleet.json (fleet_measure.py's
# fields: wall_ms, cpu_ms = the tool's own process, tree_cpu_ms, machine_cpu_ms, …) and removes
# every host it booted.
#   sudo OPSBOOK_OLD_BIN=/path/to/older/opsbook bash bench/rollout-fleet.sh [N]   (N: 100)
# OPSBOOK_BIN: the opsbook measured (else this tree's debug build, built here).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
for tool in ansible-playbook unshare nsenter sshd; do
  command -v "$tool" >/dev/null || { echo "$tool is needed (ansible-core from PyPI, util-linux, openssh-server)" >&2; exit 1; }
done
old=${OPSBOOK_OLD_BIN:?give the build before: OPSBOOK_OLD_BIN=/path/to/opsbook}
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build -q --bin opsbook
fi
bin="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/opsbook}"
n=${1:-100}
runs=${OPSBOOK_BENCH_RUNS:-3}
warmup=${OPSBOOK_BENCH_WARMUP:-1}
forks=${OPSBOOK_BENCH_FORKS:-50}
out_dir="${CARGO_TARGET_DIR:-$repo/target}/bench"
mkdir -p "$out_dir"
d=$(mktemp -d /tmp/opsbook-rollout.XXXXXX)
tools=(opsbook-shipper old-shipper ansible-shipper opsbook-agent old-agent ansible-agent)
cleanup() {
  for tool in "${tools[@]}"; do python3 "$repo/bench/fleet_measure.py" --cleanup "$tool-$n"; done
  python3 "$repo/bench/fleet_boot.py" down "$d" || true
  rm -rf "$d"
}
# OPSBOOK_BENCH_KEEP=1 leaves a failed run's hosts up (then: python3 bench/fleet_boot.py down DIR).
trap 'status=$?; if [ $status != 0 ] && [ "${OPSBOOK_BENCH_KEEP:-0}" = 1 ]; then echo "kept: $d" >&2; else cleanup; fi' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$d/load.txt"
echo "booting the server and $n clients…" >&2
OPSBOOK_BENCH_CLIENT_UNITS=0 python3 bench/fleet_boot.py up "$d" "$n" "$bin"
# A mark per measured run (every contender's runs counted together) and a few more.
python3 bench/rollout_fleet_files.py "$d" "$bin" $(( (runs + warmup) * ${#tools[@]} + 10 )) "$forks"
cd "$d/rollout"

echo "deploying the agent and the shipper on $n clients…" >&2
for role in metrics-agent log-shipper; do
  "$bin" run deploy --set "service=$role" --forks "$forks" >"deploy-$role.txt" ||
    { tail -40 "deploy-$role.txt" >&2; exit 1; }
done
group=$d/contenders.json
mkdir -p "$d/out"
lines=$d/results.jsonl
: >"$lines"
contender() {
  python3 - "$group" "$@" <<'PY'
import json, sys
path, tool, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    group = json.load(open(path))
except FileNotFoundError:
    group = []
group.append({"tool": tool, "setup": None, "argv": argv})
json.dump(group, open(path, "w"))
PY
}
measure_group() {
  OPSBOOK_BENCH_OUT=$d/out python3 "$repo/bench/fleet_measure.py" "$n" "$runs" "$warmup" "$group" | tee -a "$lines"
  rm -f "$group"
}
rollout() { echo --runbooks "$d/marks/{run}/runbooks" run configure --set "service=$1" --serial 10% --forks "$forks"; }
ansible=(env "ANSIBLE_CONFIG=$d/rollout-ansible.cfg" ansible-playbook -e "mark={run}")
# OPSBOOK_BENCH_GROUPS: which rollouts to measure ("shipper agent").
# shellcheck disable=SC2046
for g in ${OPSBOOK_BENCH_GROUPS:-shipper agent}; do
  case $g in
    shipper) role=log-shipper ;;
    agent) role=metrics-agent ;;
    *) echo "OPSBOOK_BENCH_GROUPS: $g is neither shipper nor agent" >&2; exit 1 ;;
  esac
  contender "opsbook-$g" "$bin" $(rollout $role)
  contender "old-$g" "$old" $(rollout $role)
  contender "ansible-$g" "${ansible[@]}" "$d/$g.yml"
  measure_group
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$d/load.txt"
python3 - "$lines" "$out_dir/rollout-fleet.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print(f"{'hosts':>5}  {'tool':<16} {'wall ms':>9} {'cpu ms':>8} {'cpu/host':>8} {'tree cpu':>9} {'machine cpu':>11}")
for r in rows:
    print(f"{r['hosts']:>5}  {r['tool']:<16} {r['wall_ms']:>9} {r['cpu_ms']:>8} {r['cpu_ms'] / r['hosts']:>8.2f} "
          f"{r['tree_cpu_ms']:>9} {r['machine_cpu_ms']:>11}")
PY
# A batch costs one gate: one agent rollout's own table beside one host's change alone.
mark=$(( (runs + warmup) * ${#tools[@]} + 5 ))
"$bin" --runbooks "$d/marks/$mark/runbooks" run configure --set service=metrics-agent --serial 10% \
  --forks "$forks" | sed -n '/^rollout of /,/^$/p'
for i in 1 2 3; do
  start=$(date +%s%N)
  "$bin" --runbooks "$d/marks/$((mark + i))/runbooks" run configure --set service=c1:metrics-agent >/dev/null
  echo "one host's agent change alone (c1): $(( ($(date +%s%N) - start) / 1000000 )) ms"
done
cat "$d/load.txt"
echo "written: $out_dir/rollout-fleet.json"
