#!/usr/bin/env bash
# `opsbook run quick-check` against the shell sequence (4 x systemctl is-active, curl /health,
# curl /ready) in one hyperfine run, and its peak memory, with the four units under the spec's
# names and ports (stand-in servers). Runs inside the private host (bench/quick-check.sh).
set -euo pipefail
state=$1
units=/run/user/0/systemd/user
cat > "$state/influxdb.json" <<'JSON'
{"GET /health": {"headers": {"Content-Type": "application/json"}, "body": "{\"name\":\"influxdb\",\"message\":\"ready for queries and writes\",\"status\":\"pass\",\"checks\":[],\"version\":\"v2.7.11\"}"}}
JSON
echo '{"GET /ready": {"headers": {"Content-Type": "text/plain"}, "body": "ready\n"}}' > "$state/loki.json"
printf '[Service]\nExecStart=/usr/bin/python3 %s %s 8086\n' "$REPO/tests/support/wire_server.py" "$state/influxdb.json" > $units/influxdb.service
printf '[Service]\nExecStart=/usr/bin/python3 %s %s 3100\n' "$REPO/tests/support/wire_server.py" "$state/loki.json" > $units/loki.service
for u in telegraf alloy; do printf '[Service]\nExecStart=/bin/sleep infinity\n' > $units/$u.service; done
systemctl --user daemon-reload
systemctl --user start influxdb loki telegraf alloy
for p in 8086 3100; do for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done
cd "$state"
shell="systemctl --user is-active -q influxdb && systemctl --user is-active -q loki && systemctl --user is-active -q telegraf && systemctl --user is-active -q alloy && curl -sf -o /dev/null http://127.0.0.1:8086/health && curl -sf http://127.0.0.1:3100/ready | grep -q ready"
"$OPSBOOK_BIN" --user run quick-check >/dev/null
hyperfine -N --warmup 5 --runs 60 --export-json "$state/quick-check.json" \
  -n "opsbook run quick-check" "$OPSBOOK_BIN --user --format tap run quick-check" \
  -n "shell: 4 x systemctl is-active + 2 x curl" "sh -c '$shell'" >/dev/null
/usr/bin/time -f "peak memory of opsbook run quick-check: %M KiB" "$OPSBOOK_BIN" --user run quick-check >/dev/null 2> "$state/time.log" || true
tail -1 "$state/time.log" > "$state/memory.txt"
