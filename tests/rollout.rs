//! Rollouts rehearsed in the sandbox's simulated fleet (no root, no network, so these always
//! run): a restart rolled out one host at a time with a fault on the second host — the first
//! changed, the second failed (its rollback could not bring it back either), the third not
//! attempted — the same as JSON; `--dry-run` showing the batches; the orchestrator script
//! passing a rollout through and showing the batches in its plan; the flags refused where they
//! mean nothing. The rollouts over real hosts are in `rollout_fleet.rs`.

use crate::support::{Output, Test, mask};

/// What varies from run to run: durations, temporary paths and a slow check's own time
/// (`mask`), times of day, the line of a stdlib module an abort names.
pub(crate) fn settled(text: &str) -> String {
    let rules = [
        (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "[TIME]"),
        (r"\.rhai:\d+:\d+([;)])", ".rhai:[LINE]$1"),
        // A counter's reading before and after a wait.
        (r"(_total) \d+ → \d+", "$1 [N] → [N]"),
        // A run's id, and who ran it when (a rollback point records them).
        (r"\d{8}T\d{6}Z-[0-9a-f]{4}", "[RUN]"),
        (r"by [^ ,@]+@[^ ,]+, \d\d:\d\d UTC", "by [WHO], [HH:MM] UTC"),
    ];
    rules.iter().fold(mask(text), |text, (pattern, with)| {
        regex::Regex::new(pattern).unwrap().replace_all(&text, *with).into_owned()
    })
}

/// The rollout's summary: from its first line to the end of the report, `settled`.
pub(crate) fn summary(out: &Output) -> String {
    let text = settled(&out.stdout);
    let at = text.find("rollout of ").unwrap_or_else(|| panic!("no rollout summary:\n{}", out.stdout));
    text[at..].to_string()
}

const RESTART: [&str; 9] =
    ["run", "restart", "--sandbox", "--fleet", "3", "--hosts", "log-shipper", "--set", "component=log-shipper"];

/// c2's shipper, as the fault leaves it: a file that does not validate, which a restart
/// reads.
const BAD_START: &str = "failed (now failed (failed), result exit-code, exit status 1)
  its last log lines:
    Starting Vendor-agnostic OpenTelemetry Collector distribution with programmable pipelines...
    Error: [TMP]/c2/root/etc/alloy/alloy.toml: error: unknown key `batchwait` in [write]; did you mean `batch_wait`?
 --> [TMP]/c2/root/etc/alloy/alloy.toml:3:1
  |
3 | batchwait = \"[DUR]\"
  | ^
    alloy.service: Main process exited, code=exited, status=1/FAILURE
    alloy.service: Failed with result 'exit-code'.
    Failed to start Vendor-agnostic OpenTelemetry Collector distribution with programmable pipelines.
  hint: `journalctl -u alloy.service -n 20` shows more";

pub(crate) fn restarted(host: &str, faults: &str, dry: &str, plan: &str) -> String {
    // A restart ends with evidence made after it: a marker line through the shipper, its
    // counters moving (a dry run changes nothing, so there is nothing to prove).
    let evidence = if dry.is_empty() {
        format!(
            "  ok    a line written after the change reached the log store in {{hostname=\"{host}\"}} — after [DUR]
  ok    alloy.service logged no failed delivery since the change — read 0 warning/error line(s)
  ok    sent counter grew since the change — loki_write_sent_entries_total [N] → [N]
  ok    no push retried or dropped since the change — retried 0 → 0, dropped 0 → 0

6 passed, 0 failed"
        )
    } else {
        "  skip  log-shipper delivers after the change — a dry run changes nothing: nothing to prove

2 passed, 0 failed, 1 skipped"
            .to_string()
    };
    format!(
        "restart on {host} (<built-in>/runbooks/restart.rhai)  [sandbox: in-process stack{faults}]{dry}

== restart alloy.service
{plan}  ok    alloy.service active — active (running)

== logs since the restart
  ok    alloy.service logged no errors since [TIME]

== log-shipper: evidence made after the change
{evidence}  ([DUR])

"
    )
}

#[test]
fn a_fault_on_the_second_host_stops_the_rollout_there_and_the_third_is_not_attempted() {
    let faults = ", faults c2:log-shipper:bad-config";
    let args = [&RESTART[..], &["--serial", "1", "--fault", "c2:log-shipper:bad-config"]].concat();
    let out = Test::new().args(&args).run().code(1);
    let expected = format!(
        "{}restart on c2 (<built-in>/runbooks/restart.rhai)  [sandbox: in-process stack{faults}]

== restart alloy.service

aborted: restart of `alloy.service` {BAD_START}

0 passed, 0 failed  ([DUR])

rollback on c2 (<built-in>/runbooks/rollback.rhai)  [sandbox: in-process stack{faults}]

== restore log-shipper
  the rollback point from before run [RUN]'s change (restart, by [WHO], [HH:MM] UTC)

aborted: start of `alloy.service` {BAD_START} (at <built-in>/runbooks/rollback.rhai:[LINE]; thrown at <built-in>/stdlib/rollback.rhai:[LINE])

0 passed, 0 failed  ([DUR])

rollout of restart: 3 host(s) in 3 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c1     1 changed      [DUR]
2      c2     1 failed       [DUR]
3      c3     not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      changed
c2    metrics-agent, log-shipper  2      failed         gate: aborted: restart of `alloy.service` failed (now failed (failed), result exit-code, exit status 1); the rollback failed: aborted: start of `alloy.service` failed (now failed (failed), result exit-code, exit status 1)
c3    metrics-agent, log-shipper  3      not attempted  stopped after batch 2: 1 host(s) failed, more than 0

3 host(s): 1 changed (c1), 1 failed (c2), 1 not attempted (c3); stopped after batch 2 of 3: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
",
        restarted("c1", faults, "", "")
    );
    assert_eq!(settled(&out.stdout), expected, "{}", out.stdout);

    // With a budget of one failed host, the third host is changed too; as JSON.
    let json_args = [&args[..], &["--max-fail", "1", "--format", "json"]].concat();
    let json = Test::new().args(&json_args).run().code(1).json();
    assert_eq!((&json["outcome"], &json["exit_code"], &json["fleet"]), (&"failed".into(), &1.into(), &true.into()));
    let rollout = &json["rollout"];
    assert_eq!(
        (&rollout["serial"], &rollout["canary"], &rollout["max_fail"], &rollout["budget"], &rollout["stopped"]),
        (&"1".into(), &false.into(), &"1".into(), &1.into(), &serde_json::Value::Null)
    );
    assert_eq!(
        rollout["summary"],
        serde_json::json!({"changed": 2, "rolled_back": 0, "failed": 1, "unreachable": 0, "not_attempted": 0, "planned": 0})
    );
    let hosts: Vec<_> = rollout["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["host"].clone(), h["batch"].clone(), h["outcome"].clone(), h["rollback"]["outcome"].clone()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("c1".into(), 1.into(), "changed".into(), serde_json::Value::Null),
            ("c2".into(), 2.into(), "failed".into(), "failed".into()),
            ("c3".into(), 3.into(), "changed".into(), serde_json::Value::Null),
        ]
    );
    let batches = rollout["batches"].as_array().unwrap();
    assert!(batches.iter().all(|b| b["duration_s"].as_f64().is_some() && b["started_s"].as_f64().is_some()));
    assert_eq!(
        batches.iter().map(|b| b["outcome"].clone()).collect::<Vec<_>>(),
        ["1 changed", "1 failed", "1 changed"]
    );
}

#[test]
fn a_dry_run_shows_each_host_s_plan_and_the_batches_it_would_run_in() {
    let args = [&RESTART[..], &["--serial", "2", "--canary", "--dry-run"]].concat();
    let out = Test::new().args(&args).run().code(0);
    let dry = "  (dry run: nothing will be changed)";
    let plan = "  plan: would restart alloy.service\n";
    let expected = format!(
        "{}{}{}rollout of restart (dry run: nothing changes): 3 host(s) in 2 batch(es), a canary, then 2 at a time
BATCH  HOSTS   OUTCOME    TIME
1      c1      1 planned
2      c2, c3  2 planned

HOST  ROLES                       BATCH  OUTCOME  WHY
c1    metrics-agent, log-shipper  1      planned
c2    metrics-agent, log-shipper  2      planned
c3    metrics-agent, log-shipper  2      planned

3 host(s) planned in 2 batch(es); nothing changed  ([DUR])
",
        restarted("c1", "", dry, plan),
        restarted("c2", "", dry, plan),
        restarted("c3", "", dry, plan)
    );
    assert_eq!(settled(&out.stdout), expected, "{}", out.stdout);
}

#[test]
fn with_no_rollback_a_failed_host_is_kept_as_it_is_and_the_report_says_how_to_restore_it() {
    let args = [&RESTART[..], &["--serial", "1", "--no-rollback", "--fault", "c1:log-shipper:bad-config"]].concat();
    let out = Test::new().args(&args).run();
    assert_eq!(
        summary(&out),
        "rollout of restart: 3 host(s) in 3 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is kept as it is (--no-rollback)
BATCH  HOSTS  OUTCOME        TIME
1      c1     1 failed       [DUR]
2      c2     not attempted
3      c3     not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      failed         gate: aborted: restart of `alloy.service` failed (now failed (failed), result exit-code, exit status 1); kept as it is (--no-rollback): `opsbook run rollback --host c1 --set service=log-shipper` restores it
c2    metrics-agent, log-shipper  2      not attempted  stopped after batch 1: 1 host(s) failed, more than 0
c3    metrics-agent, log-shipper  3      not attempted  stopped after batch 1: 1 host(s) failed, more than 0

3 host(s): 1 failed (c1), 2 not attempted (c2, c3); stopped after batch 1 of 3: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
"
    );
    assert!(!out.stdout.contains("rollback on c1"), "{}", out.stdout);
    out.code(1);
}

#[test]
fn the_rollout_flags_are_refused_where_they_mean_nothing() {
    let run = |args: &[&str]| Test::new().args(args).run().code(2);
    run(&["run", "restart", "--sandbox", "--fleet", "2", "--max-fail", "1"])
        .stderr_is("error: `--max-fail` goes with a rollout: add `--serial N` or `--canary`\n");
    run(&["run", "restart", "--sandbox", "--fleet", "2", "--no-rollback"])
        .stderr_is("error: `--no-rollback` goes with a rollout: add `--serial N` or `--canary`\n");
    run(&["run", "restart", "--sandbox", "--serial", "1"]).stderr_is(
        "error: a rollout changes hosts batch by batch: select them (`--hosts all`, `--set service=ROLE`), or \
         simulate a fleet (`--sandbox --fleet N`)\n",
    );
    run(&["run", "restart", "--sandbox", "--fleet", "2", "--serial", "101%"]).stderr_is(
        "error: invalid value '101%' for '--serial <N|P%>': `101%` is neither a number of hosts (2) nor a share \
         of them (25%)\n\nFor more information, try '--help'.\n",
    );
}

#[test]
fn the_orchestrator_script_passes_a_rollout_through_and_its_plan_shows_the_batches() {
    let t = Test::new();
    crate::support::run_in(t.path(), &["scripts", "--install", "bin"], None).code(0);
    let out = std::process::Command::new("setsid")
        .arg("-w")
        .arg(t.path().join("bin/svc-exec.sh"))
        .args(["-y", "restart", "all:alloy", "--sandbox", "--fleet", "2", "--serial", "1", "--canary"])
        .env_clear()
        .env("OPSBOOK", crate::support::opsbook())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path())
        .env("XDG_STATE_HOME", t.path().join(".state"))
        .current_dir(t.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the script runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = settled(&String::from_utf8_lossy(&out.stdout));
    let dry = "  (dry run: nothing will be changed)";
    let plan = "  plan: would restart alloy.service\n";
    let expected = format!(
        "plan: restart of log-shipper on all (the same run with --dry-run; nothing changes yet)
{}{}rollout of restart (dry run: nothing changes): 2 host(s) in 2 batch(es), a canary, then 1 at a time
BATCH  HOSTS  OUTCOME    TIME
1      c1     1 planned
2      c2     1 planned

HOST  ROLES                       BATCH  OUTCOME  WHY
c1    metrics-agent, log-shipper  1      planned
c2    metrics-agent, log-shipper  2      planned

2 host(s) planned in 2 batch(es); nothing changed  ([DUR])
{}{}rollout of restart: 2 host(s) in 2 batch(es), a canary, then 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME    TIME
1      c1     1 changed  [DUR]
2      c2     1 changed  [DUR]

HOST  ROLES                       BATCH  OUTCOME  WHY
c1    metrics-agent, log-shipper  1      changed
c2    metrics-agent, log-shipper  2      changed

2 host(s): all changed  ([DUR])
",
        restarted("c1", "", dry, plan),
        restarted("c2", "", dry, plan),
        restarted("c1", "", "", ""),
        restarted("c2", "", "", "")
    );
    assert_eq!(text, expected);
}

#[test]
fn after_a_restart_only_a_point_made_after_it_counts_and_an_agent_that_writes_nothing_fails_its_gate() {
    // The restart itself runs (the unit is active, it logs no error), and the database holds
    // ten minutes of c2's points from before: only a point stamped after the restart counts,
    // and c2's agent writes none. The rollback cannot help: nothing it restores makes it write.
    let args = [
        "run",
        "restart",
        "--sandbox",
        "--fleet",
        "3",
        "--hosts",
        "metrics-agent",
        "--set",
        "component=metrics-agent",
        "--serial",
        "1",
        "--fault",
        "c2:metrics-agent:not-writing",
    ];
    let out = Test::new().args(args).run();
    let missing = "a point of c2 stamped after the change is in telegraf — 0 point(s)";
    assert_eq!(
        summary(&out),
        format!(
            "rollout of restart: 3 host(s) in 3 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c1     1 changed      [DUR]
2      c2     1 failed       [DUR]
3      c3     not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      changed
c2    metrics-agent, log-shipper  2      failed         gate: {missing}; the rollback failed: {missing}
c3    metrics-agent, log-shipper  3      not attempted  stopped after batch 2: 1 host(s) failed, more than 0

3 host(s): 1 changed (c1), 1 failed (c2), 1 not attempted (c3); stopped after batch 2 of 3: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
"
        ),
        "{}",
        out.stdout
    );
    // c2's own report: the restart ran, the evidence made after it is missing.
    let restart = settled(&out.stdout);
    let c2 = restart.split("restart on c2 ").nth(1).and_then(|r| r.split("rollback on c2 ").next()).unwrap_or_default();
    assert!(
        c2.ends_with(
            "== metrics-agent: evidence made after the change
  FAIL  a point of c2 stamped after the change is in telegraf
          expected: a point (2 × interval [DUR] + flush_interval [DUR] + jitter [DUR] + margin [DUR]) within [DUR]
          actual:   0 point(s)
  ok    telegraf.service logged no failed delivery since the change — read 0 warning/error line(s)

3 passed, 1 failed  ([DUR])

"
        ),
        "{}",
        out.stdout
    );
    out.code(1);
}
