//! `--sandbox`: every built-in runbook passes against the in-process stack, and each
//! `--fault` is caught by the runbook meant to catch it, with a message naming the cause.
//! These need no root, no systemd and no network beyond loopback, so they always run.

use crate::support::{Output, Test};

#[track_caller]
fn sandbox(args: &[&str]) -> Output {
    Test::new().args(["--sandbox"]).args(args).run()
}

/// Runs each runbook in the sandbox and expects it to pass (exit 0, no failed check).
#[track_caller]
fn all_pass(runs: &[&[&str]]) {
    for args in runs {
        sandbox(&[&["run"], *args].concat()).passed(&format!("`opsbook run {}` in the sandbox", args.join(" ")));
    }
}

/// Every built-in runbook, by the test that runs it in the sandbox.
const COVERED: &[&str] = &[
    "deploy",
    "configure",
    "remove",
    "prepare",
    "status",
    "quick-check",
    "logs",
    "containers",
    "e2e-logs",
    "verify",
    "checklist",
    "verify-metrics-db",
    "verify-log-store",
    "verify-metrics-agent",
    "verify-log-shipper",
    "stop",
    "start",
    "restart",
    "reload-agent",
    "reload-shipper",
    "restart-all",
    "e2e-metrics",
    // rollout.rs: a rollout's rehearsal runs it on each host (save, restore, release).
    "rollback",
];

#[test]
fn every_built_in_runbook_is_run_here() {
    let out = Test::new().args(["list", "--format", "json"]).run().code(0);
    let listed: Vec<String> =
        out.json().as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
    let missing: Vec<&String> = listed.iter().filter(|n| !COVERED.contains(&n.as_str())).collect();
    assert!(missing.is_empty(), "built-in runbooks no sandbox test runs: {missing:?}");
}

/// The lifecycle runbooks install real programs, which the sandbox only simulates: there they
/// rehearse (`--dry-run`: every step says what it would do), and refuse to act.
#[test]
fn lifecycle_runbooks_rehearse_with_dry_run_and_refuse_to_act() {
    all_pass(&[
        &["deploy", "--dry-run", "--set", "service=localhost:alloy"],
        &["configure", "--dry-run", "--set", "service=localhost:telegraf"],
        &["remove", "--dry-run", "--set", "service=localhost:loki"],
        &["prepare", "--dry-run", "--set", "environment=all"],
        // No inventory: the one host is this machine, and prepare needs no group.
        &["prepare", "--dry-run"],
    ]);
    sandbox(&["run", "deploy", "--set", "service=localhost:loki"]).code(1).stdout_matches(
        r"deploy \(<built-in>/runbooks/deploy\.rhai\)  \[sandbox: in-process stack\]\n\naborted: the lifecycle runbooks install real programs, which the sandbox only simulates: rehearse with --dry-run, or run against a host \(--host NAME\) \(at <built-in>/runbooks/deploy\.rhai:\d+:\d+; thrown at <built-in>/stdlib/lifecycle\.rhai:\d+:\d+\)\n\n0 passed, 0 failed  \(\[DUR\]\)\n",
    );
}

#[test]
fn status_checks_and_logs_runbooks_pass() {
    all_pass(&[
        &["status"],
        &["quick-check"],
        &["logs", "--set", "unit=log-shipper", "--set", "since=10 min ago"],
        &["containers"],
        &["e2e-logs"],
    ]);
    sandbox(&["run", "quick-check"]).code(0).stdout_is(&quick_check_report(
        "",
        ACTIVE,
        [DB_HEALTHY, STORE_READY],
        "stack healthy",
    ));
    // The shipper's own start lines are in its unit's journal.
    sandbox(&["run", "logs", "--set", "unit=alloy"]).code(0).stdout_has("Started Vendor-agnostic");
}

#[test]
fn verification_runbooks_pass() {
    all_pass(&[&["verify"], &["checklist"]]);
    for component in ["metrics-db", "log-store", "metrics-agent", "log-shipper"] {
        all_pass(&[&[&format!("verify-{component}")]]);
    }
}

#[test]
fn mutating_runbooks_pass() {
    all_pass(&[
        &["stop"],
        &["start"],
        &["restart", "--set", "component=log-store"],
        &["reload-agent"],
        &["reload-shipper"],
        &["restart-all"],
    ]);
}

#[test]
fn the_end_to_end_metrics_flow_passes() {
    all_pass(&[&["e2e-metrics", "--set", "load=3s"]]);
}

#[test]
fn stop_really_stops_and_the_ports_close() {
    let src = r#"
unit::stop(["telegraf", "alloy", "influxdb", "loki"]);
let db = influx::health();
check("database port closed", #{ ok: !db.ok && db.detail.contains("refused"), detail: db.detail });
check("unit inactive", unit::status("loki").active_state == "inactive");
unit::start("loki");
check("log store answers again", loki::ready().ok);
"#;
    Test::new().runbook("t", src).args(["run", "t", "--sandbox"]).run().code(0).stdout_has("3 passed, 0 failed");
}

/// The quick check's whole report in the sandbox with these faults, unit and server lines.
fn quick_check_report(faults: &str, units: [&str; 4], servers: [&str; 2], verdict: &str) -> String {
    let failed = units.iter().chain(&servers).filter(|l| l.starts_with("FAIL")).count();
    let faults = if faults.is_empty() { String::new() } else { format!(", faults {faults}") };
    format!(
        "quick-check (<built-in>/runbooks/quick-check.rhai)  [sandbox: in-process stack{faults}]\n\n\
         == units\n{}\n\n== servers\n{}\n  {verdict}\n\n{} passed, {failed} failed  ([DUR])\n",
        units.map(|l| format!("  {l}")).join("\n"),
        servers.map(|l| format!("  {l}")).join("\n"),
        6 - failed,
    )
}

const ACTIVE: [&str; 4] = [
    "ok    influxdb.service active — active (running)",
    "ok    loki.service active — active (running)",
    "ok    telegraf.service active — active (running)",
    "ok    alloy.service active — active (running)",
];
const DB_HEALTHY: &str =
    "ok    metrics database /health answers 200 — HTTP 200, ready for queries and writes (v2.7.11)";
const STORE_READY: &str = "ok    log store /ready says ready — ready";

#[test]
fn a_stopped_or_failing_server_fails_the_quick_check_naming_it() {
    let stopped = "FAIL  loki.service active — inactive (dead); result success\n          expected: active (running)\n          actual:   inactive (dead)";
    sandbox(&["run", "quick-check", "--fault", "log-store:down"]).code(1).stdout_is(&quick_check_report(
        "log-store:down",
        [ACTIVE[0], stopped, ACTIVE[2], ACTIVE[3]],
        [DB_HEALTHY, "FAIL  log store /ready says ready — connection refused"],
        "stack NOT healthy: 2 check(s) failed",
    ));
    sandbox(&["run", "quick-check", "--fault", "metrics-db:fail-start"])
        .code(1)
        .stdout_matches(r"(?s).*\n  FAIL  influxdb\.service active — failed \(failed\); result exit-code\n.*");
    // Starting it again fails, quoting the server's own last words.
    sandbox(&["run", "start", "--fault", "metrics-db:fail-start"])
        .code(1)
        .stdout_has("start of `influxdb.service` failed")
        .stdout_has("Failed to open engine");
}

#[test]
fn broken_servers_are_named_by_what_they_answered() {
    sandbox(&["run", "quick-check", "--fault", "log-store:error-500"])
        .code(1)
        .stdout_has("log store /ready says ready")
        .stdout_has("HTTP 500");
    sandbox(&["run", "quick-check", "--fault", "metrics-db:garbage"])
        .code(1)
        .stdout_has("not InfluxDB's health JSON")
        .stdout_has("<!DOCTYPE html>");
    sandbox(&["run", "verify-metrics-db", "--fault", "metrics-db:refuse-token"])
        .code(1)
        .stdout_has("authenticated bucket listing")
        .stdout_has("refused the API token");
}

#[test]
fn a_slow_server_holds_the_clients_back() {
    let out = sandbox(&[
        "run",
        "start",
        "--set",
        "deadline=1s",
        "--fault",
        "log-store:slow-ready=60s",
        "--fault",
        "metrics-agent:down",
        "--fault",
        "log-shipper:down",
    ]);
    let out = out.code(1).stdout_has("clients NOT started").stdout_has("Ingester not ready");
    assert!(!out.stdout.contains("== start clients"), "{}", out.stdout);
    sandbox(&["run", "quick-check", "--fault", "metrics-db:slow-ready=60s"]).code(1).stdout_is(&quick_check_report(
        "metrics-db:slow-ready=[DUR]",
        ACTIVE,
        ["FAIL  metrics database /health answers 200 — connection refused", STORE_READY],
        "stack NOT healthy: 1 check(s) failed",
    ));
    // A short delay is waited out.
    sandbox(&["run", "start", "--fault", "log-store:slow-ready=1s"]).code(0).stdout_has("servers ready");
}

#[test]
fn client_faults_are_caught_by_their_verifications() {
    sandbox(&["run", "verify-metrics-agent", "--fault", "metrics-agent:not-writing"]).code(1).stdout_matches(
        r"(?s).*\n  FAIL  newest cpu point of \S+ within 5m — none in the last 5m(?:  \(\[DUR\]\))?\n          expected: a point no older than 5m within \[DUR\]\n          actual:   none in the last 5m\n.*",
    );
    let out = sandbox(&["run", "reload-shipper", "--fault", "log-shipper:bad-config", "--format", "json"]).code(1);
    let report = out.json();
    assert_eq!(
        (report["sandbox"].as_bool(), report["faults"][0].as_str()),
        (Some(true), Some("log-shipper:bad-config"))
    );
    let checks = report["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["section"] != "reload"), "reloaded despite a bad config: {report}");
    assert!(out.stdout.contains("did you mean `batch_wait`?"), "{}", out.stdout);
    sandbox(&["run", "verify-log-shipper", "--fault", "log-shipper:bad-config"])
        .code(1)
        .stdout_has("FAIL  configuration validates");
    // A failed reload is remedied by a restart, and the report says why it restarted.
    sandbox(&["run", "reload-shipper", "--fault", "log-shipper:reload-fails"])
        .code(0)
        .stdout_has("WARN  shipper reload")
        .stdout_has("the configuration could not be loaded")
        .stdout_has("restarting the unit instead");
    sandbox(&["run", "reload-agent", "--fault", "metrics-agent:no-reload"])
        .code(0)
        .stdout_has("does not support reload (systemd refuses the job)")
        .stdout_has("telegraf.service: restarted");
}

#[test]
fn bad_fault_specs_are_usage_errors() {
    sandbox(&["run", "status", "--fault", "log-stor:down"]).code(2).stderr_has("did you mean `log-store`?");
    sandbox(&["run", "status", "--fault", "metrics-agent:garbage"]).code(2).stderr_has("does not apply");
    Test::new().args(["run", "status", "--fault", "log-store:down"]).run().code(2).stderr_has("--sandbox");
}

#[test]
fn the_sandbox_leaves_nothing_behind_and_never_shows_its_token() {
    let t = Test::new();
    let tmp = t.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let tmp_text = tmp.display().to_string();
    let out = t
        .env("TMPDIR", &tmp_text)
        .args(["run", "verify-metrics-db", "--sandbox", "--format", "json", "-vv"])
        .run()
        .code(0);
    let token = regex_like_token(&out.stdout) || regex_like_token(&out.stderr);
    assert!(!token, "the sandbox's API token was shown");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "the sandbox left files in TMPDIR");
    sandbox(&["config"]).code(0).stdout_has("<redacted>").stdout_has("# sandbox");
}

/// Whether `text` holds something shaped like the sandbox's token (`sandbox-` + 48 hex digits).
fn regex_like_token(text: &str) -> bool {
    text.match_indices("sandbox-").any(|(at, _)| {
        let rest = &text[at + 8..];
        rest.len() >= 48 && rest[..48].chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// As root, the test drops to `nobody` inside a network namespace that has only loopback:
/// the sandbox needs neither privileges nor a network.
#[test]
fn the_sandbox_needs_no_root_and_no_network() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Already unprivileged: that alone is the proof for the first half.
        sandbox(&["run", "quick-check"]).code(0).stdout_has("stack healthy");
        crate::support::skip("not root: cannot make a network namespace to prove the loopback-only half");
        return;
    }
    let t = Test::new();
    let dir = t.path().display().to_string();
    std::process::Command::new("chmod").args(["777", &dir]).status().unwrap();
    // A copy nobody can reach, wherever the checkout is (a private CI directory, say).
    let bin = t.path().join("opsbook");
    std::fs::copy(crate::support::opsbook(), &bin).unwrap();
    let script = format!(
        "ip link set lo up && ip -o link | grep -vc ': lo:' | grep -qx 0 && \
         exec setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin HOME={dir} TMPDIR={dir} \
         {bin} run quick-check --sandbox",
        bin = bin.display()
    );
    let out = std::process::Command::new("unshare").args(["--net", "sh", "-c", &script]).current_dir(&dir).output();
    let out = match out {
        Ok(o) => o,
        Err(e) => return crate::support::skip(format!("cannot run unshare: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("stack healthy"),
        "quick-check --sandbox as nobody without a network:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
