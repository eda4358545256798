//! Unfinished changes and lost hosts rehearsed in the sandbox (no root, no network, so these
//! always run): a rollback point that outlived its run is named by every later run and never
//! replaced by `rollback`'s `step=save`, and one kept by an older opsbook (no run recorded) is
//! named too; a host lost in the middle of its change (`--fault HOST:C:lost-mid-change`) is
//! reported unreachable — not rolled back, its point kept — and counts against the failure
//! budget, so the hosts after it are untouched.

use crate::rollout::{restarted, settled};
use crate::support::Test;

/// This machine's name: a single sandbox host is this machine.
fn this_machine() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string()
}

/// Plants a rollback point from another run (a killed one), then does what a later run does.
const LATER_RUN: &str = r#"
import "unfinished" as unfinished;
import "rollback" as rollback;
let role = "log-shipper";
let path = unfinished::path(role);
let point = #{ role: role, unit: "alloy.service", taken: "2026-11-27 21:03:07 UTC", run: "20261127T210307Z-ab12",
    change: "configure", by: "root@op1", known: true, enabled: true, active: true, files: [] };
file::write(path, point.to_json(), #{ mode: "0600", backup: false });
unfinished::list();
rollback::save(rollback::covered(role), "configure");
section("kept");
log(`the point kept is run ${parse_json(file::read(path)).run}'s`);
// A point kept by an opsbook that recorded no run: still an unfinished change, still kept.
point.remove("run");
file::write(path, point.to_json(), #{ mode: "0600", backup: false });
rollback::save(rollback::covered(role), "restart");
log(`kept ${parse_json(file::read(path)).taken}`);
"#;

#[test]
fn a_point_that_outlived_its_run_is_named_and_never_replaced() {
    let out = Test::new().runbook("later", LATER_RUN).args(["run", "later", "--sandbox"]).run().code(0);
    let text = settled(&out.stdout).replace(&format!("— {} ", this_machine()), "— [MACHINE] ");
    let named = "an unfinished change from run [RUN] (configure, by root@op1, 2026-11-27 21:03 UTC) \
                 was never verified; its rollback point (from before that change) is kept";
    let older = "an unfinished change from an earlier run (its rollback point was kept 2026-11-27 21:03 UTC) was \
                 never verified; its rollback point (from before that change) is kept";
    assert_eq!(
        text,
        format!(
            "later (runbooks/later.rhai)  [sandbox: in-process stack]
  changed [TMP]/sandbox/root/etc/alloy/alloy.toml.opsbook-rollback: created (1 line, mode 0600)

== unfinished changes
  WARN  unfinished change of log-shipper — [MACHINE] log-shipper: {named}; `opsbook run rollback --set service=log-shipper` restores the state from before it; a change whose verification passes ends it

== rollback point of log-shipper
  WARN  unfinished change of log-shipper — [MACHINE] log-shipper: {named}
  ok    rollback point of log-shipper kept — the one from before the unfinished change, kept 2026-11-27 21:03 UTC

== kept
  the point kept is run [RUN]'s
  changed [TMP]/sandbox/root/etc/alloy/alloy.toml.opsbook-rollback: 1 line added, 1 removed

== rollback point of log-shipper
  WARN  unfinished change of log-shipper — [MACHINE] log-shipper: {older}
  ok    rollback point of log-shipper kept — the one from before the unfinished change, kept 2026-11-27 21:03 UTC
  kept [TIME]

2 passed, 0 failed, 3 warnings  ([DUR])
"
        )
    );
}

#[test]
fn a_host_lost_mid_change_is_unreachable_not_rolled_back_and_spends_the_budget() {
    let args = [
        "run",
        "restart",
        "--sandbox",
        "--fleet",
        "3",
        "--hosts",
        "log-shipper",
        "--set",
        "component=log-shipper",
        "--serial",
        "1",
        "--fault",
        "c2:log-shipper:lost-mid-change",
    ];
    let out = Test::new().args(args).run().code(1);
    let faults = ", faults c2:log-shipper:lost-mid-change";
    let expected = format!(
        "{}restart on c2 (<built-in>/runbooks/restart.rhai)  [sandbox: in-process stack{faults}]

== restart alloy.service

aborted: host c2 does not answer: lost after log-shipper changed (sandbox fault)

0 passed, 0 failed  ([DUR])

rollout of restart: 3 host(s) in 3 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c1     1 changed      [DUR]
2      c2     1 unreachable  [DUR]
3      c3     not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      changed
c2    metrics-agent, log-shipper  2      unreachable    unreachable during its change (no answer: the sandbox's host was lost (fault lost-mid-change)): restart's change may be partly in place, not verified, not rolled back; rollback point kept (aborted: host c2 does not answer: lost after log-shipper changed (sandbox fault)); once it answers, `opsbook run rollback --host c2 --set service=log-shipper` restores it
c3    metrics-agent, log-shipper  3      not attempted  stopped after batch 2: 1 host(s) failed, more than 0

3 host(s): 1 changed (c1), 1 unreachable (c2), 1 not attempted (c3); stopped after batch 2 of 3: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
",
        restarted("c1", faults, "", "")
    );
    assert_eq!(settled(&out.stdout), expected);
    // The JSON says the same, for machines.
    let args = [&args[..], &["--format", "json"]].concat();
    let doc = Test::new().args(&args).run().code(1).json();
    let c2 = &doc["rollout"]["hosts"][1];
    assert_eq!((c2["host"].as_str(), c2["outcome"].as_str()), (Some("c2"), Some("unreachable")));
    assert_eq!(doc["rollout"]["summary"]["unreachable"], 1);
}

/// Plants the point a killed `configure` of the shipper left, at the top of the real runbook
/// `name` (the sandbox's files live as long as one run), so the run below is that runbook's.
fn with_point_planted(name: &str) -> String {
    let source = std::fs::read_to_string(crate::support::repo_dir().join(format!("runbooks/{name}.rhai"))).unwrap();
    let plant = r#"
file::write(unfinished::path("log-shipper"), #{ role: "log-shipper", unit: "alloy.service",
    taken: "2026-11-27 21:03:07 UTC", run: "20261127T210307Z-ab12", change: "configure", by: "root@op1",
    known: true, enabled: true, active: true, files: [] }.to_json(), #{ mode: "0600", backup: false });
"#;
    let at = source.find("\nunfinished::").expect("the runbook says what is unfinished");
    format!("{}{plant}{}", &source[..at], &source[at..])
}

/// stop touches every component too: it names an unfinished change first (remove's naming,
/// and its taking the point away, is in `lifecycle::prepare_deploy_verify_configure_and_remove…`:
/// the sandbox removes nothing).
#[test]
fn stop_names_an_unfinished_change_before_it_acts() {
    let named = "an unfinished change from run [RUN] (configure, by root@op1, 2026-11-27 21:03 UTC) \
                 was never verified; its rollback point (from before that change) is kept; `opsbook run rollback \
                 --set service=log-shipper` restores the state from before it; a change whose verification passes ends it";
    let out = Test::new().runbook("stop", &with_point_planted("stop")).args(["run", "stop", "--sandbox"]).run().code(0);
    let text = settled(&out.stdout).replace(&format!("— {} ", this_machine()), "— [MACHINE] ");
    assert_eq!(
        text,
        format!(
            "stop (runbooks/stop.rhai)  [sandbox: in-process stack]
  changed [TMP]/sandbox/root/etc/alloy/alloy.toml.opsbook-rollback: created (1 line, mode 0600)

== unfinished changes
  WARN  unfinished change of log-shipper — [MACHINE] log-shipper: {named}

== stop clients

== stop servers

== status
  ok    telegraf.service stopped
  ok    alloy.service stopped
  ok    influxdb.service stopped
  ok    loki.service stopped

4 passed, 0 failed, 1 warning  ([DUR])
"
        )
    );
}
