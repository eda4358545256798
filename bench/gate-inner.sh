#!/usr/bin/env bash
# Inside the private host (bench/gate.sh): the twins as units with their default clocks, then
# the reloads with and without the gate after them, and an earlier build's, in one hyperfine run.
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
runs=${OPSBOOK_BENCH_RUNS:-5}
# A first reload of each, so every measured run starts from a shipper and an agent that have
# been reloaded before (the agent's points of before the change are in the database).
"$OPSBOOK_BIN" --user run reload-shipper --set verify=false >/dev/null
"$OPSBOOK_BIN" --user run reload-agent --set verify=false >/dev/null
old=()
if [ -n "${OPSBOOK_OLD_BIN:-}" ]; then
  old=(-n "old build: reload-shipper (its gate: reloaded, active)" "$OPSBOOK_OLD_BIN --user run reload-shipper"
    -n "old build: reload-agent (its gate: reloaded, active)" "$OPSBOOK_OLD_BIN --user run reload-agent")
fi
hyperfine -N -i --runs "$runs" --export-json "$state/gate.json" \
  -n "reload-shipper, no gate (verify=false)" "$OPSBOOK_BIN --user run reload-shipper --set verify=false" \
  -n "reload-shipper + evidence after it" "$OPSBOOK_BIN --user run reload-shipper" \
  -n "reload-agent, no gate (verify=false)" "$OPSBOOK_BIN --user run reload-agent --set verify=false" \
  -n "reload-agent + evidence after it" "$OPSBOOK_BIN --user run reload-agent" \
  "${old[@]}" >/dev/null
# One report of each with its gate, to show what the gate waited for and how long.
{ "$OPSBOOK_BIN" --user run reload-shipper; "$OPSBOOK_BIN" --user run reload-agent; } >"$state/gate-reports.txt" 2>&1 || true
grep -E "evidence|after the change|  \(" "$state/gate-reports.txt" > "$state/gate.txt" || true
