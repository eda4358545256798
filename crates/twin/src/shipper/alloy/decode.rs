//! From parsed Alloy statements to the shipper's config, checking what `alloy validate`
//! checks, in its words: unknown components (`cannot find the definition of component
//! name`), unknown or repeated attributes and blocks, missing required attributes, values
//! of the wrong type (`expected string, got number`), bad durations and levels, and
//! references to components that do not exist (`component "…" does not exist or is out of
//! scope`).
//!
//! The twin runs one pipeline: the first `loki.source.journal` and the `loki.write` its
//! `forward_to` names (its first endpoint). Like Alloy without relabel rules, streams carry
//! the source's `labels` and the writer's `external_labels`, nothing else.

use std::collections::BTreeMap;
use std::time::Duration;

use super::diag::Diag;
use super::parse::{Attr, Block, Expr, Kind, Stmt};
use super::values::{base2_bytes, go_duration};
use crate::logger::Level;
use crate::shipper::config::ShipperConfig;

const COMPONENTS: [&str; 2] = ["loki.source.journal", "loki.write"];
const LOGGING: [&str; 4] = ["level", "format", "destination", "write_to"];
const JOURNAL: [&str; 7] = ["format_as_json", "max_age", "path", "relabel_rules", "matches", "forward_to", "labels"];
const WRITE: [&str; 2] = ["external_labels", "max_streams"];
const ENDPOINT: [&str; 11] = [
    "name",
    "url",
    "batch_wait",
    "batch_size",
    "remote_timeout",
    "headers",
    "min_backoff_period",
    "max_backoff_period",
    "max_backoff_retries",
    "tenant_id",
    "retry_on_http_429",
];

/// Checks `body` and builds the config; `file` names it in messages, `listen` is the
/// shipper's HTTP address (a command-line flag in Alloy, not part of the file).
pub(super) fn decode(file: &str, text: &str, body: &[Stmt], listen: &str) -> Result<ShipperConfig, Vec<Diag>> {
    let mut d = Decoder { file, text, diags: Vec::new(), refs: Vec::new() };
    let mut cfg = ShipperConfig {
        listen: listen.to_string(),
        labels: Vec::new(),
        unit_label: false,
        log_level: Level::Info,
        ..ShipperConfig::default()
    };
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let (mut writers, mut journals) = (BTreeMap::new(), Vec::new());
    // Alloy checks its configuration blocks (`logging`) before the components.
    for stmt in body.iter().filter(|s| matches!(s, Stmt::Block(b) if b.full_name() == "logging")) {
        let Stmt::Block(b) = stmt else { continue };
        if d.once(&mut seen, b) {
            d.logging(b, &mut cfg);
        }
    }
    for stmt in body {
        let b = match stmt {
            Stmt::Attr(a) => {
                d.diags.push(Diag::span(a.pos, a.value.end, "unsupported statement type *ast.AttributeStmt"));
                continue;
            }
            Stmt::Block(b) if b.full_name() == "logging" => continue,
            Stmt::Block(b) => b,
        };
        let name = b.full_name();
        if !COMPONENTS.contains(&name.as_str()) {
            let message = format!("cannot find the definition of component name {name:?}");
            d.diags.push(Diag::span(b.pos, b.pos + name.len() - 1, message));
            continue;
        }
        if b.label.is_none() {
            d.diags.push(Diag::span(b.pos, b.pos + name.len() - 1, format!("component {name:?} must have a label")));
            continue;
        }
        if !d.once(&mut seen, b) {
            continue;
        }
        if name == "loki.write" {
            writers.insert(b.id(), d.write(b));
        } else {
            journals.push((b.id(), d.journal(b)));
        }
    }
    d.check_refs(&seen);
    if !d.diags.is_empty() {
        return Err(d.diags);
    }
    cfg.follow = !journals.is_empty();
    if let Some((id, j)) = journals.into_iter().next() {
        cfg.source_id = id;
        cfg.units = j.units;
        cfg.labels = j.labels;
        if let Some(age) = j.max_age {
            cfg.max_age = age;
        }
        let writer = j.forward_to.iter().find(|to| writers.contains_key(to.trim_end_matches(".receiver")));
        if let Some(to) = writer
            && let Some(w) = writers.get(to.trim_end_matches(".receiver"))
        {
            cfg.writer_id = to.trim_end_matches(".receiver").to_string();
            for (k, v) in &w.external_labels {
                if !cfg.labels.iter().any(|(name, _)| name == k) {
                    cfg.labels.push((k.clone(), v.clone()));
                }
            }
            cfg.labels.sort();
            let e = &w.endpoint;
            (cfg.url, cfg.batch_wait, cfg.batch_size, cfg.timeout) = (e.url.clone(), e.wait, e.size, e.timeout);
            (cfg.min_backoff, cfg.max_backoff, cfg.max_retries) = (e.min_backoff, e.max_backoff, e.retries);
        }
    }
    Ok(cfg)
}

/// What one `loki.source.journal` contributes.
struct Journal {
    forward_to: Vec<String>,
    labels: Vec<(String, String)>,
    units: Vec<String>,
    /// `max_age` when given (Alloy's default is 7 h).
    max_age: Option<Duration>,
}

/// What one `loki.write` contributes (its first endpoint).
struct Writer {
    endpoint: Endpoint,
    external_labels: Vec<(String, String)>,
}

struct Endpoint {
    url: String,
    wait: Duration,
    size: usize,
    timeout: Duration,
    min_backoff: Duration,
    max_backoff: Duration,
    retries: u32,
}

impl Default for Endpoint {
    fn default() -> Self {
        let d = ShipperConfig::default();
        Endpoint {
            url: String::new(),
            wait: d.batch_wait,
            size: d.batch_size,
            timeout: d.timeout,
            min_backoff: d.min_backoff,
            max_backoff: d.max_backoff,
            retries: d.max_retries,
        }
    }
}

struct Decoder<'a> {
    file: &'a str,
    text: &'a str,
    diags: Vec<Diag>,
    /// References met in values, checked once every component is known, with the type the
    /// place wants when it is not a receiver (a receiver there is `got capsule`).
    refs: Vec<(Expr, Option<&'static str>)>,
}

impl Decoder<'_> {
    /// Records `b` as declared; false (and a diagnostic) when it was declared already.
    fn once(&mut self, seen: &mut BTreeMap<String, usize>, b: &Block) -> bool {
        if let Some(first) = seen.get(&b.id()) {
            let at = super::diag::line_col(self.text, *first);
            let name = b.full_name();
            let message = format!("block {} already declared at {}:{at}", b.id(), self.file);
            self.diags.push(Diag::span(b.pos, b.pos + name.len() - 1, message));
            return false;
        }
        seen.insert(b.id(), b.pos);
        true
    }

    /// The attributes of `b` by name, after reporting unknown, repeated and misplaced ones;
    /// blocks named in `blocks` are returned apart.
    fn members<'b>(
        &mut self,
        b: &'b Block,
        attrs: &[&str],
        blocks: &[&str],
    ) -> (BTreeMap<&'b str, &'b Attr>, Vec<&'b Block>) {
        let (mut found, mut inner) = (BTreeMap::new(), Vec::new());
        for stmt in &b.body {
            match stmt {
                Stmt::Attr(a) if blocks.contains(&a.name.as_str()) => self.diags.push(Diag::span(
                    a.pos,
                    a.value.end,
                    format!("{:?} must be a block, but is used as an attribute", a.name),
                )),
                Stmt::Attr(a) if !attrs.contains(&a.name.as_str()) => {
                    self.diags.push(Diag::span(a.pos, a.value.end, format!("unrecognized attribute name {:?}", a.name)))
                }
                Stmt::Attr(a) if found.contains_key(a.name.as_str()) => self.diags.push(Diag::span(
                    a.pos,
                    a.value.end,
                    format!("attribute {:?} may only be provided once", a.name),
                )),
                Stmt::Attr(a) => {
                    found.insert(a.name.as_str(), a);
                }
                Stmt::Block(inner_block) if blocks.contains(&inner_block.full_name().as_str()) => {
                    inner.push(inner_block)
                }
                Stmt::Block(other) => self.diags.push(Diag::span(
                    other.pos,
                    other.end,
                    format!("unrecognized block name {:?}", other.full_name()),
                )),
            }
        }
        (found, inner)
    }

    /// Puts the diagnostics recorded since `mark` in file order (Alloy decodes a block's
    /// statements in order), then reports a missing required attribute.
    fn required(&mut self, mark: usize, b: &Block, found: &BTreeMap<&str, &Attr>, name: &str) {
        self.diags[mark..].sort_by_key(|d| d.start);
        if !found.contains_key(name) {
            self.diags.push(Diag::span(b.pos, b.end, format!("missing required attribute {name:?}")));
        }
    }

    fn logging(&mut self, b: &Block, cfg: &mut ShipperConfig) {
        let mark = self.diags.len();
        let (found, _) = self.members(b, &LOGGING, &[]);
        if let Some(a) = found.get("level")
            && let Some(level) = self.string(&a.value)
        {
            match level.as_str() {
                "debug" => cfg.log_level = Level::Debug,
                "info" => cfg.log_level = Level::Info,
                "warn" => cfg.log_level = Level::Warn,
                "error" => cfg.log_level = Level::Error,
                other => self.invalid(&a.value, format!("unrecognized log level {other:?}")),
            }
        }
        if let Some(a) = found.get("format")
            && let Some(format) = self.string(&a.value)
        {
            match format.as_str() {
                "logfmt" => cfg.log_json = false,
                "json" => cfg.log_json = true,
                other => self.invalid(&a.value, format!("unrecognized log format {other:?}")),
            }
        }
        if let Some(a) = found.get("destination")
            && let Some(to) = self.string(&a.value)
            && to != "stderr"
            && to != "stdout"
        {
            self.invalid(&a.value, format!("unrecognized log destination {to:?}"));
        }
        if let Some(a) = found.get("write_to") {
            self.receivers(&a.value);
        }
        self.diags[mark..].sort_by_key(|d| d.start);
    }

    fn journal(&mut self, b: &Block) -> Journal {
        let mark = self.diags.len();
        let (found, _) = self.members(b, &JOURNAL, &[]);
        let mut j = Journal { forward_to: Vec::new(), labels: Vec::new(), units: Vec::new(), max_age: None };
        if let Some(a) = found.get("forward_to") {
            j.forward_to = self.receivers(&a.value);
        }
        if let Some(a) = found.get("labels") {
            j.labels = self.string_map(&a.value);
        }
        if let Some(a) = found.get("max_age") {
            j.max_age = self.duration(&a.value);
        }
        if let Some(a) = found.get("path") {
            self.string(&a.value);
        }
        if let Some(a) = found.get("format_as_json") {
            self.boolean(&a.value);
        }
        if let Some(a) = found.get("relabel_rules") {
            self.refs.push((a.value.clone(), None));
        }
        // `matches = "_SYSTEMD_UNIT=loki.service"` follows one unit, as journalctl would.
        if let Some(a) = found.get("matches")
            && let Some(m) = self.string(&a.value)
        {
            j.units = m
                .split_whitespace()
                .filter_map(|term| term.strip_prefix("_SYSTEMD_UNIT=").or_else(|| term.strip_prefix("UNIT=")))
                .map(str::to_string)
                .collect();
        }
        self.required(mark, b, &found, "forward_to");
        j
    }

    fn write(&mut self, b: &Block) -> Writer {
        let (found, endpoints) = self.members(b, &WRITE, &["endpoint", "wal"]);
        let mut w = Writer { endpoint: Endpoint::default(), external_labels: Vec::new() };
        if let Some(a) = found.get("external_labels") {
            w.external_labels = self.string_map(&a.value);
        }
        if let Some(a) = found.get("max_streams") {
            self.integer(&a.value);
        }
        for (i, e) in endpoints.iter().filter(|e| e.full_name() == "endpoint").enumerate() {
            let endpoint = self.endpoint(e);
            if i == 0 {
                w.endpoint = endpoint;
            }
        }
        w
    }

    fn endpoint(&mut self, b: &Block) -> Endpoint {
        let mark = self.diags.len();
        let (found, _) = self.members(b, &ENDPOINT, &["queue_config"]);
        let mut e = Endpoint::default();
        if let Some(a) = found.get("url")
            && let Some(url) = self.string(&a.value)
        {
            e.url = url;
        }
        let duration = |d: &mut Self, name: &str, into: &mut Duration| {
            if let Some(a) = found.get(name)
                && let Some(v) = d.duration(&a.value)
            {
                *into = v;
            }
        };
        duration(self, "batch_wait", &mut e.wait);
        duration(self, "remote_timeout", &mut e.timeout);
        duration(self, "min_backoff_period", &mut e.min_backoff);
        duration(self, "max_backoff_period", &mut e.max_backoff);
        if let Some(a) = found.get("batch_size")
            && let Some(text) = self.string(&a.value)
        {
            match base2_bytes(&text) {
                Some(n) => e.size = n.max(1),
                None => self.invalid(&a.value, format!("units: unknown unit in {text:?}")),
            }
        }
        if let Some(a) = found.get("max_backoff_retries")
            && let Some(n) = self.integer(&a.value)
        {
            // Zero is "retry for ever" in Alloy; the twin caps it as it caps the TOML key.
            e.retries = if n <= 0 { 1000 } else { n.min(1000) as u32 };
        }
        for name in ["name", "tenant_id"] {
            if let Some(a) = found.get(name) {
                self.string(&a.value);
            }
        }
        if let Some(a) = found.get("headers") {
            self.string_map(&a.value);
        }
        if let Some(a) = found.get("retry_on_http_429") {
            self.boolean(&a.value);
        }
        self.required(mark, b, &found, "url");
        e
    }

    fn invalid(&mut self, e: &Expr, message: String) {
        self.diags.push(Diag::span(e.start, e.end, message));
    }

    /// A value of the wrong type: `expected string, got number`. A reference is checked
    /// once every component is known: it does not exist, or it is a receiver (a capsule).
    fn mismatch(&mut self, e: &Expr, want: &'static str) {
        if let Kind::Other(what) = e.kind {
            let message = format!("the twin does not evaluate {what}s: write the {want} itself");
            return self.invalid(e, message);
        }
        if e.path().is_some() {
            return self.refs.push((e.clone(), Some(want)));
        }
        let got = match &e.kind {
            Kind::Str(_) => "string",
            Kind::Number(_) | Kind::Float(_) => "number",
            Kind::Bool(_) => "bool",
            Kind::Null => "null",
            Kind::Array(_) => "array",
            Kind::Object(_) => "object",
            Kind::Ident(_) | Kind::Access(..) | Kind::Other(_) => "capsule",
        };
        self.invalid(e, format!("expected {want}, got {got}"));
    }

    fn string(&mut self, e: &Expr) -> Option<String> {
        match &e.kind {
            Kind::Str(s) => Some(s.clone()),
            _ => {
                self.mismatch(e, "string");
                None
            }
        }
    }

    fn boolean(&mut self, e: &Expr) -> Option<bool> {
        match e.kind {
            Kind::Bool(b) => Some(b),
            _ => {
                self.mismatch(e, "bool");
                None
            }
        }
    }

    fn integer(&mut self, e: &Expr) -> Option<i64> {
        match &e.kind {
            Kind::Number(n) => n.parse().ok(),
            _ => {
                self.mismatch(e, "number");
                None
            }
        }
    }

    fn duration(&mut self, e: &Expr) -> Option<Duration> {
        let text = self.string(e)?;
        let parsed = go_duration(&text);
        if parsed.is_none() {
            self.invalid(e, format!("time: invalid duration {text:?}"));
        }
        parsed
    }

    /// An object of strings (`labels`, `external_labels`, `headers`), sorted by name.
    fn string_map(&mut self, e: &Expr) -> Vec<(String, String)> {
        let Kind::Object(fields) = &e.kind else {
            self.mismatch(e, "object");
            return Vec::new();
        };
        let mut out: Vec<(String, String)> =
            fields.iter().filter_map(|(k, v)| self.string(v).map(|v| (k.clone(), v))).collect();
        out.sort();
        out
    }

    /// A list of receivers (`forward_to`, `write_to`): their reference paths.
    fn receivers(&mut self, e: &Expr) -> Vec<String> {
        let Kind::Array(items) = &e.kind else {
            self.mismatch(e, "array");
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            match item.path() {
                Some(path) => {
                    self.refs.push((item.clone(), None));
                    out.push(path);
                }
                None => self.mismatch(item, "capsule"),
            }
        }
        out
    }

    /// Each reference names a declared component and one of its exports.
    fn check_refs(&mut self, declared: &BTreeMap<String, usize>) {
        for (r, want) in std::mem::take(&mut self.refs) {
            let path = r.path().unwrap_or_default();
            let owner = declared.keys().find(|id| path.starts_with(&format!("{id}.")) || path == **id);
            match owner {
                None => self.invalid(&r, format!("component {path:?} does not exist or is out of scope")),
                Some(id) => {
                    let export = path[id.len()..].trim_start_matches('.');
                    if !(id.starts_with("loki.write.") && export == "receiver") {
                        let field = export.split('.').next().unwrap_or(export);
                        self.invalid(&r, format!("field {field:?} does not exist"));
                    } else if let Some(want) = want {
                        self.invalid(&r, format!("expected {want}, got capsule"));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::diag::render;
    use super::*;

    const TEMPLATE: &str = "logging {\n  level  = \"info\"\n  format = \"logfmt\"\n}\n\n\
        loki.source.journal \"journal\" {\n  forward_to = [loki.write.default.receiver]\n  max_age    = \"12h\"\n  \
        labels     = {\n    service_type = \"journal\",\n    hostname     = \"c1\",\n  }\n}\n\n\
        loki.write \"default\" {\n  endpoint {\n    url        = \"http://10.0.0.1:3100/loki/api/v1/push\"\n    \
        batch_wait = \"1s\"\n  }\n}\n";

    fn run(text: &str) -> Result<ShipperConfig, String> {
        let (body, diags) = super::super::parse::parse(text);
        assert!(diags.is_empty(), "{diags:?}");
        decode("c.alloy", text, &body, "127.0.0.1:12345").map_err(|d| render("c.alloy", text, &d))
    }

    #[test]
    fn the_deploy_template_decodes() {
        let c = run(TEMPLATE).unwrap();
        let expected = ShipperConfig {
            listen: "127.0.0.1:12345".into(),
            labels: vec![("hostname".into(), "c1".into()), ("service_type".into(), "journal".into())],
            url: "http://10.0.0.1:3100/loki/api/v1/push".into(),
            unit_label: false,
            log_level: Level::Info,
            max_age: Duration::from_secs(12 * 3600),
            source_id: "loki.source.journal.journal".into(),
            writer_id: "loki.write.default".into(),
            ..ShipperConfig::default()
        };
        assert_eq!(c, expected);
        // Without a journal source nothing is read.
        let writer_only = &TEMPLATE[TEMPLATE.find("loki.write \"").unwrap()..];
        assert!(!run(writer_only).unwrap().follow);
    }

    #[test]
    fn problems_are_reported_in_alloys_words() {
        let text = "logging {\n  level = \"loud\"\n}\nloki.source.journl \"j\" {\n}\n\
            loki.source.journal \"journal\" {\n  forward_to = [loki.write.nope.receiver]\n  max_age = 12\n  colour = \"red\"\n}\n";
        assert_eq!(
            run(text).unwrap_err(),
            "Error: c.alloy:2:11: unrecognized log level \"loud\"\n\n\
             1 | logging {\n\
             2 |   level = \"loud\"\n  |           ^^^^^^\n\
             3 | }\n\n\
             Error: c.alloy:4:1: cannot find the definition of component name \"loki.source.journl\"\n\n\
             3 | }\n\
             4 | loki.source.journl \"j\" {\n  | ^^^^^^^^^^^^^^^^^^\n\
             5 | }\n\n\
             Error: c.alloy:8:13: expected string, got number\n\n\
             7 |   forward_to = [loki.write.nope.receiver]\n\
             8 |   max_age = 12\n  |             ^^\n\
             9 |   colour = \"red\"\n\n\
             Error: c.alloy:9:3: unrecognized attribute name \"colour\"\n\n \
             8 |   max_age = 12\n \
             9 |   colour = \"red\"\n   |   ^^^^^^^^^^^^^^\n\
             10 | }\n\n\
             Error: c.alloy:7:17: component \"loki.write.nope.receiver\" does not exist or is out of scope\n\n\
             6 | loki.source.journal \"journal\" {\n\
             7 |   forward_to = [loki.write.nope.receiver]\n  |                 ^^^^^^^^^^^^^^^^^^^^^^^^\n\
             8 |   max_age = 12"
                .to_string()
                + "\n"
        );
    }

    #[test]
    fn references_where_values_belong() {
        let text =
            "logging {\n  level = info\n}\nloki.write \"w\" {\n  endpoint {\n    url = loki.write.w.receiver\n  }\n}\n";
        let (body, diags) = super::super::parse::parse(text);
        assert!(diags.is_empty(), "{diags:?}");
        let got: Vec<String> = decode("c.alloy", text, &body, "127.0.0.1:12345")
            .unwrap_err()
            .iter()
            .map(|d| format!("{} {}", super::super::diag::line_col(text, d.start), d.message))
            .collect();
        assert_eq!(
            got,
            vec!["2:11 component \"info\" does not exist or is out of scope", "6:11 expected string, got capsule",]
        );
    }
}
