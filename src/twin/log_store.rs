//! The log-store twin: an in-memory stand-in for Grafana Loki 3 speaking its HTTP API.
//!
//! - `GET /ready`: 503 `Ingester not ready: waiting for 15s after being ready` during the
//!   configured start delay, then 200 `ready`; `HEAD /ready` is 405 as in Loki.
//! - `GET /metrics`: Prometheus exposition text with Loki's ingestion counters, among them
//!   `loki_ingester_chunks_created_total`, which grows as chunks are cut.
//! - `POST /loki/api/v1/push`: JSON (optionally gzip/deflate) and snappy-compressed protobuf.
//! - `GET|POST /loki/api/v1/query_range` and `/query` (log queries on `/query` get Loki 3's
//!   400), labels, label values, series, build info, and `GET /config` (YAML whose
//!   `schema_config.configs[*].object_store` names the backend).
//!
//! Like Loki 3, streams get `service_name` (discovered, else `unknown_service`) and query
//! results carry a `detected_level` for each line. Memory is bounded by a retention window and
//! a byte budget (pushes beyond it get Loki's 429).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query as QueryParams, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::faults::{self, Faults};
use super::logger::{self, Level, Sink};
use super::logql::{self, AggOp, LogSelector, MetricQuery, Query, RangeFn};
use super::push;

/// Loki's version, as `/loki/api/v1/status/buildinfo` and `loki_build_info` report it.
pub const VERSION: &str = "3.4.6";

/// What the twin is configured with (Loki's defaults where Loki has one).
#[derive(Debug, Clone)]
pub struct Options {
    /// How long `/ready` answers 503 after start (Loki's ingester waits 15 s).
    pub ready_delay: Duration,
    /// Entries older than this are dropped.
    pub retention: Duration,
    /// Bytes of log lines kept at most; pushes beyond get 429.
    pub max_bytes: usize,
    /// `object_store` of the schema period in `/config` (`filesystem`, `s3`, …).
    pub object_store: String,
    /// A stream's chunk is cut once it holds this many bytes (Loki's chunk_target_size).
    pub chunk_target_bytes: usize,
    /// A stream idle this long gets a new chunk on its next push (Loki's chunk_idle_period).
    pub chunk_idle: Duration,
    /// Longest accepted line (Loki's max_line_size).
    pub max_line_size: usize,
    /// Oldest accepted entry (Loki's reject_old_samples_max_age).
    pub reject_older_than: Duration,
    /// How far in the future an entry may be (Loki's creation_grace_period).
    pub creation_grace: Duration,
    /// Address shown in `/config` (`server.http_listen_address`/`port`).
    pub listen: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ready_delay: Duration::from_secs(15),
            retention: Duration::from_secs(24 * 3600),
            max_bytes: 512 << 20,
            object_store: "filesystem".into(),
            chunk_target_bytes: 1_572_864,
            chunk_idle: Duration::from_secs(30 * 60),
            max_line_size: 256 << 10,
            reject_older_than: Duration::from_secs(7 * 24 * 3600),
            creation_grace: Duration::from_secs(10 * 60),
            listen: "127.0.0.1:3100".into(),
        }
    }
}

type Labels = Vec<(String, String)>;

/// A metric query's series: labels and (time ns, value) points.
type MetricSeries = (Labels, Vec<(i64, f64)>);

struct Stored {
    ts: i64,
    line: Box<str>,
    level: &'static str,
}

struct Stream {
    labels: Labels,
    entries: VecDeque<Stored>,
    chunk_bytes: usize,
    last_push: Instant,
}

#[derive(Default)]
struct Data {
    streams: HashMap<Labels, Stream>,
    bytes: usize,
}

/// Counters exposed on `/metrics`.
#[derive(Default)]
struct Counters {
    lines_received: AtomicU64,
    bytes_received: AtomicU64,
    chunks_created: AtomicU64,
    streams_created: AtomicU64,
    push_requests: AtomicU64,
    queries: AtomicU64,
}

/// A running log store's state; share it with `Arc` between the server and the sandbox.
pub struct LogStore {
    pub options: Options,
    pub faults: Arc<Faults>,
    log: Sink,
    ready_at: Mutex<Instant>,
    data: RwLock<Data>,
    counters: Counters,
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

impl LogStore {
    pub fn new(options: Options, log: Sink) -> Arc<LogStore> {
        let ready_at = Instant::now() + options.ready_delay;
        Arc::new(LogStore {
            options,
            faults: Faults::new(),
            log,
            ready_at: Mutex::new(ready_at),
            data: RwLock::new(Data::default()),
            counters: Counters::default(),
        })
    }

    /// Makes `/ready` answer 503 for `delay` from now (a restart, or a slow start).
    pub fn delay_ready(&self, delay: Duration) {
        if let Ok(mut r) = self.ready_at.lock() {
            *r = Instant::now() + delay;
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready_at.lock().map(|r| Instant::now() >= *r).unwrap_or(true)
    }

    fn info(&self, msg: &str, fields: &[(&str, &str)]) {
        (self.log)(Level::Info, &logger::logfmt(Level::Info, msg, fields));
    }

    fn warn(&self, msg: &str, fields: &[(&str, &str)]) {
        (self.log)(Level::Warn, &logger::logfmt(Level::Warn, msg, fields));
    }

    /// The total of `loki_ingester_chunks_created_total`.
    pub fn chunks_created(&self) -> u64 {
        self.counters.chunks_created.load(Ordering::Relaxed)
    }

    /// Number of entries held.
    pub fn entry_count(&self) -> usize {
        self.data.read().map(|d| d.streams.values().map(|s| s.entries.len()).sum()).unwrap_or(0)
    }

    /// Stores pushed streams. Invalid entries are skipped and reported (Loki's 400 text);
    /// valid ones are kept even then. `Err((status, text))` is the answer to send.
    pub fn ingest(&self, streams: Vec<push::PushStream>) -> Result<(), (StatusCode, String)> {
        let now = now_ns();
        let oldest = now - self.options.reject_older_than.as_nanos() as i64;
        let newest = now + self.options.creation_grace.as_nanos() as i64;
        let incoming: usize = streams.iter().flat_map(|s| &s.entries).map(|e| e.line.len()).sum();
        let lines: usize = streams.iter().map(|s| s.entries.len()).sum();
        let mut data = self.data.write().map_err(|_| (StatusCode::INTERNAL_SERVER_ERROR, "poisoned".to_string()))?;
        self.evict(&mut data, now);
        if data.bytes + incoming > self.options.max_bytes {
            return Err((
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "Ingestion rate limit exceeded for user fake (limit: {} bytes/sec) while attempting to ingest \
                     '{lines}' lines totaling '{incoming}' bytes, reduce log volume or contact your Loki \
                     administrator to see if the limit can be increased",
                    self.options.max_bytes
                ),
            ));
        }
        let mut problems = Vec::new();
        for s in streams {
            if s.labels.is_empty() {
                problems.push("error at least one label pair is required per stream".to_string());
                continue;
            }
            if let Some((bad, _)) = s.labels.iter().find(|(k, _)| !logql::valid_label_name(k)) {
                problems.push(format!("error parsing labels: invalid label name {bad:?}"));
                continue;
            }
            let labels = with_service_name(s.labels);
            let shown = push::labels_text(&labels);
            let mut accepted = Vec::with_capacity(s.entries.len());
            for e in s.entries {
                if e.line.len() > self.options.max_line_size {
                    problems.push(format!(
                        "Max entry size '{}' bytes exceeded for stream '{shown}' while adding an entry with length '{}' bytes",
                        self.options.max_line_size,
                        e.line.len()
                    ));
                } else if e.ts < oldest {
                    problems.push(format!(
                        "entry for stream '{shown}' has timestamp too old: {}, oldest acceptable timestamp is: {}",
                        rfc3339(e.ts),
                        rfc3339(oldest)
                    ));
                } else if e.ts > newest {
                    problems.push(format!("entry for stream '{shown}' has timestamp too new: {}", rfc3339(e.ts)));
                } else {
                    accepted.push(e);
                }
            }
            if accepted.is_empty() {
                continue;
            }
            let target = self.options.chunk_target_bytes;
            let idle = self.options.chunk_idle;
            let counters = &self.counters;
            let mut added = 0;
            let stream = data.streams.entry(labels.clone()).or_insert_with(|| {
                counters.streams_created.fetch_add(1, Ordering::Relaxed);
                counters.chunks_created.fetch_add(1, Ordering::Relaxed);
                Stream { labels, entries: VecDeque::new(), chunk_bytes: 0, last_push: Instant::now() }
            });
            if stream.last_push.elapsed() >= idle && stream.chunk_bytes > 0 {
                counters.chunks_created.fetch_add(1, Ordering::Relaxed);
                stream.chunk_bytes = 0;
            }
            stream.last_push = Instant::now();
            for e in accepted {
                let len = e.line.len();
                if stream.chunk_bytes > 0 && stream.chunk_bytes + len > target {
                    counters.chunks_created.fetch_add(1, Ordering::Relaxed);
                    stream.chunk_bytes = 0;
                }
                stream.chunk_bytes += len;
                added += len;
                counters.lines_received.fetch_add(1, Ordering::Relaxed);
                counters.bytes_received.fetch_add(len as u64, Ordering::Relaxed);
                let stored = Stored { ts: e.ts, level: detect_level(&e.line, &e.metadata), line: e.line.into() };
                // Loki accepts out-of-order writes; keep each stream sorted by time.
                if stream.entries.back().is_none_or(|last| last.ts <= stored.ts) {
                    stream.entries.push_back(stored);
                } else {
                    let at = stream.entries.partition_point(|x| x.ts <= stored.ts);
                    stream.entries.insert(at, stored);
                }
            }
            data.bytes += added;
        }
        drop(data);
        if problems.is_empty() {
            Ok(())
        } else {
            let more = problems.len() - 1;
            let mut text = problems.swap_remove(0);
            if more > 0 {
                text.push_str(&format!(" (and {more} more errors)"));
            }
            self.warn("push rejected entries", &[("err", &text)]);
            Err((StatusCode::BAD_REQUEST, text))
        }
    }

    /// Drops entries older than the retention window.
    fn evict(&self, data: &mut Data, now: i64) {
        let cutoff = now - self.options.retention.as_nanos() as i64;
        let mut freed = 0;
        data.streams.retain(|_, s| {
            while s.entries.front().is_some_and(|e| e.ts < cutoff) {
                if let Some(e) = s.entries.pop_front() {
                    freed += e.line.len();
                }
            }
            !s.entries.is_empty()
        });
        data.bytes = data.bytes.saturating_sub(freed);
    }

    /// A log query over `[start, end]`: the newest (or oldest, `forward`) `limit` lines.
    fn select_logs(&self, sel: &LogSelector, start: i64, end: i64, limit: usize, forward: bool) -> (Value, Tally) {
        let data = match self.data.read() {
            Ok(d) => d,
            Err(_) => return (json!([]), Tally::default()),
        };
        let mut tally = Tally::default();
        // Each stream contributes at most `limit` lines, then the merge keeps `limit` overall.
        let mut picked: Vec<(i64, &Stream, &Stored)> = Vec::new();
        for stream in data.streams.values().filter(|s| sel.selects(&s.labels)) {
            let lo = stream.entries.partition_point(|e| e.ts < start);
            let hi = stream.entries.partition_point(|e| e.ts <= end);
            let window = stream.entries.range(lo..hi);
            let mut taken = 0;
            let entries: Box<dyn Iterator<Item = &Stored>> =
                if forward { Box::new(window) } else { Box::new(window.rev()) };
            for e in entries {
                tally.lines += 1;
                tally.bytes += e.line.len();
                if sel.keeps(&e.line) {
                    picked.push((e.ts, stream, e));
                    taken += 1;
                    if taken >= limit {
                        break;
                    }
                }
            }
        }
        if forward {
            picked.sort_by_key(|(ts, _, _)| *ts);
        } else {
            picked.sort_by_key(|(ts, _, _)| std::cmp::Reverse(*ts));
        }
        picked.truncate(limit);
        tally.returned = picked.len();
        // One result stream per label set and detected level, as Loki 3 answers.
        let mut grouped: BTreeMap<(String, &'static str), (&Labels, Vec<Value>)> = BTreeMap::new();
        for (ts, stream, e) in picked {
            let key = (push::labels_text(&stream.labels), e.level);
            grouped
                .entry(key)
                .or_insert_with(|| (&stream.labels, Vec::new()))
                .1
                .push(json!([ts.to_string(), &*e.line]));
        }
        let result: Vec<Value> = grouped
            .into_iter()
            .map(
                |((_, level), (labels, values))| json!({"stream": label_object(labels, Some(level)), "values": values}),
            )
            .collect();
        (Value::Array(result), tally)
    }

    /// A metric query evaluated at each of `times` (seconds-resolution ns timestamps).
    fn eval_metric(&self, q: &MetricQuery, times: &[i64]) -> (Vec<MetricSeries>, Tally) {
        let mut tally = Tally::default();
        let mut series: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
        let Ok(data) = self.data.read() else { return (Vec::new(), tally) };
        let range = q.range.as_nanos() as i64;
        let seconds = q.range.as_secs_f64();
        for stream in data.streams.values().filter(|s| q.selector.selects(&s.labels)) {
            for &t in times {
                let lo = stream.entries.partition_point(|e| e.ts <= t - range);
                let hi = stream.entries.partition_point(|e| e.ts <= t);
                let mut per_level: BTreeMap<&'static str, f64> = BTreeMap::new();
                for e in stream.entries.range(lo..hi) {
                    tally.lines += 1;
                    tally.bytes += e.line.len();
                    if !q.selector.keeps(&e.line) {
                        continue;
                    }
                    let add = match q.func {
                        RangeFn::CountOverTime | RangeFn::Rate => 1.0,
                        RangeFn::BytesOverTime | RangeFn::BytesRate => e.line.len() as f64,
                    };
                    *per_level.entry(e.level).or_default() += add;
                }
                for (level, mut v) in per_level {
                    if matches!(q.func, RangeFn::Rate | RangeFn::BytesRate) {
                        v /= seconds;
                    }
                    let mut labels = stream.labels.clone();
                    labels.push(("detected_level".into(), level.into()));
                    labels.sort();
                    series.entry(labels).or_default().push((t, v));
                }
            }
        }
        drop(data);
        let Some(agg) = &q.aggregation else {
            let mut out: Vec<_> = series.into_iter().collect();
            for (_, points) in &mut out {
                points.sort_by_key(|p| p.0);
            }
            tally.returned = out.len();
            return (out, tally);
        };
        // Vector aggregation: group the series by the kept labels, combine per timestamp.
        let mut groups: BTreeMap<Labels, BTreeMap<i64, Vec<f64>>> = BTreeMap::new();
        for (labels, points) in series {
            let kept: Labels = labels
                .into_iter()
                .filter(|(k, _)| if agg.by { agg.labels.contains(k) } else { !agg.labels.contains(k) })
                .collect();
            let group = groups.entry(kept).or_default();
            for (t, v) in points {
                group.entry(t).or_default().push(v);
            }
        }
        let out: Vec<_> = groups
            .into_iter()
            .map(|(labels, points)| {
                let points = points
                    .into_iter()
                    .map(|(t, vs)| {
                        let v = match agg.op {
                            AggOp::Sum => vs.iter().sum(),
                            AggOp::Min => vs.iter().copied().fold(f64::INFINITY, f64::min),
                            AggOp::Max => vs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            AggOp::Avg => vs.iter().sum::<f64>() / vs.len() as f64,
                            AggOp::Count => vs.len() as f64,
                        };
                        (t, v)
                    })
                    .collect();
                (labels, points)
            })
            .collect::<Vec<_>>();
        tally.returned = out.len();
        (out, tally)
    }

    fn label_names(&self, start: i64, end: i64) -> Vec<String> {
        let mut names = BTreeSet::new();
        if let Ok(data) = self.data.read() {
            for s in data.streams.values().filter(|s| overlaps(s, start, end)) {
                names.extend(s.labels.iter().map(|(k, _)| k.clone()));
            }
        }
        names.into_iter().collect()
    }

    fn label_values(&self, name: &str, start: i64, end: i64, selector: Option<&LogSelector>) -> Vec<String> {
        let mut values = BTreeSet::new();
        if let Ok(data) = self.data.read() {
            for s in data.streams.values().filter(|s| overlaps(s, start, end)) {
                if selector.is_some_and(|sel| !sel.selects(&s.labels)) {
                    continue;
                }
                if let Some((_, v)) = s.labels.iter().find(|(k, _)| k == name) {
                    values.insert(v.clone());
                }
            }
        }
        values.into_iter().collect()
    }

    fn series(&self, selectors: &[LogSelector], start: i64, end: i64) -> Vec<Value> {
        let Ok(data) = self.data.read() else { return Vec::new() };
        let mut found: Vec<&Labels> = data
            .streams
            .values()
            .filter(|s| overlaps(s, start, end))
            .filter(|s| selectors.is_empty() || selectors.iter().any(|sel| sel.selects(&s.labels)))
            .map(|s| &s.labels)
            .collect();
        found.sort();
        found.into_iter().map(|l| label_object(l, None)).collect()
    }

    /// The `/metrics` exposition text.
    pub fn metrics_text(&self) -> String {
        let c = &self.counters;
        let (streams, entries) = self
            .data
            .read()
            .map(|d| (d.streams.len(), d.streams.values().map(|s| s.entries.len()).sum::<usize>()))
            .unwrap_or((0, 0));
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, lines: &[(String, String)]| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
            for (labels, value) in lines {
                out.push_str(&format!("{name}{labels} {value}\n"));
            }
        };
        let one = |v: String| vec![(String::new(), v)];
        metric(
            "loki_build_info",
            "gauge",
            "A metric with a constant '1' value labeled by version, revision, branch, goversion from which loki was \
             built, and the goos and goarch for the build.",
            &[(
                format!(
                    "{{branch=\"HEAD\",goarch=\"amd64\",goos=\"linux\",goversion=\"go1.23.5\",revision=\"opsbook-twin\",tags=\"netgo\",version=\"v{VERSION}\"}}"
                ),
                "1".into(),
            )],
        );
        metric(
            "loki_distributor_bytes_received_total",
            "counter",
            "The total number of uncompressed bytes received per tenant. Includes structured metadata bytes.",
            &[(
                "{aggregated_metric=\"false\",retention_hours=\"\",tenant=\"fake\"}".into(),
                c.bytes_received.load(Ordering::Relaxed).to_string(),
            )],
        );
        metric(
            "loki_distributor_lines_received_total",
            "counter",
            "The total number of lines received per tenant",
            &[(
                "{aggregated_metric=\"false\",tenant=\"fake\"}".into(),
                c.lines_received.load(Ordering::Relaxed).to_string(),
            )],
        );
        metric(
            "loki_ingester_chunks_created_total",
            "counter",
            "The total number of chunks created in the ingester.",
            &one(c.chunks_created.load(Ordering::Relaxed).to_string()),
        );
        metric(
            "loki_ingester_memory_streams",
            "gauge",
            "The total number of streams in memory per tenant.",
            &[("{tenant=\"fake\"}".into(), streams.to_string())],
        );
        metric(
            "loki_ingester_streams_created_total",
            "counter",
            "The total number of streams created per tenant.",
            &[("{tenant=\"fake\"}".into(), c.streams_created.load(Ordering::Relaxed).to_string())],
        );
        metric(
            "loki_ingester_entries_in_memory",
            "gauge",
            "Log entries held in memory by the opsbook twin.",
            &one(entries.to_string()),
        );
        metric(
            "loki_request_total",
            "counter",
            "Requests handled by the opsbook twin, by route.",
            &[
                ("{route=\"loki_api_v1_push\"}".into(), c.push_requests.load(Ordering::Relaxed).to_string()),
                ("{route=\"loki_api_v1_query_range\"}".into(), c.queries.load(Ordering::Relaxed).to_string()),
            ],
        );
        out
    }

    /// The `/config` YAML: the sections operators read, in Loki's layout.
    pub fn config_yaml(&self) -> String {
        let (address, port) = self.options.listen.rsplit_once(':').unwrap_or(("127.0.0.1", "3100"));
        let o = &self.options;
        format!(
            "target: all\nhttp_prefix: \"\"\nserver:\n  http_listen_network: tcp\n  http_listen_address: {address}\n  \
             http_listen_port: {port}\n  grpc_listen_port: 9095\n  log_level: info\ncommon:\n  path_prefix: /var/lib/loki\n  \
             replication_factor: 1\nstorage_config:\n  filesystem:\n    directory: /var/lib/loki/chunks\n  s3:\n    \
             endpoint: \"\"\n    bucketnames: \"\"\ningester:\n  chunk_idle_period: {}\n  chunk_target_size: {}\n\
             limits_config:\n  reject_old_samples: true\n  reject_old_samples_max_age: {}\n  creation_grace_period: {}\n  \
             max_line_size: {}\n  retention_period: {}\nschema_config:\n  configs:\n  - from: \"2020-10-24\"\n    \
             store: tsdb\n    object_store: {}\n    schema: v13\n    index:\n      path_prefix: index/\n      \
             prefix: index_\n      period: 1d\n      tags: {{}}\n    chunks:\n      prefix: \"\"\n      period: 0s\n      \
             tags: {{}}\n    row_shards: 16\nanalytics:\n  reporting_enabled: false\n",
            go_duration(o.chunk_idle),
            o.chunk_target_bytes,
            go_duration(o.reject_older_than),
            go_duration(o.creation_grace),
            o.max_line_size,
            go_duration(o.retention),
            o.object_store,
        )
    }
}

/// Go's duration text as Loki prints durations in its config (`1h0m0s`, `30s`).
fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        return "0s".into();
    }
    let (h, m, sec) = (s / 3600, s % 3600 / 60, s % 60);
    if h > 0 {
        format!("{h}h{m}m{sec}s")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else {
        format!("{sec}s")
    }
}

fn overlaps(s: &Stream, start: i64, end: i64) -> bool {
    s.entries.front().is_some_and(|f| f.ts <= end) && s.entries.back().is_some_and(|b| b.ts >= start)
}

fn label_object(labels: &Labels, level: Option<&str>) -> Value {
    let mut all: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    if let Some(level) = level {
        all.push(("detected_level", level));
    }
    all.sort();
    Value::Object(all.into_iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect())
}

fn rfc3339(ns: i64) -> String {
    humantime::format_rfc3339_nanos(UNIX_EPOCH + Duration::from_nanos(ns.max(0) as u64)).to_string()
}

/// Loki 3's `service_name`: kept if pushed, else taken from the first of the usual labels,
/// else `unknown_service`.
fn with_service_name(mut labels: Labels) -> Labels {
    const FROM: [&str; 13] = [
        "service",
        "app",
        "application",
        "app_name",
        "name",
        "app_kubernetes_io_name",
        "container",
        "container_name",
        "k8s_container_name",
        "component",
        "workload",
        "job",
        "k8s_job_name",
    ];
    if labels.iter().any(|(k, _)| k == "service_name") {
        return labels;
    }
    let value = FROM
        .iter()
        .find_map(|want| labels.iter().find(|(k, _)| k == want).map(|(_, v)| v.clone()))
        .unwrap_or_else(|| "unknown_service".into());
    labels.push(("service_name".into(), value));
    labels.sort();
    labels
}

fn normalise_level(text: &str) -> Option<&'static str> {
    Some(match text.to_ascii_lowercase().as_str() {
        "trace" | "trc" => "trace",
        "debug" | "dbg" => "debug",
        "info" | "inf" | "information" | "notice" => "info",
        "warn" | "warning" | "wrn" => "warn",
        "error" | "err" | "eror" => "error",
        "critical" | "crit" | "fatal" | "panic" | "emerg" | "alert" => "critical",
        _ => return None,
    })
}

/// Loki 3's `detected_level`: from structured metadata, a `level=`-style field (logfmt or
/// JSON), or keywords in the line; `unknown` otherwise.
fn detect_level(line: &str, metadata: &[(String, String)]) -> &'static str {
    const KEYS: [&str; 5] = ["level", "lvl", "severity", "loglevel", "log_level"];
    for (k, v) in metadata {
        if KEYS.contains(&k.to_ascii_lowercase().as_str())
            && let Some(l) = normalise_level(v)
        {
            return l;
        }
    }
    if line.trim_start().starts_with('{')
        && let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line)
    {
        for (k, v) in &obj {
            if KEYS.contains(&k.to_ascii_lowercase().as_str())
                && let Some(l) = v.as_str().and_then(normalise_level)
            {
                return l;
            }
        }
    }
    for token in line.split_whitespace() {
        if let Some((k, v)) = token.split_once('=')
            && KEYS.contains(&k.to_ascii_lowercase().as_str())
            && let Some(l) = normalise_level(v.trim_matches('"'))
        {
            return l;
        }
    }
    if line.contains("info") || line.contains("INFO") {
        "info"
    } else if line.contains("err:") || line.contains("ERR:") || line.contains("error") || line.contains("ERROR") {
        "error"
    } else if line.contains("warn") || line.contains("WARN") {
        "warn"
    } else if line.contains("CRITICAL") || line.contains("critical") || line.contains("fatal") || line.contains("FATAL")
    {
        "critical"
    } else if line.contains("debug") || line.contains("DEBUG") {
        "debug"
    } else {
        "unknown"
    }
}

/// What a query read and returned (for the `stats` block).
#[derive(Default)]
struct Tally {
    lines: usize,
    bytes: usize,
    returned: usize,
}

fn stats(t: &Tally, exec: Duration) -> Value {
    let secs = exec.as_secs_f64().max(1e-9);
    let chunk = json!({"headChunkBytes":0,"headChunkLines":0,"decompressedBytes":0,"decompressedLines":0,
        "compressedBytes":0,"totalDuplicates":0,"postFilterLines":0,"headChunkStructuredMetadataBytes":0,
        "decompressedStructuredMetadataBytes":0});
    let mut head = chunk.clone();
    head["headChunkBytes"] = json!(t.bytes);
    head["headChunkLines"] = json!(t.lines);
    head["postFilterLines"] = json!(t.returned);
    let store = |chunk: Value| {
        json!({"totalChunksRef":0,"totalChunksDownloaded":0,"chunksDownloadTime":0,
            "queryReferencedStructuredMetadata":false,"chunk":chunk,"chunkRefsFetchTime":0,
            "congestionControlLatency":0,"pipelineWrapperFilteredLines":0})
    };
    let cache = json!({"entriesFound":0,"entriesRequested":0,"entriesStored":0,"bytesReceived":0,"bytesSent":0,
        "requests":0,"downloadTime":0,"queryLengthServed":0});
    json!({
        "summary": {
            "bytesProcessedPerSecond": (t.bytes as f64 / secs) as u64,
            "linesProcessedPerSecond": (t.lines as f64 / secs) as u64,
            "totalBytesProcessed": t.bytes,
            "totalLinesProcessed": t.lines,
            "execTime": exec.as_secs_f64(),
            "queueTime": 0,
            "subqueries": 0,
            "totalEntriesReturned": t.returned,
            "splits": 0,
            "shards": 1,
            "totalPostFilterLines": t.returned,
            "totalStructuredMetadataBytesProcessed": 0
        },
        "querier": {"store": store(chunk)},
        "ingester": {"totalReached": 1, "totalChunksMatched": 1, "totalBatches": 1, "totalLinesSent": t.returned,
            "store": store(head)},
        "cache": {"chunk": cache, "index": cache, "result": cache, "statsResult": cache, "volumeResult": cache,
            "seriesResult": cache, "labelResult": cache, "instantMetricResult": cache},
        "index": {"totalChunks": 0, "postFilterChunks": 0, "shardsDuration": 0, "usedBloomFilters": false}
    })
}

/// A 400 (or other) answer in Loki's plain-text style.
fn text_error(status: StatusCode, text: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")],
        format!("{}\n", text.into()),
    )
        .into_response()
}

fn json_ok(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json; charset=UTF-8")], v.to_string()).into_response()
}

/// Loki's timestamp parameter: float seconds, integer seconds (≤ 10 digits) or nanoseconds,
/// or RFC 3339.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.contains('.')
        && let Ok(f) = text.parse::<f64>()
    {
        return Ok((f * 1e9).round() as i64);
    }
    if let Ok(n) = text.parse::<i64>() {
        return Ok(if text.trim_start_matches('-').len() <= 10 { n.saturating_mul(1_000_000_000) } else { n });
    }
    humantime::parse_rfc3339_weak(text)
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .ok_or_else(|| format!("cannot parse {text:?} to a valid timestamp"))
}

/// A duration parameter: Prometheus text (`5m`) or float seconds.
fn parse_step(text: &str) -> Result<Duration, String> {
    logql::parse_duration(text)
        .or_else(|| text.parse::<f64>().ok().filter(|f| *f > 0.0).map(Duration::from_secs_f64))
        .ok_or_else(|| format!("cannot parse {text:?} to a valid duration"))
}

type Params = Vec<(String, String)>;

fn param<'a>(params: &'a Params, name: &str) -> Option<&'a str> {
    params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `start`/`end` with a default look-back (Loki: 1 h for queries, 6 h for label lookups);
/// `since` replaces the look-back.
fn window(params: &Params, default_back: Duration) -> Result<(i64, i64), String> {
    let end = param(params, "end").map(parse_time).transpose()?.unwrap_or_else(now_ns);
    let back = param(params, "since").map(parse_step).transpose()?.unwrap_or(default_back);
    let start = param(params, "start").map(parse_time).transpose()?.unwrap_or(end - back.as_nanos() as i64);
    if end < start {
        return Err("end timestamp must not be before or equal to start time".into());
    }
    Ok((start, end))
}

/// Seconds as Loki writes sample times: an integer when whole, else up to milliseconds.
fn seconds_number(ns: i64) -> Value {
    let ms = ns.div_euclid(1_000_000);
    if ms % 1000 == 0 { json!(ms / 1000) } else { json!(ms as f64 / 1000.0) }
}

fn sample_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v}")
    }
}

fn labels_json(labels: &Labels) -> Value {
    Value::Object(labels.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

async fn handle_query(store: &LogStore, params: &Params, instant: bool) -> Response {
    store.counters.queries.fetch_add(1, Ordering::Relaxed);
    let began = Instant::now();
    let Some(text) = param(params, "query") else {
        return text_error(StatusCode::BAD_REQUEST, "query parameter `query` is required");
    };
    let query = match logql::parse(text) {
        Ok(q) => q,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    let limit = match param(params, "limit").map(str::parse::<usize>) {
        None => 100,
        Some(Ok(0)) | Some(Err(_)) => {
            return text_error(StatusCode::BAD_REQUEST, "limit must be a positive value");
        }
        Some(Ok(n)) => n,
    };
    let forward = match param(params, "direction").unwrap_or("backward").to_ascii_lowercase().as_str() {
        "forward" => true,
        "backward" => false,
        other => return text_error(StatusCode::BAD_REQUEST, format!("invalid direction '{other}'")),
    };
    match (query, instant) {
        (Query::Log(_), true) => text_error(
            StatusCode::BAD_REQUEST,
            "log queries are not supported as an instant query type, please change your query to a range query type",
        ),
        (Query::Log(sel), false) => {
            let (start, end) = match window(params, Duration::from_secs(3600)) {
                Ok(w) => w,
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let (result, tally) = store.select_logs(&sel, start, end, limit, forward);
            json_ok(json!({"status": "success", "data": {"resultType": "streams", "result": result,
                "stats": stats(&tally, began.elapsed())}}))
        }
        (Query::Metric(m), true) => {
            let t = match param(params, "time").map(parse_time).transpose() {
                Ok(t) => t.unwrap_or_else(now_ns),
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let (series, tally) = store.eval_metric(&m, &[t]);
            let result: Vec<Value> = series
                .iter()
                .filter_map(|(labels, points)| {
                    let (ts, v) = points.first()?;
                    Some(json!({"metric": labels_json(labels), "value": [seconds_number(*ts), sample_text(*v)]}))
                })
                .collect();
            json_ok(json!({"status": "success", "data": {"resultType": "vector", "result": result,
                "stats": stats(&tally, began.elapsed())}}))
        }
        (Query::Metric(m), false) => {
            let (start, end) = match window(params, Duration::from_secs(3600)) {
                Ok(w) => w,
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let step = match param(params, "step").map(parse_step).transpose() {
                // Loki's default: a 250th of the range, at least a second.
                Ok(s) => {
                    s.unwrap_or_else(|| Duration::from_secs((((end - start) / 1_000_000_000) / 250).max(1) as u64))
                }
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let step_ns = (step.as_nanos() as i64).max(1);
            if (end - start) / step_ns > 11_000 {
                return text_error(
                    StatusCode::BAD_REQUEST,
                    "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
                );
            }
            // Evaluation times are aligned to the step, as Loki's query frontend aligns them.
            let first = start.div_euclid(step_ns) * step_ns;
            let times: Vec<i64> =
                (0..).map(|i| first + i * step_ns).take_while(|t| *t <= end).filter(|t| *t >= start).collect();
            let (series, tally) = store.eval_metric(&m, &times);
            let result: Vec<Value> = series
                .iter()
                .map(|(labels, points)| {
                    let values: Vec<Value> =
                        points.iter().map(|(t, v)| json!([seconds_number(*t), sample_text(*v)])).collect();
                    json!({"metric": labels_json(labels), "values": values})
                })
                .collect();
            json_ok(json!({"status": "success", "data": {"resultType": "matrix", "result": result,
                "stats": stats(&tally, began.elapsed())}}))
        }
    }
}

async fn ready(State(store): State<Arc<LogStore>>) -> Response {
    if store.is_ready() {
        text_error(StatusCode::OK, "ready")
    } else {
        text_error(StatusCode::SERVICE_UNAVAILABLE, "Ingester not ready: waiting for 15s after being ready")
    }
}

async fn metrics(State(store): State<Arc<LogStore>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], store.metrics_text()).into_response()
}

async fn push_handler(State(store): State<Arc<LogStore>>, headers: HeaderMap, body: Bytes) -> Response {
    store.counters.push_requests.fetch_add(1, Ordering::Relaxed);
    let h = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let encoding = push::encoding_of(&h(header::CONTENT_TYPE));
    let plain = match push::decompress(&h(header::CONTENT_ENCODING), &body, 100 << 20) {
        Ok(p) => p,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    let streams = match push::decode(encoding, &plain) {
        Ok(s) => s,
        Err(e) => {
            store.warn("error decoding push request", &[("err", &e)]);
            return text_error(StatusCode::BAD_REQUEST, e);
        }
    };
    match store.ingest(streams) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err((status, text)) => text_error(status, text),
    }
}

async fn query_range(
    State(store): State<Arc<LogStore>>,
    QueryParams(params): QueryParams<Params>,
    body: Bytes,
) -> Response {
    handle_query(&store, &with_form(params, &body), false).await
}

async fn query_instant(
    State(store): State<Arc<LogStore>>,
    QueryParams(params): QueryParams<Params>,
    body: Bytes,
) -> Response {
    handle_query(&store, &with_form(params, &body), true).await
}

/// POSTed queries carry their parameters form-encoded in the body.
fn with_form(mut params: Params, body: &[u8]) -> Params {
    if !body.is_empty()
        && let Ok(form) = serde_urlencoded_pairs(body)
    {
        params.extend(form);
    }
    params
}

fn serde_urlencoded_pairs(body: &[u8]) -> Result<Params, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.push((percent_decode(k), percent_decode(v)));
    }
    Ok(out)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex))
        {
            (b'%', Some(hi), Some(lo)) => Some(hi * 16 + lo),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 2;
            }
            (None, b'+') => out.push(b' '),
            (None, b) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn labels(State(store): State<Arc<LogStore>>, QueryParams(params): QueryParams<Params>) -> Response {
    match window(&params, Duration::from_secs(6 * 3600)) {
        Ok((start, end)) => json_ok(json!({"status": "success", "data": store.label_names(start, end)})),
        Err(e) => text_error(StatusCode::BAD_REQUEST, e),
    }
}

async fn label_values(
    State(store): State<Arc<LogStore>>,
    Path(name): Path<String>,
    QueryParams(params): QueryParams<Params>,
) -> Response {
    let (start, end) = match window(&params, Duration::from_secs(6 * 3600)) {
        Ok(w) => w,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    let selector = match param(&params, "query").map(logql::parse).transpose() {
        Ok(Some(Query::Log(s))) => Some(s),
        Ok(Some(Query::Metric(_))) => return text_error(StatusCode::BAD_REQUEST, "query must be a stream selector"),
        Ok(None) => None,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    json_ok(json!({"status": "success", "data": store.label_values(&name, start, end, selector.as_ref())}))
}

async fn series(State(store): State<Arc<LogStore>>, QueryParams(params): QueryParams<Params>, body: Bytes) -> Response {
    let params = with_form(params, &body);
    let (start, end) = match window(&params, Duration::from_secs(6 * 3600)) {
        Ok(w) => w,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    let mut selectors = Vec::new();
    for (_, m) in params.iter().filter(|(k, _)| k == "match[]" || k == "match") {
        match logql::parse(m) {
            Ok(Query::Log(s)) => selectors.push(s),
            Ok(Query::Metric(_)) => return text_error(StatusCode::BAD_REQUEST, "match[] must be a stream selector"),
            Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
        }
    }
    json_ok(json!({"status": "success", "data": store.series(&selectors, start, end)}))
}

async fn buildinfo() -> Response {
    json_ok(json!({"version": format!("v{VERSION}"), "revision": "opsbook-twin", "branch": "HEAD",
        "buildUser": "", "buildDate": "", "goVersion": ""}))
}

async fn config(State(store): State<Arc<LogStore>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], store.config_yaml()).into_response()
}

async fn method_not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

async fn not_found() -> Response {
    text_error(StatusCode::NOT_FOUND, "404 page not found")
}

/// The HTTP routes, with the fault middleware in front.
pub fn router(store: Arc<LogStore>) -> Router {
    Router::new()
        .route("/ready", get(ready).head(method_not_allowed))
        .route("/metrics", get(metrics))
        .route("/config", get(config))
        .route("/loki/api/v1/push", post(push_handler))
        .route("/loki/api/v1/query_range", get(query_range).post(query_range))
        .route("/loki/api/v1/query", get(query_instant).post(query_instant))
        .route("/loki/api/v1/labels", get(labels).post(labels))
        .route("/loki/api/v1/label/{name}/values", get(label_values))
        .route("/loki/api/v1/series", get(series).post(series))
        .route("/loki/api/v1/status/buildinfo", get(buildinfo))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(store.faults.clone(), faults::apply))
        .with_state(store)
}

/// Serves the log store on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<LogStore>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    store.info("Loki started", &[("caller", "loki.go:560"), ("version", VERSION), ("listen", &addr)]);
    let store2 = store.clone();
    let result = axum::serve(listener, router(store)).with_graceful_shutdown(shutdown).await;
    store2.info("Loki stopped", &[("caller", "loki.go:577")]);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ts: i64, line: &str) -> push::PushEntry {
        push::PushEntry { ts, line: line.into(), metadata: vec![] }
    }

    fn store() -> Arc<LogStore> {
        LogStore::new(Options { ready_delay: Duration::ZERO, ..Options::default() }, logger::discard())
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn service_name_and_detected_level_as_loki_3() {
        assert_eq!(
            with_service_name(labels(&[("hostname", "h1"), ("service_type", "test")])),
            labels(&[("hostname", "h1"), ("service_name", "unknown_service"), ("service_type", "test")])
        );
        assert_eq!(with_service_name(labels(&[("job", "x")]))[1], ("service_name".into(), "x".into()));
        assert_eq!(detect_level("ceo-tools test line level=info msg=\"hello loki\"", &[]), "info");
        assert_eq!(detect_level(r#"{"lvl":"WARNING","msg":"x"}"#, &[]), "warn");
        assert_eq!(detect_level("something ERROR happened", &[]), "error");
        assert_eq!(detect_level("plain words", &[]), "unknown");
    }

    #[test]
    fn chunks_are_cut_by_size_and_counted() {
        let s = LogStore::new(Options { chunk_target_bytes: 10, ..Options::default() }, logger::discard());
        let now = now_ns();
        let stream =
            |line: &str, ts| push::PushStream { labels: labels(&[("a", "b")]), entries: vec![entry(ts, line)] };
        s.ingest(vec![stream("12345678", now)]).unwrap();
        assert_eq!(s.chunks_created(), 1);
        s.ingest(vec![stream("12345678", now + 1)]).unwrap();
        assert_eq!(s.chunks_created(), 2);
        assert!(s.metrics_text().contains("\nloki_ingester_chunks_created_total 2\n"));
    }

    #[test]
    fn old_and_oversized_entries_are_refused_but_others_kept() {
        let s = store();
        let now = now_ns();
        let err = s
            .ingest(vec![push::PushStream {
                labels: labels(&[("a", "b")]),
                entries: vec![entry(now, "fine"), entry(now - 8 * 24 * 3600 * 1_000_000_000, "old")],
            }])
            .unwrap_err();
        assert_eq!(err.0, StatusCode::BAD_REQUEST);
        assert!(err.1.contains("timestamp too old"), "{}", err.1);
        assert_eq!(s.entry_count(), 1);
        assert!(s.ingest(vec![push::PushStream { labels: vec![], entries: vec![entry(now, "x")] }]).is_err());
    }

    #[test]
    fn log_queries_honour_limit_direction_and_filters() {
        let s = store();
        let now = now_ns();
        let entries: Vec<_> =
            (0..10).map(|i| entry(now - (10 - i) * 1_000_000, &format!("line {i} level=info"))).collect();
        s.ingest(vec![push::PushStream { labels: labels(&[("hostname", "h1")]), entries }]).unwrap();
        let Query::Log(sel) = logql::parse(r#"{hostname="h1"} != "line 9""#).unwrap() else { panic!() };
        let (result, tally) = s.select_logs(&sel, now - 3_600_000_000_000, now, 3, false);
        let values = result[0]["values"].as_array().unwrap();
        assert_eq!(values.len(), 3);
        assert_eq!(values[0][1], "line 8 level=info");
        assert_eq!(result[0]["stream"]["detected_level"], "info");
        assert_eq!(result[0]["stream"]["service_name"], "unknown_service");
        assert_eq!(tally.returned, 3);
        let (result, _) = s.select_logs(&sel, now - 3_600_000_000_000, now, 2, true);
        assert_eq!(result[0]["values"][0][1], "line 0 level=info");
    }

    #[test]
    fn metric_queries_count_per_level_and_aggregate() {
        let s = store();
        let now = now_ns();
        s.ingest(vec![push::PushStream {
            labels: labels(&[("hostname", "h1"), ("unit", "a")]),
            entries: vec![entry(now - 1000, "level=info a"), entry(now - 500, "level=error b")],
        }])
        .unwrap();
        let Query::Metric(m) = logql::parse(r#"count_over_time({hostname="h1"}[5m])"#).unwrap() else { panic!() };
        let (series, _) = s.eval_metric(&m, &[now]);
        assert_eq!(series.len(), 2, "one series per detected level");
        let Query::Metric(m) = logql::parse(r#"sum by (hostname) (count_over_time({hostname="h1"}[5m]))"#).unwrap()
        else {
            panic!()
        };
        let (series, _) = s.eval_metric(&m, &[now]);
        assert_eq!(series, vec![(labels(&[("hostname", "h1")]), vec![(now, 2.0)])]);
    }

    #[test]
    fn retention_evicts_old_entries() {
        let s = LogStore::new(Options { retention: Duration::from_secs(60), ..Options::default() }, logger::discard());
        let now = now_ns();
        s.ingest(vec![push::PushStream {
            labels: labels(&[("a", "b")]),
            entries: vec![entry(now - 120_000_000_000, "old"), entry(now, "new")],
        }])
        .unwrap();
        // The old entry arrived inside the accepted window but outside retention: the next
        // push evicts it.
        s.ingest(vec![push::PushStream { labels: labels(&[("a", "b")]), entries: vec![entry(now + 1, "newer")] }])
            .unwrap();
        assert_eq!(s.entry_count(), 2);
    }

    #[test]
    fn timestamps_in_every_form_loki_accepts() {
        assert_eq!(parse_time("1795338824").unwrap(), 1_795_338_824_000_000_000);
        assert_eq!(parse_time("1795338824104597505").unwrap(), 1_795_338_824_104_597_505);
        assert_eq!(parse_time("1795338824.5").unwrap(), 1_795_338_824_500_000_000);
        assert_eq!(parse_time("2026-11-22T09:13:44Z").unwrap(), 1_795_338_824_000_000_000);
        assert!(parse_time("soon").is_err());
        assert_eq!(seconds_number(1_795_338_840_000_000_000), json!(1795338840));
        assert_eq!(seconds_number(1_795_338_832_130_000_000), json!(1795338832.13));
    }

    #[test]
    fn config_names_the_backend() {
        let s = LogStore::new(Options { object_store: "s3".into(), ..Options::default() }, logger::discard());
        assert_eq!(crate::wire::loki_config::object_stores(&s.config_yaml()), vec!["s3".to_string()]);
    }
}
