#!/usr/bin/env bash
# One host of a test fleet: run as the init of a mount+net+pid+uts namespace, e.g.
#   unshare --mount --net --pid --uts --fork --kill-child --mount-proc bash fleet-host.sh \
#     STATE NAME PEER ADDRESS/24 AUTHORIZED_KEYS
# It names the host, waits for the veth end PEER that the outer side moves into this
# namespace, makes it eth0 with ADDRESS, gives it private overlays of /etc, /var/lib and
# /root, starts an sshd of its own on that address, then becomes a private stack host (private-host.sh: journald, systemd --user, STATE/ready).
set -euo pipefail
state=$1 name=$2 peer=$3 address=$4 authorized=$5
here=$(dirname "$0")
mount --make-rprivate /
hostname "$name"
ip link set lo up
# The outer side moves the veth end in once it knows our pid; wait for it.
for _ in $(seq 500); do ip link show "$peer" >/dev/null 2>&1 && break; sleep 0.01; done
ip link set "$peer" name eth0
ip addr add "$address" dev eth0
ip link set eth0 up
# sshd refuses a world-writable runtime dir, and must not share the real /run/sshd.
mkdir -p /run/sshd
mount -t tmpfs -o mode=755 tmpfs /run/sshd
# wg(8) finds a userspace WireGuard by its socket in /run/wireguard: one per host.
mkdir -p /run/wireguard
mount -t tmpfs -o mode=700 tmpfs /run/wireguard
# Lifecycle runbooks write /etc, /var/lib and /root (unit files, configs, users): each host
# gets private copies, overlays whose changes live in a tmpfs of its own, so a file written on
# one host is seen neither by the others nor by the machine.
mkdir -p "$state/overlay"
mount -t tmpfs -o mode=700 tmpfs "$state/overlay"
for dir in /etc /var/lib /root; do
  layer="$state/overlay/$(echo "$dir" | tr / _)"
  mkdir -p "$layer/upper" "$layer/work"
  mount -t overlay overlay -o "lowerdir=$dir,upperdir=$layer/upper,workdir=$layer/work" "$dir"
done
# The user manager (private-host.sh) has HOME=/run/user/0/home while an ssh login has /root:
# the login's user unit folder is the manager's runtime one, so what is installed there loads.
mkdir -p /root/.config/systemd
rm -rf /root/.config/systemd/user
ln -s /run/user/0/systemd/user /root/.config/systemd/user
# Every remote command starts the login shell, which reads ~/.bashrc: the machine's may be
# slow (it can take a lock shared by every host); a plain one keeps commands cheap.
if [ -e /root/.bashrc ]; then
  printf '# a plain .bashrc for test hosts\n' > "$state/bashrc"
  mount --bind "$state/bashrc" /root/.bashrc
fi
ssh-keygen -q -t ed25519 -N '' -f "$state/host_key" >/dev/null
cat > "$state/sshd_config" <<EOF
ListenAddress ${address%/*}
HostKey $state/host_key
PidFile $state/sshd.pid
AuthorizedKeysFile $authorized
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
SetEnv XDG_RUNTIME_DIR=/run/user/0 DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/0/bus
EOF
/usr/sbin/sshd -f "$state/sshd_config" -E "$state/sshd.log"
exec bash "$here/private-host.sh" "$state"
