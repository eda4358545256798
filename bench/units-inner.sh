#!/usr/bin/env bash
# Status of the four stack units: opsbook (one D-Bus connection) against four
# `systemctl is-active` processes, side by side in one hyperfine run. Runs inside the private
# host (bench/units.sh).
set -euo pipefail
state=$1
for u in influxdb loki telegraf alloy; do
  printf '[Service]\nExecStart=/bin/sleep infinity\n' > "/run/user/0/systemd/user/$u.service"
done
systemctl --user daemon-reload
systemctl --user start influxdb loki telegraf alloy
mkdir -p "$state/runbooks"
cat > "$state/runbooks/status4.rhai" <<'RHAI'
for u in ["influxdb", "loki", "telegraf", "alloy"] { if !unit::is_active(u) { throw u; } }
RHAI
cd "$state"
hyperfine -N --warmup 5 --runs 100 --export-json "$state/units.json" \
  -n "opsbook: 4 unit statuses" "$OPSBOOK_BIN --user --format tap run status4" \
  -n "shell: 4 x systemctl is-active" "sh -c 'systemctl --user is-active -q influxdb; systemctl --user is-active -q loki; systemctl --user is-active -q telegraf; systemctl --user is-active -q alloy'" \
  >/dev/null
