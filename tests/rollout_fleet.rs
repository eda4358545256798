//! Rollouts over a fleet of real hosts reached over ssh (tests/support/fleet.rs: each host its
//! own network, sshd, `systemd --user` and journald; the twins as the components' programs):
//! a shipper configuration that validates but pushes to a dead port, rolled out one host at a
//! time — the first host rolled back and verified healthy again, the others keeping their file
//! and their process; on a new host the same change undone whole (stopped, taken off) — then
//! a good one rolling through every batch; Ctrl-C during a batch (the
//! hosts in flight finish, no new one starts); a host that becomes unreachable mid-change
//! (named, failed, the budget deciding whether the others go on). Skipped, saying why,
//! without root or sshd.

use std::time::{Duration, Instant};

use crate::fleet_runs::{boot, opsbook};
use crate::rollout::summary;
use crate::support::Test;
use crate::support::fleet::{Fleet, FleetHost};

const CONFIG: &str = "/etc/alloy/config.alloy";

/// The running shipper's main PID on a host.
fn main_pid(host: &FleetHost) -> String {
    host.ok(&["systemctl", "--user", "show", "alloy", "-p", "MainPID"])
}

/// A copy of the built-in shipper template in `DIR/templates`, `from` replaced by `to`; the
/// `--runbooks` folder that finds it.
fn shipper_template(t: &Test, dir: &str, from: &str, to: &str) -> String {
    let text = opsbook(t, &["templates", "log-shipper/config.alloy.j2"]).code(0).stdout;
    assert!(text.contains(from), "{text}");
    let root = t.path().join(dir);
    std::fs::create_dir_all(root.join("runbooks")).unwrap();
    std::fs::create_dir_all(root.join("templates/log-shipper")).unwrap();
    std::fs::write(root.join("templates/log-shipper/config.alloy.j2"), text.replace(from, to)).unwrap();
    root.join("runbooks").display().to_string()
}

/// `text` with the reason a gate gave before "; the rollback passed" masked as `[WHY]`.
fn gate_masked(text: &str) -> String {
    regex::Regex::new(r"gate: .*; the rollback passed")
        .unwrap()
        .replace_all(text, "gate: [WHY]; the rollback passed")
        .into_owned()
}

/// No rollback point is left behind on any host.
fn no_points(fleet: &Fleet) {
    for h in fleet.hosts() {
        assert_eq!(h.read_file(&format!("{CONFIG}.opsbook-rollback")), None, "{}", h.name());
    }
}

#[test]
fn a_change_that_breaks_delivery_is_rolled_back_on_the_first_host_and_a_good_one_rolls_through() {
    let Some(fleet) = boot(&["server", "c1", "c2", "c3"]) else { return };
    let t = Test::new();
    crate::lifecycle::configure_operator(&t, &fleet, "");
    opsbook(&t, &["run", "deploy", "--set", "service=server:loki"]).code(0);
    // c3 is new: it gets the shipper first from a rollout.
    for client in ["c1", "c2"] {
        opsbook(&t, &["run", "deploy", "--set", &format!("service={client}:log-shipper")]).code(0);
    }
    let clients: Vec<&FleetHost> = ["c1", "c2", "c3"].iter().map(|n| fleet.host(n)).collect();
    let before: Vec<(Option<String>, String)> = clients.iter().map(|h| (h.read_file(CONFIG), main_pid(h))).collect();

    // Valid, but every push goes to a port where nothing listens.
    let server = fleet.host("server").address();
    let dead = format!("http://{server}:3199");
    let broken = shipper_template(&t, "broken", "{{ log_store_url }}", &dead);
    let out = opsbook(&t, &["--runbooks", &broken, "run", "deploy", "--set", "service=log-shipper", "--serial", "1"]);
    let text = summary(&out);
    let out = out.code(1);
    assert_eq!(
        gate_masked(&text),
        "rollout of deploy: 3 host(s) in 3 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c1     1 rolled back  [DUR]
2      c2     not attempted
3      c3     not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      rolled back    gate: [WHY]; the rollback passed
c2    metrics-agent, log-shipper  2      not attempted  stopped after batch 1: 1 host(s) failed, more than 0
c3    metrics-agent, log-shipper  3      not attempted  stopped after batch 1: 1 host(s) failed, more than 0

3 host(s): 1 rolled back (c1), 2 not attempted (c2, c3); stopped after batch 1 of 3: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
",
        "{}",
        out.stdout
    );
    // The gate is deploy's own verification: a line written after the change never arrives.
    assert!(
        text.contains("gate: a line written after the change reached the log store in {hostname=\"c1\"} — absent"),
        "{}",
        out.stdout
    );
    // c1 is back on its file, running and verified (the rollback's report passed); the
    // replaced file is kept for inspection.
    let c1 = clients[0];
    assert_eq!(c1.read_file(CONFIG), before[0].0);
    assert!(c1.read_file(&format!("{CONFIG}.opsbook-backup")).unwrap_or_default().contains(&dead));
    assert_eq!(c1.ok(&["systemctl", "--user", "is-active", "alloy"]), "active\n");
    let rollback = out.stdout.split("rollback on c1 ").nth(1).unwrap_or_else(|| panic!("{}", out.stdout));
    let rollback = rollback.split("\n\nrollout of ").next().unwrap();
    assert!(
        rollback.contains("\n  ok    a line written after the change reached the log store in {hostname=\"c1\"}"),
        "{rollback}"
    );
    assert!(!rollback.contains("FAIL"), "{rollback}");
    // The others keep their file and their process.
    for (h, (file, pid)) in clients.iter().zip(&before).skip(1) {
        assert_eq!((&h.read_file(CONFIG), &main_pid(h)), (file, pid), "{}", h.name());
    }
    no_points(&fleet);

    // On a new host the broken change is undone whole: the shipper stopped and taken off again.
    let args = ["--runbooks", &broken, "run", "deploy", "--set", "service=c3:log-shipper", "--serial", "1"];
    let out = opsbook(&t, &args);
    let text = summary(&out);
    let out = out.code(1);
    assert_eq!(
        gate_masked(&text),
        "rollout of deploy: 1 host(s) in 1 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c3     1 rolled back  [DUR]

HOST  ROLES                       BATCH  OUTCOME      WHY
c3    metrics-agent, log-shipper  1      rolled back  gate: [WHY]; the rollback passed

1 host(s): 1 rolled back (c3)  ([DUR])
",
        "{}",
        out.stdout
    );
    let c3 = clients[2];
    let rollback = out.stdout.split("rollback on c3 ").nth(1).unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(rollback.contains("\n  ok    alloy.service unknown to the service manager again"), "{rollback}");
    assert_eq!(
        (c3.read_file(CONFIG), c3.ok(&["systemctl", "--user", "show", "-P", "LoadState", "alloy"])),
        (None, "not-found\n".to_string())
    );
    no_points(&fleet);

    // A good change: a canary, then two at a time, every host changed (c3 installed).
    let good = shipper_template(&t, "good", "batch_wait = \"1s\"", "batch_wait = \"2s\"");
    let args = ["--runbooks", &good, "run", "deploy", "--set", "service=log-shipper", "--canary", "--serial", "2"];
    let out = opsbook(&t, &args);
    assert_eq!(
        summary(&out),
        "rollout of deploy: 3 host(s) in 2 batch(es), a canary, then 2 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS   OUTCOME    TIME
1      c1      1 changed  [DUR]
2      c2, c3  2 changed  [DUR]

HOST  ROLES                       BATCH  OUTCOME  WHY
c1    metrics-agent, log-shipper  1      changed
c2    metrics-agent, log-shipper  2      changed
c3    metrics-agent, log-shipper  2      changed

3 host(s): all changed  ([DUR])
",
        "{}",
        out.stdout
    );
    out.code(0);
    for h in &clients {
        assert!(h.read_file(CONFIG).unwrap_or_default().contains("batch_wait = \"2s\""), "{}", h.name());
    }
    no_points(&fleet);
}

/// A change that writes the shipper's file, says so in `FILE.started`, then waits for
/// `FILE.go` on its host.
const SLOW_CHANGE: &str = r#"//! A change that waits for a go-ahead on its host.
let service = param("service", "");
let path = config.log_shipper.config;
file::mkdir("/etc/alloy", #{ mode: "0755" });
file::write(path, `// changed on ${hostname()} by run ${param("run", "1")}\n`, #{ backup: true });
file::write(path + ".started", "", #{});
// Polled here, not with wait::until: a host that stops answering must end the run at once.
let polls = 0;
while !file::exists(path + ".go") {
    if polls > 600 {
        throw "no go-ahead within a minute";
    }
    sleep("100ms");
    polls += 1;
}
check("the go-ahead came", true);
"#;

/// An operator's config for clients only, and the slow change.
fn slow_fleet(fleet: &Fleet) -> Test {
    let mut config = String::from(
        "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n",
    );
    for h in fleet.hosts() {
        config.push_str(&format!(
            "[hosts.{}]\naddress = \"{}\"\nroles = [\"telegraf\", \"alloy\"]\nuser = \"root\"\nkey = \"{}\"\n",
            h.name(),
            h.address(),
            h.key().display()
        ));
    }
    Test::new().file("opsbook.toml", &config).runbook("slow-change", SLOW_CHANGE)
}

/// Waits (at most 60 s) until every host named has begun the slow change.
fn started(fleet: &Fleet, names: &[&str]) {
    let begun = Instant::now();
    while !names.iter().all(|n| fleet.host(n).exec(&["test", "-e", &format!("{CONFIG}.started")]).status.success()) {
        assert!(begun.elapsed() < Duration::from_secs(60), "{names:?} did not begin the change");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn go(host: &FleetHost) {
    host.ok(&["mkdir", "-p", "/etc/alloy"]);
    host.ok(&["touch", &format!("{CONFIG}.go")]);
}

#[test]
fn ctrl_c_lets_the_batch_in_flight_finish_and_an_unreachable_host_is_named_and_failed() {
    let Some(fleet) = boot(&["c1", "c2", "c3"]) else { return };
    let args = ["run", "slow-change", "--hosts", "all", "--set", "service=log-shipper"];

    // Ctrl-C while c1 and c2 change: both finish, c3 is never started.
    let running = slow_fleet(&fleet).args(args).args(["--serial", "2"]).spawn();
    started(&fleet, &["c1", "c2"]);
    running.signal(libc::SIGINT);
    go(fleet.host("c1"));
    go(fleet.host("c2"));
    let (out, _) = running.wait(Duration::from_secs(60));
    assert_eq!(
        summary(&out),
        "rollout of slow-change: 3 host(s) in 2 batch(es), 2 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS   OUTCOME        TIME
1      c1, c2  2 changed      [DUR]
2      c3      not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      changed
c2    metrics-agent, log-shipper  1      changed
c3    metrics-agent, log-shipper  2      not attempted  interrupted before batch 2

3 host(s): 2 changed (c1, c2), 1 not attempted (c3); interrupted: no batch started after batch 1 of 2  ([DUR])
",
        "{}",
        out.stdout
    );
    let out = out.code(130);
    out.stderr_has("interrupted: finishing the hosts in flight");
    assert_eq!(fleet.host("c3").read_file(CONFIG), None, "c3 was touched");
    no_points(&fleet);

    // Ctrl-C twice while c1 and c2 change again: both are stopped and rolled back to the first
    // run's file (old, never half), c3 is never started.
    let before: Vec<Option<String>> = ["c1", "c2"].iter().map(|n| fleet.host(n).read_file(CONFIG)).collect();
    assert_eq!(before[0].as_deref(), Some(r"// changed on c1 by run 1\n"));
    for h in fleet.hosts() {
        h.ok(&["rm", "-f", &format!("{CONFIG}.started"), &format!("{CONFIG}.go")]);
    }
    let running = slow_fleet(&fleet).args(args).args(["--serial", "2", "--set", "run=2"]).spawn();
    started(&fleet, &["c1", "c2"]);
    assert_eq!(fleet.host("c1").read_file(CONFIG).as_deref(), Some(r"// changed on c1 by run 2\n"));
    running.signal(libc::SIGINT);
    // Signals that come together are one to the process: the second after the first was taken.
    running.wait_for_output("interrupted: finishing the hosts in flight", Duration::from_secs(10));
    running.signal(libc::SIGINT);
    let (out, _) = running.wait(Duration::from_secs(60));
    let text = summary(&out);
    let out = out.code(130).stderr_has("interrupted again: stopping the hosts in flight and rolling them back");
    assert_eq!(
        text,
        "rollout of slow-change: 3 host(s) in 2 batch(es), 2 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS   OUTCOME        TIME
1      c1, c2  2 rolled back  [DUR]
2      c3      not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      rolled back    gate: interrupted; the rollback passed
c2    metrics-agent, log-shipper  1      rolled back    gate: interrupted; the rollback passed
c3    metrics-agent, log-shipper  2      not attempted  interrupted before batch 2

3 host(s): 2 rolled back (c1, c2), 1 not attempted (c3); interrupted: no batch started after batch 1 of 2  ([DUR])
",
        "{}",
        out.stdout
    );
    for (name, file) in ["c1", "c2"].iter().zip(&before) {
        assert_eq!(&fleet.host(name).read_file(CONFIG), file, "{name}");
    }
    assert_eq!(fleet.host("c3").read_file(CONFIG), None, "c3 was touched");
    no_points(&fleet);

    // c1 becomes unreachable mid-change: named unreachable (not rolled back, its point kept),
    // counted against the budget; with a budget of one, c2 and c3 still change.
    for h in fleet.hosts() {
        h.ok(&["rm", "-f", &format!("{CONFIG}.started"), &format!("{CONFIG}.go")]);
    }
    go(fleet.host("c2"));
    go(fleet.host("c3"));
    let running = slow_fleet(&fleet).args(args).args(["--serial", "1", "--max-fail", "1"]).spawn();
    started(&fleet, &["c1"]);
    fleet.host("c1").stop_sshd();
    let (out, _) = running.wait(Duration::from_secs(60));
    let text = summary(&out);
    let c1 = regex::Regex::new(r"(?m)^c1 .*$").unwrap().find(&text).map(|m| m.as_str().to_string()).unwrap_or_default();
    assert!(
        c1.starts_with("c1    metrics-agent, log-shipper  1      unreachable  unreachable during its change (ssh to host c1 failed: ")
            && c1.contains(&fleet.host("c1").address().to_string())
            && c1.contains("may be partly in place, not verified, not rolled back; rollback point kept"),
        "{}",
        out.stdout
    );
    assert_eq!(
        text.replace(&c1, "c1 [UNREACHABLE]"),
        "rollout of slow-change: 3 host(s) in 3 batch(es), 1 at a time; stop once more than 1 host(s) fail (--max-fail 1); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c1     1 unreachable  [DUR]
2      c2     1 changed      [DUR]
3      c3     1 changed      [DUR]

HOST  ROLES                       BATCH  OUTCOME      WHY
c1 [UNREACHABLE]
c2    metrics-agent, log-shipper  2      changed
c3    metrics-agent, log-shipper  3      changed

3 host(s): 2 changed (c2, c3), 1 unreachable (c1)  ([DUR])
",
        "{}",
        out.stdout
    );
    out.code(1);
}
