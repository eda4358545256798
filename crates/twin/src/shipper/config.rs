//! The log-shipper twin's config, a small TOML file (every key optional):
//!
//! ```toml
//! [server]
//! listen = "127.0.0.1:12345"        # /metrics, /-/ready, /-/reload
//!
//! [journal]
//! units = ["loki.service"]          # units to follow; empty or absent: every entry
//! user = false                      # read the user's journal (journalctl --user)
//!
//! [labels]                          # on every stream, beside `unit`
//! service_type = "journal"
//! hostname = ""                     # "" = this machine's name
//!
//! [write]
//! url = "http://127.0.0.1:3100/loki/api/v1/push"
//! format = "protobuf"               # snappy-compressed protobuf, as Alloy sends; or "json"
//! batch_wait = "1s"                 # send a batch this long after its first entry…
//! batch_size = 1048576              # …or once it holds this many bytes
//! timeout = "10s"
//! max_retries = 10                  # then the batch is dropped (counted in /metrics)
//! min_backoff = "500ms"
//! max_backoff = "5m"
//!
//! [logging]                         # the shipper's own lines, as Alloy's `logging` block
//! level = "debug"                   # debug, info, warn, error
//! format = "logfmt"                 # or "json"
//!
//! [storage]
//! path = ""                         # where positions.yml is kept ("": none; the journal is
//!                                   # then read from `max_age` back at every start)
//! max_age = "7h"                    # how far back a start without a position reads
//! ```
//!
//! `validate` (like `alloy validate`) reports every problem at its `file:line:col`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::logger::Level;
use crate::toml_check::{self, Checker};
use opsbook_base::Diagnostic;

/// A complete config, shown by `opsbook twin log-shipper --help` (and tested to load).
pub const EXAMPLE: &str = r#"# Config file (TOML); every key is optional.
[server]
listen = "127.0.0.1:12345"        # /metrics, /-/ready, /-/reload

[journal]
units = ["loki.service"]          # units to follow; empty or absent: every entry
user = false                      # read the user's journal (journalctl --user)

[labels]                          # on every stream, beside `unit`
service_type = "journal"
hostname = ""                     # "" = this machine's name

[write]
url = "http://127.0.0.1:3100/loki/api/v1/push"
format = "protobuf"               # snappy-compressed protobuf, as Alloy sends; or "json"
batch_wait = "1s"                 # send a batch this long after its first entry...
batch_size = 1048576              # ...or once it holds this many bytes
timeout = "10s"
max_retries = 10                  # then the batch is dropped (counted in /metrics)
min_backoff = "500ms"
max_backoff = "5m"
"#;

/// How pushes are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/x-protobuf`, snappy-compressed (Loki's own).
    Protobuf,
    /// `application/json`.
    Json,
}

#[derive(Debug, Clone, PartialEq)]
/// A shipper's config as the twin runs it, from its TOML or Alloy file.
pub struct ShipperConfig {
    /// The address its own HTTP server listens on.
    pub listen: String,
    /// The systemd units whose journal it follows.
    pub units: Vec<String>,
    /// Whether they are the user's units.
    pub user: bool,
    /// Static labels, `hostname` included, sorted by name.
    pub labels: Vec<(String, String)>,
    /// The log store's push URL.
    pub url: String,
    /// How pushes are encoded.
    pub format: Format,
    /// How long lines are gathered before a push.
    pub batch_wait: Duration,
    pub(crate) batch_size: usize,
    /// How long one push may take.
    pub timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) min_backoff: Duration,
    pub(crate) max_backoff: Duration,
    /// Whether anything follows the journal (an Alloy file without `loki.source.journal`
    /// reads nothing).
    pub follow: bool,
    /// Each stream also gets the entry's `unit` (the TOML config's pipeline; an Alloy
    /// pipeline without relabel rules pushes only its configured labels).
    pub(crate) unit_label: bool,
    /// The least severe of the shipper's own lines written (Alloy's `logging { level }`).
    pub log_level: Level,
    /// Its own lines as JSON objects instead of logfmt (`logging { format = "json" }`).
    pub(crate) log_json: bool,
    /// Alloy's `--storage.path`: positions are kept under it (none: not kept).
    pub storage_path: Option<std::path::PathBuf>,
    /// `loki.source.journal`'s `max_age`: how far back a start without a position reads
    /// (Alloy v1.9.0 `types.go`: 7 h).
    pub max_age: Duration,
    /// The journal source's component id (`loki.source.journal.LABEL`).
    pub source_id: String,
    /// The writer's component id (`loki.write.LABEL`).
    pub writer_id: String,
}

impl Default for ShipperConfig {
    fn default() -> Self {
        ShipperConfig {
            listen: "127.0.0.1:12345".into(),
            units: Vec::new(),
            user: false,
            labels: vec![("hostname".into(), opsbook_world::this_machine()), ("service_type".into(), "journal".into())],
            url: "http://127.0.0.1:3100/loki/api/v1/push".into(),
            format: Format::Protobuf,
            batch_wait: Duration::from_secs(1),
            batch_size: 1 << 20,
            timeout: Duration::from_secs(10),
            max_retries: 10,
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(300),
            follow: true,
            unit_label: true,
            log_level: Level::Debug,
            log_json: false,
            storage_path: None,
            max_age: Duration::from_secs(7 * 3600),
            source_id: "loki.source.journal.read".into(),
            writer_id: "loki.write.default".into(),
        }
    }
}

/// Reads and checks a config file.
pub fn load(path: &Path) -> Result<ShipperConfig, Vec<Diagnostic>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![Diagnostic::at(format!("cannot read the shipper config: {e}"), &shown, None, 0, 0)])?;
    parse(&shown, &text)
}

/// Checks a config text; every problem is a located diagnostic.
pub fn parse(file: &str, text: &str) -> Result<ShipperConfig, Vec<Diagnostic>> {
    let doc = toml_check::parse(file, text).map_err(|d| vec![d])?;
    let root = doc.get_ref();
    let mut c = Checker::new(file, text);
    let mut cfg = ShipperConfig::default();
    c.only(root, &["server", "journal", "labels", "write", "logging", "storage"], "the top level");
    logging_section(&mut c, root, &mut cfg);
    storage_section(&mut c, root, &mut cfg);

    if let Some((server, _)) = c.table(root, "server") {
        c.only(server, &["listen"], "[server]");
        if let Some(listen) = c.string(server, "listen") {
            if listen.parse::<SocketAddr>().is_err() {
                let span = Checker::span_of(server, "listen").unwrap_or(0..0);
                c.error(span, format!("`listen` must be an address like 127.0.0.1:12345, not `{listen}`"));
            }
            cfg.listen = listen;
        }
    }

    if let Some((journal, _)) = c.table(root, "journal") {
        c.only(journal, &["units", "user"], "[journal]");
        if let Some(units) = c.strings(journal, "units") {
            if units.iter().any(|u| u.trim().is_empty()) {
                let span = Checker::span_of(journal, "units").unwrap_or(0..0);
                c.error(span, "`units` must not hold empty names");
            }
            cfg.units = units;
        }
        cfg.user = c.bool(journal, "user").unwrap_or(false);
    }

    if let Some((labels, _)) = c.table(root, "labels") {
        let mut found = Vec::new();
        for (k, v, span) in c.string_map(labels) {
            if !opsbook_wire::loki::valid_label_name(&k) {
                c.error(
                    span.clone(),
                    format!("label name `{k}` is not valid (letters, digits and _, not first a digit)"),
                );
            }
            if k == "unit" {
                c.error(span, "label `unit` is set from each journal entry; choose another name");
                continue;
            }
            let v = if k == "hostname" && v.is_empty() { opsbook_world::this_machine() } else { v };
            found.push((k, v));
        }
        if !found.iter().any(|(k, _)| k == "hostname") {
            found.push(("hostname".into(), opsbook_world::this_machine()));
        }
        found.sort();
        cfg.labels = found;
    }

    write_section(&mut c, root, &mut cfg);
    if c.errors.is_empty() { Ok(cfg) } else { Err(c.errors) }
}

/// `[write]`: where and how batches go.
fn write_section<'a>(c: &mut Checker<'a>, root: &toml::de::DeTable<'a>, cfg: &mut ShipperConfig) {
    let Some((write, _)) = c.table(root, "write") else { return };
    c.only(
        write,
        &["url", "format", "batch_wait", "batch_size", "timeout", "max_retries", "min_backoff", "max_backoff"],
        "[write]",
    );
    if let Some(url) = c.string(write, "url") {
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
            let span = Checker::span_of(write, "url").unwrap_or(0..0);
            c.error(span, format!("`url` must be an http:// or https:// address, not `{url}`"));
        }
        cfg.url = url;
    }
    match c.string(write, "format").as_deref() {
        None | Some("protobuf") => {}
        Some("json") => cfg.format = Format::Json,
        Some(other) => {
            let span = Checker::span_of(write, "format").unwrap_or(0..0);
            c.error(span, format!("`format` must be \"protobuf\" or \"json\", not `{other}`"));
        }
    }
    if let Some(d) = c.duration(write, "batch_wait") {
        cfg.batch_wait = d;
    }
    if let Some(n) = c.int(write, "batch_size", 1) {
        cfg.batch_size = n as usize;
    }
    if let Some(d) = c.duration(write, "timeout") {
        cfg.timeout = d;
    }
    if let Some(n) = c.int(write, "max_retries", 0) {
        cfg.max_retries = n.min(1000) as u32;
    }
    if let Some(d) = c.duration(write, "min_backoff") {
        cfg.min_backoff = d;
    }
    if let Some(d) = c.duration(write, "max_backoff") {
        cfg.max_backoff = d;
    }
    if cfg.max_backoff < cfg.min_backoff {
        let span = Checker::span_of(write, "max_backoff").unwrap_or(0..0);
        c.error(span, "`max_backoff` must not be shorter than `min_backoff`");
    }
}

/// `[logging]`: Alloy's `logging { level, format }` (v1.9.0
/// `internal/runtime/logging/options.go`), in the same words when a value is wrong.
fn logging_section<'a>(c: &mut Checker<'a>, root: &toml::de::DeTable<'a>, cfg: &mut ShipperConfig) {
    let Some((logging, _)) = c.table(root, "logging") else { return };
    c.only(logging, &["level", "format"], "[logging]");
    if let Some(level) = c.string(logging, "level") {
        cfg.log_level = match level.as_str() {
            "debug" => Level::Debug,
            "info" => Level::Info,
            "warn" => Level::Warn,
            "error" => Level::Error,
            other => {
                let span = Checker::span_of(logging, "level").unwrap_or(0..0);
                c.error(span, format!("unrecognized log level {other:?}"));
                cfg.log_level
            }
        };
    }
    match c.string(logging, "format").as_deref() {
        None | Some("logfmt") => {}
        Some("json") => cfg.log_json = true,
        Some(other) => {
            let span = Checker::span_of(logging, "format").unwrap_or(0..0);
            c.error(span, format!("unrecognized log format {other:?}"));
        }
    }
}

/// `[storage]`: the data folder (Alloy's `--storage.path`) and the journal's `max_age`.
fn storage_section<'a>(c: &mut Checker<'a>, root: &toml::de::DeTable<'a>, cfg: &mut ShipperConfig) {
    let Some((storage, _)) = c.table(root, "storage") else { return };
    c.only(storage, &["path", "max_age"], "[storage]");
    if let Some(path) = c.string(storage, "path").filter(|p| !p.is_empty()) {
        cfg.storage_path = Some(path.into());
    }
    if let Some(d) = c.duration(storage, "max_age") {
        cfg.max_age = d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_a_full_file() {
        let c = parse("s.toml", "").unwrap();
        assert_eq!(c.listen, "127.0.0.1:12345");
        assert!(c.labels.iter().any(|(k, _)| k == "hostname"));
        let c = parse(
            "s.toml",
            "[journal]\nunits = [\"loki.service\"]\n[labels]\nservice_type = \"test\"\nhostname = \"h1\"\n[write]\nformat = \"json\"\nbatch_wait = \"100ms\"\n",
        )
        .unwrap();
        assert_eq!(c.units, vec!["loki.service"]);
        assert_eq!(c.labels, vec![("hostname".into(), "h1".into()), ("service_type".into(), "test".into())]);
        assert_eq!((c.format, c.batch_wait), (Format::Json, Duration::from_millis(100)));
    }

    #[test]
    fn the_documented_example_loads() {
        let c = parse("example.toml", EXAMPLE).unwrap();
        assert_eq!((c.units.len(), c.format), (1, Format::Protobuf));
    }

    #[test]
    fn every_problem_is_located() {
        let bad = "[server]\nlisten = \"12345\"\n[labels]\n\"bad-name\" = \"x\"\nunit = \"y\"\n[write]\nurl = \"loki:3100\"\nformat = \"xml\"\nbatchwait = \"1s\"\n";
        let errors = parse("s.toml", bad).unwrap_err();
        let at: Vec<String> = errors.iter().map(|d| format!("{}:{} {}", d.line, d.column, d.message)).collect();
        assert_eq!(errors.len(), 6, "{at:?}");
        assert!(at[0].starts_with("2:10 `listen`"), "{at:?}");
        assert!(at.iter().any(|a| a.starts_with("4:1 label name `bad-name`")), "{at:?}");
        assert!(at.iter().any(|a| a.starts_with("5:1 label `unit`")), "{at:?}");
        assert!(at.iter().any(|a| a.starts_with("7:7 `url`")), "{at:?}");
        assert!(at.iter().any(|a| a.starts_with("8:10 `format`")), "{at:?}");
        assert!(at.iter().any(|a| a.starts_with("9:1 unknown key `batchwait`") && a.contains("batch_wait")), "{at:?}");
    }
}
