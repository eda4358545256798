#!/usr/bin/env bash
# What a cold host costs beyond one ssh connection, over the whole process tree (needs root
# and perf): boots N client hosts and a server as bench/fleet-scale.sh does (light hosts), then
# for opsbook cold (`ssh.persist = "0"`) and the cold ssh loop (bench/fleet-loop.sh):
#   - the processes each starts per host (one traced run: execve and fork/clone, threads aside);
#   - where the CPU of everything it started on this machine went (RUNS runs under
#     `perf record -e cpu-clock -g`, children followed): per host, by process, and for the ssh
#     processes by kernel entry (system call, page fault) against user time.
# The hosts' own processes (sshd, systemd, journald) are outside both trees, as in the benchmark.
#   sudo bash bench/fleet-profile.sh [N] [RUNS]        (default 50 hosts, 3 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is needed (linux-perf)" >&2; exit 1; }
n=${1:-50} runs=${2:-3}
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
fi
bin="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/opsbook}"
d=$(mktemp -d /tmp/opsbook-profile.XXXXXX)
cleanup() {
  python3 "$repo/bench/fleet_boot.py" down "$d"
  umount "$d/rt" 2>/dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
echo "booting the server and $n clients…" >&2
OPSBOOK_BENCH_LIGHT=1 python3 bench/fleet_boot.py up "$d" "$n" "$bin"
mkdir -p "$d/rt" && mount -t tmpfs -o mode=700,size=64m opsbook-profile-rt "$d/rt"
sed 's/^\[ssh\]$/[ssh]\npersist = "0"/' "$d/opsbook.toml" >"$d/cold.toml"
opsbook=(env "XDG_RUNTIME_DIR=$d/rt" "$bin" --config "$d/cold.toml" run quick-check --hosts all --forks $((n + 1)))
loop=(bash "$repo/bench/fleet-loop.sh" "$d" cold)
"${opsbook[@]}" >/dev/null
"${loop[@]}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for tool in opsbook loop; do
  declare -n argv=$tool
  strace -f -qq -e trace=execve,fork,vfork,clone,clone3 -o "$d/$tool.strace" "${argv[@]}" >/dev/null
  perf record -q -e cpu-clock -F 2000 -g -o "$d/$tool.perf" -- \
    sh -c "for i in \$(seq $runs); do $(printf '%q ' "${argv[@]}") >/dev/null || exit 1; done"
  perf script -i "$d/$tool.perf" -F comm,ip,sym 2>/dev/null >"$d/$tool.script"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$repo/bench/fleet_profile.py" "$((n + 1))" "$runs" "$d/opsbook" "$d/loop"
