//! The twin crate's tests: the stack twin, run in this process, against real wire facts. Every
//! capture of a real server in the repository's tests/fixtures/wire reproduced (status, content
//! type, body, the log lines of one life), the official InfluxDB Python client reading the twin's
//! CSV, the twin shipper's pushes accepted by the twin log store (JSON and protobuf), and the
//! lines the real components log (tests/fixtures/upstream). One file per component; the helpers
//! they share are here. The twins as `opsbook twin SERVICE` processes (flags, config files,
//! signals) are the binary's: the root tests/twin_processes.rs and tests/twin_real_configs.rs.

// Tests report to the developer running them (`skipped: why`).
#![allow(clippy::disallowed_macros)]

mod influx_tenancy;
mod log_store;
mod loki_life;
mod metrics_db;
mod shipper;
mod upstream_logs;

use std::sync::Arc;
use std::time::Duration;

use opsbook_twin::{Shutdown, log_store as store, logger, metrics_db as db};
use serde_json::{Value, json};

/// A tokio runtime on its own threads, serving twins while the test thread makes requests.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

pub(crate) fn client() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

/// The structure of a JSON value: keys and types, not values.
pub(crate) fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::Number(_) => json!(0),
        Value::String(_) => json!(""),
        Value::Bool(_) => json!(false),
        Value::Null => Value::Null,
    }
}

pub(crate) fn start_log_store(
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

pub(crate) fn start_metrics_db(rt: &tokio::runtime::Runtime, token: &str) -> (String, Arc<db::MetricsDb>) {
    let db = db::MetricsDb::new(db::Options::default(), opsbook_base::secret::Secret::new(token), logger::discard());
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(db.clone(), Some(listener), std::future::pending()));
    (url, db)
}

pub(crate) fn header(r: &reqwest::blocking::Response, name: &str) -> String {
    r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// The raw body of a captured response (after the blank line), or the file when it is a body.
pub(crate) fn captured_body(path: &str) -> String {
    let text = capture(path);
    match text.split_once("\r\n\r\n") {
        Some((_, body)) if path.ends_with(".txt") => body.to_string(),
        _ => text,
    }
}

/// A fresh metrics database (not onboarded), its URL and its log lines.
pub(crate) fn start_fresh_metrics_db(rt: &tokio::runtime::Runtime) -> (String, Arc<db::MetricsDb>, logger::Kept) {
    let (sink, kept) = logger::memory();
    let db = db::MetricsDb::fresh(db::Options::default(), sink);
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(db.clone(), Some(listener), std::future::pending()));
    (url, db, kept)
}

/// The lines of the repository's tests/fixtures/upstream/log-lines.txt (what the real components write, read
/// in their source) of `component` containing `text`.
pub(crate) fn upstream_lines(component: &str, text: &str) -> Vec<String> {
    let all = std::fs::read_to_string(repo_path("tests/fixtures/upstream/log-lines.txt")).unwrap();
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
pub(crate) fn mask_line(line: &str) -> String {
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

/// Waits for a condition instead of sleeping: calls `probe` until it observes what the test
/// waits for (`Ok`, whose value is returned), every 10 ms for at most `limit`. Past that the
/// test fails, naming `what` it waited for and what `probe` last observed (its `Err`).
#[track_caller]
pub(crate) fn wait_until<T, E: std::fmt::Display>(
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> Result<T, E>,
) -> T {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match probe() {
            Ok(value) => return value,
            Err(last) if std::time::Instant::now() >= deadline => {
                panic!("waited {limit:?} for {what}, in vain; last seen: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// A file of the repository (the fixtures the twin's tests share with the other crates'), by
/// its path from the repository's top.
pub(crate) fn repo_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// A captured answer of a real server, kept in the repository's `tests/fixtures/wire` (its
/// README says what each file shows).
#[track_caller]
pub(crate) fn capture(path: &str) -> String {
    let file = repo_path(&format!("tests/fixtures/wire/{path}"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("fixture `{}` cannot be read: {e}", file.display()))
}

/// Marks the calling test as skipped because a real part it needs is missing: the reason is
/// printed (visible with `--nocapture`) and appended to `target/tmp/skipped.log`, as the root
/// tests' skips are. With `OPSBOOK_TEST_REQUIRE_ALL` set to anything but `0` or nothing (as
/// `.ci/run` sets it) a skip is a failure instead.
#[track_caller]
pub(crate) fn skip(reason: &str) {
    if std::env::var("OPSBOOK_TEST_REQUIRE_ALL").is_ok_and(|v| !v.is_empty() && v != "0") {
        panic!("this test cannot run here, and OPSBOOK_TEST_REQUIRE_ALL forbids skipping: {reason}");
    }
    eprintln!("skipped: {reason}");
    let log = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped.log");
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let _ = writeln!(f, "{test}: {reason}");
    }
}
