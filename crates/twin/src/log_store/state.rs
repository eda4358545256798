//! The log store's state: its options, the streams it holds with their entries, its counters,
//! when it is ready.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::loki_file;
use crate::faults::Faults;
use crate::logger::Sink;

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
pub(super) type Labels = Vec<(String, String)>;

/// A metric query's series: labels and (time ns, value) points.
pub(super) type MetricSeries = (Labels, Vec<(i64, f64)>);

pub(super) struct Stored {
    pub(super) ts: i64,
    pub(super) line: Box<str>,
    pub(super) level: &'static str,
}

pub(super) struct Stream {
    pub(super) labels: Labels,
    pub(super) entries: VecDeque<Stored>,
    pub(super) chunk_bytes: usize,
    pub(super) last_push: Instant,
}

#[derive(Default)]
pub(super) struct Data {
    pub(super) streams: HashMap<Labels, Stream>,
    pub(super) bytes: usize,
}

/// Counters exposed on `/metrics`.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) lines_received: AtomicU64,
    pub(super) bytes_received: AtomicU64,
    pub(super) chunks_created: AtomicU64,
    pub(super) streams_created: AtomicU64,
    pub(super) push_requests: AtomicU64,
    pub(super) queries: AtomicU64,
}

/// A running log store's state; share it with `Arc` between the server and the sandbox.
pub struct LogStore {
    /// What it was started with.
    pub options: Options,
    /// The faults the sandbox sets on it.
    pub faults: Arc<Faults>,
    pub(super) log: Sink,
    pub(super) ready_at: Mutex<Instant>,
    pub(super) data: RwLock<Data>,
    pub(super) counters: Counters,
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
