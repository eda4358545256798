//! Which storage backend a Loki runs on, read from its `GET /config` YAML: the
//! `object_store` of each `schema_config.configs` period, the last one being in force.
//! Only that section is read, line by line, so no YAML library is needed.

/// The `object_store` of every schema period, in order.
pub fn object_stores(yaml: &str) -> Vec<String> {
    let mut stores = Vec::new();
    let mut in_schema = false;
    for line in yaml.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let top_level = !line.starts_with(' ') && !line.starts_with('-');
        if top_level {
            in_schema = line.trim_end() == "schema_config:";
            continue;
        }
        if in_schema && let Some(value) = line.trim().trim_start_matches("- ").strip_prefix("object_store:") {
            let value = value.trim().trim_matches('"').trim_matches('\'');
            if !value.is_empty() {
                stores.push(value.to_string());
            }
        }
    }
    stores
}

/// Whether a backend name is object storage (as opposed to a local filesystem).
pub fn is_object_storage(store: &str) -> bool {
    !matches!(store, "filesystem" | "local" | "inmemory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_captured_config() {
        let path =
            format!("{}/tests/fixtures/wire/loki-3.4.6/config.yaml", concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(object_stores(&text), vec!["filesystem"]);
    }

    #[test]
    fn last_period_wins_and_object_storage_is_recognised() {
        let yaml = "server:\n  http_listen_port: 3100\nschema_config:\n  configs:\n  - from: 2020-01-01\n    object_store: filesystem\n  - from: 2024-01-01\n    object_store: s3\nstorage_config:\n  aws:\n    object_store: nope\n";
        assert_eq!(object_stores(yaml), vec!["filesystem", "s3"]);
        assert!(is_object_storage("s3") && !is_object_storage("filesystem"));
    }
}
