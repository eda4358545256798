#!/usr/bin/env bash
# The change lock's cost at fleet scale (needs root): boots N client hosts and a server as
# bench/fleet-scale.sh does (bench/fleet_boot.py, light hosts; N = 30 by default), then runs a
# runbook that declares it changes the host and changes nothing (its runs take every host's
# change lock, hold it and let it go: the lock alone) with this build and an earlier one
# (OPSBOOK_OLD_BIN, which takes no lock), taking turns (bench/fleet_measure.py: medians of
# OPSBOOK_BENCH_RUNS runs, 7 by default, after one warm-up run each), over the lasting
# connections the previous run left (ssh.persist), then over new connections (ssh.persist = "0").
# The same build also runs the runbook without its "Changes the host" line (`nolock`: it takes no
# lock). The lock's cost per host is the difference of the medians divided by N, of this build
# with and without the lock (and, beside it, of the two builds): `cpu_ms` (opsbook's own
# process) and `tree_cpu_ms` (its process tree: the ssh masters too).
#   OPSBOOK_OLD_BIN=/path/to/older/opsbook sudo -E bash bench/fleet-lock.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
old=${OPSBOOK_OLD_BIN:?give the earlier build: OPSBOOK_OLD_BIN=/path/to/opsbook}
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
fi
bin="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/opsbook}"
n=${1:-30}
runs=${OPSBOOK_BENCH_RUNS:-7}
out_dir="${CARGO_TARGET_DIR:-$repo/target}/bench"
mkdir -p "$out_dir"
d=$(mktemp -d /tmp/opsbook-lock.XXXXXX)
cleanup() {
  for tool in old-warm new-warm nolock-warm old-cold new-cold nolock-cold; do
    python3 "$repo/bench/fleet_measure.py" --cleanup "$tool-$n"
  done
  OPSBOOK_BENCH_NET=${OPSBOOK_BENCH_NET:-1} python3 "$repo/bench/fleet_boot.py" down "$d"
  umount "$d/rt" 2>/dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "booting the server and $n clients…" >&2
OPSBOOK_BENCH_LIGHT=1 python3 bench/fleet_boot.py up "$d" "$n" "$bin"
mkdir -p "$d/rt" "$d/runbooks" && mount -t tmpfs -o mode=700,size=64m opsbook-bench-rt "$d/rt"
cat >"$d/runbooks/lock-bench.rhai" <<'RHAI'
//! A change that changes nothing: its runs take, hold and let go of each host's change lock.
//!
//! Changes the host: a run holds the host's change lock while it runs.
check("reached", true, "");
RHAI
grep -v '^//! Changes the host' "$d/runbooks/lock-bench.rhai" >"$d/runbooks/nolock-bench.rhai"
sed "s/^\[ssh\]$/[ssh]\nmax_masters = $((n + 10))/" "$d/opsbook.toml" >"$d/warm.toml"
sed 's/^\[ssh\]$/[ssh]\npersist = "0"/' "$d/opsbook.toml" >"$d/cold.toml"
lines=$d/results.jsonl
: >"$lines"
env=(env "XDG_RUNTIME_DIR=$d/rt")
for kind in warm cold; do
  python3 - "$d/contenders.json" "$kind" "$old" "$bin" "$((n + 1))" "${env[@]}" <<'PY'
import json, sys
path, kind, old, new, forks, env = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
run = lambda b, rb="lock-bench": env + [b, "--config", f"{kind}.toml", "--runbooks", "runbooks", "run", rb, "--hosts", "all", "--forks", forks]
json.dump([{"tool": f"old-{kind}", "setup": None, "argv": run(old)},
           {"tool": f"new-{kind}", "setup": None, "argv": run(new)},
           {"tool": f"nolock-{kind}", "setup": None, "argv": run(new, "nolock-bench")}], open(path, "w"))
PY
  echo "  old-$kind, new-$kind, nolock-$kind ($n clients)…" >&2
  (cd "$d" && python3 "$repo/bench/fleet_measure.py" "$n" "$runs" 1 "$d/contenders.json") | tee -a "$lines"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$lines" "$n" "$out_dir/fleet-lock.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
hosts = int(sys.argv[2]) + 1
json.dump(rows, open(sys.argv[3], "w"), indent=1)
by = {r["tool"]: r for r in rows}
print(f"{'tool':<9} {'wall ms':>8} {'cpu ms':>8} {'tree cpu':>9}")
for r in rows:
    print(f"{r['tool']:<9} {r['wall_ms']:>8} {r['cpu_ms']:>8} {r['tree_cpu_ms']:>9}")
for kind in ("warm", "cold"):
    o, n, u = by[f"old-{kind}"], by[f"new-{kind}"], by[f"nolock-{kind}"]
    print(f"{kind}: the lock costs {(n['cpu_ms'] - u['cpu_ms']) / hosts:+.3f} ms of opsbook's CPU a host, "
          f"{(n['tree_cpu_ms'] - u['tree_cpu_ms']) / hosts:+.3f} ms of its tree's ({hosts} hosts; this build "
          f"with and without it); against the earlier build {(n['cpu_ms'] - o['cpu_ms']) / hosts:+.3f} / "
          f"{(n['tree_cpu_ms'] - o['tree_cpu_ms']) / hosts:+.3f} ms")
PY
echo "written: $out_dir/fleet-lock.json"
