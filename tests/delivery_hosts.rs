//! Changes that stop data flowing while every process survives, on Debian 13 hosts (systemd
//! 257 as PID 1, root over ssh, the vendors' packages from signed repositories, their programs
//! the twins): a server and two clients, prepared and deployed, then
//!
//! - a configure whose shipper template pushes to a port nothing listens on, and one whose
//!   agent template names a bucket the database lacks, each rolled out one host at a time
//!   with no failure allowed: the first client fails its gate (no marker arrives, no point
//!   stamped after the change) and is rolled back, delivering again; the second keeps its file
//!   and its process, not attempted; exit 1;
//! - restart-all and deploy report such a break;
//! - a healthy change still passes every gate.
//!
//! A reload keeps the shipper's counters and the agent's points of before: these failed to
//! fail before the checks judged only evidence made after the change. Skipped, saying why,
//! without root, the Debian 13 root or its packages.

use crate::debian13::host::Debian13Host;
use crate::realhosts::{ROLES, operator_config, passes_on, run, site};
use crate::rollout::summary;
use crate::support::{Output, Test};

const SHIPPER: &str = "/etc/alloy/config.alloy";
const AGENT: &str = "/etc/telegraf/telegraf.conf";

/// A unit's main PID on a host.
fn main_pid(host: &Debian13Host, unit: &str) -> String {
    host.ok(&["systemctl", "show", "-P", "MainPID", unit])
}

/// The role's built-in template with `from` replaced by `to`, in `t`'s templates folder
/// (where the operator's own templates override the built-in ones).
fn template(t: &Test, path: &str, from: &str, to: &str) {
    let base = base_text(path);
    assert!(base.contains(from), "{path} holds {from}");
    write_template(t, path, &base.replace(from, to));
}

/// The operator's templates every step starts from: the built-in ones, the agent collecting
/// and flushing every 2 s instead of 10 (its checks after a change wait two of its intervals
/// and a flush: a failing gate then takes 16 s, not 40).
fn base_templates(t: &Test) {
    let _ = std::fs::remove_dir_all(t.path().join("templates"));
    write_template(t, AGENT_TEMPLATE, &base_text(AGENT_TEMPLATE));
}

const AGENT_TEMPLATE: &str = "metrics-agent/telegraf.conf.j2";

/// A template as `base_templates` has it.
fn base_text(path: &str) -> String {
    let built_in = std::fs::read_to_string(crate::support::repo_dir().join("templates").join(path)).unwrap();
    if path != AGENT_TEMPLATE {
        return built_in;
    }
    let faster = built_in.replace("interval | default(\"10s\")", "interval | default(\"2s\")");
    assert_ne!(faster, built_in, "the agent's template sets its interval");
    faster
}

fn write_template(t: &Test, path: &str, text: &str) {
    let file = t.path().join("templates").join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

/// A rollout's summary with the gate's reason masked, the reason returned apart.
fn rolled_back(out: &Output) -> (String, String) {
    let text = summary(out);
    let why = regex::Regex::new(r"gate: (.*); the rollback passed").unwrap();
    let reason = why.captures(&text).map(|c| c[1].to_string()).unwrap_or_default();
    (why.replace_all(&text, "gate: [WHY]; the rollback passed").into_owned(), reason)
}

/// What a configure rolled out over the two clients says when the first fails its gate.
fn first_rolled_back(change: &str) -> String {
    format!(
        "rollout of {change}: 2 host(s) in 2 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      d13c1  1 rolled back  [DUR]
2      d13c2  not attempted

HOST   ROLES                       BATCH  OUTCOME        WHY
d13c1  metrics-agent, log-shipper  1      rolled back    gate: [WHY]; the rollback passed
d13c2  metrics-agent, log-shipper  2      not attempted  stopped after batch 1: 1 host(s) failed, more than 0

2 host(s): 1 rolled back (d13c1), 1 not attempted (d13c2); stopped after batch 1 of 2: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
"
    )
}

/// Runs a configure of `role` over the clients, one at a time, and checks the first was
/// rolled back (its file as before, delivering again by its rollback's own evidence) and the
/// second untouched (same file, same main PID). Returns the gate's reason.
fn broken_configure_is_rolled_back(
    t: &Test,
    clients: [&Debian13Host; 2],
    role: &str,
    file: &str,
    unit: &str,
) -> String {
    let before: Vec<(String, String)> = clients.iter().map(|h| (h.ok(&["cat", file]), main_pid(h, unit))).collect();
    let service = format!("service={role}");
    let out = run(t, &["run", "configure", "--set", &service, "--serial", "1", "--max-fail", "0"]);
    let (text, reason) = rolled_back(&out);
    assert_eq!(text, first_rolled_back("configure"), "{}", out.stdout);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(clients[0].ok(&["cat", file]), before[0].0, "d13c1's {file} is put back");
    assert_eq!(clients[0].ok(&["systemctl", "is-active", unit]), "active\n");
    let rollback = out.stdout.split("rollback on d13c1 ").nth(1).unwrap_or_else(|| panic!("{}", out.stdout));
    let rollback = rollback.split("\n\nrollout of ").next().unwrap_or_default();
    assert!(rollback.contains("evidence made after the change"), "{rollback}");
    assert!(!rollback.contains("FAIL"), "the rolled-back host delivers again:\n{rollback}");
    assert_eq!((clients[1].ok(&["cat", file]), main_pid(clients[1], unit)), before[1].clone(), "d13c2 untouched");
    reason
}

#[test]
fn a_change_that_stops_delivery_fails_its_gate_is_rolled_back_and_stops_the_rollout() {
    let Some(site) = site(&["d13srv", "d13c1", "d13c2"]) else { return };
    let server = site.fleet.host("d13srv").address();
    let t = Test::new();
    let urls = format!("metrics_db.url = \"http://{server}:8086\"\nlog_store.url = \"http://{server}:3100\"\n");
    let roles = |name: &str| {
        if name == "d13srv" { vec!["metrics-db", "log-store"] } else { vec!["metrics-agent", "log-shipper"] }
    };
    let config = operator_config(&site, t.path(), &urls, roles);
    let t = t.config(&config);
    base_templates(&t);
    let hosts = ["d13srv", "d13c1", "d13c2"];
    passes_on(&t, &site, &hosts, &["run", "prepare", "--set", "environment=debian13"]);
    for role in ROLES {
        passes_on(&t, &site, &hosts, &["run", "deploy", "--set", &format!("service={role}")]);
    }
    let clients = [site.fleet.host("d13c1"), site.fleet.host("d13c2")];

    // The shipper's pushes to a port where nothing listens: the unit runs, the file validates.
    template(&t, "log-shipper/config.alloy.j2", "{{ log_store_url }}", &format!("http://{server}:3199"));
    let why = broken_configure_is_rolled_back(&t, clients, "log-shipper", SHIPPER, "alloy.service");
    assert!(
        why.starts_with("a line written after the change reached the log store in {hostname=\"d13c1\"} — absent"),
        "{why}"
    );
    base_templates(&t);

    // The agent's writes to a bucket the database lacks (404 every flush).
    template(&t, "metrics-agent/telegraf.conf.j2", "bucket = \"{{ bucket }}\"", "bucket = \"nowhere\"");
    let why = broken_configure_is_rolled_back(&t, clients, "metrics-agent", AGENT, "telegraf.service");
    // The agent reloads in place: its 404 lines count as errors of its current run too.
    assert!(why.contains("a point of d13c1 stamped after the change is in telegraf — 0 point(s)"), "{why}");
    base_templates(&t);

    // restart-all over every host reports an agent that writes nowhere, on its host.
    let good = clients[1].ok(&["cat", AGENT]);
    clients[1].ok(&["sh", "-c", &format!("sed -i 's/^  bucket = .*/  bucket = \"nowhere\"/' {AGENT}")]);
    let out = run(&t, &["run", "restart-all", "--hosts", "all"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    let failed: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("  FAIL")).collect();
    assert_eq!(
        failed
            .iter()
            .map(|l| l.split(" — ").next().unwrap_or_default().split("  (").next().unwrap_or_default())
            .collect::<Vec<_>>(),
        [
            "  FAIL  a point of d13c2 stamped after the change is in telegraf",
            "  FAIL  telegraf.service logged no failed delivery since the change"
        ],
        "{}",
        out.stdout
    );

    // deploy reports it too: the operator's template puts the bucket back, a broken one does not.
    template(&t, "metrics-agent/telegraf.conf.j2", "bucket = \"{{ bucket }}\"", "bucket = \"nowhere\"");
    clients[1].ok(&["sh", "-c", &format!("cat > {AGENT} <<'EOF'\n{good}EOF")]);
    let out = run(&t, &["run", "deploy", "--set", "service=d13c1:metrics-agent"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("  FAIL  a point of d13c1 stamped after the change is in telegraf"), "{}", out.stdout);
    base_templates(&t);
    passes_on(&t, &site, &hosts, &["run", "deploy", "--set", "service=d13c1:metrics-agent"]);

    // A healthy change passes every gate: the shipper's batch_wait, one host at a time.
    template(&t, "log-shipper/config.alloy.j2", "batch_wait = \"1s\"", "batch_wait = \"2s\"");
    let out = run(&t, &["run", "configure", "--set", "service=log-shipper", "--serial", "1"]);
    assert_eq!(
        summary(&out),
        "rollout of configure: 2 host(s) in 2 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME    TIME
1      d13c1  1 changed  [DUR]
2      d13c2  1 changed  [DUR]

HOST   ROLES                       BATCH  OUTCOME  WHY
d13c1  metrics-agent, log-shipper  1      changed
d13c2  metrics-agent, log-shipper  2      changed

2 host(s): all changed  ([DUR])
",
        "{}",
        out.stdout
    );
    for h in clients {
        assert!(h.ok(&["cat", SHIPPER]).contains("batch_wait = \"2s\""), "{}", h.name());
    }
}
