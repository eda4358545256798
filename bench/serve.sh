#!/usr/bin/env bash
# `opsbook serve` under load (targets: p99 < 20 ms for /metrics and / at 200 req/s with
# 20 jobs x 200 stored runs; < 50 MB resident after 10,000 stored runs; a quick-check job
# every 10 s costs < 1 % of one core). Run from the repository root:  bash bench/serve.sh
# (OPSBOOK_BIN=path uses a given binary instead of building the release one.)
#
# 1. A history of 20 jobs x 500 runs (10,000 runs) is written straight into SQLite, each run
#    a real quick-check report (from `opsbook run quick-check --sandbox --format json`).
# 2. `opsbook serve --sandbox` starts with those 20 jobs (every 1h, so they run once): each
#    job keeps its last 200 runs in memory. /metrics and / are loaded at 200 req/s for 20 s
#    each (bench/serve_load.py), then the service's resident memory is read.
# 3. A service with one quick-check job every 10 s runs for 60 s; its CPU time (user +
#    system, from /proc) is divided by the wall time, and so is that of the same service whose
#    job is due hourly: the in-process stack of --sandbox (four components, the agent writing
#    every second) costs the same in both, the difference is the job.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$PWD"
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
  OPSBOOK_BIN="${CARGO_TARGET_DIR:-$repo/target}/release/opsbook"
fi
bin="$OPSBOOK_BIN"
scratch=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT
cd "$scratch"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

"$bin" run quick-check --sandbox --format json > report.json || true
{
  echo "[serve]"
  echo "listen = \"127.0.0.1:$port\""
  echo "state_dir = \"$scratch/state\""
  echo "retention_runs = 1000"
  echo "jitter = \"0s\""
  for i in $(seq -w 1 20); do
    printf '[[serve.job]]\nname = "quick-check-%s"\nrunbook = "quick-check"\nevery = "1h"\n' "$i"
  done
} > opsbook.toml
mkdir -p state
python3 - "$scratch/state/history.sqlite" report.json <<'PY'
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
report = json.dumps(json.load(open(sys.argv[2])), separators=(",", ":"))
db.executescript("""CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, job TEXT NOT NULL,
  runbook TEXT NOT NULL, started_ms INTEGER NOT NULL, duration_s REAL NOT NULL, outcome TEXT NOT NULL,
  note TEXT, report TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_by_job ON runs (job, id);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_ms);""")
now = int(time.time() * 1000)
rows = []
for n in range(500):
    for j in range(1, 21):
        rows.append((len(rows) + 1, f"quick-check-{j:02d}", "quick-check", now - (500 - n) * 60000, 0.01, "passed", None, report))
db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
db.commit()
print(f"stored {len(rows)} runs ({len(report)} bytes of report each)")
PY

"$bin" serve --sandbox --config opsbook.toml 2>serve.log &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat serve.log; exit 1; }
echo "20 jobs, 200 runs each in memory; page $(curl -s "http://127.0.0.1:$port/" | wc -c) bytes, metrics $(curl -s "http://127.0.0.1:$port/metrics" | wc -c) bytes"
python3 "$repo/bench/serve_load.py" "http://127.0.0.1:$port/metrics" 200 20
python3 "$repo/bench/serve_load.py" "http://127.0.0.1:$port/" 200 20
echo "resident memory after 10,000 stored runs: $(awk '/VmRSS/ {printf "%.1f MB", $2/1024}' /proc/$pid/status) (peak $(awk '/VmHWM/ {printf "%.1f MB", $2/1024}' /proc/$pid/status))"
kill -TERM "$pid"; wait "$pid" || true; pid=""

# The same service with the job due only once an hour is the baseline (the in-process stack,
# the idle service); the difference is what the job every 10 s costs.
ticks=$(getconf CLK_TCK)
measure() {
  rm -rf "$scratch/state2"
  printf '[serve]\njitter = "0s"\n' > jitter.toml
  "$bin" serve --sandbox --config jitter.toml "quick-check@$1" --listen "127.0.0.1:$port" --state-dir "$scratch/state2" 2>serve2.log &
  pid=$!
  sleep 5
  local before after t0 t1
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat"); t0=$(date +%s.%N)
  sleep 60
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat"); t1=$(date +%s.%N)
  kill -TERM "$pid"; wait "$pid" || true; pid=""
  python3 -c "import sys; b,a,t0,t1,hz=map(float,sys.argv[1:]); print(f'{100*(a-b)/hz/(t1-t0):.2f}')" "$before" "$after" "$t0" "$t1" "$ticks"
}
idle=$(measure 1h)
busy=$(measure 10s)
python3 -c "import sys; i,b=map(float,sys.argv[1:]); print(f'CPU over 60 s, % of one core: quick-check every 10 s {b:.2f}, idle (job due hourly) {i:.2f}, the job itself {b-i:.2f}')" "$idle" "$busy"
