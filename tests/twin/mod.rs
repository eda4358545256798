//! The stack twin against real wire facts: every capture of a real server in tests/fixtures/wire
//! reproduced (status, content type, body, the log lines of one life), the official InfluxDB
//! Python client reading the twin's CSV, the twin shipper's pushes accepted by the twin log
//! store (JSON and protobuf), and the `opsbook twin …` processes themselves (serving, --test,
//! validate, SIGHUP, SIGTERM), also started with the real programs' command lines and config
//! files (`real_configs`). One file per component; the helpers they share are here.

mod influx_tenancy;
mod log_store;
mod metrics_db;
mod processes;
mod real_configs;
mod shipper;
mod upstream_logs;

use std::sync::Arc;
use std::time::Duration;

use opsbook_twin::{Shutdown, log_store as store, logger, metrics_db as db};
use serde_json::{Value, json};

use crate::support::wire::capture;

/// A tokio runtime on its own threads, serving twins while the test thread makes requests.
pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

pub(super) fn client() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

/// The structure of a JSON value: keys and types, not values.
pub(super) fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::Number(_) => json!(0),
        Value::String(_) => json!(""),
        Value::Bool(_) => json!(false),
        Value::Null => Value::Null,
    }
}

pub(super) fn start_log_store(
    rt: &tokio::runtime::Runtime,
    options: store::Options,
) -> (String, Arc<store::LogStore>, Shutdown) {
    let store = store::LogStore::new(options, logger::discard());
    let stop = Shutdown::new();
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(store.clone(), Some(listener), stop.signal()));
    (url, store, stop)
}

pub(super) fn start_metrics_db(rt: &tokio::runtime::Runtime, token: &str) -> (String, Arc<db::MetricsDb>) {
    let db = db::MetricsDb::new(db::Options::default(), opsbook_base::secret::Secret::new(token), logger::discard());
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(db.clone(), Some(listener), std::future::pending()));
    (url, db)
}

pub(super) fn header(r: &reqwest::blocking::Response, name: &str) -> String {
    r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// The raw body of a captured response (after the blank line), or the file when it is a body.
pub(super) fn captured_body(path: &str) -> String {
    let text = capture(path);
    match text.split_once("\r\n\r\n") {
        Some((_, body)) if path.ends_with(".txt") => body.to_string(),
        _ => text,
    }
}

/// A fresh metrics database (not onboarded), its URL and its log lines.
pub(super) fn start_fresh_metrics_db(rt: &tokio::runtime::Runtime) -> (String, Arc<db::MetricsDb>, logger::Kept) {
    let (sink, kept) = logger::memory();
    let db = db::MetricsDb::fresh(db::Options::default(), sink);
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(db.clone(), Some(listener), std::future::pending()));
    (url, db, kept)
}

/// The lines of tests/fixtures/upstream/log-lines.txt (what the real components write, read
/// in their source) of `component` containing `text`.
pub(super) fn upstream_lines(component: &str, text: &str) -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/upstream/log-lines.txt");
    let all = std::fs::read_to_string(path).unwrap();
    all.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            let (c, _level, line) = (parts.next()?, parts.next()?, parts.next()?);
            (c == component && line.contains(text)).then(|| line.to_string())
        })
        .collect()
}

/// A log line with what varies masked: logfmt `ts=`/`log_id=` values, JSON `"ts"`/`"time"`
/// values, Telegraf's leading RFC 3339 time, durations, and loopback ports.
pub(super) fn mask_line(line: &str) -> String {
    use std::sync::OnceLock;
    static RULES: OnceLock<Vec<(regex::Regex, &'static str)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        vec![
            (regex::Regex::new(r"\b(ts|log_id)=[^ ]+").unwrap(), "$1=[X]"),
            (regex::Regex::new(r#""(ts|time)":"[^"]*""#).unwrap(), r#""$1":"[X]""#),
            (regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap(), "[T]"),
            (regex::Regex::new(r"\b\d+(\.\d+)?(ns|µs|ms|s)\b").unwrap(), "[DUR]"),
            (regex::Regex::new(r"127\.0\.0\.1:\d+").unwrap(), "127.0.0.1:[PORT]"),
        ]
    });
    rules.iter().fold(line.to_string(), |t, (re, with)| re.replace_all(&t, *with).into_owned())
}
