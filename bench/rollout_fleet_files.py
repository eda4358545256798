#!/usr/bin/env python3
"""Writes what bench/rollout-fleet.sh's contenders need into a fleet booted by
bench/fleet_boot.py (DIR/hosts.json, DIR/key):

- rollout/opsbook.toml: opsbook's configuration and inventory (run from DIR/rollout, apart from
  fleet_boot.py's DIR/opsbook.toml, which ./opsbook.toml would layer in), the twins as the components' programs
  (as tests/lifecycle.rs's operator has them), the server's twins already running;
- marks/RUN/{runbooks,templates}: the built-in agent and shipper templates with one more
  comment line, `rollout mark RUN` (a `--runbooks` folder per run: each run a real change);
- rollout.ini + ansible.cfg + shipper.yml + agent.yml: Ansible doing the same change — the same
  templates (their Jinja is Ansible's), the mark from `-e mark=RUN`, then the reload — with
  `serial: 10%`, no verification, `gather_facts: false`.

    python3 bench/rollout_fleet_files.py DIR BIN MARKS FORKS
"""
import json
import os
import subprocess
import sys

TOKEN = "bench-fleet-token"
AGENT = "metrics-agent/telegraf.conf.j2"
SHIPPER = "log-shipper/config.alloy.j2"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main(d, binary, marks, forks):
    hosts = json.load(open(os.path.join(d, "hosts.json")))
    server = hosts[0]["address"]
    key = os.path.join(d, "key")
    inventory = "".join(
        f'[hosts.{h["name"]}]\naddress = "{h["address"]}"\n'
        f'roles = {json.dumps(["metrics-db", "log-store"] if h["name"] == "server" else ["metrics-agent", "log-shipper"])}\n'
        f'user = "root"\nkey = "{key}"\n' for h in hosts)
    write(os.path.join(d, "rollout", "opsbook.toml"), f"""scope = "user"
[ssh]
options = "StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR"
max_masters = {len(hosts) + 10}
[metrics_db]
url = "http://{server}:8086"
token = "{TOKEN}"
org = "opsbook"
[log_store]
url = "http://{server}:3100"
[metrics_agent]
exec = "{binary} twin metrics-agent --config {{config}}"
test_command = ["{binary}", "twin", "metrics-agent", "--config", "{{config}}", "--test"]
[log_shipper]
exec = "{binary} twin log-shipper run --server.http.listen-addr=127.0.0.1:12345 --storage.path={{data_dir}} {{config}}"
validate_command = ["{binary}", "twin", "log-shipper", "validate", "{{config}}"]
{inventory}""")
    shown = lambda name: subprocess.run([binary, "templates", name], capture_output=True, text=True,
                                        check=True, timeout=60).stdout
    agent, shipper = shown(AGENT), shown(SHIPPER)
    for run in range(marks):
        root = os.path.join(d, "marks", str(run))
        os.makedirs(os.path.join(root, "runbooks"), exist_ok=True)
        write(os.path.join(root, "templates", AGENT), f"{agent}\n# rollout mark {run}\n")
        write(os.path.join(root, "templates", SHIPPER), f"{shipper}\n// rollout mark {run}\n")
    write(os.path.join(d, "ansible", AGENT), agent + "\n# rollout mark {{ mark }}\n")
    write(os.path.join(d, "ansible", SHIPPER), shipper + "\n// rollout mark {{ mark }}\n")
    write(os.path.join(d, "rollout.ini"), "[clients]\n" + "".join(
        f"{h['name']} ansible_host={h['address']}\n" for h in hosts[1:]) +
        f"[clients:vars]\nansible_user=root\nansible_ssh_private_key_file={key}\n"
        "ansible_python_interpreter=/usr/bin/python3\n"
        f"metrics_db_url=http://{server}:8086\nmetrics_db_token={TOKEN}\norg=opsbook\nbucket=telegraf\n"
        f"log_store_url=http://{server}:3100\n")
    common = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
    write(os.path.join(d, "rollout-ansible.cfg"), f"""[defaults]
inventory = {d}/rollout.ini
forks = {forks}
host_key_checking = False
gathering = explicit
stdout_callback = ansible.builtin.default
[ssh_connection]
pipelining = True
ssh_args = {common} -o ControlMaster=auto -o ControlPersist=60s
control_path_dir = {d}/ansible-cp
""")
    play = """- name: {what}
  hosts: clients
  serial: "10%"
  gather_facts: false
  vars:
    host: "{{{{ inventory_hostname }}}}"
  tasks:
    - name: configuration from the template
      ansible.builtin.template:
        src: {d}/ansible/{template}
        dest: {dest}
        mode: "0640"
    - name: reload
{reload}
"""
    write(os.path.join(d, "agent.yml"), play.format(
        what="the agent's configuration", d=d, template=AGENT, dest="/etc/telegraf/telegraf.conf",
        reload="      ansible.builtin.systemd_service:\n        name: telegraf.service\n        scope: user\n"
               "        state: reloaded"))
    write(os.path.join(d, "shipper.yml"), play.format(
        what="the shipper's configuration", d=d, template=SHIPPER, dest="/etc/alloy/config.alloy",
        reload="      ansible.builtin.uri:\n        url: http://127.0.0.1:12345/-/reload\n        method: POST"))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(os.path.abspath(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4])
