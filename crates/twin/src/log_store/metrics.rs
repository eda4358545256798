//! The log-store twin's `GET /metrics`: Loki's ingestion counters in Prometheus exposition
//! text (written by `opsbook_wire::exposition::Writer`), with the names, help texts and labels
//! of Loki 3.4.6 (`metrics-excerpt.txt`), plus two of the twin's own.

use std::sync::atomic::Ordering;

use super::state::{LogStore, VERSION};
use opsbook_wire::exposition::Writer;

impl LogStore {
    /// The `/metrics` exposition text.
    pub(crate) fn metrics_text(&self) -> String {
        let c = &self.counters;
        let n = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed) as f64;
        let (streams, entries) = self
            .data
            .read()
            .map(|d| (d.streams.len(), d.streams.values().map(|s| s.entries.len()).sum::<usize>()))
            .unwrap_or((0, 0));
        let version = format!("v{VERSION}");
        let mut w = Writer::new();
        crate::build_info::build_info(&mut w, "loki", &version, "go1.23.5", "netgo");
        w.family(
            "loki_distributor_bytes_received_total",
            "counter",
            "The total number of uncompressed bytes received per tenant. Includes structured metadata bytes.",
        )
        .sample(
            "loki_distributor_bytes_received_total",
            &[("aggregated_metric", "false"), ("retention_hours", ""), ("tenant", "fake")],
            n(&c.bytes_received),
        );
        w.family("loki_distributor_lines_received_total", "counter", "The total number of lines received per tenant")
            .sample(
                "loki_distributor_lines_received_total",
                &[("aggregated_metric", "false"), ("tenant", "fake")],
                n(&c.lines_received),
            );
        // 0 until the first push creates a chunk, as a freshly started Loki shows it.
        w.family(
            "loki_ingester_chunks_created_total",
            "counter",
            "The total number of chunks created in the ingester.",
        )
        .sample("loki_ingester_chunks_created_total", &[], n(&c.chunks_created));
        w.family("loki_ingester_memory_streams", "gauge", "The total number of streams in memory per tenant.").sample(
            "loki_ingester_memory_streams",
            &[("tenant", "fake")],
            streams as f64,
        );
        w.family("loki_ingester_streams_created_total", "counter", "The total number of streams created per tenant.")
            .sample("loki_ingester_streams_created_total", &[("tenant", "fake")], n(&c.streams_created));
        w.family("loki_ingester_entries_in_memory", "gauge", "Log entries held in memory by the opsbook twin.").sample(
            "loki_ingester_entries_in_memory",
            &[],
            entries as f64,
        );
        w.family("loki_request_total", "counter", "Requests handled by the opsbook twin, by route.")
            .sample("loki_request_total", &[("route", "loki_api_v1_push")], n(&c.push_requests))
            .sample("loki_request_total", &[("route", "loki_api_v1_query_range")], n(&c.queries));
        w.finish()
    }
}
