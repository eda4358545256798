//! Storing pushes in the log-store twin, with Loki's limits and wording: label checks, line
//! size, too-old and too-new entries (each refused entry named in the 400 text, the valid ones
//! kept), the byte budget (429), chunks cut by size and idleness (counted on `/metrics`), and
//! eviction by retention.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::http::StatusCode;

use super::loki3::{detect_level, with_service_name};
use super::state::{Data, LogStore, Stored, Stream};
use crate::clock::now_ns;
use opsbook_wire::loki::{PushEntry, PushStream, labels_text, valid_label_name};

impl LogStore {
    /// Stores pushed streams. Invalid entries are skipped and reported (Loki's 400 text);
    /// valid ones are kept even then. `Err((status, text))` is the answer to send.
    pub(crate) fn ingest(&self, streams: Vec<PushStream>) -> Result<(), (StatusCode, String)> {
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
            if let Some((bad, _)) = s.labels.iter().find(|(k, _)| !valid_label_name(k)) {
                problems.push(format!("error parsing labels: invalid label name {bad:?}"));
                continue;
            }
            let labels = with_service_name(s.labels);
            let shown = labels_text(&labels);
            let accepted = self.admitted(s.entries, &shown, (oldest, newest), &mut problems);
            if !accepted.is_empty() {
                data.bytes += self.store(&mut data, labels, accepted);
            }
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
            self.push_rejected(&text);
            Err((StatusCode::BAD_REQUEST, text))
        }
    }

    /// The entries of a stream Loki would keep: not over the line size, not older than `oldest`
    /// nor newer than `newest` (the window); each refused one is named in `problems`.
    fn admitted(
        &self,
        entries: Vec<PushEntry>,
        shown: &str,
        (oldest, newest): (i64, i64),
        problems: &mut Vec<String>,
    ) -> Vec<PushEntry> {
        let mut accepted = Vec::with_capacity(entries.len());
        for e in entries {
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
        accepted
    }

    /// Adds entries to their stream (made on first use), cutting chunks by size and idleness as
    /// Loki does; returns the bytes added.
    fn store(&self, data: &mut Data, labels: Vec<(String, String)>, accepted: Vec<PushEntry>) -> usize {
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
        added
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
}

/// RFC 3339 with nanoseconds, as Loki quotes entry times in its refusals.
fn rfc3339(ns: i64) -> String {
    humantime::format_rfc3339_nanos(std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns.max(0) as u64))
        .to_string()
}

#[cfg(test)]
mod tests {

    use std::time::Duration;

    use super::super::Options;
    use super::super::test_support::{entry, labels, store};
    use super::*;
    use crate::logger;

    #[test]
    fn chunks_are_cut_by_size_and_counted() {
        let s = LogStore::new(Options { chunk_target_bytes: 10, ..Options::default() }, logger::discard());
        let now = now_ns();
        let stream = |line: &str, ts| PushStream { labels: labels(&[("a", "b")]), entries: vec![entry(ts, line)] };
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
            .ingest(vec![PushStream {
                labels: labels(&[("a", "b")]),
                entries: vec![entry(now, "fine"), entry(now - 8 * 24 * 3600 * 1_000_000_000, "old")],
            }])
            .unwrap_err();
        assert_eq!(err.0, StatusCode::BAD_REQUEST);
        // Loki's words up to the timestamps, which follow (the entry's and the oldest accepted,
        // read from the clock).
        assert!(
            err.1.starts_with("entry for stream '{a=\"b\", service_name=\"unknown_service\"}' has timestamp too old: ")
                && err.1.contains("Z, oldest acceptable timestamp is: "),
            "{}",
            err.1
        );
        assert_eq!(s.entry_count(), 1);
        assert_eq!(
            s.ingest(vec![PushStream { labels: vec![], entries: vec![entry(now, "x")] }]).unwrap_err(),
            (StatusCode::BAD_REQUEST, "error at least one label pair is required per stream".to_string())
        );
    }

    #[test]
    fn retention_evicts_old_entries() {
        let s = LogStore::new(Options { retention: Duration::from_secs(60), ..Options::default() }, logger::discard());
        let now = now_ns();
        s.ingest(vec![PushStream {
            labels: labels(&[("a", "b")]),
            entries: vec![entry(now - 120_000_000_000, "old"), entry(now, "new")],
        }])
        .unwrap();
        // The old entry arrived inside the accepted window but outside retention: the next
        // push evicts it.
        s.ingest(vec![PushStream { labels: labels(&[("a", "b")]), entries: vec![entry(now + 1, "newer")] }]).unwrap();
        assert_eq!(s.entry_count(), 2);
    }
}
