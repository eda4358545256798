//! Loki's YAML configuration file (`-config.file=PATH`), read as Loki 3.4 reads it: strictly,
//! so a key Loki does not know is `field X not found in type T` at its line, a value of the
//! wrong kind `cannot unmarshal !!str `abc` into int`, all of them listed under `yaml:
//! unmarshal errors:`; then checked as Loki checks a loaded config (`validating config`).
//!
//! The sections the twin uses are checked key by key (`server`, `common`, `schema_config`,
//! `limits_config`, `analytics`; the keys and their Go types are in `loki_keys`); Loki's
//! other sections are accepted whole (`ingester`, `storage_config`, …): the twin has nothing
//! to configure there.

use std::collections::BTreeMap;
use std::time::Duration;

use saphyr::{MarkedYaml, ScalarStyle, YamlData, YamlLoader};

use super::loki_keys::TOP;
use super::loki_keys::Ty::{self, *};

/// The values of a Loki config file the twin uses (Loki's defaults where the file is silent).
#[derive(Debug, Clone, PartialEq)]
pub struct LokiFile {
    /// `auth_enabled`.
    pub auth_enabled: bool,
    /// Empty: every interface.
    pub http_listen_address: String,
    /// `server.http_listen_port`.
    pub http_listen_port: u16,
    /// `server.grpc_listen_port`.
    pub grpc_listen_port: u16,
    /// `server.log_level`.
    pub log_level: String,
    /// `common.path_prefix`.
    pub path_prefix: String,
    /// `common.replication_factor`.
    pub replication_factor: u32,
    /// `common.ring.kvstore.store`.
    pub kvstore: String,
    /// `common.storage.filesystem.chunks_directory`.
    pub chunks_directory: String,
    /// `common.storage.filesystem.rules_directory`.
    pub rules_directory: String,
    /// `schema_config.configs`, in order.
    pub periods: Vec<Period>,
    /// Zero: kept for ever (the twin then keeps its own window).
    pub retention_period: Duration,
    /// `analytics.reporting_enabled`.
    pub reporting_enabled: bool,
}

/// One `schema_config.configs` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Period {
    /// `from`: the first day it applies to.
    pub from: String,
    /// `store`: the index store.
    pub store: String,
    /// `object_store`: where chunks are kept.
    pub object_store: String,
    /// `schema`: the schema's version.
    pub schema: String,
    pub(crate) index_prefix: String,
    pub(crate) index_period: Duration,
}

impl Default for LokiFile {
    /// What the twin shows without a file: a single-binary Loki on the filesystem.
    fn default() -> Self {
        LokiFile {
            auth_enabled: false,
            http_listen_address: String::new(),
            http_listen_port: 3100,
            grpc_listen_port: 9095,
            log_level: "info".into(),
            path_prefix: "/var/lib/loki".into(),
            replication_factor: 1,
            kvstore: "inmemory".into(),
            chunks_directory: "/var/lib/loki/chunks".into(),
            rules_directory: "/var/lib/loki/rules".into(),
            periods: vec![Period {
                from: "2020-10-24".into(),
                store: "tsdb".into(),
                object_store: "filesystem".into(),
                schema: "v13".into(),
                index_prefix: "index_".into(),
                index_period: Duration::from_secs(24 * 3600),
            }],
            retention_period: Duration::ZERO,
            reporting_enabled: false,
        }
    }
}

/// Parses a config text; the error is what follows `failed parsing config: ` (with the
/// file's name and, unless `expand_env`, Loki's hint about `-config.expand-env`).
pub fn parse(file: &str, text: &str, expand_env: bool) -> Result<LokiFile, String> {
    let hint = if expand_env {
        ""
    } else {
        ". Use `-config.expand-env=true` flag if you want to expand environment variables in your config file"
    };
    let mut loader: YamlLoader<'_, MarkedYaml<'_>> = YamlLoader::default();
    loader.early_parse(false);
    let mut parser = saphyr_parser::Parser::new_from_str(text);
    if let Some(e) = parser.load(&mut loader, true).err().or_else(|| loader.error().cloned()) {
        // Go's yaml gives the problem without the parser's context ("while parsing …, ").
        let info = e.info();
        let problem = match info.strip_prefix("while ") {
            Some(rest) => rest.split_once(", ").map_or(info, |(_, p)| p),
            None => info,
        };
        return Err(format!("{file}: yaml: line {}: {problem}{hint}", e.marker().line()));
    }
    let mut values = BTreeMap::new();
    if let Some(root) = loader.into_documents().into_iter().next() {
        let mut w = Walk { values: &mut values, errors: Vec::new() };
        let top = Struct("loki.ConfigWrapper", TOP);
        if let Err(fatal) = w.node(&root, &top, "") {
            return Err(format!("{file}: {fatal}{hint}"));
        }
        if !w.errors.is_empty() {
            return Err(format!("{file}: yaml: unmarshal errors:\n  {}{hint}", w.errors.join("\n  ")));
        }
    }
    Ok(from_values(&values))
}

/// Checks a loaded config as Loki does before it starts; the error is its `err=` text.
pub fn validate(f: &LokiFile) -> Result<(), String> {
    let mut errors = Vec::new();
    if f.periods.is_empty() {
        errors.push("must specify at least one schema configuration".to_string());
    }
    for p in &f.periods {
        let version = p.schema.trim_matches('v').parse::<u32>().unwrap_or(0);
        let problem = if p.store == "tsdb" && p.index_period != Duration::from_secs(24 * 3600) {
            Some("tsdb must always have periodic config for index set to 24h")
        } else if p.index_period.as_secs() % (24 * 3600) != 0 {
            Some("validating index tables: the table period must be a multiple of 24h (1h for schema v1)")
        } else if !(9..=13).contains(&version) {
            Some("invalid schema version")
        } else {
            None
        };
        if let Some(problem) = problem {
            errors.push(format!("validating period_config: {problem}"));
            break;
        }
    }
    let errors: Vec<String> = errors.into_iter().map(|e| format!("CONFIG ERROR: invalid schema config: {e}")).collect();
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors[0].clone()),
        _ => Err(format!("MULTIPLE CONFIG ERRORS FOUND, PLEASE READ CAREFULLY\n{}", errors.join("\n"))),
    }
}

/// Collects scalar values by dotted path (`server.http_listen_port`, `schema_config.configs.0.store`).
struct Walk<'v> {
    values: &'v mut BTreeMap<String, String>,
    errors: Vec<String>,
}

/// A scalar's YAML 1.1 tag as Go's yaml.v2 resolves it, and its text.
fn scalar(node: &MarkedYaml<'_>) -> Option<(&'static str, String)> {
    match &node.data {
        YamlData::Representation(text, style, _) => {
            let t = text.to_string();
            if *style != ScalarStyle::Plain {
                return Some(("!!str", t));
            }
            let tag = match t.as_str() {
                "" | "~" | "null" | "Null" | "NULL" => "!!null",
                "true" | "True" | "TRUE" | "false" | "False" | "FALSE" | "yes" | "Yes" | "YES" | "no" | "No" | "NO"
                | "on" | "On" | "ON" | "off" | "Off" | "OFF" | "y" | "Y" | "n" | "N" => "!!bool",
                _ if t.parse::<i64>().is_ok() => "!!int",
                _ if t.parse::<f64>().is_ok() => "!!float",
                _ => "!!str",
            };
            Some((tag, t))
        }
        YamlData::Value(v) => Some(("!!str", format!("{v:?}"))),
        _ => None,
    }
}

fn kind_tag(node: &MarkedYaml<'_>) -> &'static str {
    match &node.data {
        YamlData::Sequence(_) => "!!seq",
        YamlData::Mapping(_) => "!!map",
        _ => "!!str",
    }
}

impl Walk<'_> {
    fn mismatch(&mut self, node: &MarkedYaml<'_>, into: &str) {
        let line = node.span.start.line();
        match scalar(node) {
            Some((tag, text)) => self.errors.push(format!("line {line}: cannot unmarshal {tag} `{text}` into {into}")),
            None => self.errors.push(format!("line {line}: cannot unmarshal {} into {into}", kind_tag(node))),
        }
    }

    /// Reads `node` as `ty` at `path`; an error Loki's own unmarshalling raises (a bad
    /// duration, date or schema version) stops the reading.
    fn node(&mut self, node: &MarkedYaml<'_>, ty: &Ty, path: &str) -> Result<(), String> {
        if matches!(ty, Any) || scalar(node).is_some_and(|(tag, _)| tag == "!!null") {
            return Ok(());
        }
        match ty {
            Struct(name, fields) => {
                let YamlData::Mapping(map) = &node.data else {
                    self.mismatch(node, name);
                    return Ok(());
                };
                for (k, v) in map {
                    let key = scalar(k).map(|(_, t)| t).unwrap_or_default();
                    match fields.iter().find(|(f, _)| *f == key) {
                        Some((_, field)) => {
                            let inner = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                            self.node(v, field, &inner)?;
                        }
                        None => self
                            .errors
                            .push(format!("line {}: field {key} not found in type {name}", k.span.start.line())),
                    }
                }
            }
            Seq(item) => {
                let YamlData::Sequence(items) = &node.data else {
                    self.mismatch(node, "[]config.PeriodConfig");
                    return Ok(());
                };
                for (i, v) in items.iter().enumerate() {
                    self.node(v, item, &format!("{path}.{i}"))?;
                }
            }
            _ => {
                let Some((tag, text)) = scalar(node) else {
                    let into = match ty {
                        Int => "int",
                        Bool => "bool",
                        _ => "string",
                    };
                    self.mismatch(node, into);
                    return Ok(());
                };
                let ok = match ty {
                    Int => tag == "!!int",
                    Bool => tag == "!!bool",
                    Duration if model_duration(&text).is_none() => {
                        return Err(format!("not a valid duration string: {text:?}"));
                    }
                    Day if !is_day(&text) => {
                        return Err(format!(
                            "parsing time {text:?} as \"2006-01-02\": cannot parse {text:?} as \"2006\""
                        ));
                    }
                    Schema if text.trim_matches('v').parse::<u32>().is_err() => {
                        let digits = text.trim_matches('v');
                        return Err(format!(
                            "invalid schema version: strconv.Atoi: parsing {digits:?}: invalid syntax"
                        ));
                    }
                    _ => true,
                };
                if !ok {
                    self.mismatch(node, if matches!(ty, Int) { "int" } else { "bool" });
                    return Ok(());
                }
                self.values.insert(path.to_string(), text);
            }
        }
        Ok(())
    }
}

fn is_day(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && (1..=12).contains(&text[5..7].parse::<u32>().unwrap_or(0))
        && (1..=31).contains(&text[8..10].parse::<u32>().unwrap_or(0))
}

/// Prometheus' duration: `1y2w3d4h5m6s7ms` in that order, each part optional; `0` is zero.
pub(crate) fn model_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    const UNITS: [(&str, u64); 7] = [
        ("y", 365 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ];
    let (mut rest, mut ms, mut next_unit) = (text, 0u64, 0usize);
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = if rest.starts_with("ms") { "ms" } else { rest.get(..1)? };
        let at = UNITS.iter().position(|(u, _)| *u == unit)?;
        if at < next_unit {
            return None;
        }
        next_unit = at + 1;
        ms = ms.checked_add(n.checked_mul(UNITS[at].1)?)?;
        rest = &rest[unit.len()..];
    }
    Some(Duration::from_millis(ms))
}

fn from_values(v: &BTreeMap<String, String>) -> LokiFile {
    let text = |key: &str, default: &str| v.get(key).cloned().unwrap_or_else(|| default.to_string());
    let truth = |key: &str, default: bool| {
        v.get(key).map_or(default, |t| {
            matches!(t.as_str(), "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y")
        })
    };
    let mut periods = Vec::new();
    while v.keys().any(|k| k.starts_with(&format!("schema_config.configs.{}.", periods.len()))) {
        let p =
            |key: &str| v.get(&format!("schema_config.configs.{}.{key}", periods.len())).cloned().unwrap_or_default();
        periods.push(Period {
            from: p("from"),
            store: p("store"),
            object_store: p("object_store"),
            schema: p("schema"),
            index_prefix: p("index.prefix"),
            index_period: model_duration(&p("index.period")).unwrap_or_default(),
        });
    }
    let prefix = text("common.path_prefix", "");
    let under =
        |dir: &str, fallback: &str| if prefix.is_empty() { fallback.to_string() } else { format!("{prefix}/{dir}") };
    LokiFile {
        auth_enabled: truth("auth_enabled", true),
        http_listen_address: text("server.http_listen_address", ""),
        http_listen_port: text("server.http_listen_port", "3100").parse().unwrap_or(3100),
        grpc_listen_port: text("server.grpc_listen_port", "9095").parse().unwrap_or(9095),
        log_level: text("server.log_level", "info"),
        replication_factor: text("common.replication_factor", "3").parse().unwrap_or(3),
        kvstore: text("common.ring.kvstore.store", "consul"),
        chunks_directory: text("common.storage.filesystem.chunks_directory", &under("chunks", "")),
        rules_directory: text("common.storage.filesystem.rules_directory", &under("rules", "")),
        path_prefix: prefix,
        periods,
        retention_period: v.get("limits_config.retention_period").and_then(|t| model_duration(t)).unwrap_or_default(),
        reporting_enabled: truth("analytics.reporting_enabled", true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file the deploy runbook renders.
    pub(super) const TEMPLATE: &str = "auth_enabled: false\nserver:\n  http_listen_address: 0.0.0.0\n  http_listen_port: 3100\n  \
        grpc_listen_port: 9096\n  log_level: info\ncommon:\n  instance_addr: 127.0.0.1\n  path_prefix: /var/lib/loki\n  \
        storage:\n    filesystem:\n      chunks_directory: /var/lib/loki/chunks\n      rules_directory: /var/lib/loki/rules\n  \
        replication_factor: 1\n  ring:\n    kvstore:\n      store: inmemory\nschema_config:\n  configs:\n    - from: \"2024-01-01\"\n      \
        store: tsdb\n      object_store: filesystem\n      schema: v13\n      index:\n        prefix: index_\n        period: 24h\n\
        limits_config:\n  retention_period: 744h\nanalytics:\n  reporting_enabled: false\n";

    #[test]
    fn the_deploy_template_reads_whole() {
        let f = parse("loki.yaml", TEMPLATE, false).unwrap();
        let expected = LokiFile {
            auth_enabled: false,
            http_listen_address: "0.0.0.0".into(),
            http_listen_port: 3100,
            grpc_listen_port: 9096,
            log_level: "info".into(),
            path_prefix: "/var/lib/loki".into(),
            replication_factor: 1,
            kvstore: "inmemory".into(),
            chunks_directory: "/var/lib/loki/chunks".into(),
            rules_directory: "/var/lib/loki/rules".into(),
            periods: vec![Period {
                from: "2024-01-01".into(),
                store: "tsdb".into(),
                object_store: "filesystem".into(),
                schema: "v13".into(),
                index_prefix: "index_".into(),
                index_period: Duration::from_secs(86_400),
            }],
            retention_period: Duration::from_secs(744 * 3600),
            reporting_enabled: false,
        };
        assert_eq!(f, expected);
        assert_eq!(validate(&f), Ok(()));
    }

    #[test]
    fn unknown_fields_and_wrong_kinds_as_loki_lists_them() {
        let text = "server:\n  http_listen_port: abc\n  http_port: 1\nfoo: 1\ncommon:\n  ring:\n    kvstore:\n      backend: x\n";
        assert_eq!(
            parse("/etc/loki/config.yaml", text, false).unwrap_err(),
            "/etc/loki/config.yaml: yaml: unmarshal errors:\n  \
             line 2: cannot unmarshal !!str `abc` into int\n  \
             line 3: field http_port not found in type server.Config\n  \
             line 4: field foo not found in type loki.ConfigWrapper\n  \
             line 8: field backend not found in type kv.Config. \
             Use `-config.expand-env=true` flag if you want to expand environment variables in your config file"
        );
        assert_eq!(
            parse("c.yaml", "limits_config:\n  retention_period: 31 days\n", true).unwrap_err(),
            "c.yaml: not a valid duration string: \"31 days\""
        );
    }

    #[test]
    fn broken_yaml_names_its_line() {
        let err = parse("c.yaml", "server:\n  http_listen_port: 1\n bad: [\n", true).unwrap_err();
        assert_eq!(err, "c.yaml: yaml: line 3: did not find expected key");
    }

    #[test]
    fn validation_as_loki_words_it() {
        let text = TEMPLATE.replace("period: 24h", "period: 168h");
        let f = parse("c.yaml", &text, false).unwrap();
        assert_eq!(
            validate(&f).unwrap_err(),
            "CONFIG ERROR: invalid schema config: validating period_config: tsdb must always have periodic config for index set to 24h"
        );
        assert_eq!(model_duration("1d12h"), Some(Duration::from_secs(36 * 3600)));
        assert_eq!(model_duration("12h1d"), None);
    }
}
