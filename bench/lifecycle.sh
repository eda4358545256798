#!/usr/bin/env bash
# The lifecycle benchmark (needs root): boots the fleet benchmark's private hosts
# (bench/fleet_boot.py: a server and N client hosts, each its own netns, sshd, systemd --user
# and journald, the twins as units) and measures, in one hyperfine run per size:
#   - `opsbook run deploy --set service=log-shipper`: the log shipper deployed on every client
#     host at once (each run starts from nothing: hyperfine's --prepare removes it first);
#   - the same deploy again with nothing changed (`changed=0`, nothing restarted), side by
#     side with `opsbook run verify-log-shipper --hosts log-shipper`.
# Targets: deploy to 20 hosts at most 3 x one host; a no-change deploy at most 1.5 x a verify.
#   sudo bash bench/lifecycle.sh [SIZES...]    (default: 1 20; OPSBOOK_BENCH_RUNS=5 runs each)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
[ "$(id -u)" = 0 ] || { echo "booting private hosts needs root" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)" >&2; exit 1; }
if [ -z "${OPSBOOK_BIN:-}" ]; then
  cargo build --release -q
fi
bin="${OPSBOOK_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/opsbook}"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 20)
runs=${OPSBOOK_BENCH_RUNS:-5}
results=$(mktemp -d /tmp/opsbook-bench-lifecycle.XXXXXX)
current=""
cleanup() {
  [ -n "$current" ] || return 0
  python3 "$repo/bench/fleet_boot.py" down "$current"
  current=""
}
trap cleanup EXIT
for n in "${sizes[@]}"; do
  d=$results/fleet-$n
  current=$d
  python3 bench/fleet_boot.py up "$d" "$n" "$bin"
  # The shipper as deploy makes it: Alloy's configuration from the built-in template (the
  # default path), the twin's program as its command line; the units fleet_boot.py started
  # are taken away first, so deploy and remove own the shipper.
  python3 - "$d/opsbook.toml" "$bin" <<'PY'
import sys
path, binary = sys.argv[1], sys.argv[2]
text = open(path).read()
text = text.replace('config = "' + path.rsplit("/", 1)[0] + '/alloy.toml"\n', "")
run = f"{binary} twin log-shipper run --server.http.listen-addr=127.0.0.1:12345 --storage.path={{data_dir}} {{config}}"
text = text.replace("[log_shipper]\n", f'[log_shipper]\nexec = "{run}"\n', 1)
open(path, "w").write(text)
PY
  # (ssh -n: without it the first ssh reads the rest of hosts.txt as its stdin, and only the
  # first client loses its unit: the others keep fleet_boot.py's alloy.service, which remove
  # then rightly reports as still known to their service manager.)
  while read -r name units; do
    [ "$name" = server ] && continue
    ssh -n -F "$d/ssh_config" "$name" 'systemctl --user stop alloy; rm -f /run/user/0/systemd/user/alloy.service; systemctl --user daemon-reload' &
  done < "$d/hosts.txt"
  wait
  (cd "$d" && "$bin" run deploy --set service=log-shipper --forks 25 >"$d/deploy.txt") || {
    echo "deploy does not pass on the fleet of $n (see $d/deploy.txt)" >&2; exit 1; }
  (cd "$d" && "$bin" run verify-log-shipper --hosts log-shipper --forks 25 >"$d/verify.txt") || {
    echo "verify-log-shipper does not pass on the fleet of $n (see $d/verify.txt)" >&2; exit 1; }
  # The last remove's and deploy's reports are kept, so a failing run can be read.
  (cd "$d" && hyperfine --runs "$runs" --export-json "$results/deploy-$n.json" \
    --prepare "$bin run remove --set service=log-shipper --forks 25 >$d/remove.txt 2>&1" \
    -n "deploy log-shipper ($n client hosts)" "$bin run deploy --set service=log-shipper --forks 25 >$d/deploy.txt 2>&1") || {
    echo "a remove or deploy failed on the fleet of $n: its report:" >&2
    cat "$d/remove.txt" "$d/deploy.txt" >&2
    exit 1
  }
  (cd "$d" && hyperfine --warmup 1 --runs "$runs" --export-json "$results/redeploy-$n.json" \
    -n "deploy, nothing changed ($n client hosts)" "$bin run deploy --set service=log-shipper --forks 25" \
    -n "verify-log-shipper ($n client hosts)" "$bin run verify-log-shipper --hosts log-shipper --forks 25")
  cleanup
done
python3 bench/medians.py "$results"/deploy-*.json "$results"/redeploy-*.json
echo "results: $results"
