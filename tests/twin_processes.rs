//! The twins as processes (`opsbook twin SERVICE`), the binary's end of the twin: serving,
//! logging to stdout, stopping on SIGTERM/SIGINT, the agent's `--test` and its SIGHUP reload,
//! the readiness told to a `Type=notify` manager, influxd's `--log-level`, the shipper's
//! `validate`. The twins themselves, in one process,
//! are tested in their crate (crates/twin/tests/); the real programs' command lines and config
//! files are in twin_real_configs.

use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

use crate::support::ports::free_port;
use crate::support::{Test, wait_until};
use loki_life::{Phase, assert_lines_match, loki_life};

#[path = "../crates/twin/tests/twin/loki_life.rs"]
mod loki_life;

pub(crate) fn client() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

/// Waits until `url` answers at all (a twin process has bound its port).
#[track_caller]
pub(crate) fn wait_http(url: &str) {
    let c = client();
    wait_until(&format!("{url} answering"), Duration::from_secs(10), || c.get(url).send().map(drop));
}

/// A metrics database twin in this process (on a runtime of its own threads), for a twin
/// process to write to: its URL and state.
fn start_metrics_db(rt: &tokio::runtime::Runtime, token: &str) -> (String, Arc<opsbook_twin::metrics_db::MetricsDb>) {
    use opsbook_twin::{logger, metrics_db as db};
    let db = db::MetricsDb::new(db::Options::default(), opsbook_base::secret::Secret::new(token), logger::discard());
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(db.clone(), Some(listener), std::future::pending()));
    (url, db)
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
    running.wait_for_output("err=\"empty ring\"", Duration::from_secs(10));
    running.signal(libc::SIGTERM);
    let (out, _) = running.wait(Duration::from_secs(10));
    let out = out.code(0).stdout_has("msg=\"Starting Loki\"").stdout_has("msg=\"Loki stopped\"");
    // Its errors and warnings over this life are the real one's at start and at stop.
    let said: Vec<&str> =
        out.stdout.lines().filter(|l| l.contains("level=error") || l.contains("level=warn")).collect();
    let captured = loki_life(&crate::support::wire::capture("loki-3.4.6/log-levels-one-life.txt"));
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
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (url, db) = start_metrics_db(&rt, "agent-token");
    let t = Test::new().file("telegraf.conf", &AGENT_CONFIG.replace("URL", &url));
    let conf = t.path().join("telegraf.conf");
    let running =
        t.env("AGENT_TOKEN", "agent-token").args(["twin", "metrics-agent", &conf.display().to_string()]).spawn();
    let count = |flux: &str| -> usize {
        let csv = db.query(flux, &Default::default()).unwrap();
        opsbook_wire::flux_csv::parse(&csv).unwrap().len()
    };
    let cpu =
        r#"from(bucket:"telegraf")|>range(start:-1m)|>filter(fn:(r)=>r._measurement=="cpu" and r.cpu=="cpu-total")"#;
    wait_until("cpu points written", Duration::from_secs(15), || match count(cpu) {
        0 => Err("none yet"),
        _ => Ok(()),
    });
    // As Telegraf: no gather at start, and cpu usage only from the second gather — the first
    // cpu point comes after the first mem point.
    let earliest = |measurement: &str, tag: &str| -> Option<String> {
        let flux = format!(
            r#"from(bucket:"telegraf")|>range(start:-1m)|>filter(fn:(r)=>r._measurement=="{measurement}"{tag})"#
        );
        let rows = opsbook_wire::flux_csv::parse(&db.query(&flux, &Default::default()).unwrap()).unwrap();
        rows.iter()
            .flat_map(|row| row.iter())
            .filter_map(|(column, value)| match value {
                opsbook_wire::flux_csv::Value::Time(t) if column == "_time" => Some(t.clone()),
                _ => None,
            })
            .min()
    };
    let cpu_from_the_second_gather = |tag: &str| {
        let (mem, cpu) = (earliest("mem", tag).unwrap(), earliest("cpu", tag).unwrap());
        // A later gather (one interval later unless the machine stalled past a tick).
        assert!(epoch_seconds(&cpu) > epoch_seconds(&mem), "first mem point {mem}, first cpu point {cpu}");
    };
    cpu_from_the_second_gather("");
    // A changed config takes effect on SIGHUP: the global tag shows on later points; the
    // inputs are made anew, so cpu usage waits for a second gather again.
    std::fs::write(&conf, format!("[global_tags]\n  reloaded = \"yes\"\n{}", AGENT_CONFIG.replace("URL", &url)))
        .unwrap();
    running.signal(libc::SIGHUP);
    let reloaded =
        r#"from(bucket:"telegraf")|>range(start:-1m)|>filter(fn:(r)=>r.reloaded=="yes" and r._measurement=="cpu")"#;
    wait_until("the reloaded config in effect", Duration::from_secs(15), || match count(reloaded) {
        0 => Err("no cpu point with its global tag yet"),
        _ => Ok(()),
    });
    cpu_from_the_second_gather(r#" and r.reloaded=="yes""#);
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

#[test]
fn influxd_log_level_takes_zaps_levels() {
    Test::new()
        .args(["twin", "metrics-db", "--listen", "127.0.0.1:0", "--log-level", "warning"])
        .run()
        .code(1)
        .stderr_is("Error: invalid argument \"warning\" for \"--log-level\" flag: unknown log level; supported levels are debug, info, warn, error\n");
    // A bad level in the config file is ignored: the server starts at info.
    let t = Test::new().file("influxd.toml", "log-level = \"warning\"\n");
    let conf = t.path().join("influxd.toml").display().to_string();
    let welcome = welcome_line(t.env("INFLUXD_CONFIG_PATH", &conf), &[]);
    assert!(welcome.ends_with(" log_level=info"), "{welcome}");
    let welcome = welcome_line(Test::new(), &["--log-level", "WARN"]);
    assert!(welcome.ends_with(" log_level=warn"), "{welcome}");
}

/// Seconds since the epoch of an RFC 3339 time as InfluxDB writes it (UTC, `Z`).
fn epoch_seconds(time: &str) -> i64 {
    let parsed = humantime::parse_rfc3339(time).unwrap_or_else(|e| panic!("{time}: {e}"));
    parsed.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// The welcome line of a metrics-db process started with `args`, once it answers, then stopped.
fn welcome_line(t: Test, args: &[&str]) -> String {
    let listen = format!("127.0.0.1:{}", free_port());
    let running = t.args(["twin", "metrics-db", "--listen", &listen]).args(args).spawn();
    wait_http(&format!("http://{listen}/health"));
    running.signal(libc::SIGTERM);
    let (out, _) = running.wait(Duration::from_secs(10));
    out.code(0).stdout.lines().find(|l| l.contains("Welcome to InfluxDB")).unwrap_or_default().to_string()
}

#[test]
fn shipper_validate_is_silent_on_success_and_locates_problems() {
    let t = Test::new()
        .file("ok.toml", "[labels]\nservice_type = \"x\"\n")
        .file("bad.toml", "[server]\nlisten = \"nowhere\"\n[write]\nformat = \"xml\"\n");
    let ok = t.path().join("ok.toml").display().to_string();
    let bad = t.path().join("bad.toml").display().to_string();
    let out = Test::new().args(["twin", "log-shipper", "validate", &ok]).run().code(0);
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    Test::new()
        .args(["twin", "log-shipper", "validate", &bad])
        .run()
        .code(1)
        .stderr_has(&format!("{bad}:2:10"))
        .stderr_has(&format!("{bad}:4:10"))
        .stderr_has("is invalid (2 problems)");
    // A process refuses to start on an invalid config.
    Test::new().args(["twin", "log-shipper", &bad]).run().code(1).stderr_has("`listen` must be an address");
}

/// The agent and the shipper tell a `Type=notify` service manager they are ready only once a
/// reload would be taken: SIGHUP sent the instant `READY=1` arrives (as `systemctl reload`
/// right after `systemctl start` does) reloads them, never ends them. (They said ready before
/// their reload handler existed, and a reload at that moment was the signal's default: the end.)
#[test]
fn a_reload_the_instant_the_agent_and_the_shipper_said_ready_is_a_reload() {
    let t = Test::new()
        .file("telegraf.conf", &AGENT_CONFIG.replace("URL", "http://127.0.0.1:9"))
        .file("alloy.toml", &format!("[server]\nlisten = \"127.0.0.1:{}\"\n", free_port()));
    let conf = |name: &str| t.path().join(name).display().to_string();
    let services: [(&[&str], &str); 2] = [
        (&["metrics-agent", &conf("telegraf.conf")], "I! Reloading Telegraf config"),
        (&["log-shipper", &conf("alloy.toml")], "msg=\"config reloaded\""),
    ];
    for (args, reloaded) in services {
        let dir = tempfile::tempdir().unwrap();
        let socket_path = dir.path().join("notify");
        let manager = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
        manager.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let running = Test::new()
            .args(["twin"])
            .args(args)
            .env("NOTIFY_SOCKET", &socket_path.display().to_string())
            .env("AGENT_TOKEN", "t")
            .spawn();
        let mut said = [0u8; 64];
        let n = manager.recv(&mut said).unwrap_or_else(|e| panic!("{args:?} never said it was ready: {e}"));
        assert_eq!(&said[..n], b"READY=1");
        running.signal(libc::SIGHUP);
        running.wait_for_output(reloaded, Duration::from_secs(10));
        running.signal(libc::SIGTERM);
        let (out, _) = running.wait(Duration::from_secs(20));
        out.code(0);
    }
}
