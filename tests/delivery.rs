//! Delivery broken while the component runs, rehearsed in the sandbox (no root, no network
//! beyond loopback, so these always run): the shipper pushing to a dead port or to a path the
//! log store answers 404, the agent writing to a bucket the database lacks or with a token it
//! refuses — each unit active and its configuration valid all along. Every runbook that judges
//! delivery says so: after a change (reload, restart, restart-all) by evidence made after it
//! (a marker, a point stamped after the change, the counters, the failed pushes or writes it
//! logged), without one (verify) by the age of the newest line or point and the failures in
//! the recent window. quick-check judges units and endpoints only, and passes: the report
//! says what each runbook reads. Each case's verdicts are compared whole.

use crate::rollout::{settled, summary};
use crate::support::Test;

/// The verdicts of a sandbox run, one `OUTCOME name` line each, and its exit code. This
/// machine's host name reads `[HOST]`, times of day `[TIME]`. Whether a unit "logged no errors"
/// right after its start depends on whether its first failed flush came before the check (a
/// second, on a loaded machine more): that one outcome reads `pass|warn`.
fn verdicts(args: &[&str]) -> String {
    let out = Test::new().args(["run", "--sandbox", "--format", "json"]).args(args).run();
    let report = out.json();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let lines: Vec<String> = report["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks: {}", out.stdout))
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            let outcome = c["outcome"].as_str().unwrap_or_default();
            let outcome =
                if name.contains(" logged no errors since ") && outcome != "fail" { "pass|warn" } else { outcome };
            format!("{outcome} {name}")
        })
        .collect();
    let text = format!("exit {}\n{}\n", report["exit_code"], lines.join("\n"));
    settled(
        &text.replace(&format!("\"{}\"", host.trim()), "\"[HOST]\"").replace(&format!(" {} ", host.trim()), " [HOST] "),
    )
}

/// The shipper's evidence after a change when its pushes fail.
const SHIPPER_FAILS: &str = "fail a line written after the change reached the log store in {hostname=\"[HOST]\"}
fail alloy.service logged no failed delivery since the change
fail sent counter grew since the change
fail no push retried or dropped since the change";

/// The agent's evidence after a change when its writes are refused.
const AGENT_FAILS: &str = "fail a point of [HOST] stamped after the change is in telegraf
fail telegraf.service logged no failed delivery since the change";

/// The servers' round trips after restart-all.
const SERVERS_DELIVER: &str = "pass a point written after the change is taken
pass the point is read back from opsbook_probe
pass a line pushed after the change is taken
pass the line is read back from {opsbook_probe=\"[HOST]\"}";

fn restart_all(shipper: &str, agent: &str) -> String {
    format!(
        "exit 1
pass servers ready
pass influxdb.service active
pass loki.service active
pass telegraf.service active
pass alloy.service active
pass|warn influxdb.service logged no errors since [TIME]
pass|warn loki.service logged no errors since [TIME]
pass|warn telegraf.service logged no errors since [TIME]
pass|warn alloy.service logged no errors since [TIME]
{SERVERS_DELIVER}
{agent}
{shipper}
"
    )
}

#[test]
fn a_shipper_whose_pushes_fail_fails_every_check_of_its_delivery() {
    let cases = ["log-shipper:push-dead", "log-shipper:push-refused"];
    let agent_delivers = "pass a point of [HOST] stamped after the change is in telegraf
pass telegraf.service logged no failed delivery since the change";
    std::thread::scope(|s| {
        for fault in cases {
            s.spawn(move || {
                assert_eq!(
                    verdicts(&["verify-log-shipper", "--fault", fault]),
                    "exit 1
pass alloy.service active
pass configuration validates
pass|warn alloy.service logged no errors since 1 hour ago
pass log sources read
fail newest line from [HOST] in the log store within 5m
fail local metrics show write operations
fail alloy.service logged no failed delivery in the last 5m
",
                    "{fault}"
                );
            });
            s.spawn(move || {
                let expected = format!(
                    "exit 1\npass configuration validates\npass shipper reloaded its configuration\npass alloy.service active\n{SHIPPER_FAILS}\n"
                );
                assert_eq!(verdicts(&["reload-shipper", "--fault", fault]), expected, "{fault}");
            });
            s.spawn(move || {
                let expected = format!(
                    "exit 1\npass alloy.service active\npass|warn alloy.service logged no errors since [TIME]\n{SHIPPER_FAILS}\n"
                );
                assert_eq!(verdicts(&["restart", "--set", "component=log-shipper", "--fault", fault]), expected, "{fault}");
            });
            s.spawn(move || {
                assert_eq!(
                    verdicts(&["restart-all", "--fault", fault]),
                    restart_all(SHIPPER_FAILS, agent_delivers),
                    "{fault}"
                );
            });
        }
    });
}

#[test]
fn an_agent_whose_writes_are_refused_fails_every_check_of_its_delivery() {
    let cases = ["metrics-agent:missing-bucket", "metrics-agent:wrong-token"];
    let shipper_delivers = "pass a line written after the change reached the log store in {hostname=\"[HOST]\"}
pass alloy.service logged no failed delivery since the change
pass sent counter grew since the change
pass no push retried or dropped since the change";
    std::thread::scope(|s| {
        for fault in cases {
            s.spawn(move || {
                assert_eq!(
                    verdicts(&["verify-metrics-agent", "--fault", fault]),
                    "exit 1
pass telegraf.service active
pass configuration test prints line protocol
pass|warn telegraf.service logged no errors since 1 hour ago
pass collects cpu
pass collects mem
pass collects disk
fail newest cpu point of [HOST] within 5m
fail telegraf.service logged no failed delivery in the last 5m
",
                    "{fault}"
                );
            });
            s.spawn(move || {
                let expected = format!(
                    "exit 1\npass configuration test passes\npass telegraf.service reloaded\npass telegraf.service active\n{AGENT_FAILS}\n"
                );
                assert_eq!(verdicts(&["reload-agent", "--fault", fault]), expected, "{fault}");
            });
            s.spawn(move || {
                let expected = format!(
                    "exit 1\npass telegraf.service active\npass|warn telegraf.service logged no errors since [TIME]\n{AGENT_FAILS}\n"
                );
                assert_eq!(verdicts(&["restart", "--set", "component=metrics-agent", "--fault", fault]), expected, "{fault}");
            });
            s.spawn(move || {
                assert_eq!(
                    verdicts(&["restart-all", "--fault", fault]),
                    restart_all(shipper_delivers, AGENT_FAILS),
                    "{fault}"
                );
            });
            // quick-check reads units and endpoints, not delivery: it passes, as documented.
            s.spawn(move || {
                assert_eq!(
                    verdicts(&["quick-check", "--fault", fault]),
                    "exit 0
pass influxdb.service active
pass loki.service active
pass telegraf.service active
pass alloy.service active
pass metrics database /health answers 200
pass log store /ready says ready
",
                    "{fault}"
                );
            });
        }
    });
}

/// The agent's evidence counts any point of this host, but only one stamped after the change:
/// with an agent that writes nothing (its token refused), a point stamped a microsecond before
/// the change — written into the bucket after it — fails the gate; one stamped a microsecond
/// after passes it.
#[test]
fn a_point_stamped_before_the_change_never_proves_the_agent_delivers() {
    let runbook = r#"import "evidence" as evidence;
let bucket = config.metrics_db.bucket;
let changed = moment();
let at = changed.us * 1000;
influx::write(bucket, `mem,host=${hostname()} used_percent=1 ${at - 1000}`);
evidence::evidence_after("metrics-agent", changed, #{ margin: "0s" });
influx::write(bucket, `mem,host=${hostname()} used_percent=1 ${at + 1000}`);
evidence::evidence_after("metrics-agent", changed, #{ margin: "0s" });
"#;
    let out = Test::new()
        .runbook("stamped", runbook)
        .args(["run", "stamped", "--sandbox", "--format", "json", "--fault", "metrics-agent:wrong-token"])
        .run();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let lines: Vec<String> = out.json()["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks: {}", out.stdout))
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().replace(host.trim(), "[HOST]");
            let outcome = c["outcome"].as_str().unwrap_or_default();
            // How many failed writes the agent logged meanwhile depends on the machine's pace.
            match c["actual"].as_str() {
                Some(actual) if name.starts_with("a point of ") => format!("{outcome} {name} — {actual}"),
                _ => format!("{outcome} {name}"),
            }
        })
        .collect();
    assert_eq!(
        lines.join("\n"),
        "fail a point of [HOST] stamped after the change is in telegraf — 0 point(s)
fail telegraf.service logged no failed delivery since the change
pass a point of [HOST] stamped after the change is in telegraf — 1 point(s)
fail telegraf.service logged no failed delivery since the change",
        "{}",
        out.stdout
    );
    out.code(1);
}

/// The report of a failed delivery check says what was waited for, for how long, and quotes
/// what the agent logged.
#[test]
fn a_refused_write_after_a_reload_is_reported_with_the_wait_and_the_agents_own_lines() {
    let out = Test::new().args(["run", "reload-agent", "--sandbox", "--fault", "metrics-agent:missing-bucket"]).run();
    let text = settled(&out.stdout);
    let evidence = text.split("== metrics-agent: evidence made after the change\n").nth(1).unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let seen = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
        .unwrap()
        .replace_all(evidence, "[TS]")
        .replace(host.trim(), "[HOST]");
    let seen = regex::Regex::new(r"\d+ line\(s\)").unwrap().replace_all(&seen, "[N] line(s)");
    assert_eq!(
        seen,
        "  FAIL  a point of [HOST] stamped after the change is in telegraf
          expected: a point (2 × interval [DUR] + flush_interval [DUR] + jitter [DUR] + margin [DUR]) within [DUR]
          actual:   0 point(s)
  FAIL  telegraf.service logged no failed delivery since the change — [N] line(s), the last: [TS] E! [outputs.influxdb_v2] Failed to write metric to telegraf-missing (will be dropped: 404 Not Found): not found: bucket \"telegraf-missing\" not found
          expected: no failed push or write
          actual:   [N] line(s)

3 passed, 2 failed  ([DUR])
",
        "{}",
        out.stdout
    );
    out.code(1);
}

/// A rollout of a restart one host at a time: c2's shipper pushes nowhere, so its restart's
/// own evidence fails, the rollback cannot make it deliver, and c3 is not attempted.
#[test]
fn a_rollout_stops_at_the_first_host_whose_shipper_stops_delivering() {
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
        "c2:log-shipper:push-dead",
    ];
    let out = Test::new().args(args).run();
    let why = "a line written after the change reached the log store in {hostname=\"c2\"} — absent; \
               alloy.service logged no failed delivery since the change — [N] line(s), the last: [QUOTED]";
    let quoted = regex::Regex::new(r"\d+ line\(s\), the last: ts=.*?; and").unwrap();
    assert_eq!(
        quoted.replace_all(&summary(&out), "[N] line(s), the last: [QUOTED]; and"),
        format!(
            "rollout of restart: 3 host(s) in 3 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c1     1 changed      [DUR]
2      c2     1 failed       [DUR]
3      c3     not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      changed
c2    metrics-agent, log-shipper  2      failed         gate: {why}; and 2 more; the rollback failed: {why}; and 2 more
c3    metrics-agent, log-shipper  3      not attempted  stopped after batch 2: 1 host(s) failed, more than 0

3 host(s): 1 changed (c1), 1 failed (c2), 1 not attempted (c3); stopped after batch 2 of 3: 1 host(s) failed, more than --max-fail 0 allows  ([DUR])
"
        ),
        "{}",
        out.stdout
    );
    out.code(1);
}
