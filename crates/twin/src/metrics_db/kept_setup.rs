//! The setup of a metrics-db twin run as a process, kept across its restarts as influxd keeps
//! its own in its bolt file: when `bolt-path` is given (as the packaged influxd's
//! config.toml gives it), a successful `POST /api/v2/setup` writes what it made — user, org,
//! bucket, retention and the operator token — to that file (mode 0600, as the token is in it),
//! and a start finds it there and is set up again. Points stay in memory: a restart loses
//! them, its setup it keeps. Without `bolt-path` (the sandbox, most tests) nothing is written.

use std::path::Path;

use serde_json::{Value, json};

use super::database::MetricsDb;

/// Writes what setup made to `path` (beside it, then renamed); a failure is logged, not fatal:
/// the server is set up either way.
pub(super) fn keep(path: &str, username: &str, org: &str, bucket: &str, retention_s: u64, token: &str) {
    let kept =
        json!({"username": username, "org": org, "bucket": bucket, "retentionSeconds": retention_s, "token": token});
    let written = (|| {
        if let Some(dir) = Path::new(path).parent() {
            std::fs::create_dir_all(dir)?;
        }
        opsbook_base::write_atomically(Path::new(path), kept.to_string().as_bytes(), 0o600)
    })();
    if let Err(e) = written {
        tracing::warn!("the metrics-db twin could not keep its setup in {path}: {e}");
    }
}

impl MetricsDb {
    /// Sets the server up again as the setup kept in `path` says; nothing when there is none.
    pub fn restore_setup(&self, path: &str) {
        let Ok(text) = std::fs::read_to_string(path) else { return };
        let Ok(kept) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!("the metrics-db twin ignores {path}: not a setup it kept");
            return;
        };
        let field = |k: &str| kept.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let retention = kept.get("retentionSeconds").and_then(Value::as_u64).unwrap_or(0);
        let token = Some(field("token")).filter(|t| !t.is_empty());
        if let Err((_, e)) = self.onboard(&field("username"), &field("org"), &field("bucket"), retention, token) {
            tracing::warn!("the metrics-db twin could not restore its setup from {path}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics_db::Options;

    #[test]
    fn a_kept_setup_sets_a_fresh_server_up_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib/influxd.bolt").display().to_string();
        keep(&path, "admin", "opsbook", "telegraf", 0, "kept-token-1");
        let db = MetricsDb::fresh(Options::default(), crate::logger::discard());
        assert!(db.onboarding_allowed());
        db.restore_setup(&path);
        assert!(!db.onboarding_allowed(), "set up from {path}");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        let other = MetricsDb::fresh(Options::default(), crate::logger::discard());
        other.restore_setup(&dir.path().join("none").display().to_string());
        assert!(other.onboarding_allowed(), "no file: still fresh");
    }
}
