//! `opsbook serve` watching a fleet over ssh: a job with `hosts = "all"` on the test fleet
//! (tests/support/fleet.rs; the twins as real units on a server and two clients, as in
//! fleet_runs.rs). Each host has its own runs, metrics and health line; a unit stopped on one
//! client fails that host only, a host whose sshd goes away is reported unreachable, then
//! reached again once sshd is back — each run connects afresh — and SIGHUP re-reads the
//! inventory.

use std::time::{Duration, Instant};

use crate::fleet_runs::{boot, install};
use crate::serve::{get, until};
use crate::support::ports::free_port;
use crate::support::{Test, wait_until};

/// Polls `/healthz` until its body matches `pattern` (the whole body); the body and the time.
#[track_caller]
fn health_until(base: &str, status: u16, pattern: &str, limit: Duration) -> (String, Duration) {
    let re = regex::Regex::new(pattern).unwrap();
    let started = Instant::now();
    let body = wait_until(&format!("/healthz answering {status} /{pattern}/"), limit, || {
        match get(&format!("{base}/healthz")) {
            (code, body) if code == status && re.is_match(&body) => Ok(body),
            (code, body) => Err(format!("{code} {body}")),
        }
    });
    (body, started.elapsed())
}

/// The `opsbook_run_outcome` series that are 1: `host outcome`, sorted.
#[track_caller]
fn outcomes(base: &str) -> Vec<String> {
    let (_, metrics) = get(&format!("{base}/metrics"));
    let re = regex::Regex::new(
        r#"^opsbook_run_outcome\{job="quick-check",runbook="quick-check",host="([^"]+)",outcome="(\w+)"\} 1$"#,
    )
    .unwrap();
    let mut seen: Vec<String> =
        metrics.lines().filter_map(|l| re.captures(l)).map(|c| format!("{} {}", &c[1], &c[2])).collect();
    seen.sort();
    seen
}

#[test]
fn a_job_over_the_fleet_reports_each_host_and_reaches_a_host_again_after_its_sshd_returns() {
    let Some(fleet) = boot(&["server", "c1", "c2"]) else { return };
    let t = Test::new();
    install(&t, &fleet);
    crate::support::run_in(t.path(), &["run", "start", "--hosts", "log-shipper"], None).code(0);
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let config = t.path().join("opsbook.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[serve]\nlisten = \"127.0.0.1:{port}\"\nstate_dir = \"state\"\njitter = \"0s\"\n\
         [[serve.job]]\nrunbook = \"quick-check\"\nevery = \"1s\"\nhosts = \"all\"\n"
    ));
    std::fs::write(&config, text).unwrap();
    let dir = t.path().to_path_buf();
    let serve = t.args(["serve"]).spawn();

    let (health, _) = until(&format!("{base}/healthz"), 200, Duration::from_secs(30));
    assert_eq!(health, "ok: the latest run of 1 job passed on 3 hosts\n");
    assert_eq!(outcomes(&base), ["c1 passed", "c2 passed", "server passed"]);
    // The page has a card per host.
    let (_, page) = get(&format!("{base}/"));
    let cards: Vec<&str> = regex::Regex::new(r#"<section class="job \w+" id="job-([^"]+)">"#)
        .unwrap()
        .captures_iter(&page)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert_eq!(cards, ["quick-check-c1", "quick-check-c2", "quick-check-server"]);
    let (_, runs) = get(&format!("{base}/api/runs?host=c2&limit=1"));
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    assert_eq!(
        (runs["runs"][0]["host"].as_str(), runs["runs"][0]["report"]["host"].as_str()),
        (Some("c2"), Some("c2"))
    );

    // The shipper stopped on one client: that host fails, within about an interval.
    fleet.host("c1").ok(&["systemctl", "--user", "stop", "alloy"]);
    let (_, took) = health_until(
        &base,
        503,
        r"^failing:\nquick-check on c1: failed \(run \d+\): units › alloy\.service active\n$",
        Duration::from_secs(10),
    );
    assert!(took < Duration::from_secs(4), "503 only after {took:?}");
    assert_eq!(outcomes(&base), ["c1 failed", "c2 passed", "server passed"]);
    fleet.host("c1").ok(&["systemctl", "--user", "start", "alloy"]);
    health_until(&base, 200, "^ok: the latest run of 1 job passed on 3 hosts\n$", Duration::from_secs(10));

    // sshd gone on c2: the host is unreachable, quoted; back, and the next run reaches it.
    fleet.host("c2").stop_sshd();
    let c2 = regex::escape(&fleet.host("c2").address().to_string());
    health_until(
        &base,
        503,
        &format!(
            r"^failing:\nquick-check on c2: failed \(run \d+\): c2 reachable over ssh; host `c2`: connecting failed: ssh said .*{c2}.*Connection refused.*\n$"
        ),
        Duration::from_secs(10),
    );
    fleet.host("c2").start_sshd();
    let (_, took) =
        health_until(&base, 200, "^ok: the latest run of 1 job passed on 3 hosts\n$", Duration::from_secs(10));
    assert!(took < Duration::from_secs(4), "reached again only after {took:?}");

    // SIGHUP re-reads the inventory: a host taken out of it is no longer watched.
    let text = std::fs::read_to_string(&config).unwrap();
    let c2 = regex::Regex::new(r"(?m)^\[hosts\.c2\]\n(?:[a-z].*\n)*").unwrap();
    assert!(c2.is_match(&text), "{text}");
    std::fs::write(&config, c2.replace(&text, "").as_ref()).unwrap();
    serve.signal(libc::SIGHUP);
    health_until(&base, 200, "^ok: the latest run of 1 job passed on 2 hosts\n$", Duration::from_secs(10));
    assert_eq!(outcomes(&base), ["c1 passed", "server passed"]);

    serve.signal(libc::SIGTERM);
    let (out, _) = serve.wait(Duration::from_secs(30));
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The history keeps each host's runs apart.
    let history =
        crate::support::run_in(&dir, &["history", "--on", "c2", "--failed", "--state-dir", "state"], None).code(0);
    let table = regex::Regex::new(
        r"^ +ID  STARTED                   JOB          OUTCOME      DURATION  DETAIL\n( +\d+  \d{4}-\d\d-\d\dT[\d:.]+Z  quick-check  failed +(?:\d+\.\d\ds|\d\.\dms)  c2 reachable over ssh; host `c2`: connecting failed: ssh said [^\n]*Connection refused[^\n]*\n)+\nno flapping checks \(none changed outcome more than 2 times\)\n$",
    )
    .unwrap();
    assert!(table.is_match(&history.stdout), "{}", history.stdout);
}
