//! The metrics-db twin's description of itself, as InfluxDB 2 writes it: the runtime
//! configuration of `GET /api/v2/config` (where `engine-path` says where data lives). The
//! bucket and org lists are tenancy's (`tenant`, `tenant_http`).

use serde_json::{Value, json};

use super::database::MetricsDb;

impl MetricsDb {
    pub(super) fn config_json(&self) -> Value {
        let o = &self.options;
        let port = o.listen.rsplit_once(':').map_or("8086", |(_, p)| p);
        let bind = o.http_bind_address.clone().unwrap_or_else(|| format!(":{port}"));
        let pairs: Vec<(&str, Value)> = vec![
            ("assets-path", json!("")),
            ("bolt-path", json!(o.bolt_path)),
            ("e2e-testing", json!(false)),
            ("engine-path", json!(o.engine_path)),
            ("feature-flags", json!(null)),
            ("flux-log-enabled", json!(false)),
            ("hardening-enabled", json!(false)),
            ("http-bind-address", json!(bind)),
            ("http-idle-timeout", json!(180_000_000_000u64)),
            ("http-read-header-timeout", json!(10_000_000_000u64)),
            ("http-read-timeout", json!(0)),
            ("http-write-timeout", json!(0)),
            ("influxql-max-select-buckets", json!(0)),
            ("influxql-max-select-point", json!(0)),
            ("influxql-max-select-series", json!(0)),
            ("instance-id", json!("")),
            ("log-level", json!(o.log_level)),
            ("metrics-disabled", json!(false)),
            ("no-tasks", json!(false)),
            ("pprof-disabled", json!(false)),
            ("query-concurrency", json!(1024)),
            ("query-initial-memory-bytes", json!(0)),
            ("query-max-memory-bytes", json!(0)),
            ("query-memory-bytes", json!(0)),
            ("query-queue-size", json!(1024)),
            ("reporting-disabled", json!(o.reporting_disabled)),
            ("secret-store", json!("bolt")),
            ("session-length", json!(60)),
            ("session-renew-disabled", json!(false)),
            ("sqlite-path", json!("/var/lib/influxdb2/influxd.sqlite")),
            ("storage-cache-max-memory-size", json!(1_073_741_824u64)),
            ("storage-retention-check-interval", json!(1_800_000_000_000u64)),
            ("storage-wal-fsync-delay", json!(0)),
            ("store", json!("disk")),
            ("testing-always-allow-setup", json!(false)),
            ("tls-cert", json!("")),
            ("tls-key", json!("")),
            ("tls-min-version", json!("1.2")),
            ("tls-strict-ciphers", json!(false)),
            ("tracing-type", json!("")),
            ("ui-disabled", json!(false)),
            ("vault-addr", json!("")),
        ];
        let config: serde_json::Map<String, Value> = pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        json!({"config": config})
    }
}
