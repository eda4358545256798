//! The agent and shipper twins against the log lines and metrics their real counterparts
//! write, as tests/fixtures/upstream/log-lines.txt and docs/upstream-checked.md §1 and §8 give
//! them (Telegraf v1.32.0, Alloy v1.9.0): the agent's 401 lines, kept batch, overflow warning
//! and debug-only "Wrote batch", its structured format and logfile; the shipper's JSON and
//! logfmt error lines, its `loki_write_*` labels and series, its positions and `max_age`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use opsbook_twin::agent::{self, Agent};
use opsbook_twin::{Shutdown, logger, shipper};
use opsbook_world::BoxFuture;
use opsbook_world::journal::{Entry, Feed, Journal, Query};
use serde_json::Value;

use super::{client, mask_line, runtime, start_fresh_metrics_db, upstream_lines};

fn agent_config(url: &str, extra: &str) -> agent::config::AgentConfig {
    let text = format!(
        "[agent]\n  interval = \"1s\"\n  hostname = \"h\"\n{extra}[[outputs.influxdb_v2]]\n  urls = [\"{url}\"]\n  token = \"agent-token\"\n  \
         organization = \"opsbook\"\n  bucket = \"telegraf\"\n  timeout = \"2s\"\n[[inputs.mem]]\n"
    );
    agent::config::parse("telegraf.conf", &text).unwrap()
}

/// The lines logged so far, masked.
fn masked(kept: &logger::Kept) -> Vec<String> {
    kept.lock().unwrap().iter().map(|(_, l)| mask_line(l)).collect()
}

/// Telegraf's lines of the fixture holding `text`, masked.
fn telegraf(text: &str) -> Vec<String> {
    upstream_lines("telegraf", text).iter().map(|l| mask_line(l)).collect()
}

#[test]
fn the_agent_keeps_a_refused_batch_and_logs_telegrafs_401_lines() {
    let rt = runtime();
    let (url, db, _) = start_fresh_metrics_db(&rt);
    let (sink, kept) = logger::memory();
    let a = Agent::new(agent_config(&url, "  metric_buffer_limit = 3\n"), None, sink);
    for _ in 0..4 {
        rt.block_on(a.tick());
    }
    // Four gathers of one metric each, three kept: the oldest went with the overflow.
    assert_eq!(a.buffered(), 3);
    let write_401 =
        telegraf("When writing to [http://127.0.0.1:8086/api/v2/write]: failed to write metric to telegraf (401");
    let agent_error =
        telegraf("[agent] Error writing to outputs.influxdb_v2: failed to send metrics to any configured server(s)");
    let overflow = telegraf("Metric buffer overflow; 1000 metrics")[0].replace("1000", "1");
    let (one, two) = (write_401[0].clone(), agent_error[0].clone());
    let expected = [&one, &two, &one, &two, &one, &two, &overflow, &one, &two].map(String::clone).to_vec();
    assert_eq!(masked(&kept), expected);
    // Once the database is set up with the agent's token, the kept metrics are written.
    let setup =
        serde_json::json!({"username": "admin", "org": "opsbook", "bucket": "telegraf", "token": "agent-token"});
    assert_eq!(client().post(format!("{url}/api/v2/setup")).json(&setup).send().unwrap().status(), 201);
    rt.block_on(a.tick());
    assert_eq!((a.buffered(), db.point_count() > 0), (0, true));
    assert!(!masked(&kept).iter().any(|l| l.contains("Wrote batch")), "Wrote batch is a debug line");
}

#[test]
fn with_debug_the_agent_says_what_it_wrote() {
    let rt = runtime();
    let (url, _db, _) = start_fresh_metrics_db(&rt);
    let setup =
        serde_json::json!({"username": "admin", "org": "opsbook", "bucket": "telegraf", "token": "agent-token"});
    client().post(format!("{url}/api/v2/setup")).json(&setup).send().unwrap();
    let (sink, kept) = logger::memory();
    let a = Agent::new(agent_config(&url, "  debug = true\n"), None, sink);
    rt.block_on(a.tick());
    let wrote = telegraf("Wrote batch of 42")[0].replace("42", "1");
    let fullness = telegraf("Buffer fullness: 0 / 10000")[0].clone();
    assert_eq!(masked(&kept), [wrote, fullness]);
}

/// A JSON line with its time and ports masked, as a map (slog's attribute order is random).
fn json_masked(line: &str) -> Value {
    let mut v: Value = serde_json::from_str(&mask_line(line)).unwrap();
    if let Some(m) = v.as_object_mut() {
        m.remove("time");
    }
    v
}

#[test]
fn structured_logs_are_telegrafs_json_lines_and_a_logfile_takes_them_from_the_journal() {
    let rt = runtime();
    let (url, _db, _) = start_fresh_metrics_db(&rt);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("log/telegraf.log");
    let extra = format!("  logformat = \"structured\"\n  logfile = \"{}\"\n", file.display());
    let (sink, kept) = logger::memory();
    let a = Agent::new(agent_config(&url, &extra), None, sink);
    a.say_early(logger::Level::Info, "Loading config: telegraf.conf");
    rt.block_on(a.tick());
    // The journal holds only what came before logging was set up, in Telegraf's text.
    let journal = masked(&kept);
    assert_eq!(journal, ["[T] I! Loading config: telegraf.conf"]);
    let lines: Vec<Value> = std::fs::read_to_string(&file).unwrap().lines().map(json_masked).collect();
    let expected: Vec<Value> =
        upstream_lines("telegraf", "\"level\":\"ERROR\"").iter().take(2).map(|l| json_masked(l)).collect();
    assert_eq!(lines[0], serde_json::json!({"level": "INFO", "msg": "Loading config: telegraf.conf"}));
    assert_eq!(lines[1..], expected[..]);
}

/// A journal holding entries; following returns those at or after the query's `since`.
struct Backlog(std::sync::Mutex<Vec<Entry>>, std::sync::Mutex<Vec<String>>);

fn since_us(query: &Query) -> u64 {
    let text = query.since.as_deref().unwrap_or("@0").trim_start_matches('@');
    (text.parse::<f64>().unwrap() * 1e6).round() as u64
}

impl Journal for Backlog {
    fn read<'a>(&'a self, _query: &'a Query) -> BoxFuture<'a, Result<Vec<Entry>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn follow<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Feed, String>> {
        Box::pin(async move {
            self.1.lock().unwrap().push(query.since.clone().unwrap_or_default());
            let since = since_us(query);
            let (tx, rx) = tokio::sync::mpsc::channel(64);
            for e in self.0.lock().unwrap().iter().filter(|e| e.realtime_us >= since) {
                tx.try_send(Ok(e.clone())).unwrap();
            }
            // Keep the feed open: the follower waits for more.
            tokio::spawn(async move { tx.closed().await });
            Ok(rx)
        })
    }
    fn emit<'a>(&'a self, _identifier: &'a str, _message: &'a str, _priority: u8) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

fn entry(realtime_us: u64, message: &str) -> Entry {
    Entry {
        realtime_us,
        priority: 6,
        unit: "loki.service".into(),
        identifier: "loki".into(),
        pid: 1,
        message: message.into(),
    }
}

/// Runs a shipper over `journal` until it has sent `want` entries; returns its /metrics before
/// and after, then stops it.
fn ship(
    rt: &tokio::runtime::Runtime,
    config: shipper::config::ShipperConfig,
    journal: Arc<Backlog>,
    want: u64,
) -> (String, String) {
    let (sink, _kept) = logger::memory();
    let s = shipper::Shipper::new(config, None, journal, sink);
    let before = s.metrics_text();
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let stop = Shutdown::new();
    let server = rt.spawn(opsbook_twin::serve(s.clone(), Some(listener), stop.signal()));
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.sent_entries() < want {
        assert!(Instant::now() < deadline, "sent {} of {want}", s.sent_entries());
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = s.metrics_text();
    stop.trigger();
    rt.block_on(server).unwrap().unwrap();
    (before, after)
}

#[test]
fn the_shipper_reads_max_age_back_then_resumes_from_its_positions_file() {
    let rt = runtime();
    let (store_url, _store, _stop) = super::start_log_store(
        &rt,
        opsbook_twin::log_store::Options { ready_delay: Duration::ZERO, ..Default::default() },
    );
    let dir = tempfile::tempdir().unwrap();
    let now = (opsbook_twin::now_ns() / 1000) as u64;
    let hour = 3_600_000_000;
    let journal = Arc::new(Backlog(
        std::sync::Mutex::new(vec![
            entry(now - 8 * hour, "too old"),
            entry(now - 6 * hour, "backlog"),
            entry(now - 1, "recent"),
        ]),
        std::sync::Mutex::default(),
    ));
    let text = format!(
        "[write]\nurl = \"{store_url}/loki/api/v1/push\"\nbatch_wait = \"10ms\"\n[storage]\npath = \"{}\"\n",
        dir.path().display()
    );
    let config = shipper::config::parse("s.toml", &text).unwrap();
    let (before, after) = ship(&rt, config.clone(), journal.clone(), 2);
    // No loki_write_* series before the first entry; the journal's counter from the start.
    assert!(!before.contains("loki_write_"), "{before}");
    assert!(before.contains(
        "loki_source_journal_target_lines_total{component_id=\"loki.source.journal.read\",component_path=\"/\"} 0\n"
    ));
    let host = store_url.trim_start_matches("http://");
    let sent = format!(
        "loki_write_sent_entries_total{{component_id=\"loki.write.default\",component_path=\"/\",host=\"{host}\",tenant=\"\"}} 2\n"
    );
    assert!(after.contains(&sent), "{after}");
    let dropped = format!(
        "loki_write_dropped_entries_total{{component_id=\"loki.write.default\",component_path=\"/\",host=\"{host}\",reason=\"rate_limited\",tenant=\"\"}} 0\n"
    );
    assert!(after.contains(&dropped), "{after}");
    assert!(after.contains(&format!("loki_write_request_duration_seconds_count{{component_id=\"loki.write.default\",component_path=\"/\",host=\"{host}\",status_code=\"204\",tenant=\"\"}} 1\n")), "{after}");
    let positions = std::fs::read_to_string(dir.path().join("loki.source.journal.read/positions.yml")).unwrap();
    assert_eq!(
        positions,
        format!(
            "positions:\n  ? path: cursor-loki.source.journal.read\n    labels: \"\"\n  : s=0;i=0;b=0;m=0;t={:x};x=0\n",
            now - 1
        )
    );
    // A second start resumes just after the cursor: only the new entry goes.
    journal.0.lock().unwrap().push(entry(now + 5, "new"));
    let (_, again) = ship(&rt, config, journal.clone(), 1);
    assert!(
        again.contains(
            "loki_source_journal_target_lines_total{component_id=\"loki.source.journal.read\",component_path=\"/\"} 1\n"
        ),
        "{again}"
    );
    let starts: Vec<u64> = journal
        .1
        .lock()
        .unwrap()
        .iter()
        .map(|s| since_us(&Query { since: Some(s.clone()), ..Query::default() }))
        .collect();
    assert_eq!(starts[1], now);
    assert!(starts[0].abs_diff(now - 7 * hour) < 5_000_000, "the first start reads 7 h back");
}

/// A loopback server answering every request 401 `no org id`, as Loki without a tenant.
fn refusing_loki() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Read, Write};
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = reader
                .get_mut()
                .write_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 10\r\nConnection: close\r\n\r\nno org id\n");
        }
    });
    format!("http://{addr}")
}

#[test]
fn the_shippers_final_error_is_alloys_in_logfmt_and_in_json() {
    let rt = runtime();
    let url = refusing_loki();
    for (format, fixture) in
        [("logfmt", "level=error msg=\"final error sending batch\""), ("json", "\"msg\":\"final error sending batch\"")]
    {
        let text = format!(
            "[write]\nurl = \"{url}/loki/api/v1/push\"\nbatch_wait = \"10ms\"\n[logging]\nformat = \"{format}\"\n"
        );
        let config = shipper::config::parse("s.toml", &text).unwrap();
        let (sink, kept) = logger::memory();
        let journal = Arc::new(Backlog(
            std::sync::Mutex::new(vec![entry((opsbook_twin::now_ns() / 1000) as u64, "x")]),
            Default::default(),
        ));
        let s = shipper::Shipper::new(config, None, journal, sink);
        let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
        let stop = Shutdown::new();
        let server = rt.spawn(opsbook_twin::serve(s.clone(), Some(listener), stop.signal()));
        let deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            let lines = masked(&kept);
            if let Some(l) = lines.iter().find(|l| l.contains("final error")) {
                break l.clone();
            }
            assert!(Instant::now() < deadline, "no final error: {lines:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let expected: Vec<String> = upstream_lines("alloy", fixture).iter().map(|l| mask_line(l)).collect();
        assert_eq!(seen, expected[0]);
        stop.trigger();
        rt.block_on(server).unwrap().unwrap();
    }
}
