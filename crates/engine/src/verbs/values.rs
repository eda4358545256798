//! How host values look to scripts and in reports: the one record every probe returns, the
//! text of any value, and the time format journalctl accepts. Shared by every verbs module;
//! it imports none of them, so no two modules depend on each other through it.

use rhai::{Dynamic, ImmutableString, Map};
use serde::Serialize;

use super::result::{VerbResult, fail};
use opsbook_world::units::UnitStatus;

/// Facts a probe adds to its record; none by default.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct NoFacts {}

/// What every probe returns: `#{ok, status, detail, elapsed_ms}` and the facts of its kind
/// (a version, a backend…). `status` and `elapsed_ms` are `()` when no HTTP answer came back.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Probe<F: Serialize = NoFacts> {
    /// Whether the probe passed.
    pub ok: bool,
    /// The HTTP status, when an answer came back.
    pub status: Option<u16>,
    /// What happened, in words.
    pub detail: String,
    pub(crate) elapsed_ms: Option<u64>,
    #[serde(flatten)]
    /// The facts of its kind.
    pub facts: F,
}

impl Probe {
    /// A probe with no facts; `elapsed` is `None` when no answer came back.
    pub(crate) fn new(
        ok: bool,
        status: Option<u16>,
        detail: impl Into<String>,
        elapsed: Option<std::time::Duration>,
    ) -> Probe {
        Probe {
            ok,
            status,
            detail: detail.into(),
            elapsed_ms: elapsed.map(|e| e.as_millis() as u64),
            facts: NoFacts {},
        }
    }

    /// A probe that got no answer at all (refused, timed out…).
    pub(crate) fn unanswered(reason: impl Into<String>) -> Probe {
        Probe::new(false, None, reason, None)
    }
}

impl<F: Serialize> Probe<F> {
    /// The same outcome, carrying `facts`.
    pub(crate) fn with<G: Serialize>(self, facts: G) -> Probe<G> {
        Probe { ok: self.ok, status: self.status, detail: self.detail, elapsed_ms: self.elapsed_ms, facts }
    }

    /// The record as scripts see it.
    pub(crate) fn into_map(self) -> VerbResult<Map> {
        record(&self)
    }
}

/// Any serialisable record as a script map (through rhai's serde support).
pub(crate) fn record<T: Serialize>(value: &T) -> VerbResult<Map> {
    rhai::serde::to_dynamic(value)?.try_cast::<Map>().ok_or_else(|| fail("a host record did not serialise as a map"))
}

/// How a value reads in a report: strings as they are, other values as Rhai shows them.
pub fn text(value: &Dynamic) -> String {
    if value.is_unit() {
        String::new()
    } else if let Some(status) = value.read_lock::<UnitStatus>() {
        status.to_string()
    } else if let Some(s) = value.read_lock::<ImmutableString>() {
        s.to_string()
    } else {
        nested(value)
    }
}

/// How deep `nested` shows arrays and maps inside each other: deeper ones read `[…]`, `#{…}`.
pub(crate) const MAX_SHOWN_DEPTH: usize = 64;

/// A value as Rhai shows it (`[1, "a"]`, `#{"k": 2}`), arrays and maps nested deeper than
/// `MAX_SHOWN_DEPTH` shown as `[…]` and `#{…}`: Rhai's own printer recurses once a level, and
/// a 40,000-deep array overflowed the stack.
pub(crate) fn nested(value: &Dynamic) -> String {
    let mut out = String::new();
    walk(value, 0, &mut out);
    out
}

/// `nested` of an array, without copying it.
pub(crate) fn nested_array(list: &rhai::Array) -> String {
    let mut out = String::new();
    array(list, 0, &mut out);
    out
}

/// `nested` of a map, without copying it.
pub(crate) fn nested_map(items: &Map) -> String {
    let mut out = String::new();
    map(items, 0, &mut out);
    out
}

fn walk(value: &Dynamic, depth: usize, out: &mut String) {
    use std::fmt::Write;
    if let Some(list) = value.read_lock::<rhai::Array>() {
        array(&list, depth, out);
    } else if let Some(items) = value.read_lock::<Map>() {
        map(&items, depth, out);
    } else if let Some(status) = value.read_lock::<UnitStatus>() {
        // Its status line, as `print` shows one alone, not Rust's name of the type.
        let _ = write!(out, "{}", *status);
    } else if depth == 0 {
        out.push_str(&value.to_string());
    } else {
        let _ = write!(out, "{value:?}");
    }
}

fn array(list: &rhai::Array, depth: usize, out: &mut String) {
    if depth >= MAX_SHOWN_DEPTH {
        out.push_str("[…]");
        return;
    }
    out.push('[');
    for (i, v) in list.iter().enumerate() {
        out.push_str(if i > 0 { ", " } else { "" });
        walk(v, depth + 1, out);
    }
    out.push(']');
}

fn map(items: &Map, depth: usize, out: &mut String) {
    use std::fmt::Write;
    if depth >= MAX_SHOWN_DEPTH {
        out.push_str("#{…}");
        return;
    }
    out.push_str("#{");
    for (i, (k, v)) in items.iter().enumerate() {
        let _ = write!(out, "{}{:?}: ", if i > 0 { ", " } else { "" }, k.as_str());
        walk(v, depth + 1, out);
    }
    out.push('}');
}

/// `YYYY-MM-DD HH:MM:SS UTC`: readable, and a time `journalctl --since` accepts.
pub fn time_text(t: std::time::SystemTime) -> String {
    let rfc = humantime::format_rfc3339_seconds(t).to_string();
    // 2026-11-22T09:31:05Z → 2026-11-22 09:31:05 UTC
    format!("{} UTC", rfc.trim_end_matches('Z').replacen('T', " ", 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Version {
        version: String,
    }

    #[test]
    fn a_probe_is_one_flat_record() {
        let m = Probe::new(true, Some(200), "HTTP 200", Some(std::time::Duration::from_millis(12)))
            .with(Version { version: "v3.4.6".into() })
            .into_map()
            .unwrap();
        let shown: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(shown, ["detail=HTTP 200", "elapsed_ms=12", "ok=true", "status=200", "version=v3.4.6"]);
        let m = Probe::unanswered("connection refused").into_map().unwrap();
        assert!(m["status"].is_unit() && m["elapsed_ms"].is_unit(), "{m:?}");
        assert_eq!(m["detail"].to_string(), "connection refused");
    }
}
