//! Faults around a change on Debian 13 hosts over ssh (a server and two clients, prepared and
//! deployed once for both cases), a configure of the agent whose template names a bucket the
//! database lacks, rolled out one host at a time with no failure allowed:
//!
//! - (a) opsbook SIGKILLed while the first client is in its gate: a rerun of the same broken
//!   change names the unfinished change and rolls the client back to its configuration from
//!   before the killed run (not to the broken one); killed again, `rollback` alone does too;
//! - (c) the first client's network cut for 25 s during its gate: the run ends within its
//!   deadline saying the client was unreachable — not rolled back, its point kept — the second
//!   client untouched; `rollback` restores it once it answers.
//!
//! Skipped, saying why, without root, the Debian 13 root or its packages.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::debian13::host::Debian13Host;
use crate::delivery_hosts::{AGENT, base_templates, first_rolled_back, template};
use crate::realhosts::{ROLES, operator_config, passes_on, run};
use crate::support::Test;

const CONFIGURE: [&str; 8] = ["run", "configure", "--set", "service=metrics-agent", "--serial", "1", "--max-fail", "0"];

/// Starts the broken configure and waits until the first client has the broken file and its
/// agent took it in (its change made: its gate runs), then returns the running opsbook.
fn in_gate(t: &Test, client: &Debian13Host) -> Child {
    let mut command = t.command();
    command.args(CONFIGURE).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    let child = command.spawn().expect("start opsbook");
    let started = Instant::now();
    while !client.ok(&["cat", AGENT]).contains("\"nowhere\"") {
        assert!(started.elapsed() < Duration::from_secs(120), "the configure never wrote d13c1's agent file");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The file is written (the agent's own tool checked it before); the reload and its
    // readiness follow within a moment, then the gate, whose first program on the host is the
    // agent's configuration test (`telegraf … --test`, half a second): the gate has begun once
    // that is seen. A machine too loaded for these looks to catch it is given 12 s.
    let written = Instant::now();
    while written.elapsed() < Duration::from_secs(12) {
        let testing = client.command(&["pgrep", "-f", "[t]elegraf .*--test"]).output();
        if testing.is_ok_and(|found| found.status.success()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    child
}

/// SIGKILL, as a closed laptop or an OOM kill ends opsbook.
fn kill(mut child: Child) {
    // SAFETY: kill has no memory preconditions; the pid is our own child's, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
}

/// What varies: the run's id, the operator's machine, the time of day, the holder's pid, how
/// many error lines the agent has logged by the time a check reads them; then durations and
/// paths (`support::mask`).
fn masked(text: &str) -> String {
    let rules = [
        (r"\d{8}T\d{6}Z-[0-9a-f]{4}", "[RUN]"),
        (r"root@[A-Za-z0-9._-]+", "root@[MACHINE]"),
        (r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\dZ?", "[TIME]"),
        (r"\d\d:\d\d:\d\d UTC", "[HH:MM:SS] UTC"),
        (r"\d\d:\d\d UTC", "[HH:MM] UTC"),
        (r"pid \d+", "pid [PID]"),
        (r"\d+ (error )?line\(s\)", "[N] ${1}line(s)"),
        (r"read \d+ warning/error", "read [N] warning/error"),
    ];
    let text = rules.iter().fold(text.to_string(), |text, (pattern, with)| {
        regex::Regex::new(pattern).unwrap().replace_all(&text, *with).into_owned()
    });
    crate::support::mask(&text)
}

#[test]
fn a_killed_run_and_a_lost_host_leave_an_unfinished_change_that_is_found_and_restored() {
    let Some(site) = crate::realhosts::site(&["d13srv", "d13c1", "d13c2"]) else { return };
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
    let (c1, c2) = (site.fleet.host("d13c1"), site.fleet.host("d13c2"));
    let good = (c1.ok(&["cat", AGENT]), c2.ok(&["cat", AGENT]));
    template(&t, "metrics-agent/telegraf.conf.j2", "bucket = \"{{ bucket }}\"", "bucket = \"nowhere\"");

    // (a) Killed in d13c1's gate: the rerun names the killed run's change and rolls back to
    // the configuration from before it.
    kill(in_gate(&t, c1));
    assert!(c1.ok(&["cat", AGENT]).contains("\"nowhere\""), "the killed run left its change in place");
    let out = run(&t, &CONFIGURE);
    assert_eq!(rerun_masked(&out.stdout), rerun(), "{}", out.stdout);
    assert_eq!(c1.ok(&["cat", AGENT]), good.0, "d13c1 has its configuration from before the killed run");
    assert_eq!(c2.ok(&["cat", AGENT]), good.1, "d13c2 untouched");
    // Killed again: `rollback` alone restores it, saying whose change it undoes.
    kill(in_gate(&t, c1));
    let out = run(&t, &["run", "rollback", "--host", "d13c1", "--set", "service=metrics-agent"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    let took_over = "  warning: d13c1: took over the change lock left by root@[MACHINE] — run [RUN], configure metrics-agent, \
                     pid [PID], since [HH:MM:SS] UTC: its holder is gone\n";
    assert_eq!(masked(&out.stdout), restored(took_over), "{}", out.stdout);
    assert_eq!(c1.ok(&["cat", AGENT]), good.0, "d13c1 restored by rollback alone");

    // (c) d13c1's network cut for 25 s in its gate: unreachable, not rolled back, its point
    // kept; d13c2 untouched; the run ends within its deadline (configure's 60 s, and margin).
    let begun = Instant::now();
    let running = in_gate(&t, c1);
    let link = c1.ok(&["sh", "-c", "ip -o -4 addr show scope global | awk '{print $2; exit}'"]);
    let mut cut =
        c1.command(&["sh", "-c", &format!("ip link set {0} down; sleep 25; ip link set {0} up", link.trim())]);
    let mut cut = cut.spawn().unwrap();
    let out = crate::support::Output::from_raw(running.wait_with_output().unwrap(), t.path());
    let took = begun.elapsed();
    cut.wait().unwrap();
    assert!(took < Duration::from_secs(150), "the run took {took:?}");
    assert_eq!(lost_masked(&out.stdout), lost(), "{}", out.stdout);
    assert_eq!(c2.ok(&["cat", AGENT]), good.1, "d13c2 untouched");
    assert!(c1.ok(&["cat", AGENT]).contains("\"nowhere\""), "d13c1 not rolled back by the run");
    let out = run(&t, &["run", "rollback", "--host", "d13c1", "--set", "service=metrics-agent"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert_eq!(masked(&out.stdout), restored(""), "{}", out.stdout);
    assert_eq!(c1.ok(&["cat", AGENT]), good.0, "d13c1 restored once it answers");
}

/// The rerun's report, masked (`masked`), with what timing decides left open: the agent's first
/// flushes of the broken file may have failed by the time its startup check reads the journal,
/// within its start (tolerated, a warning) or past it (a failure, then named first in the
/// gate's reason): that check, the totals it counts in and the reason; the reason names the
/// missing point in every case.
fn rerun_masked(stdout: &str) -> String {
    let startup = regex::Regex::new(
        r"(?m)^  (ok|WARN|FAIL) +(telegraf.service logged no errors since \[TIME\] UTC).*\n(          (expected|actual):.*\n)*",
    )
    .unwrap();
    let totals = regex::Regex::new(r"(?m)^\d+ passed, [23] failed(, \d+ warnings?)?  ").unwrap();
    let why = regex::Regex::new(r"gate: (.*); the rollback passed").unwrap();
    let text = masked(stdout);
    let reason = why.captures(&text).map(|c| c[1].to_string()).unwrap_or_default();
    assert!(reason.contains("a point of d13c1 stamped after the change is in telegraf — 0 point(s)"), "{reason}");
    let text = startup.replacen(&text, 1, "  [OUTCOME]  $2 [STARTUP]\n").into_owned();
    let text = totals.replace_all(&text, "[N] passed, [N] failed, [N] warning(s)  ").into_owned();
    why.replace_all(&text, "gate: [WHY]; the rollback passed").into_owned()
}

/// The report of the configure whose host was cut off in its gate, masked (`masked`), with
/// what depends on where the cut fell left open: each gate check's outcome and what it found
/// (its name kept), the totals, and the summary's `[WHY]` and `[GATE]` (`lost_summary`).
fn lost_masked(stdout: &str) -> String {
    let server = regex::Regex::new(r"http://[0-9.]+:8086").unwrap();
    let text = server.replace_all(&masked(stdout), "http://[SERVER]:8086").into_owned();
    let Some((before, gate)) = text.split_once("\n== metrics agent\n") else { return text };
    let check =
        regex::Regex::new(r"(?m)^  (ok|WARN|FAIL) +(.+?)( — .*)?\n(          (expected|actual):.*\n)*").unwrap();
    let gate = check.replace_all(gate, "  [OUTCOME]  $2 [FOUND]\n");
    let totals = regex::Regex::new(r"(?m)^\d+ passed, \d+ failed(, \d+ warnings?)?  ").unwrap();
    let gate = totals.replace_all(&gate, "[N] passed, [N] failed, [N] warning(s)  ");
    let why = regex::Regex::new(r"unreachable during its (change|gate) \(([^()]|\([^()]*\))*\)").unwrap();
    let gate = why.replace_all(&gate, "unreachable during its $1 ([WHY])");
    let kept = regex::Regex::new(r"rollback point kept \(.*\); once").unwrap();
    let gate = kept.replace_all(&gate, "rollback point kept ([GATE]); once");
    format!("{before}\n== metrics agent\n{gate}")
}

/// The configure whose host was cut off in its gate, whole (`lost_masked`).
fn lost() -> &'static str {
    "configure on d13c1 (<built-in>/runbooks/configure.rhai)

== configuration of metrics-agent
  ok    configuration rendered from metrics-agent/telegraf.conf.j2
  --- /etc/telegraf/telegraf.conf
+++ /etc/telegraf/telegraf.conf
@@ -8,7 +8,7 @@
   urls = [\"http://[SERVER]:8086\"]
   token = \"********\"
   organization = \"opsbook\"
-  bucket = \"telegraf\"
+  bucket = \"nowhere\"
   timeout = \"[DUR]\"
 
 [[inputs.cpu]]

  ok    configuration validated by the component's own tool
  changed /etc/telegraf/telegraf.conf: 1 line added, 1 removed (previous version kept as /etc/telegraf/telegraf.conf.opsbook-backup)

== apply to telegraf.service
  changed=1: configuration /etc/telegraf/telegraf.conf
  ok    metrics-agent ready

== metrics agent
  [OUTCOME]  telegraf.service active [FOUND]
  [OUTCOME]  configuration test prints line protocol [FOUND]
  [OUTCOME]  telegraf.service logged no errors since [TIME] UTC [FOUND]
  [OUTCOME]  collects cpu [FOUND]
  [OUTCOME]  collects mem [FOUND]
  [OUTCOME]  collects disk [FOUND]

== metrics-agent: evidence made after the change
  [OUTCOME]  a point of d13c1 stamped after the change is in telegraf [FOUND]
  [OUTCOME]  telegraf.service logged no failed delivery since the change [FOUND]

[N] passed, [N] failed, [N] warning(s)  ([DUR])

rollout of configure: 2 host(s) in 2 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      d13c1  1 unreachable  [DUR]
2      d13c2  not attempted

HOST   ROLES                       BATCH  OUTCOME        WHY
d13c1  metrics-agent, log-shipper  1      unreachable    unreachable during its change ([WHY]): configure's change in place, not verified, not rolled back; rollback point kept ([GATE]); once it answers, `opsbook run rollback --host d13c1 --set service=metrics-agent` restores it
d13c2  metrics-agent, log-shipper  2      not attempted  stopped after batch 1: 1 host(s) failed, more than 0

2 host(s): 1 unreachable (d13c1), 1 not attempted (d13c2); stopped after batch 1 of 2: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
"
}

/// The rerun of the broken configure after the killed run, whole: the unfinished change named,
/// the file as that run left it applied and verified again, the gate failing, the rollback to
/// the point from before the killed run passing, the rollout's summary.
fn rerun() -> String {
    format!(
        "configure on d13c1 (<built-in>/runbooks/configure.rhai)
  WARN  unfinished change of metrics-agent — d13c1 metrics-agent: an unfinished change from run [RUN] (configure, by root@[MACHINE], [HH:MM] UTC) was never verified; its rollback point (from before that change) is kept; `opsbook run rollback --set service=metrics-agent` restores the state from before it; a change whose verification passes ends it

== configuration of metrics-agent
  ok    configuration rendered from metrics-agent/telegraf.conf.j2
  nothing to write: /etc/telegraf/telegraf.conf is as an unfinished change left it, never verified: applying and verifying it now
  ok    configuration validated by the component's own tool

== apply to telegraf.service
  changed=1: configuration /etc/telegraf/telegraf.conf
  ok    metrics-agent ready

== metrics agent
  ok    telegraf.service active — active (running)
  ok    configuration test prints line protocol — 7 points from cpu, mem, system, disk
  [OUTCOME]  telegraf.service logged no errors since [TIME] UTC [STARTUP]
  ok    collects cpu
  ok    collects mem
  ok    collects disk

== metrics-agent: evidence made after the change
  FAIL  a point of d13c1 stamped after the change is in telegraf
          expected: a point (2 × interval [DUR] + flush_interval [DUR] + jitter [DUR] + margin [DUR]) within [DUR]
          actual:   0 point(s)
  FAIL  telegraf.service logged no failed delivery since the change — [N] line(s), the last: [TIME] E! [outputs.influxdb_v2] Failed to write metric to nowhere (will be dropped: 404 Not Found): not found: bucket \"nowhere\" not found
          expected: no failed push or write
          actual:   [N] line(s)

[N] passed, [N] failed, [N] warning(s)  ([DUR])

rollback on d13c1 (<built-in>/runbooks/rollback.rhai)
{ROLLBACK}
{}",
        first_rolled_back("configure")
    )
}

/// A rollback of the agent's configuration to the point from before a killed or cut-off
/// configure, after its report's first line: the point named by its run, the file restored and
/// the agent restarted, delivering again by evidence made after it.
const ROLLBACK: &str = "
== restore metrics-agent
  the rollback point from before run [RUN]'s change (configure, by root@[MACHINE], [HH:MM] UTC)
  changed /etc/telegraf/telegraf.conf: 1 line added, 1 removed (previous version kept as /etc/telegraf/telegraf.conf.opsbook-backup)
  restored=2: configuration /etc/telegraf/telegraf.conf, restarted

== metrics-agent as it was
  ok    metrics-agent ready

== metrics agent
  ok    telegraf.service active — active (running)
  ok    configuration test prints line protocol — 7 points from cpu, mem, system, disk
  ok    telegraf.service logged no errors since [TIME] UTC
  ok    collects cpu
  ok    collects mem
  ok    collects disk

== metrics-agent: evidence made after the change
  ok    a point of d13c1 stamped after the change is in telegraf — after [DUR]
  ok    telegraf.service logged no failed delivery since the change — read [N] warning/error line(s)
  changed /etc/telegraf/telegraf.conf.opsbook-rollback: removed

9 passed, 0 failed  ([DUR])
";

/// `opsbook run rollback --host d13c1 --set service=metrics-agent`, whole, with what it says
/// of the change lock (`took_over`: a line, or nothing).
fn restored(took_over: &str) -> String {
    format!(
        "rollback on d13c1 (<built-in>/runbooks/rollback.rhai)\n{took_over}{ROLLBACK}
HOST   ROLES                       PASSED  FAILED  TIME
d13c1  metrics-agent, log-shipper  9       0       [DUR]

1 host(s): all passed  ([DUR])
ssh connections: 1 reused, 0 new
"
    )
}
