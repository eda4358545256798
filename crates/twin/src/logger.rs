//! Where a twin's log lines go. As a process (`opsbook twin …`) they go to stdout, so under
//! systemd the journal holds them as it would hold the real component's; in-process (the
//! sandbox) they go to whatever sink the caller gives, e.g. its simulated journal.
//!
//! Each component formats its own lines in its real counterpart's style (Loki and Alloy
//! logfmt, Telegraf's `I!`/`E!` prefixes); this file only carries them and their level.
//! As a process a twin writes its lines plain, as the real components do (Telegraf's text
//! logger and Alloy's logfmt handler write no `<N>` syslog prefix), so under systemd journald
//! files every line at its default priority, info: the level is only in the text
//! (`E!`, `level=error`, `lvl=error`), and `journalctl -p err` finds none of them.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Severity of a line (syslog priority in parentheses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// An error (priority 3).
    Error,
    /// A warning (priority 4).
    Warn,
    /// Information (priority 6).
    Info,
    /// Debugging (priority 7).
    Debug,
}

impl Level {
    /// The syslog priority journald records for it.
    pub fn priority(self) -> u8 {
        match self {
            Level::Error => 3,
            Level::Warn => 4,
            Level::Info => 6,
            Level::Debug => 7,
        }
    }

    /// The lower-case word logfmt loggers use (`level=warn`).
    pub fn word(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

/// Receives every line a twin logs.
pub type Sink = Arc<dyn Fn(Level, &str) + Send + Sync>;

/// Lines to stdout, one write each, plain (no journald priority prefix: see the top).
pub fn stdout() -> Sink {
    Arc::new(move |_level, line| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    })
}

/// What `memory()` keeps.
pub type Kept = Arc<Mutex<Vec<(Level, String)>>>;

/// Lines kept in memory (tests, and the sandbox when it has no journal of its own).
pub fn memory() -> (Sink, Kept) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    let sink: Sink = Arc::new(move |level, line| {
        if let Ok(mut l) = kept.lock() {
            l.push((level, line.to_string()));
        }
    });
    (sink, lines)
}

/// Lines dropped.
pub fn discard() -> Sink {
    Arc::new(|_, _| {})
}

/// RFC 3339 UTC time of now with the given sub-second digits (0, 3, 6 or 9).
pub fn now_rfc3339(digits: u8) -> String {
    let now = std::time::SystemTime::now();
    match digits {
        0 => humantime::format_rfc3339_seconds(now).to_string(),
        3 => humantime::format_rfc3339_millis(now).to_string(),
        6 => humantime::format_rfc3339_micros(now).to_string(),
        _ => humantime::format_rfc3339_nanos(now).to_string(),
    }
}

/// A logfmt value: bare when it needs no quoting, else double-quoted with escapes.
pub(crate) fn logfmt_value(text: &str) -> String {
    if !text.is_empty() && !text.chars().any(|c| c == ' ' || c == '"' || c == '=' || c.is_control()) {
        return text.to_string();
    }
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logfmt_quotes_only_what_needs_it() {
        assert_eq!(logfmt_value("ready"), "ready");
        assert_eq!(logfmt_value("two words"), "\"two words\"");
        assert_eq!(logfmt_value("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(logfmt_value(""), "\"\"");
    }

    #[test]
    fn memory_sink_keeps_lines_in_order() {
        let (sink, lines) = memory();
        sink(Level::Info, "one");
        sink(Level::Error, "two");
        let kept = lines.lock().unwrap().clone();
        assert_eq!(kept, vec![(Level::Info, "one".to_string()), (Level::Error, "two".to_string())]);
    }
}
