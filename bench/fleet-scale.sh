#!/usr/bin/env bash
# The fleet at scale (needs root): for each size N (default 50 100 200) boots N client hosts
# and a server (bench/fleet_boot.py with OPSBOOK_BENCH_LIGHT=1: each host its own netns, sshd,
# systemd --user and journald; the server runs the twin metrics database and log store, the
# clients light stand-ins under the agent's and shipper's unit names, enough for a check that
# reads unit states), then measures the contenders in pairs, taking turns (bench/fleet_measure.py:
# medians of OPSBOOK_BENCH_RUNS runs, 5 by default, after one warm-up run each; the warm pair,
# then the cold pair, then Ansible):
#   - opsbook-warm: `opsbook run quick-check --hosts all` over the lasting connections the
#     previous run left (ssh.persist, as Ansible's ControlPersist; ssh.max_masters above N);
#   - opsbook-cold: the same with `ssh.persist = "0"` (a new connection per host, ended at exit);
#   - ssh-loop-warm / ssh-loop-cold: bench/fleet-loop.sh (one ssh per host in the background,
#     over masters opened beforehand, or a new connection each);
#   - ansible (at 100 hosts only; OPSBOOK_BENCH_ANSIBLE=0 skips it, for repeated runs): ansible-playbook
#     with systemd_service and uri, forks 50, pipelining, ControlPersist;
#   - with OPSBOOK_BENCH_SAME=1, the cold loop against itself (ssh-loop-cold-a / -b, taking turns
#     as every pair does): how far apart two identical contenders come out here, the benchmark's
#     own spread, to read the cold pair's ratios against.
# OPSBOOK_BENCH_KEX=ALGORITHMS gives every contender's ssh the same key exchange
# (bench/fleet_boot.py); unset, ssh's default (sntrup761x25519 on Debian 12) stands.
# Every contender checks the same: the host's two units active, the server's /health and
# /ready answered from that host; all of them run at once (opsbook --forks N+1, like the loop).
# Writes the medians to target/bench/fleet-scale.json (a list of {"hosts", "tool", "wall_ms",
# "cpu_ms", "tree_cpu_ms", "machine_cpu_ms", "peak_rss_kb", "tree_peak_rss_kb", "runs"}; see
# bench/fleet_measure.py for what each means) and removes every host it booted.
#   sudo bash bench/fleet-scale.sh [N...]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
for tool in ansible-playbook unshare nsenter sshd; do
  command -v "$tool" >/dev/null || { echo "$tool is needed (ansible-core from PyPI, util-linux, openssh-server)" >&2; exit 1; }
done
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
fi
bin="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/opsbook}"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(50 100 200)
runs=${OPSBOOK_BENCH_RUNS:-5}
out_dir="${CARGO_TARGET_DIR:-$repo/target}/bench"
mkdir -p "$out_dir"
results=$(mktemp -d /tmp/opsbook-scale.XXXXXX)
lines="$results/results.jsonl"
: >"$lines"
current="" n=0
cleanup() {
  [ -n "$current" ] || return 0
  for tool in opsbook-warm opsbook-cold ssh-loop-warm ssh-loop-cold ssh-loop-cold-a ssh-loop-cold-b ansible; do
    python3 "$repo/bench/fleet_measure.py" --cleanup "$tool-$n"
  done
  OPSBOOK_BENCH_NET=${OPSBOOK_BENCH_NET:-1} python3 "$repo/bench/fleet_boot.py" down "$current"
  umount "$current/rt" 2>/dev/null || true
  rm -rf "$current"
  current=""
}
# A size that fails stops the script: its hosts and this scratch directory go all the same.
trap 'cleanup; rm -rf "$results"' EXIT
# The medians so far, as JSON and as a table (written after each contender, so a size the
# machine cannot boot or a contender that fails leaves what was measured before it).
write_results() {
  python3 - "$lines" "$out_dir/fleet-scale.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print(f"{'hosts':>5}  {'tool':<14} {'wall ms':>9} {'cpu ms':>8} {'tree cpu':>9} {'machine cpu':>11} {'rss KB':>8} {'tree rss KB':>11}")
for r in rows:
    print(f"{r['hosts']:>5}  {r['tool']:<14} {r['wall_ms']:>9} {r['cpu_ms']:>8} {r['tree_cpu_ms']:>9} "
          f"{r.get('machine_cpu_ms', '-'):>11} {r['peak_rss_kb']:>8} {r['tree_peak_rss_kb']:>11}")
PY
}
# contender TOOL SETUP COMMAND...: adds one to the group measured next (SETUP may be "").
contender() {
  local tool=$1 setup=$2
  shift 2
  python3 - "$group" "$tool" "$setup" "$@" <<'PY'
import json, sys
path, tool, setup, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
try:
    group = json.load(open(path))
except FileNotFoundError:
    group = []
group.append({"tool": tool, "setup": setup or None, "argv": argv})
json.dump(group, open(path, "w"))
PY
}
# measure_group: runs the contenders added since the last call, taking turns.
measure_group() {
  echo "  $(python3 -c 'import json,sys; print(", ".join(c["tool"] for c in json.load(open(sys.argv[1]))))' "$group") ($n clients)…" >&2
  (cd "$current" && python3 "$repo/bench/fleet_measure.py" "$n" "$runs" 1 "$group") | tee -a "$lines"
  rm -f "$group"
  write_results >/dev/null
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$results/load.txt"
for n in "${sizes[@]}"; do
  d=$results/fleet-$n
  current=$d
  echo "booting the server and $n clients…" >&2
  started=$(date +%s)
  OPSBOOK_BENCH_LIGHT=1 OPSBOOK_BENCH_ANSIBLE_FORKS=50 python3 bench/fleet_boot.py up "$d" "$n" "$bin"
  echo "  booted in $(( $(date +%s) - started )) s" >&2
  forks=$((n + 1))
  # Lasting connections in a directory of this run's own (short enough for socket paths), a
  # tmpfs as every systemd machine's runtime directory (/run/user/UID) is: opsbook's default.
  mkdir -p "$d/rt" && mount -t tmpfs -o mode=700,size=64m opsbook-bench-rt "$d/rt"
  sed "s/^\[ssh\]$/[ssh]\nmax_masters = $((n + 10))/" "$d/opsbook.toml" >"$d/warm.toml"
  sed 's/^\[ssh\]$/[ssh]\npersist = "0"/' "$d/opsbook.toml" >"$d/cold.toml"
  grep -q '^persist = "0"' "$d/cold.toml" || { echo "no [ssh] table in $d/opsbook.toml" >&2; exit 1; }
  env=(env "XDG_RUNTIME_DIR=$d/rt")
  group=$d/contenders.json
  # The warm loop's masters are opened beforehand, inside its own measuring cgroup.
  masters="while read -r name _; do ssh -F $d/ssh_config -o ControlMaster=yes -o ControlPath=$d/cm-%n \
-o ControlPersist=600 -fN \$name; done < $d/hosts.txt"
  contender opsbook-warm "" "${env[@]}" "$bin" --config warm.toml run quick-check --hosts all --forks "$forks"
  contender ssh-loop-warm "$masters" bash "$repo/bench/fleet-loop.sh" "$d" warm
  measure_group
  contender opsbook-cold "" "${env[@]}" "$bin" --config cold.toml run quick-check --hosts all --forks "$forks"
  contender ssh-loop-cold "" bash "$repo/bench/fleet-loop.sh" "$d" cold
  measure_group
  if [ "${OPSBOOK_BENCH_SAME:-0}" = 1 ]; then
    contender ssh-loop-cold-a "" bash "$repo/bench/fleet-loop.sh" "$d" cold
    contender ssh-loop-cold-b "" bash "$repo/bench/fleet-loop.sh" "$d" cold
    measure_group
  fi
  if [ "$n" = 100 ] && [ "${OPSBOOK_BENCH_ANSIBLE:-1}" = 1 ]; then
    contender ansible "" env "ANSIBLE_CONFIG=$d/ansible.cfg" ansible-playbook playbook.yml
    measure_group
  fi
  echo "load after $n: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results/load.txt"
  cleanup
done
write_results
cat "$results/load.txt"
echo "written: $out_dir/fleet-scale.json"
