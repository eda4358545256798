#!/usr/bin/env bash
# `opsbook run quick-check` against the shell sequence (4 x systemctl is-active, curl /health,
# curl /ready) in one hyperfine run, and its peak memory, with the four twins installed as real
# units under the spec's names and ports (bench/twin-units.sh). Runs inside the private host
# (bench/quick-check.sh).
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
shell="systemctl --user is-active -q influxdb && systemctl --user is-active -q loki && systemctl --user is-active -q telegraf && systemctl --user is-active -q alloy && curl -sf -o /dev/null http://127.0.0.1:8086/health && curl -sf http://127.0.0.1:3100/ready | grep -q ready"
"$OPSBOOK_BIN" --user run quick-check >/dev/null
hyperfine -N --warmup 5 --runs 60 --export-json "$state/quick-check.json" \
  -n "opsbook run quick-check" "$OPSBOOK_BIN --user --format tap run quick-check" \
  -n "shell: 4 x systemctl is-active + 2 x curl" "sh -c '$shell'" >/dev/null
for r in quick-check verify checklist; do
  /usr/bin/time -f "peak memory of opsbook run $r: %M KiB" "$OPSBOOK_BIN" --user run $r >/dev/null 2> "$state/time.log" || true
  tail -1 "$state/time.log" >> "$state/memory.txt"
done
