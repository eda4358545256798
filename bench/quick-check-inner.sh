#!/usr/bin/env bash
# `opsbook run quick-check` against the shell sequence (4 x systemctl is-active, curl /health,
# curl /ready; and the one-call variant, one systemctl for the four units — the peer of issue
# #47's target; and Testinfra making the one-call shell's checks) in one run, taking turns
# (bench/interleave.py), and its peak memory, with the four twins installed as real units under their usual
# names and ports (bench/twin-units.sh); the memory of each of the heaviest runbooks, as an
# exit-0 run. Runs inside the private host (bench/quick-check.sh).
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
shell="systemctl --user is-active -q influxdb && systemctl --user is-active -q loki && systemctl --user is-active -q telegraf && systemctl --user is-active -q alloy && curl -sf -o /dev/null http://127.0.0.1:8086/health && curl -sf http://127.0.0.1:3100/ready | grep -q ready"
shell_one="systemctl --user is-active -q influxdb loki telegraf alloy && curl -sf -o /dev/null http://127.0.0.1:8086/health && curl -sf http://127.0.0.1:3100/ready | grep -q ready"
"$OPSBOOK_BIN" --user run quick-check >/dev/null
# An earlier build beside this one, when given: OPSBOOK_OLD_BIN=/path/to/opsbook bash bench/quick-check.sh
old=()
if [ -n "${OPSBOOK_OLD_BIN:-}" ]; then
  "$OPSBOOK_OLD_BIN" --user run quick-check >/dev/null
  old=(-n "old binary: opsbook run quick-check" "$OPSBOOK_OLD_BIN --user --format tap run quick-check")
fi
# Testinfra (pytest-testinfra, its local backend) making the same checks as the one-call shell,
# as a team that writes its checks in Python would: the units in one call, the two endpoints.
cat > "$state/test_quick_check.py" <<'PY'
"""The quick-check of the stack, written for Testinfra."""


def test_units_active(host):
    assert host.run("systemctl --user is-active -q influxdb loki telegraf alloy").rc == 0


def test_metrics_db_healthy(host):
    assert host.run("curl -sf -o /dev/null http://127.0.0.1:8086/health").rc == 0


def test_log_store_ready(host):
    assert "ready" in host.check_output("curl -sf http://127.0.0.1:3100/ready")
PY
testinfra=(-n "Testinfra: the same checks (pytest, local backend)"
  "python3 -m pytest -q -p no:cacheprovider --hosts=local:// $state/test_quick_check.py")
python3 -m pytest -q -p no:cacheprovider --hosts=local:// "$state/test_quick_check.py" >/dev/null
this=(-n "opsbook run quick-check" "$OPSBOOK_BIN --user --format tap run quick-check")
# Whichever build goes first tends to come out slower: OPSBOOK_OLD_FIRST=1 measures the old first.
if [ "${OPSBOOK_OLD_FIRST:-0}" = 1 ] && [ ${#old[@]} -gt 0 ]; then
  builds=("${old[@]}" "${this[@]}")
else
  builds=("${this[@]}" "${old[@]}")
fi
# The contenders take turns (bench/interleave.py: a block of 5 runs each, round after round), so
# load from elsewhere on the machine falls on all of them alike; 60 runs each by default.
runs=${OPSBOOK_BENCH_RUNS:-60}
pairs=()
set -- "${builds[@]}" \
  -n "shell: 4 x systemctl is-active + 2 x curl" "sh -c '$shell'" \
  -n "shell: 1 x systemctl is-active (4 units) + 2 x curl" "sh -c '$shell_one'" "${testinfra[@]}"
while [ $# -gt 0 ]; do pairs+=("$2" "$3"); shift 3; done
python3 "$REPO/bench/interleave.py" "$state/quick-check.json" $(((runs + 4) / 5)) 5 "${pairs[@]}"
# The target is a ratio to the one-call shell (issue #47: at most 0.25): said for each build.
python3 - "$state/quick-check.json" > "$state/ratio.txt" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
peer = results["shell: 1 x systemctl is-active (4 units) + 2 x curl"]["median"]
for name in ("opsbook run quick-check", "old binary: opsbook run quick-check"):
    if name in results:
        print(f"{name}: {results[name]['median'] / peer:.3f} x the one-call shell (medians)")
PY
[ "${OPSBOOK_BENCH_MEMORY:-1}" = 1 ] || exit 0
# Peak memory of the heaviest runbooks, each a passing run: first wait (up to 40 s) for the
# agent's first points (10 s interval) so verify and checklist have data to check.
for _ in $(seq 80); do "$OPSBOOK_BIN" --user run verify >/dev/null 2>&1 && break; sleep 0.5; done
for r in quick-check verify checklist e2e-logs e2e-metrics restart-all "logs --set lines=1000"; do
  rc=0
  /usr/bin/time -f "%M" -o "$state/time.log" "$OPSBOOK_BIN" --user run $r >/dev/null 2>&1 || rc=$?
  echo "peak memory of opsbook run $r: $(cat "$state/time.log") KiB (exit $rc)" >> "$state/memory.txt"
done
