//! The log-store twin's `GET /config`: the running configuration as Loki writes it (YAML,
//! the sections operators read, in Loki's layout), whose `schema_config.configs[*].object_store`
//! names the storage backend (`config.yaml`).

use std::time::Duration;

use super::LogStore;

impl LogStore {
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

#[cfg(test)]
mod tests {
    use super::super::Options;
    use super::*;
    use crate::twin::logger;

    #[test]
    fn config_names_the_backend() {
        let s = LogStore::new(Options { object_store: "s3".into(), ..Options::default() }, logger::discard());
        assert_eq!(crate::wire::loki_config::object_stores(&s.config_yaml()), vec!["s3".to_string()]);
    }
}
