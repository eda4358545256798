# Sourced inside the private host by the benchmarks that need the stack: installs the four
# twins (`opsbook twin …`) as user units under the spec's names and ports, configured as the
# real components are by default (the shipper batches for 1 s, like Alloy's loki.write), starts
# them in the safe order and waits until the log store is ready and the first lines shipped.
# Expects $state (a scratch directory) and $OPSBOOK_BIN; leaves opsbook.toml in $state.
units=/run/user/0/systemd/user
token=bench-token-5a4b3c
cat > "$state/telegraf.conf" <<CONF
[agent]
  interval = "10s"
[[outputs.influxdb_v2]]
  urls = ["http://127.0.0.1:8086"]
  token = "$token"
  organization = "opsbook"
  bucket = "telegraf"
[[inputs.cpu]]
[[inputs.mem]]
[[inputs.disk]]
CONF
cat > "$state/alloy.toml" <<'CONF'
[server]
listen = "127.0.0.1:12345"
[write]
url = "http://127.0.0.1:3100/loki/api/v1/push"
batch_wait = "1s"
CONF
cat > "$state/opsbook.toml" <<CONF
[metrics_db]
token = "$token"
org = "opsbook"
[metrics_agent]
config = "$state/telegraf.conf"
test_command = ["$OPSBOOK_BIN", "twin", "metrics-agent", "{config}", "--test"]
[log_shipper]
config = "$state/alloy.toml"
validate_command = ["$OPSBOOK_BIN", "twin", "log-shipper", "validate", "{config}"]
CONF
printf '[Service]\nExecStart=%s twin metrics-db --token %s --org opsbook\n' "$OPSBOOK_BIN" "$token" > $units/influxdb.service
printf '[Service]\nExecStart=%s twin log-store --ready-delay 1s\n' "$OPSBOOK_BIN" > $units/loki.service
printf '[Service]\nExecStart=%s twin metrics-agent %s\nExecReload=/bin/kill -HUP $MAINPID\n' "$OPSBOOK_BIN" "$state/telegraf.conf" > $units/telegraf.service
printf '[Service]\nExecStart=%s twin log-shipper %s\nExecReload=/bin/kill -HUP $MAINPID\n' "$OPSBOOK_BIN" "$state/alloy.toml" > $units/alloy.service
systemctl --user daemon-reload
systemctl --user start influxdb loki
for i in $(seq 100); do curl -sf http://127.0.0.1:3100/ready >/dev/null 2>&1 && break; sleep 0.1; done
systemctl --user start telegraf alloy
for i in $(seq 100); do curl -sf http://127.0.0.1:12345/-/ready >/dev/null 2>&1 && break; sleep 0.1; done
sleep 2
cd "$state"
