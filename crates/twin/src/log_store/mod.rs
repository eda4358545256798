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
//! `state` holds the state, `serve` serves the routes; `ingest` stores pushes, `select`
//! answers queries, `http` the routes, `metrics`, `config` and `stats` the bodies of those
//! answers. `loki_file` reads Loki's own YAML config file (`-config.file`; its keys in
//! `loki_keys`).

mod config;
mod http;
mod ingest;
mod logql;
mod loki3;
pub mod loki_file;
mod loki_keys;
mod metrics;
mod select;
mod serve;
mod state;
mod stats;
mod voice;

pub use state::{LogStore, Options};

/// What the store's unit tests build their cases from.
#[cfg(test)]
mod test_support {
    use std::sync::Arc;
    use std::time::Duration;

    use super::state::{Labels, LogStore, Options};
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
