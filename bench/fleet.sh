#!/usr/bin/env bash
# The fleet benchmark (needs root): for 1, 5 and 20 client hosts plus the server, boots real
# private hosts (bench/fleet_boot.py: each its own netns, sshd, systemd --user, journald, the
# twins as user units) and measures side by side in ONE hyperfine run per size:
#   - opsbook run quick-check --hosts all, cold (`ssh.persist = "0"`: opsbook opens its own
#     connection to each host and closes it at exit) and warm (the default `ssh.persist`: the
#     connections the previous run left, as Ansible's ControlPersist), and opsbook run
#     checklist --hosts all, warm;
#   - Ansible: ansible-playbook with systemd_service for each host's two units and two uri
#     tasks (forks 20, pipelining, ControlMaster/ControlPersist 60s as Ansible's default);
#   - the hand-written ssh loop (bench/fleet-loop.sh), cold (a new connection per host) and warm
#     (over connections opened beforehand).
# Then the peak memory (max RSS, /usr/bin/time -v) of opsbook's process for both runbooks.
#   sudo bash bench/fleet.sh [SIZES...]        (default: 1 5 20; OPSBOOK_BENCH_RUNS=5 runs each)
# Results (hyperfine JSON, memory) stay in the printed directory.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
for tool in hyperfine ansible-playbook /usr/bin/time unshare nsenter sshd; do
  command -v "$tool" >/dev/null || { echo "$tool is needed (hyperfine, ansible-core from PyPI, time, util-linux, openssh-server)" >&2; exit 1; }
done
# OPSBOOK_BIN: measure that binary instead of building the release one.
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
fi
bin="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/opsbook}"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 5 20)
runs=${OPSBOOK_BENCH_RUNS:-5}
results=$(mktemp -d /tmp/opsbook-bench-fleet.XXXXXX)
current=""
cleanup() {
  [ -n "$current" ] || return 0
  while read -r name _; do ssh -F "$current/ssh_config" -o "ControlPath=$current/cm-%n" -O exit "$name" 2>/dev/null || true; done < "$current/hosts.txt"
  python3 "$repo/bench/fleet_boot.py" down "$current"
  current=""
}
trap cleanup EXIT
for n in "${sizes[@]}"; do
  d=$results/fleet-$n
  current=$d
  python3 bench/fleet_boot.py up "$d" "$n" "$bin"
  # opsbook cold: the same configuration with connections that end with each run.
  sed 's/^\[ssh\]$/[ssh]\npersist = "0"/' "$d/opsbook.toml" >"$d/cold.toml"
  grep -q '^persist = "0"' "$d/cold.toml" || { echo "no [ssh] table in $d/opsbook.toml" >&2; exit 1; }
  # The warm loop's shared connections, one master per host.
  while read -r name _; do
    ssh -F "$d/ssh_config" -o ControlMaster=yes -o "ControlPath=$d/cm-%n" -o ControlPersist=600 -fN "$name"
  done < "$d/hosts.txt"
  # Each contender must pass before it is timed.
  (cd "$d" && "$bin" run quick-check --hosts all --forks 25 >/dev/null && "$bin" run checklist --hosts all --forks 25 >"$d/checklist.txt") || {
    echo "opsbook does not pass on the fleet of $n (see $d/checklist.txt)" >&2; exit 1; }
  (cd "$d" && ANSIBLE_CONFIG="$d/ansible.cfg" ansible-playbook playbook.yml >"$d/ansible.txt") || {
    echo "the playbook does not pass (see $d/ansible.txt)" >&2; exit 1; }
  bash bench/fleet-loop.sh "$d" cold && bash bench/fleet-loop.sh "$d" warm
  (cd "$d" && hyperfine --warmup 1 --runs "$runs" --export-json "$results/fleet-$n.json" \
    -n "opsbook quick-check cold ($n+1 hosts)" "$bin --config cold.toml run quick-check --hosts all --forks 25" \
    -n "opsbook quick-check warm ($n+1 hosts)" "$bin run quick-check --hosts all --forks 25" \
    -n "opsbook checklist warm ($n+1 hosts)" "$bin run checklist --hosts all --forks 25" \
    -n "ansible-playbook ($n+1 hosts)" "ANSIBLE_CONFIG=$d/ansible.cfg ansible-playbook playbook.yml" \
    -n "ssh loop cold ($n+1 hosts)" "bash $repo/bench/fleet-loop.sh $d cold" \
    -n "ssh loop warm ($n+1 hosts)" "bash $repo/bench/fleet-loop.sh $d warm")
  for runbook in quick-check checklist; do
    rss=$(cd "$d" && /usr/bin/time -v "$bin" run "$runbook" --hosts all --forks 25 2>&1 >/dev/null | awk '/Maximum resident/ {print $NF}')
    echo "peak memory of opsbook $runbook ($n+1 hosts): $rss KB" | tee -a "$results/memory.txt"
  done
  cleanup
done
python3 bench/medians.py "$results"/fleet-*.json
cat "$results/memory.txt"
echo "results: $results"
