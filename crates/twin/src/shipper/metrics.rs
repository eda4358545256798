//! The shipper twin's `/metrics`: Alloy's own gauges and the `loki.source.journal` and
//! `loki.write` families (`loki_write_sent_entries_total`, `…_dropped_entries_total` by
//! reason, the request-duration histogram) with Alloy v1.9.0's labels, written by
//! `opsbook_wire::exposition::Writer`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::counters::BUCKETS;
use super::pipeline::{Shipper, VERSION};
use opsbook_wire::exposition::Writer;

/// Labels sorted by name, as client_golang writes them.
fn sorted<'a>(mut labels: Vec<(&'a str, &'a str)>) -> Vec<(&'a str, &'a str)> {
    labels.sort();
    labels
}

impl Shipper {
    /// The `/metrics` exposition text: Alloy v1.9.0's families (`common/loki/client/client.go`
    /// `NewMetrics`), each series with the component registerer's `component_path` and
    /// `component_id` (`node_builtin_component.go`). The `loki_write_*` counters exist only
    /// once the writer has seen an entry (`initBatchMetrics`); before that there is no series,
    /// which is not the same as zero.
    pub fn metrics_text(&self) -> String {
        let m = &self.metrics;
        let n = |v: &AtomicU64| v.load(Ordering::Relaxed) as f64;
        let cfg = self.config();
        let host = self.host_label();
        let mut w = Writer::new();
        crate::build_info::build_info(&mut w, "alloy", VERSION, "go1.24.1", "builtinassets");
        w.family("alloy_config_last_load_successful", "gauge", "Config loaded successfully.").sample(
            "alloy_config_last_load_successful",
            &[],
            f64::from(u8::from(m.config_ok.load(Ordering::Relaxed))),
        );
        w.family("alloy_config_load_failures_total", "counter", "Config failed to load.").sample(
            "alloy_config_load_failures_total",
            &[],
            n(&m.config_failures),
        );
        let source = [("component_id", cfg.source_id.as_str()), ("component_path", "/")];
        w.family("loki_source_journal_target_lines_total", "counter", "Total number of successful journal lines read")
            .sample("loki_source_journal_target_lines_total", &source, n(&m.lines_read));
        w.family(
            "loki_source_journal_target_parsing_errors_total",
            "counter",
            "Total number of parsing errors while reading journal messages",
        );
        let errors = m.parse_errors.load(Ordering::Relaxed);
        if errors > 0 {
            let labels = sorted(vec![source[0], source[1], ("error", "read_error")]);
            w.sample("loki_source_journal_target_parsing_errors_total", &labels, errors as f64);
        }
        if m.seen_entry.load(Ordering::Relaxed) {
            let base = vec![
                ("component_id", cfg.writer_id.as_str()),
                ("component_path", "/"),
                ("host", host.as_str()),
                ("tenant", ""),
            ];
            self.write_counters(&mut w, &base);
        }
        self.write_durations(&mut w, &cfg.writer_id, &host);
        w.finish()
    }

    /// The `loki_write_*` counters, by `host` and `tenant` (and `reason` for drops).
    fn write_counters(&self, w: &mut Writer, base: &[(&str, &str)]) {
        let m = &self.metrics;
        let n = |v: &AtomicU64| v.load(Ordering::Relaxed) as f64;
        for (name, help, v) in [
            ("loki_write_encoded_bytes_total", "Number of bytes encoded and ready to send.", &m.encoded_bytes),
            ("loki_write_sent_bytes_total", "Number of bytes sent.", &m.sent_bytes),
            ("loki_write_sent_entries_total", "Number of log entries sent to the ingester.", &m.sent_entries),
            ("loki_write_batch_retries_total", "Number of times batches has had to be retried.", &m.retries),
        ] {
            w.family(name, "counter", help).sample(name, &sorted(base.to_vec()), n(v));
        }
        let dropped = m.dropped.lock().map(|d| d.clone()).unwrap_or_default();
        for (name, help, bytes) in [
            (
                "loki_write_dropped_entries_total",
                "Number of log entries dropped because failed to be sent to the ingester after all retries.",
                false,
            ),
            (
                "loki_write_dropped_bytes_total",
                "Number of bytes dropped because failed to be sent to the ingester after all retries.",
                true,
            ),
        ] {
            w.family(name, "counter", help);
            // Alloy v1.9.0's reasons (v1.18.1 adds queue_is_full).
            for reason in ["ingester_error", "line_too_long", "rate_limited", "stream_limited"] {
                let (entries, size) = dropped.get(reason).copied().unwrap_or((0, 0));
                let mut labels = base.to_vec();
                labels.push(("reason", reason));
                w.sample(name, &sorted(labels), (if bytes { size } else { entries }) as f64);
            }
        }
    }

    /// `loki_write_request_duration_seconds` by `status_code` (`-1` for a connection error);
    /// no family before the first request.
    fn write_durations(&self, w: &mut Writer, writer_id: &str, host: &str) {
        let histogram = "loki_write_request_duration_seconds";
        let Ok(durations) = self.metrics.durations.lock() else { return };
        if durations.is_empty() {
            return;
        }
        w.family(histogram, "histogram", "Duration of send requests.");
        for (status, h) in durations.iter() {
            let labels = sorted(vec![
                ("component_id", writer_id),
                ("component_path", "/"),
                ("host", host),
                ("status_code", status.as_str()),
                ("tenant", ""),
            ]);
            let mut cumulative = 0;
            for (i, le) in BUCKETS.iter().enumerate() {
                cumulative += h.counts[i];
                let le = le.to_string();
                let mut with_le = labels.clone();
                with_le.push(("le", le.as_str()));
                w.sample(&format!("{histogram}_bucket"), &with_le, cumulative as f64);
            }
            let mut with_le = labels.clone();
            with_le.push(("le", "+Inf"));
            w.sample(&format!("{histogram}_bucket"), &with_le, h.count as f64);
            w.sample(&format!("{histogram}_sum"), &labels, h.sum);
            w.sample(&format!("{histogram}_count"), &labels, h.count as f64);
        }
    }
}
