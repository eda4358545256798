#!/usr/bin/env bash
# A private stack host: run as the init of a mount+net+pid namespace, e.g.
#   unshare --mount --net --pid --fork --kill-child --mount-proc bash private-host.sh STATE [CMD...]
# It boots a real systemd-journald and a real `systemd --user` with its own D-Bus session
# bus, on tmpfs mounts so nothing of the real machine's /run is touched, and its own
# loopback. Then it touches STATE/ready and either runs CMD (and ends, taking everything with
# it) or waits to be killed. (A mount+net+pid namespace with a real systemd --user and journald.)
set -euo pipefail
state=$1
shift
mount --make-rprivate /
# A test's own session-bus policy (STATE/dbus-session.d) in place of the machine's
# session.d, seen only inside this host's mount namespace.
if [ -d "$state/dbus-session.d" ]; then
  [ -d /etc/dbus-1/session.d ] || { echo "/etc/dbus-1/session.d is missing (apt-get install dbus)" >&2; exit 1; }
  mount --bind "$state/dbus-session.d" /etc/dbus-1/session.d
fi
# Our own cgroup, so hosts running side by side don't share unit cgroups (the cgroup
# tree is not namespaced here): the user manager takes its own cgroup as its root.
for hierarchy in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
  if [ -e "$hierarchy/cgroup.procs" ]; then
    cg="$hierarchy/opsbook-host-$(basename "$state")"
    mkdir -p "$cg" && echo $$ > "$cg/cgroup.procs" && echo "$cg" > "$state/cgroup"
    break
  fi
done
for d in /run/systemd /run/user /run/log /var/log/journal; do
  mkdir -p "$d"
  mount -t tmpfs tmpfs "$d"
done
mkdir -p /run/systemd/system /run/user/0/home /run/user/0/systemd/user
ip link set lo up
# No rate limiting: tests and benchmarks log in bursts. The bind mount is private to the host.
printf '[Journal]\nRateLimitBurst=0\nStorage=volatile\n' > "$state/journald.conf"
mount --bind "$state/journald.conf" /etc/systemd/journald.conf
/lib/systemd/systemd-journald &
for _ in $(seq 200); do [ -S /run/systemd/journal/stdout ] && break; sleep 0.02; done
[ -e /dev/log ] && mount --bind /run/systemd/journal/dev-log /dev/log || true
export XDG_RUNTIME_DIR=/run/user/0 DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/0/bus HOME=/run/user/0/home
/lib/systemd/systemd --user >/dev/null 2>&1 &
for _ in $(seq 500); do
  s=$(systemctl --user is-system-running 2>/dev/null || true)
  case "$s" in running|degraded) break ;; esac
  sleep 0.02
done
touch "$state/ready"
if [ $# -gt 0 ]; then
  "$@"
  exit $?
fi
while true; do sleep 3600; done
