//! The log-store twin: an in-memory stand-in for Grafana Loki 3.4 speaking its HTTP API.
//!
//! - `GET /ready`: 503 `Ingester not ready: waiting for 15s after being ready` during the
//!   configured start delay, then 200 `ready`; `HEAD /ready` is 405 as in Loki.
//! - `GET /metrics`: Prometheus exposition text with Loki's ingestion counters, among them
//!   `loki_ingester_chunks_created_total`: 0 until the first push creates a chunk, then
//!   growing as chunks are cut.
//! - `POST /loki/api/v1/push`: JSON (optionally gzip/deflate) and snappy-compressed protobuf.
//! - `GET|POST /loki/api/v1/query_range` and `/query` (log queries on `/query` get Loki 3's
//!   400), labels, label values, series, build info, and `GET /config` (YAML whose
//!   `schema_config.configs[*].object_store` names the backend). Empty answers take Loki's
//!   empty forms (an empty label list has no `data` at all). With `auth_enabled: true` in
//!   its config file, API calls without `X-Scope-OrgID` get Loki's 401 `no org id`.
//!
//! Like Loki 3, streams get `service_name` (discovered, else `unknown_service`) and query
//! results carry a `detected_level` for each line (`loki3`). Memory is bounded by a retention
//! window and a byte budget (pushes beyond it get Loki's 429). It logs what a healthy Loki
//! 3.4.6 logs, errors included (`voice`).
//!
//! This file holds the state; `ingest` stores pushes, `select` answers queries, `http` the
//! routes, `metrics`, `config` and `stats` the bodies of those answers. `loki_file` reads
//! Loki's own YAML config file (`-config.file`; its keys in `loki_keys`).

mod config;
mod http;
mod ingest;
mod logql;
mod loki3;
pub mod loki_file;
mod loki_keys;
mod metrics;
mod select;
mod stats;
mod voice;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use super::faults::Faults;
use super::logger::Sink;
use super::{Stop, Twin, listener_of};
use opsbook_world::BoxFuture;

/// Loki's version, as `/loki/api/v1/status/buildinfo` and `loki_build_info` report it.
pub(crate) const VERSION: &str = "3.4.6";

/// What the twin is configured with (Loki's defaults where Loki has one).
#[derive(Debug, Clone)]
pub struct Options {
    /// How long `/ready` answers 503 after start (Loki's ingester waits 15 s).
    pub ready_delay: Duration,
    /// Entries older than this are dropped.
    pub retention: Duration,
    /// Bytes of log lines kept at most; pushes beyond get 429.
    pub max_bytes: usize,
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
    /// The rest of what `/config` shows: the config file's values, or the twin's defaults.
    pub file: loki_file::LokiFile,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ready_delay: Duration::from_secs(15),
            retention: Duration::from_secs(24 * 3600),
            max_bytes: 512 << 20,
            chunk_target_bytes: 1_572_864,
            chunk_idle: Duration::from_secs(30 * 60),
            max_line_size: 256 << 10,
            reject_older_than: Duration::from_secs(7 * 24 * 3600),
            creation_grace: Duration::from_secs(10 * 60),
            listen: "127.0.0.1:3100".into(),
            file: loki_file::LokiFile::default(),
        }
    }
}

/// A stream's label pairs, sorted by name.
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
    /// What it was started with.
    pub options: Options,
    /// The faults the sandbox sets on it.
    pub faults: Arc<Faults>,
    log: Sink,
    ready_at: Mutex<Instant>,
    data: RwLock<Data>,
    counters: Counters,
}

impl LogStore {
    /// A log store started with `options`, logging to `log`.
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

    /// Whether `/ready` answers 200 now.
    pub fn is_ready(&self) -> bool {
        self.ready_at.lock().map(|r| Instant::now() >= *r).unwrap_or(true)
    }

    /// The total of `loki_ingester_chunks_created_total`.
    pub fn chunks_created(&self) -> u64 {
        self.counters.chunks_created.load(Ordering::Relaxed)
    }

    /// Number of entries held.
    pub fn entry_count(&self) -> usize {
        self.data.read().map(|d| d.streams.values().map(|s| s.entries.len()).sum()).unwrap_or(0)
    }
}

impl Twin for LogStore {
    fn run(self: Arc<Self>, listener: Option<TcpListener>, stop: Stop) -> BoxFuture<'static, std::io::Result<()>> {
        Box::pin(async move { serve(listener_of("log store", listener)?, self, stop).await })
    }
}

/// Serves the log store on `listener` until `shutdown` completes, logging as Loki does
/// over its life: its start, the `empty ring` error while the ring forms, and the
/// `context canceled` errors of its shutdown.
async fn serve(listener: TcpListener, store: Arc<LogStore>, shutdown: Stop) -> std::io::Result<()> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    store.started(&addr);
    let forming = tokio::spawn(voice::ring_forming(store.clone()));
    let result = axum::serve(listener, http::router(store.clone())).with_graceful_shutdown(shutdown).await;
    forming.abort();
    store.stopped();
    result
}

/// What the store's unit tests build their cases from.
#[cfg(test)]
mod test_support {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{Labels, LogStore, Options};
    use crate::logger;
    use opsbook_wire::loki::PushEntry;

    pub(super) fn entry(ts: i64, line: &str) -> PushEntry {
        PushEntry { ts, line: line.into(), metadata: vec![] }
    }

    pub(super) fn store() -> Arc<LogStore> {
        LogStore::new(Options { ready_delay: Duration::ZERO, ..Options::default() }, logger::discard())
    }

    pub(super) fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
}
