//! SIGTERM during a fleet run (#36, item 7): every host's partial report, and the hosts it
//! stopped reported as interrupted — in the summary table, the verdict, the exit status (130)
//! and the `--save-json` document — not as failed.

use std::time::Duration;

use crate::support::{Test, mask, wait_until};

/// Each host tells the test it is about to sleep: a file in its sandboxed root (the sandbox
/// reaches no server of this machine, so no request could say it).
const SLOW: &str = "check(\"before\", true);\nprint(\"long part next\");\nfile::write(\"/etc/opsbook-asleep\", \"\");\nsleep(\"1m\");\ncheck(\"after\", true);\n";

/// How many hosts of the sandbox fleet run `pid` has made have written their file.
fn asleep(pid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return 0 };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("opsbook-sandbox-{pid}-")))
        .map(|dir| {
            ["server", "c1", "c2"]
                .iter()
                .filter(|h| dir.path().join(h).join("root/etc/opsbook-asleep").exists())
                .count()
        })
        .sum()
}

fn host_report(host: &str) -> String {
    format!(
        "slow on {host} (runbooks/slow.rhai)  [sandbox: in-process stack]
  ok    before
  long part next
  changed /etc/opsbook-asleep: created (0 lines, mode 0644)

interrupted

1 passed, 0 failed  ([DUR])

"
    )
}

#[test]
fn sigterm_during_a_fleet_run_reports_the_hosts_as_interrupted() {
    let t = Test::new().runbook("slow", SLOW);
    let saved = t.path().join("fleet.json");
    let running = t.args(["--sandbox", "run", "slow", "--fleet", "2", "--save-json", "fleet.json"]).spawn();
    // The fleet keeps each host's lines until the host is done: the hosts' files say that the
    // three are asleep (however long the sandbox's set-up took).
    let pid = running.pid();
    wait_until("the three hosts asleep", Duration::from_secs(60), || match asleep(pid) {
        3 => Ok(()),
        n => Err(format!("{n} of 3 asleep")),
    });
    running.signal(libc::SIGTERM);
    let (out, _) = running.wait(Duration::from_secs(20));
    let expected = format!(
        "{}{}{}HOST    ROLES                       PASSED  FAILED          TIME
server  metrics-db, log-store       1       0, interrupted  [DUR]
c1      metrics-agent, log-shipper  1       0, interrupted  [DUR]
c2      metrics-agent, log-shipper  1       0, interrupted  [DUR]

3 host(s): 3 interrupted (server, c1, c2)  ([DUR])
",
        host_report("server"),
        host_report("c1"),
        host_report("c2")
    );
    let out = out.code(130).stdout_is(&expected);
    assert_eq!(
        mask(&out.stderr),
        "\ninterrupted by SIGTERM: stopping the runbook on every host (Ctrl-C again to quit at once)\n"
    );
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
    assert_eq!(
        (&doc["outcome"], &doc["exit_code"], &doc["summary"]),
        (
            &serde_json::json!("interrupted"),
            &serde_json::json!(130),
            &serde_json::json!({"hosts": 3, "passed": 0, "failed": 0, "interrupted": 3})
        )
    );
    let outcomes: Vec<&serde_json::Value> = doc["hosts"].as_array().unwrap().iter().map(|h| &h["outcome"]).collect();
    assert_eq!(outcomes, ["interrupted", "interrupted", "interrupted"]);
}
