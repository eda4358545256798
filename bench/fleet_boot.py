#!/usr/bin/env python3
"""Boots (and tears down) the fleet benchmark's private hosts, as tests/support/fleet.rs does
for the tests: one server and N client hosts, each its own network namespace, hostname, sshd,
`systemd --user` and journald (tests/support/fleet-host.sh), joined on the bridge `obb1`
(10.232.1.0/24, or obbK and 10.232.K.0/24 with OPSBOOK_BENCH_NET=K; apart from the tests' 10.231.X.0/24 and 10.233.X.0/24;
past 252 clients a /16, 10.(200 + K % 50).0.0/16). The server runs the twin metrics
database and log store, the clients the twin agent and shipper writing to it, all as real
user units under their usual names. It also writes, into DIR, what the three contenders need:
opsbook.toml (the inventory), ansible.cfg + inventory.ini + playbook.yml, ssh_config and
hosts.txt (for the ssh loop).

    python3 bench/fleet_boot.py up DIR N BIN     # boots; DIR/hosts.json records what to undo
    python3 bench/fleet_boot.py down DIR         # kills the hosts, removes links and cgroups

OPSBOOK_BENCH_LIGHT=1: the clients' units are light stand-ins under the same names (a
sleeping process each), for checks that only read unit states (bench/fleet-scale.sh); the
server still runs the twins. OPSBOOK_BENCH_CLIENT_UNITS=0: the clients get no units at all
(bench/rollout-fleet.sh deploys the components there with opsbook). OPSBOOK_BENCH_ANSIBLE_FORKS sets Ansible's forks (20).
OPSBOOK_BENCH_BOOT_BATCH: how many hosts boot at once (100; the next batch once they are ready).
OPSBOOK_BENCH_KEX=ALGORITHMS gives every contender's ssh the same `KexAlgorithms` (opsbook's
`ssh.options`, each Host of ssh_config, Ansible's ssh_args); unset, ssh's default stands.

Needs root (namespaces, links). Every wait has a deadline.
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

# OPSBOOK_BENCH_NET=K (1-254) boots on obbK / 10.232.K.0/24, so two fleets can be up at once.
NET = os.environ.get("OPSBOOK_BENCH_NET", "1")
BRIDGE = f"obb{NET}"
SUBNET = f"10.232.{NET}"
# A /24 holds the server and 252 clients; a larger fleet gets a /16 of its own instead,
# 10.(200 + K % 50).0.0/16 (clear of the tests' and the /24s' 10.231-232).
WIDE = f"10.{200 + int(NET) % 50}"


def address_of(i, n):
    """The address (with its prefix) of host number `i` (0: the server) of a fleet of `n` clients."""
    if n <= 252:
        return f"{SUBNET}.{i + 2}", 24
    return f"{WIDE}.{(i + 2) // 250}.{(i + 2) % 250 + 2}", 16
TOKEN = "bench-fleet-token"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST_SCRIPT = os.path.join(REPO, "tests/support/fleet-host.sh")
ENV = ["XDG_RUNTIME_DIR=/run/user/0", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/0/bus", "HOME=/run/user/0/home"]


def sh(*argv, timeout=30, check=True):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done


def inside(init, *argv, timeout=30):
    return sh("nsenter", "--target", str(init), "--mount", "--net", "--pid", "--uts", "--wd=/", "--", "env", *ENV,
              *argv, timeout=timeout)


def find_init(pid):
    # Hundreds of hosts starting at once on a busy machine: generous.
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                children = f.read().split()
            if children:
                return int(children[0])
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    sys.exit(f"unshare {pid}: no init within 60 s")


def unit(description, execstart, reload=False):
    text = f"[Unit]\nDescription={description}\n[Service]\nExecStart={execstart}\n"
    if reload:
        text += "ExecReload=/bin/kill -HUP $MAINPID\n"
    return text + "Restart=no\n"


def install(host, name, text):
    local = os.path.join(host["state"], name)
    with open(local, "w") as f:
        f.write(text)
    inside(host["init"], "cp", local, f"/run/user/0/systemd/user/{name}")


def wait_http(url, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status < 300:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(f"{url} did not answer within {seconds} s")


def up(d, n, binary):
    os.makedirs(d, exist_ok=True)
    key = os.path.join(d, "key")
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "opsbook-bench", "-f", key)
    authorized = os.path.join(d, "authorized_keys")
    shutil.copy(key + ".pub", authorized)
    # Every host's systemd --user and journald take inotify instances from root's allowance
    # (128 by default): past it a new user manager exits at start, silently. Raised, never lowered.
    # The kernel's ARP table is one for every network namespace (gc_thresh3, 1024 by default): a
    # server and 300 clients each knowing the other side fill it, and past it some hosts'
    # requests never reach the server ("neighbor table overflow"). Raised, never lowered.
    raised = {"fs/inotify/max_user_instances": 8192, "net/ipv4/neigh/default/gc_thresh1": 2048,
              "net/ipv4/neigh/default/gc_thresh2": 8192, "net/ipv4/neigh/default/gc_thresh3": 16384}
    for name, least in raised.items():
        limit = f"/proc/sys/{name}"
        if int(open(limit).read()) < least:
            with open(limit, "w") as f:
                f.write(str(least))
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    bridge, prefix = (f"{SUBNET}.1", 24) if n <= 252 else (f"{WIDE}.0.1", 16)
    sh("ip", "addr", "add", f"{bridge}/{prefix}", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    names = ["server"] + [f"c{i}" for i in range(1, n + 1)]
    hosts = []
    record = os.path.join(d, "hosts.json")
    # In batches: hundreds of hosts booting at once each poll their systemd with systemctl
    # until it runs, which on 2 cores is load enough that some never get there (300 at once did
    # not boot). A batch is started, then waited for, before the next.
    batch = int(os.environ.get("OPSBOOK_BENCH_BOOT_BATCH", "100"))
    for first in range(0, len(names), batch):
        boot(d, authorized, list(enumerate(names))[first:first + batch], hosts, record, n)
    server = hosts[0]["address"]
    write_configs(d, hosts, binary, server, key)
    s = hosts[0]
    install(s, "influxdb.service",
            unit("InfluxDB (twin)", f"{binary} twin metrics-db --listen 0.0.0.0:8086 --token {TOKEN} --org opsbook"))
    install(s, "loki.service", unit("Loki (twin)", f"{binary} twin log-store --listen 0.0.0.0:3100 --ready-delay 0s"))
    inside(s["init"], "systemctl", "--user", "daemon-reload")
    inside(s["init"], "systemctl", "--user", "start", "influxdb", "loki")
    wait_http(f"http://{server}:8086/health")
    wait_http(f"http://{server}:3100/ready")
    light = os.environ.get("OPSBOOK_BENCH_LIGHT") == "1"
    bare = os.environ.get("OPSBOOK_BENCH_CLIENT_UNITS") == "0"

    def client(c):
        if light:
            install(c, "telegraf.service", unit("Telegraf (light stand-in)", "/bin/sleep infinity"))
            install(c, "alloy.service", unit("Alloy (light stand-in)", "/bin/sleep infinity"))
        else:
            install(c, "telegraf.service",
                    unit("Telegraf (twin)", f"{binary} twin metrics-agent {d}/telegraf.conf", True))
            install(c, "alloy.service", unit("Alloy (twin)", f"{binary} twin log-shipper {d}/alloy.toml", True))
        inside(c["init"], "systemctl", "--user", "daemon-reload")
        inside(c["init"], "systemctl", "--user", "start", "telegraf", "alloy")

    if bare:
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(client, hosts[1:]))
    # Data has arrived from every client before anything is measured.
    if not light:
        time.sleep(3)


def boot(d, authorized, numbered, hosts, record, n):
    """Starts the hosts `numbered` ((index, name) each), adds them to `hosts` (and to `record`,
    so `down` finds them), and waits until each is ready."""
    started = []
    for i, name in numbered:
        outer, peer = f"{BRIDGE}v{i}", f"{BRIDGE}p{i}"
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", peer)
        sh("ip", "link", "set", outer, "master", BRIDGE, "up")
        state = os.path.join(d, f"{BRIDGE}-{name}")
        os.mkdir(state)
        address, prefix = address_of(i, n)
        err = open(os.path.join(state, "boot.err"), "w")
        p = subprocess.Popen(["unshare", "--mount", "--net", "--pid", "--uts", "--fork", "--kill-child",
                              "--mount-proc", "bash", HOST_SCRIPT, state, name, peer, f"{address}/{prefix}", authorized],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        started.append({"name": name, "address": address, "state": state, "unshare": p.pid, "init": 0, "peer": peer})
        with open(record, "w") as f:
            json.dump(hosts + started, f)
    for h in started:
        h["init"] = find_init(h["unshare"])
        sh("ip", "link", "set", h["peer"], "netns", str(h["init"]))
    hosts.extend(started)
    with open(record, "w") as f:
        json.dump(hosts, f)
    for h in started:
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(h["state"], "ready")):
            if time.time() > deadline:
                sys.exit(f"host {h['name']} did not boot within 60 s: see {h['state']}/boot.err")
            time.sleep(0.01)


def write_configs(d, hosts, binary, server, key):
    def write(name, text):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)

    write("telegraf.conf", f"""[agent]
  interval = "10s"
  flush_interval = "1s"
[[outputs.influxdb_v2]]
  urls = ["http://{server}:8086"]
  token = "{TOKEN}"
  organization = "opsbook"
  bucket = "telegraf"
[[inputs.cpu]]
  percpu = false
  totalcpu = true
[[inputs.mem]]
""")
    write("alloy.toml", f"""[server]
listen = "127.0.0.1:12345"
[labels]
service_type = "journal"
[write]
url = "http://{server}:3100/loki/api/v1/push"
batch_wait = "1s"
""")
    # One key exchange for every contender, when asked (OPSBOOK_BENCH_KEX).
    kex = os.environ.get("OPSBOOK_BENCH_KEX", "")
    inventory = ""
    for h in hosts:
        roles = '["metrics-db", "log-store"]' if h["name"] == "server" else '["metrics-agent", "log-shipper"]'
        inventory += f'[hosts.{h["name"]}]\naddress = "{h["address"]}"\nroles = {roles}\nuser = "root"\nkey = "{key}"\n'
    write("opsbook.toml", f"""scope = "user"
[ssh]
options = "StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR{f',KexAlgorithms={kex}' if kex else ''}"
[metrics_db]
url = "http://{server}:8086"
token = "{TOKEN}"
org = "opsbook"
[log_store]
url = "http://{server}:3100"
[metrics_agent]
config = "{d}/telegraf.conf"
test_command = ["{binary}", "twin", "metrics-agent", "{{config}}", "--test"]
[log_shipper]
config = "{d}/alloy.toml"
validate_command = ["{binary}", "twin", "log-shipper", "validate", "{{config}}"]
{inventory}""")
    common = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
    common += f" -o KexAlgorithms={kex}" if kex else ""
    write("ssh_config", "".join(
        f"Host {h['name']}\n  HostName {h['address']}\n  User root\n  IdentityFile {key}\n  BatchMode yes\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        + (f"  KexAlgorithms {kex}\n" if kex else "") for h in hosts))
    write("server.txt", server + "\n")
    write("hosts.txt", "".join(
        f"{h['name']} {'influxdb loki' if h['name'] == 'server' else 'telegraf alloy'}\n" for h in hosts))
    write("inventory.ini", "[servers]\n" + f"server ansible_host={server}\n" + "[clients]\n" + "".join(
        f"{h['name']} ansible_host={h['address']}\n" for h in hosts[1:]) +
          f"[all:vars]\nansible_user=root\nansible_ssh_private_key_file={key}\n"
          "ansible_python_interpreter=/usr/bin/python3\n"
          f"server_address={server}\n"
          "[servers:vars]\nunits=['influxdb.service','loki.service']\n"
          "[clients:vars]\nunits=['telegraf.service','alloy.service']\n")
    forks = os.environ.get("OPSBOOK_BENCH_ANSIBLE_FORKS", "20")
    write("ansible.cfg", f"""[defaults]
inventory = {d}/inventory.ini
forks = {forks}
host_key_checking = False
gathering = explicit
stdout_callback = ansible.builtin.default
[ssh_connection]
pipelining = True
ssh_args = {common} -o ControlMaster=auto -o ControlPersist=60s
control_path_dir = {d}/ansible-cp
""")
    write("playbook.yml", """- name: the monitoring stack is healthy
  hosts: all
  gather_facts: false
  tasks:
    - name: units active
      ansible.builtin.systemd_service:
        name: "{{ item }}"
        scope: user
      register: unit
      failed_when: unit.status.ActiveState != 'active'
      loop: "{{ units }}"
    - name: metrics database healthy
      ansible.builtin.uri:
        url: "http://{{ server_address }}:8086/health"
    - name: log store ready
      ansible.builtin.uri:
        url: "http://{{ server_address }}:3100/ready"
""")


def down(d):
    record = os.path.join(d, "hosts.json")
    hosts = json.load(open(record)) if os.path.exists(record) else []
    for h in hosts:
        for pid in (h.get("init"), h.get("unshare")):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    for h in hosts:
        try:
            cgroup = open(os.path.join(h["state"], "cgroup")).read().strip()
        except OSError:
            continue
        deadline = time.time() + 5
        while os.path.isdir(cgroup) and time.time() < deadline:
            for root, dirs, _ in os.walk(cgroup, topdown=False):
                for x in dirs:
                    try:
                        os.rmdir(os.path.join(root, x))
                    except OSError:
                        pass
            try:
                os.rmdir(cgroup)
            except OSError:
                time.sleep(0.05)
    for i in range(len(hosts)):
        sh("ip", "link", "del", f"{BRIDGE}v{i}", check=False)
    sh("ip", "link", "del", BRIDGE, check=False)


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "up":
        up(os.path.abspath(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == "down":
        down(os.path.abspath(sys.argv[2]))
    else:
        sys.exit(__doc__)
