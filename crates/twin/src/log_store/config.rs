//! The log-store twin's `GET /config`: the running configuration as Loki writes it (YAML,
//! the sections operators read, in Loki's layout), whose `schema_config.configs[*].object_store`
//! names the storage backend (`config.yaml`).

use std::time::Duration;

use super::state::LogStore;

impl LogStore {
    /// The `/config` YAML: the sections operators read, in Loki's layout.
    pub(crate) fn config_yaml(&self) -> String {
        let (address, port) = self.options.listen.rsplit_once(':').unwrap_or(("127.0.0.1", "3100"));
        let o = &self.options;
        let f = &o.file;
        let mut periods = String::new();
        for p in &f.periods {
            periods.push_str(&format!(
                "  - from: \"{}\"\n    store: {}\n    object_store: {}\n    schema: {}\n    index:\n      \
                 path_prefix: index/\n      prefix: {}\n      period: {}\n      tags: {{}}\n    chunks:\n      \
                 prefix: \"\"\n      period: 0s\n      tags: {{}}\n    row_shards: 16\n",
                p.from,
                p.store,
                p.object_store,
                p.schema,
                p.index_prefix,
                model_duration_text(p.index_period),
            ));
        }
        format!(
            "target: all\nauth_enabled: {}\nhttp_prefix: \"\"\nserver:\n  http_listen_network: tcp\n  \
             http_listen_address: {address}\n  http_listen_port: {port}\n  grpc_listen_port: {}\n  log_level: {}\n\
             common:\n  path_prefix: {}\n  replication_factor: {}\n  ring:\n    kvstore:\n      store: {}\n\
             storage_config:\n  filesystem:\n    directory: {}\n  s3:\n    endpoint: \"\"\n    bucketnames: \"\"\n\
             ruler_storage:\n  local:\n    directory: {}\ningester:\n  chunk_idle_period: {}\n  chunk_target_size: {}\n\
             limits_config:\n  reject_old_samples: true\n  reject_old_samples_max_age: {}\n  creation_grace_period: {}\n  \
             max_line_size: {}\n  retention_period: {}\nschema_config:\n  configs:\n{periods}analytics:\n  \
             reporting_enabled: {}\n",
            f.auth_enabled,
            f.grpc_listen_port,
            f.log_level,
            f.path_prefix,
            f.replication_factor,
            f.kvstore,
            f.chunks_directory,
            f.rules_directory,
            go_duration(o.chunk_idle),
            o.chunk_target_bytes,
            go_duration(o.reject_older_than),
            go_duration(o.creation_grace),
            o.max_line_size,
            go_duration(o.retention),
            f.reporting_enabled,
        )
    }
}

/// Prometheus' duration text, as Loki prints a schema period (`1d`, `12h`).
fn model_duration_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".into(),
        _ if s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        _ if s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
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
    use crate::logger;

    #[test]
    fn config_names_the_backend() {
        let mut file = super::super::loki_file::LokiFile::default();
        file.periods[0].object_store = "s3".into();
        let s = LogStore::new(Options { file, ..Options::default() }, logger::discard());
        assert_eq!(opsbook_wire::loki::object_stores(&s.config_yaml()), vec!["s3".to_string()]);
    }
}
