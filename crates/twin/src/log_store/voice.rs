//! What the log-store twin logs, in Loki 3.4.6's words and logfmt field order
//! (`log-levels-one-life.txt`), so a check of a Loki's log meets the same lines on the twin:
//!
//! - at start, `level=error … msg="error getting ingester clients" err="empty ring"` once,
//!   about 0.7 s in, while the ring forms;
//! - for each log query whose `limit` was met, the querier cancels the sub-queries it no
//!   longer needs: a `level=warn … msg="failed mapping AST" err="context canceled"` line, then
//!   `level=error … component=querier msg="error processing requests from scheduler" err="rpc
//!   error: code = Canceled desc = context canceled"`;
//! - on stop, the same querier line three times, the compactor's `failed to run compaction`
//!   and the querier line once more.
//!
//! Like Loki's, these lines go out plain (journald files them at priority info; the level is
//! only in the text). The caller fields are Loki's; the timestamps and trace IDs the twin's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::state::{LogStore, VERSION};
use crate::clock::now_ns;
use crate::logger::{Level, logfmt_value, now_rfc3339};

/// When, after its start, Loki 3.4.6 logged `empty ring` in the capture.
const RING_FORMING: Duration = Duration::from_millis(690);

/// The querier's line when the scheduler's request it worked on was canceled.
const QUERIER_CANCELED: [(&str, &str); 5] = [
    ("caller", "scheduler_processor.go:111"),
    ("component", "querier"),
    ("msg", "error processing requests from scheduler"),
    ("err", "rpc error: code = Canceled desc = context canceled"),
    ("addr", "127.0.0.1:9096"),
];

impl LogStore {
    /// One logfmt line: `level` and `ts` first, then `fields` in the order given (Loki's
    /// go-kit logger writes `caller` before `msg`).
    fn say(&self, level: Level, fields: &[(&str, &str)]) {
        let mut line = format!("level={} ts={}", level.word(), now_rfc3339(9));
        for (k, v) in fields {
            line.push_str(&format!(" {k}={}", logfmt_value(v)));
        }
        (self.log)(level, &line);
    }

    pub(super) fn started(&self, addr: &str) {
        let version = format!("(version={VERSION}, branch=HEAD, revision=opsbook-twin)");
        self.say(
            Level::Info,
            &[("caller", "main.go:126"), ("msg", "Starting Loki"), ("version", &version), ("listen", addr)],
        );
    }

    pub(super) fn stopped(&self) {
        for _ in 0..3 {
            self.say(Level::Error, &QUERIER_CANCELED);
        }
        self.say(
            Level::Error,
            &[("caller", "compactor.go:534"), ("msg", "failed to run compaction"), ("err", "context canceled")],
        );
        self.say(Level::Error, &QUERIER_CANCELED);
        self.say(Level::Info, &[("caller", "loki.go:577"), ("msg", "Loki stopped")]);
    }

    pub(super) fn push_rejected(&self, err: &str) {
        self.say(Level::Warn, &[("caller", "push.go:222"), ("msg", "push rejected entries"), ("err", err)]);
    }

    pub(super) fn push_undecodable(&self, err: &str) {
        self.say(Level::Warn, &[("caller", "push.go:105"), ("msg", "error decoding push request"), ("err", err)]);
    }

    /// A log query met its `limit`: the querier's cancellation of the rest, as Loki logs it.
    /// The warn line comes from Loki's span logger and starts with `ts`, not `level`.
    pub(super) fn limit_met(&self, query: &str) {
        let trace = trace_id();
        let mut line = format!("ts={}", now_rfc3339(9));
        for (k, v) in [
            ("caller", "spanlogger.go:111"),
            ("middleware", "QueryShard.astMapperware"),
            ("org_id", "fake"),
            ("traceID", trace.as_str()),
            ("user", "fake"),
            ("caller", "log.go:168"),
            ("level", "warn"),
            ("msg", "failed mapping AST"),
            ("err", "context canceled"),
            ("query", query),
        ] {
            line.push_str(&format!(" {k}={}", logfmt_value(v)));
        }
        (self.log)(Level::Warn, &line);
        self.say(Level::Error, &QUERIER_CANCELED);
    }
}

/// Runs from the start: once the ring would be forming, Loki's `empty ring` error (the task
/// is aborted if the store stops first).
pub(super) async fn ring_forming(store: Arc<LogStore>) {
    tokio::time::sleep(RING_FORMING).await;
    store.say(
        Level::Error,
        &[("caller", "ratestore.go:109"), ("msg", "error getting ingester clients"), ("err", "empty ring")],
    );
}

/// A 16-hex-digit trace ID, different for each query.
fn trace_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seed = (now_ns() as u64) ^ NEXT.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    format!("{:016x}", seed.wrapping_mul(0xbf58_476d_1ce4_e5b9) | (1 << 60))
}
