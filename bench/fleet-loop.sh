#!/usr/bin/env bash
# The hand-written peer of `opsbook run quick-check --hosts all`: one ssh per host in the
# background (its units active, then the server's /health and /ready fetched from that host),
# then `wait`; exit 1 if any host failed. Cold: a new connection each; warm: over the shared
# connections bench/fleet.sh opened beforehand (ControlPath DIR/cm-NAME).
#   bash bench/fleet-loop.sh DIR cold|warm
#
# `ssh -n`: without it, each ssh started in the background read the host list the loop was
# reading (a background command's stdin is the loop's here), and the loop ended after the 50
# to 85 of 101 hosts it had read by then, reporting success: every measurement of this peer
# before that fix undercounted its work. The loop now also refuses to pass unless it started
# one ssh per host.
set -uo pipefail
d=$1 mode=$2
server=$(cat "$d/server.txt")
opts=(-n -F "$d/ssh_config" -o ConnectTimeout=10)
[ "$mode" = warm ] && opts+=(-o ControlMaster=no -o "ControlPath=$d/cm-%n")
pids=()
while read -r name units; do
  timeout 30 ssh "${opts[@]}" "$name" \
    "systemctl --user is-active $units >/dev/null && curl -sf -m 5 -o /dev/null http://$server:8086/health && curl -sf -m 5 -o /dev/null http://$server:3100/ready" &
  pids+=($!)
done < "$d/hosts.txt"
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
hosts=$(grep -c . "$d/hosts.txt")
if [ "${#pids[@]}" -ne "$hosts" ]; then
  echo "fleet-loop: started ${#pids[@]} ssh for $hosts hosts" >&2
  exit 2
fi
exit $failed
