#!/usr/bin/env bash
# One Debian 13 test host (tests/support/debian13.rs): the read-only root of
# debian13-root.sh booted with systemd as PID 1 (system manager, system bus, journald, logind,
# sshd, podman), in namespaces of its own: mount, pid, uts, net, ipc and cgroup. Two stages:
#   bash debian13-host.sh boot CGROUP LOWER STATE NAME PEER ADDRESS/24 AUTHORIZED_KEYS HOSTS
# moves itself into the empty cgroup2 directory CGROUP (the host's cgroup namespace is rooted
# there, so the systemd of hosts side by side never share a cgroup), then becomes
#   unshare --mount --pid --uts --net --ipc --cgroup --fork --kill-child bash debian13-host.sh init …
# whose init stage, PID 1 inside, waits for the veth end PEER that the outer side moves into
# the namespace and makes it eth0 with ADDRESS, mounts an overlay of LOWER with its changes in
# STATE/upper, writes what is the host's own (hostname, machine id, hosts file, ssh host keys,
# root's authorized keys), mounts the kernel's file systems, pivots into the overlay and
# executes systemd. Killing the init (or unshare) ends the host and every process of it.
set -euo pipefail
stage=$1
shift
if [ "$stage" = boot ]; then
  cgroup=$1
  shift
  echo $$ >"$cgroup/cgroup.procs"
  exec unshare --mount --pid --uts --net --ipc --cgroup --fork --kill-child bash "$0" init "$@"
fi
[ "$stage" = init ] || { echo "debian13-host.sh: no stage $stage" >&2; exit 2; }
lower=$1 state=$2 name=$3 peer=$4 address=$5 authorized=$6 hosts=$7
root=$state/root
mount --make-rprivate /
hostname "$name"

# The network, before systemd starts (sshd then finds the address there). The outer side moves
# the veth end in once it knows our pid.
ip link set lo up
for _ in $(seq 1000); do ip link show "$peer" >/dev/null 2>&1 && break; sleep 0.01; done
ip link set "$peer" name eth0
ip addr add "$address" dev eth0
ip link set eth0 up

# The shared root stays read-only: every change the host makes lands in STATE/upper.
mkdir -p "$state/upper" "$state/work" "$root"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$state/upper,workdir=$state/work" "$root"

# What is this host's own. An empty machine id in the root would make systemd invent one on
# every boot; a fixed one per host is what an installed machine has.
echo "$name" >"$root/etc/hostname"
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$root/etc/machine-id"
echo >>"$root/etc/machine-id"
cp "$hosts" "$root/etc/hosts"
install -d -m 700 "$root/root/.ssh"
install -m 600 "$authorized" "$root/root/.ssh/authorized_keys"
# crun (podman's default runtime) refuses a pids limit without the pids controller, which
# this kernel keeps on a cgroup v1 hierarchy that the host does not see.
mkdir -p "$root/etc/containers"
printf '[containers]\npids_limit = 0\n' >"$root/etc/containers/containers.conf"
# Podman's overlay storage does not work on an overlay root: its own plain directory.
mkdir -p "$state/containers" "$root/var/lib/containers"
mount --bind "$state/containers" "$root/var/lib/containers"

# The kernel's file systems, as a container manager gives them: a pure cgroup2 view (systemd
# 257 refuses the machine's hybrid one), /sys read-only, a /dev of a few safe devices.
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
mount -t tmpfs -o mode=755,nosuid tmpfs "$root/dev"
for dev in null zero full random urandom tty; do
  touch "$root/dev/$dev"
  mount --bind "/dev/$dev" "$root/dev/$dev"
done
mkdir -p "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
# Host keys of its own, by the host's ssh-keygen (Debian's sshd-keygen.service makes them on
# the first boot only, which a host with its machine id already written is not).
chroot "$root" ssh-keygen -q -A

cd "$root"
mkdir -p oldroot
pivot_root . oldroot
umount -l /oldroot
rmdir /oldroot
exec env -i container=opsbook-test /lib/systemd/systemd --system
