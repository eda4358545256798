//! The twins as processes (`opsbook twin SERVICE`): serving, logging to stdout, stopping on
//! SIGTERM/SIGINT, the agent's `--test` and its SIGHUP reload.

use std::net::TcpListener as StdListener;
use std::time::{Duration, Instant};

use regex::Regex;

use super::log_store::{Phase, assert_lines_match, loki_life};
use super::{client, runtime, start_metrics_db};
use crate::support::Test;

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_http(url: &str) {
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if c.get(url).send().is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{url} did not answer");
}

#[test]
fn twin_processes_serve_log_to_stdout_and_stop_on_sigterm() {
    let port = free_port();
    let running = Test::new()
        .args(["twin", "log-store", "--listen", &format!("127.0.0.1:{port}"), "--ready-delay", "0s"])
        .spawn();
    wait_http(&format!("http://127.0.0.1:{port}/ready"));
    assert_eq!(client().get(format!("http://127.0.0.1:{port}/ready")).send().unwrap().text().unwrap(), "ready\n");
    // Past the ring's forming, so the process has said all a starting Loki says.
    std::thread::sleep(Duration::from_millis(1200));
    running.signal(libc::SIGTERM);
    let (out, _) = running.wait(Duration::from_secs(10));
    let out = out.code(0).stdout_has("msg=\"Starting Loki\"").stdout_has("msg=\"Loki stopped\"");
    // Its errors and warnings over this life are the real one's at start and at stop.
    let said: Vec<&str> =
        out.stdout.lines().filter(|l| l.contains("level=error") || l.contains("level=warn")).collect();
    let captured = loki_life();
    let expected: Vec<&Regex> = captured.iter().filter(|(phase, _)| *phase != Phase::Queries).map(|(_, r)| r).collect();
    assert_lines_match(&said, &expected);

    let port = free_port();
    let running = Test::new()
        .args(["twin", "metrics-db", "--listen", &format!("127.0.0.1:{port}")])
        .env("INFLUX_TOKEN", "process-token")
        .spawn();
    wait_http(&format!("http://127.0.0.1:{port}/health"));
    let r = client()
        .get(format!("http://127.0.0.1:{port}/api/v2/buckets"))
        .header("authorization", "Token process-token")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    running.signal(libc::SIGINT);
    let (out, _) = running.wait(Duration::from_secs(10));
    out.code(0).stdout_has("Listening").stdout_lacks("process-token");

    // Without a token it starts as a fresh influxd: not set up yet.
    let port = free_port();
    let running = Test::new().args(["twin", "metrics-db", "--listen", &format!("127.0.0.1:{port}")]).spawn();
    wait_http(&format!("http://127.0.0.1:{port}/health"));
    let setup = client().get(format!("http://127.0.0.1:{port}/api/v2/setup")).send().unwrap().text().unwrap();
    assert_eq!(setup, "{\n\t\"allowed\": true\n}");
    running.signal(libc::SIGTERM);
    running.wait(Duration::from_secs(10)).0.code(0);
}

const AGENT_CONFIG: &str = r#"[agent]
  interval = "1s"
  hostname = "twin-host"
[[outputs.influxdb_v2]]
  urls = ["URL"]
  token = "$AGENT_TOKEN"
  organization = "opsbook"
  bucket = "telegraf"
[[inputs.cpu]]
[[inputs.mem]]
[[inputs.disk]]
"#;

#[test]
fn agent_test_mode_prints_line_protocol_like_telegraf() {
    let t = Test::new().file("telegraf.conf", &AGENT_CONFIG.replace("URL", "http://127.0.0.1:9"));
    let conf = t.path().join("telegraf.conf").display().to_string();
    let out = t.args(["twin", "metrics-agent", &conf, "--test"]).run().code(0);
    let mut measurements = std::collections::BTreeSet::new();
    for line in out.stdout.lines() {
        let lp = line.strip_prefix("> ").unwrap_or_else(|| panic!("not `> ` + line protocol: {line}"));
        for p in opsbook_wire::line_protocol::parse(lp).unwrap() {
            assert!(p.tags.contains(&("host".into(), "twin-host".into())));
            if p.measurement == "cpu" && p.tags.contains(&("cpu".into(), "cpu-total".into())) {
                assert!(p.fields.iter().any(|(k, _)| k == "usage_system"));
                assert!(p.fields.windows(2).all(|w| w[0].0 < w[1].0), "fields sorted");
            }
            measurements.insert(p.measurement);
        }
    }
    assert_eq!(measurements.into_iter().collect::<Vec<_>>(), ["cpu", "disk", "mem"]);

    let t = Test::new().file(
        "bad.conf",
        "[agent]\n  interval = \"soon\"\n[[inputs.cpu]]\n[[outputs.influxdb_v2]]\n  bucket = \"b\"\n",
    );
    let conf = t.path().join("bad.conf").display().to_string();
    t.args(["twin", "metrics-agent", &conf, "--test"])
        .run()
        .code(1)
        .stderr_has(&format!("{conf}:2:14"))
        .stderr_has("`interval` must be a duration");
}

#[test]
fn agent_process_writes_to_the_db_and_reloads_on_sighup() {
    let rt = runtime();
    let (url, db) = start_metrics_db(&rt, "agent-token");
    let t = Test::new().file("telegraf.conf", &AGENT_CONFIG.replace("URL", &url));
    let conf = t.path().join("telegraf.conf");
    let running =
        t.env("AGENT_TOKEN", "agent-token").args(["twin", "metrics-agent", &conf.display().to_string()]).spawn();
    let count = |flux: &str| -> usize {
        let csv = db.query(flux, &Default::default()).unwrap();
        opsbook_wire::flux_csv::parse(&csv).unwrap().len()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while count(
        r#"from(bucket:"telegraf")|>range(start:-1m)|>filter(fn:(r)=>r._measurement=="cpu" and r.cpu=="cpu-total")"#,
    ) == 0
    {
        assert!(Instant::now() < deadline, "no cpu points written");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A changed config takes effect on SIGHUP: the global tag shows on later points.
    std::fs::write(&conf, format!("[global_tags]\n  reloaded = \"yes\"\n{}", AGENT_CONFIG.replace("URL", &url)))
        .unwrap();
    running.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(15);
    while count(r#"from(bucket:"telegraf")|>range(start:-1m)|>filter(fn:(r)=>r.reloaded=="yes")"#) == 0 {
        assert!(Instant::now() < deadline, "reloaded config not in effect");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A broken config on SIGHUP stops the agent with exit 1, as Telegraf does.
    std::fs::write(&conf, "[agent\n").unwrap();
    running.signal(libc::SIGHUP);
    let (out, _) = running.wait(Duration::from_secs(10));
    out.code(1)
        .stdout_has("I! Loaded inputs: cpu disk mem")
        .stdout_lacks("Wrote batch of")
        .stdout_has("I! Reloading Telegraf config")
        .stdout_has("E! [telegraf] Error running agent")
        .stdout_lacks("agent-token");
}
