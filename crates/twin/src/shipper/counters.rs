//! What the shipper counts as it works (lines read, entries sent and dropped, retries, request
//! durations by status), which its `/metrics` reports (`metrics`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

/// The request-duration histogram's upper bounds, in seconds.
pub(super) const BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// One status code's request durations.
#[derive(Default)]
pub(super) struct Histogram {
    pub(super) counts: [u64; BUCKETS.len()],
    pub(super) sum: f64,
    pub(super) count: u64,
}

/// What `/metrics` reports, counted as the shipper works.
#[derive(Default)]
pub(super) struct Metrics {
    pub(super) lines_read: AtomicU64,
    pub(super) parse_errors: AtomicU64,
    pub(super) sent_entries: AtomicU64,
    pub(super) sent_bytes: AtomicU64,
    pub(super) encoded_bytes: AtomicU64,
    pub(super) retries: AtomicU64,
    pub(super) dropped: Mutex<BTreeMap<&'static str, (u64, u64)>>,
    pub(super) durations: Mutex<BTreeMap<String, Histogram>>,
    pub(super) config_ok: AtomicBool,
    pub(super) config_failures: AtomicU64,
    /// Whether the writer has seen an entry (its counters exist from then on).
    pub(super) seen_entry: AtomicBool,
}

impl Metrics {
    /// Counts one request of `status` that took `elapsed`.
    pub(super) fn observe(&self, status: &str, elapsed: Duration) {
        if let Ok(mut d) = self.durations.lock() {
            let h = d.entry(status.to_string()).or_default();
            let secs = elapsed.as_secs_f64();
            if let Some(i) = BUCKETS.iter().position(|le| secs <= *le) {
                h.counts[i] += 1;
            }
            h.count += 1;
            h.sum += secs;
        }
    }

    /// Counts a batch dropped for `reason`.
    pub(super) fn drop_batch(&self, reason: &'static str, entries: u64, bytes: u64) {
        if let Ok(mut d) = self.dropped.lock() {
            let e = d.entry(reason).or_default();
            e.0 += entries;
            e.1 += bytes;
        }
    }
}
