//! The fleet's inventory: `opsbook hosts` over opsbook's `[hosts]`/`[groups]` and an Ansible
//! inventory, checked against Ansible itself (`ansible-inventory --list` for groups and
//! variable precedence, `ansible -m debug` for templated values), and the errors an operator
//! sees for a broken inventory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use opsbook_inventory::ansible::AnsibleInventory;
use serde_json::Value as Json;

use crate::support::{Test, repo_dir, skip};

fn fixtures() -> std::path::PathBuf {
    repo_dir().join("tests/fixtures/inventory")
}

/// A test whose directory holds a copy of `tests/fixtures/inventory` (so paths print relative),
/// its `opsbook.toml` (roles by group, two hosts' settings) included.
fn fleet() -> Test {
    let t = Test::new();
    copy_dir(&fixtures(), t.path());
    t
}

/// The same without `opsbook.toml`: the Ansible inventory alone.
#[track_caller]
fn ansible_fleet() -> Test {
    let t = fleet();
    std::fs::remove_file(t.path().join("opsbook.toml")).unwrap();
    t
}

#[track_caller]
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs an Ansible program (from PyPI's ansible-core) with its state kept in a scratch home;
/// `None` (and a skip) when it is not installed.
#[track_caller]
fn ansible(program: &str, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Option<String> {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("timeout");
    cmd.arg("120").arg(program).args(args).current_dir(dir);
    cmd.env("HOME", home.path()).env("ANSIBLE_DEPRECATION_WARNINGS", "False").env("ANSIBLE_NOCOLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    match cmd.output() {
        Ok(out) if out.status.code() != Some(127) => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        _ => {
            skip(format!("`{program}` (PyPI ansible-core) is not installed"));
            None
        }
    }
}

/// Groups, their members (children's included) and every host's variables, as Ansible's
/// own `--list` gives them, against what opsbook read.
#[track_caller]
fn same_as_ansible_inventory(file: &str) {
    let dir = fixtures().join(Path::new(file).parent().unwrap());
    let name = Path::new(file).file_name().unwrap().to_str().unwrap();
    let Some(listed) = ansible("ansible-inventory", &["-i", name, "--list"], &dir, &[]) else { return };
    let peer: Json = serde_json::from_str(&listed).expect("ansible-inventory prints JSON");
    let ours = AnsibleInventory::load(&dir.join(name)).expect("the fixture loads");

    fn members(peer: &Json, group: &str) -> BTreeSet<String> {
        let g = &peer[group];
        let mut out: BTreeSet<String> =
            g["hosts"].as_array().into_iter().flatten().filter_map(|h| h.as_str().map(String::from)).collect();
        for child in g["children"].as_array().into_iter().flatten().filter_map(|c| c.as_str()) {
            out.extend(members(peer, child));
        }
        out
    }
    let peer_groups: BTreeSet<String> = peer.as_object().unwrap().keys().filter(|k| *k != "_meta").cloned().collect();
    // Ansible leaves empty groups out of --list, except `all`.
    let our_groups: BTreeSet<String> =
        ours.groups().filter(|g| *g == "all" || !ours.members(g).is_empty()).map(String::from).collect();
    assert_eq!(our_groups, peer_groups, "{file}: groups");
    for g in &peer_groups {
        assert_eq!(ours.members(g), members(&peer, g), "{file}: members of {g}");
    }
    let hostvars = peer["_meta"]["hostvars"].as_object().unwrap();
    assert_eq!(
        ours.hosts().map(String::from).collect::<BTreeSet<_>>(),
        hostvars.keys().cloned().collect(),
        "{file}: hosts"
    );
    for (host, vars) in hostvars {
        let ours: BTreeMap<String, Json> = ours.host_vars(host).into_iter().map(|(k, v)| (k, v.value)).collect();
        let theirs: BTreeMap<String, Json> = vars.as_object().unwrap().clone().into_iter().collect();
        assert_eq!(ours, theirs, "{file}: variables of {host}");
    }
}

#[test]
fn yaml_inventory_groups_and_precedence_match_ansible_inventory() {
    same_as_ansible_inventory("yaml/inventory.yml");
}

#[test]
fn ini_inventory_groups_and_precedence_match_ansible_inventory() {
    same_as_ansible_inventory("ini/inventory.ini");
}

/// Templated addresses as Ansible renders them on the controller (`debug` needs no
/// connection), against `opsbook hosts --format json`; the one Ansible cannot render is the
/// one opsbook reports, for the same missing variable.
#[track_caller]
fn same_addresses_as_ansible(file: &str) {
    let env = [("LAB_TLD", "lab.test")];
    let dir = fixtures().join(Path::new(file).parent().unwrap());
    let name = Path::new(file).file_name().unwrap().to_str().unwrap();
    let Some(out) = ansible("ansible", &["all", "-i", name, "-m", "debug", "-a", "var=ansible_host", "-o"], &dir, &env)
    else {
        return;
    };
    let ok = regex::Regex::new(r#"^(\S+) \| SUCCESS => \{\s*"ansible_host": "([^"]*)""#).unwrap();
    let failed = regex::Regex::new(r"^(\S+) \| FAILED! => .*'(\w+)' is undefined").unwrap();
    let mut peer = BTreeMap::new();
    for line in out.lines() {
        if let Some(c) = ok.captures(line) {
            peer.insert(c[1].to_string(), format!("address {}", &c[2]));
        } else if let Some(c) = failed.captures(line) {
            peer.insert(c[1].to_string(), format!("undefined {}", &c[2]));
        }
    }
    let run = ansible_fleet()
        .env("LAB_TLD", "lab.test")
        .args(["hosts", "--inventory", file, "--format", "json"])
        .run()
        .code(1);
    let undefined = regex::Regex::new(r"`(\w+)` is not defined").unwrap();
    let mut seen = BTreeMap::new();
    for h in run.json()["hosts"].as_array().unwrap() {
        let name = h["name"].as_str().unwrap().to_string();
        let shown = match (&h["address"]["value"], h["problems"].as_array().unwrap().first()) {
            (Json::String(a), _) => format!("address {a}"),
            // Ansible reaches an address-less host by its name; for opsbook it is this machine.
            (_, None) if h["local"] == true => format!("address {name}"),
            (_, Some(p)) => {
                format!("undefined {}", &undefined.captures(p["reason"].as_str().unwrap()).unwrap()[1])
            }
            other => panic!("{name}: {other:?}"),
        };
        seen.insert(name, shown);
    }
    assert_eq!(seen, peer, "{file}: addresses (opsbook, then Ansible)");
}

#[test]
fn yaml_templated_addresses_match_ansible() {
    same_addresses_as_ansible("yaml/inventory.yml");
}

#[test]
fn ini_templated_addresses_match_ansible() {
    same_addresses_as_ansible("ini/inventory.ini");
}

#[test]
fn hosts_shows_the_fleet_and_where_each_value_came_from() {
    fleet()
        .env("LAB_TLD", "lab.test")
        .args(["hosts"])
        .run()
        .code(1)
        .stdout_is_fixture("inventory/hosts.txt")
        .stderr_is("");
}

#[test]
fn hosts_with_a_pattern_shows_only_the_selection() {
    fleet().args(["hosts", "log-store,!monitor*"]).run().code(0).stdout_is(
        "HOST    ADDRESS   ROLES      SCOPE  USER  PORT
backup  10.0.0.9  log-store  user   -     2200

where each value came from:
HOST    WHAT     VALUE      FROM
backup  address  10.0.0.9   opsbook.toml:17
backup  port     2200       opsbook.toml:19
backup  role     log-store  opsbook.toml:18
backup  scope    user       opsbook.toml:20
",
    );
}

#[test]
fn hosts_as_json_gives_every_fact_with_its_source() {
    fleet()
        .args(["hosts", "--hosts", "backup,monitor3", "--format", "json"])
        .run()
        .code(0)
        .stdout_is_fixture("inventory/hosts.json")
        .stderr_is("");
}

#[test]
fn no_inventory_is_this_machine_playing_every_role() {
    Test::new().args(["hosts"]).run().code(0).stdout_is(
        "HOST       ADDRESS         ROLES                                              SCOPE   USER  PORT
localhost  (this machine)  metrics-db, log-store, metrics-agent, log-shipper  system  -     -

where each value came from:
HOST       WHAT     VALUE           FROM
localhost  address  (this machine)  no address: the local machine
localhost  role     metrics-db      default
localhost  role     log-store       default
localhost  role     metrics-agent   default
localhost  role     log-shipper     default
",
    );
}

#[test]
fn unknown_names_in_patterns_get_a_suggestion() {
    fleet()
        .args(["hosts", "cleints:!monitor3"])
        .run()
        .code(2)
        .stdout_is("")
        .stderr_is("error: `cleints` is no group, host or role of the inventory; did you mean `clients`?\n");
}

#[test]
fn a_broken_yaml_inventory_is_shown_with_a_caret() {
    fleet().args(["hosts", "--inventory", "broken/inventory.yml"]).run().code(2).stderr_is(
        "error: invalid YAML: invalid indentation in quoted scalar
 --> broken/inventory.yml:6:25
  |
6 |           ansible_host: \"monitor1.lab
  |                         ^
",
    );
}

#[test]
fn a_broken_ini_inventory_is_shown_with_a_caret() {
    fleet().args(["hosts", "--inventory", "broken/inventory.ini"]).run().code(2).stderr_is(
        "error: a section header needs its closing `]`
 --> broken/inventory.ini:4:9
  |
4 | [clients
  |         ^
",
    );
}

#[test]
fn a_misspelt_group_key_gets_a_suggestion() {
    fleet().args(["hosts", "--inventory", "broken/misspelt.yml"]).run().code(2).stderr_is(
        "error: group `clients` has an unknown key `chidlren`; did you mean `children`?
 --> broken/misspelt.yml:6:7
  |
6 |       chidlren:
  |       ^
",
    );
}

#[test]
fn a_misspelt_setting_in_a_host_var_gets_a_suggestion() {
    ansible_fleet().args(["hosts", "--inventory", "broken/misspelt-var.yml"]).run().code(2).stderr_is(
        "error: host `monitor3`: `opsbook_log_shiper_unit`: no opsbook setting is named `opsbook_log_shiper_unit`; \
did you mean `opsbook_log_shipper_unit`?
 --> broken/misspelt-var.yml:4:7
  |
4 |       opsbook_log_shiper_unit: alloy.service
  |       ^
",
    );
}

#[test]
fn a_misspelt_field_or_key_in_opsbook_toml_points_at_it() {
    Test::new().config("[hosts.web1]\nadress = \"10.0.0.1\"\n").args(["hosts"]).run().code(2).stderr_is(
        "error: `[hosts.web1]` has no field `adress`; did you mean `address`?
 --> opsbook.toml:2:1
  |
2 | adress = \"10.0.0.1\"
  | ^
",
    );
    Test::new()
        .config("[groups.web]\nroles = [\"telegraf\"]\nconfig.log_shipper.url = \"localhost:12345\"\n")
        .args(["hosts"])
        .run()
        .code(2)
        .stderr_is(
            "error: `log_shipper.url`: `localhost:12345` is not an http:// or https:// address; write it as http://HOST:PORT or https://HOST:PORT
 --> opsbook.toml:3:20
  |
3 | config.log_shipper.url = \"localhost:12345\"
  |                    ^
",
        );
}

#[test]
fn runs_resolve_their_targets_and_a_host_unreachable_or_unresolved_is_a_failed_check() {
    fleet()
        .runbook("noop", "check(\"ok\", true);")
        .args(["run", "noop", "--hosts", "servers"])
        .run()
        .code(1)
        .stdout_matches(
            r"noop on monitor1 \(noop\)\n  FAIL  monitor1 reachable over ssh — host `monitor1`: connecting failed: ssh said .*monitor1\.example\.com.*\n(?s:.*)\n1 host\(s\): 1 failed \(monitor1\)  \(\[DUR\]\)\n",
        );
    fleet()
        .runbook("noop", "check(\"ok\", true);")
        .args(["run", "noop", "--host", "monitor12"])
        .run()
        .code(1)
        .stdout_matches(
            r"noop on monitor12 \(noop\)\n  FAIL  monitor12 resolved from the inventory — `ansible_host` \(yaml/inventory\.yml:33 \(host var\)\) cannot be resolved: `monitor12_ip` is not defined for this host\n(?s:.*)\n1 host\(s\): 1 failed \(monitor12\)  \(\[DUR\]\)\n",
        );
    // The REPL works on one host: there, the same host is refused before anything starts.
    fleet().args(["repl", "--host", "monitor12"]).run().code(2).stderr_is(
        "error: host `monitor12`: `ansible_host` (yaml/inventory.yml:33 (host var)) cannot be resolved: \
`monitor12_ip` is not defined for this host\n",
    );
    fleet()
        .runbook("noop", "check(\"ok\", true);")
        .args(["run", "noop", "--host", "localhost"])
        .run()
        .code(0)
        .stdout_matches(r"noop on localhost \(runbooks/noop.rhai\)\n  ok    ok\n\n1 passed, 0 failed  \(\[DUR\]\)\n\n(?s:.*)1 host\(s\): all passed  \(\[DUR\]\)\n");
}

#[test]
fn a_toml_group_naming_nothing_is_an_error_not_a_silent_no_op() {
    fleet()
        .file("opsbook.toml", "inventory = \"yaml/inventory.yml\"\n[groups.cleints]\nroles = [\"alloy\"]\n")
        .args(["hosts"])
        .run()
        .code(2)
        .stderr_is(
            "error: opsbook.toml:2: `[groups.cleints]` names no group of the Ansible inventory and lists no hosts; \
did you mean `clients`?\n",
        );
}
