//! `--sandbox --fleet N`: a runbook on a simulated server and N client hosts at once — a
//! section per host, the fleet's table, each format's per-host shape, faults per host. No
//! root and no network, so these always run.

use crate::support::{Output, Test};

#[track_caller]
fn fleet(args: &[&str]) -> Output {
    Test::new().args(["--sandbox"]).args(args).run()
}

/// A host's quick-check section: its two units, then the servers as seen from it.
fn quick_check_host(host: &str, faults: &str, units: [(&str, bool); 2]) -> String {
    let mut text = format!(
        "quick-check on {host} (<built-in>/runbooks/quick-check.rhai)  [sandbox: in-process stack{faults}]\n\n== units\n"
    );
    for (unit, active) in units {
        if active {
            text.push_str(&format!("  ok    {unit} active — active (running)\n"));
        } else {
            text.push_str(&format!(
                "  FAIL  {unit} active — inactive (dead); result success\n          expected: active (running)\n          actual:   inactive (dead)\n"
            ));
        }
    }
    let failed = units.iter().filter(|(_, active)| !active).count();
    let verdict =
        if failed == 0 { "stack healthy".to_string() } else { format!("stack NOT healthy: {failed} check(s) failed") };
    text.push_str(&format!(
        "\n== servers\n  ok    metrics database /health answers 200 — HTTP 200, ready for queries and writes (v2.7.11)\n  \
         ok    log store /ready says ready — ready\n  {verdict}\n\n{} passed, {failed} failed  ([DUR])\n\n",
        4 - failed
    ));
    text
}

#[test]
fn a_broken_client_is_named_and_the_other_hosts_finish() {
    let faults = ", faults c2:log-shipper:down";
    let clients = |ok| [("telegraf.service", true), ("alloy.service", ok)];
    let expected = [
        quick_check_host("server", faults, [("influxdb.service", true), ("loki.service", true)]),
        quick_check_host("c1", faults, clients(true)),
        quick_check_host("c2", faults, clients(false)),
        quick_check_host("c3", faults, clients(true)),
        "HOST    ROLES                       PASSED  FAILED  TIME\n\
         server  metrics-db, log-store       4       0       [DUR]\n\
         c1      metrics-agent, log-shipper  4       0       [DUR]\n\
         c2      metrics-agent, log-shipper  3       1       [DUR]\n\
         c3      metrics-agent, log-shipper  4       0       [DUR]\n\
         \n4 host(s): 1 failed (c2)  ([DUR])\n"
            .to_string(),
    ]
    .concat();
    // The table's columns are as wide as their widest cell: a masked time is narrower.
    let out = fleet(&["run", "quick-check", "--fleet", "3", "--fault", "c2:log-shipper:down"]).code(1);
    let squeezed = |t: &str| regex::Regex::new(r"\[DUR\] +").unwrap().replace_all(t, "[DUR] ").into_owned();
    assert_eq!(squeezed(&crate::support::mask(&out.stdout)), squeezed(&expected), "{}", out.stdout);
}

#[test]
fn every_format_names_the_host() {
    let args = ["run", "quick-check", "--fleet", "1", "--fault", "c1:log-shipper:down"];
    let tap = fleet(&[&args[..], &["--format", "tap"]].concat()).code(1);
    tap.stdout_is(
        "TAP version 13
# [server] opsbook run quick-check (<built-in>/runbooks/quick-check.rhai)
# == units
ok 1 - [server] influxdb.service active
ok 2 - [server] loki.service active
# == servers
ok 3 - [server] metrics database /health answers 200
ok 4 - [server] log store /ready says ready
# stack healthy
# [c1] opsbook run quick-check (<built-in>/runbooks/quick-check.rhai)
# == units
ok 5 - [c1] telegraf.service active
not ok 6 - [c1] alloy.service active
  ---
  message: \"inactive (dead); result success\"
  expected: \"active (running)\"
  actual: \"inactive (dead)\"
  section: \"units\"
  ...
# == servers
ok 7 - [c1] metrics database /health answers 200
ok 8 - [c1] log store /ready says ready
# stack NOT healthy: 1 check(s) failed
1..8
# 2 host(s), 1 failed
",
    );
    let json = fleet(&[&args[..], &["--format", "json"]].concat()).code(1).json();
    let summary = |passed, failed| serde_json::json!({"passed": passed, "failed": failed, "warnings": 0, "skipped": 0});
    assert_eq!(
        (&json["schema"], &json["fleet"], &json["outcome"], &json["exit_code"], &json["summary"]),
        (
            &2.into(),
            &true.into(),
            &"failed".into(),
            &1.into(),
            &serde_json::json!({"hosts": 2, "passed": 1, "failed": 1, "interrupted": 0})
        )
    );
    let hosts: Vec<_> = json["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["host"].clone(), h["roles"].clone(), h["outcome"].clone(), h["summary"].clone()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("server".into(), serde_json::json!(["metrics-db", "log-store"]), "passed".into(), summary(4, 0)),
            ("c1".into(), serde_json::json!(["metrics-agent", "log-shipper"]), "failed".into(), summary(3, 1)),
        ]
    );
    for run in json["runs"].as_array().unwrap() {
        assert!(run["checks"].as_array().unwrap().iter().all(|c| c["host"] == run["host"]), "{run}");
    }
    let junit = fleet(&[&args[..], &["--format", "junit"]].concat()).code(1);
    let xml = roxmltree::Document::parse(&junit.stdout).expect("valid XML");
    let suites: Vec<_> = xml
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|s| (s.attribute("hostname").unwrap(), s.attribute("tests").unwrap(), s.attribute("failures").unwrap()))
        .collect();
    assert_eq!(suites, [("server", "4", "0"), ("c1", "4", "1")]);
}

#[test]
fn the_verifications_and_flows_pass_on_every_host() {
    for runbook in ["verify", "checklist", "e2e-logs", "status"] {
        let out = fleet(&["run", runbook, "--fleet", "2"]).code(0);
        let last = out.stdout.lines().last().unwrap_or_default();
        assert!(last.starts_with("3 host(s): all passed  ("), "{runbook}:\n{}", out.stdout);
    }
    // The logs flow starts at a client: the server host says why it has nothing to send.
    fleet(&["run", "e2e-logs", "--fleet", "1"]).code(0).stdout_matches(
        r"(?s)e2e-logs on server .*\n  skip  end-to-end logs flow — no log-shipper on this host\n.*\n  ok    line found in \{hostname=.c1.\} — .*",
    );
}

#[test]
fn fleet_mistakes_are_usage_errors() {
    fleet(&["run", "status", "--fleet", "2", "--fault", "c9:log-shipper:down"])
        .code(2)
        .stderr_is("error: fault for host `c9`, which the sandbox does not have (hosts: server, c1, c2)\n");
    Test::new()
        .args(["run", "status", "--fleet", "2"])
        .run()
        .code(2)
        .stderr_is("error: `--fleet 2` simulates a fleet of hosts in the sandbox: add `--sandbox`\n");
}

/// `fleet::on` runs a block acting on another host: the server's units and `config`, asked
/// from each client; its checks are named after that host, and a fault there shows.
#[test]
fn a_block_acts_on_another_host() {
    let runbook = r#"//! Asks the server from every host.
import "checks" as checks;
let state = fleet::on("server", || {
    checks::units_active([config.metrics_db.unit]);
    unit::status(config.log_store.unit).active_state
});
print(`log store on the server: ${state}`);
fleet::on("nowhere", || 1);
"#;
    let out = Test::new()
        .runbook("ask-server", runbook)
        .args(["--sandbox", "run", "ask-server", "--fleet", "1", "--fault", "server:log-store:down"])
        .run()
        .code(1);
    let section = |host: &str, name: &str| {
        format!(
            "ask-server on {host} (runbooks/ask-server.rhai)  [sandbox: in-process stack, faults server:log-store:down]\n  \
             ok    {name}influxdb.service active — active (running)\n  \
             log store on the server: inactive\n\naborted: error: no host named `nowhere` in the inventory (hosts: server, c1)\n\n1 passed, 0 failed  ([DUR])\n\n"
        )
    };
    let expected = [
        section("server", ""),
        section("c1", "server: "),
        "HOST    ROLES                       PASSED  FAILED  TIME\n\
         server  metrics-db, log-store       1       1       [DUR]\n\
         c1      metrics-agent, log-shipper  1       1       [DUR]\n\
         \n2 host(s): 2 failed (server, c1)  ([DUR])\n"
            .to_string(),
    ]
    .concat();
    let squeezed = |t: &str| regex::Regex::new(r"\[DUR\] +").unwrap().replace_all(t, "[DUR] ").into_owned();
    assert_eq!(squeezed(&crate::support::mask(&out.stdout)), squeezed(&expected), "{}", out.stdout);
}
