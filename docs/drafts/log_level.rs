//! The level a log line of the monitoring stack carries, read from the line itself, with
//! journald's PRIORITY as the fallback when the line says nothing of its own.
//!
//! Draft module, pure std, to be dropped into the code later. Checked against the upstream
//! source (see docs/upstream-checked.md, section 1):
//! - Telegraf v1.32.0 and v1.39.3: text `2026-11-23T10:00:00Z E! [outputs.x] msg` (indicators
//!   `E!` `W!` `I!` `D!` `T!`, logger/text_logger.go); `logformat = "structured"` is slog's JSON
//!   handler with the level in capitals: `{"time":…,"level":"ERROR","msg":…}` (the message key
//!   may be renamed by `structured_log_message_key`, 1.33+; the level key is always `level`).
//! - Grafana Alloy v1.9.0 and v1.18.1: slog text/JSON handlers with go-kit names: `ts=… level=error
//!   msg=…` or `{"ts":…,"level":"error",…}` (internal/runtime/logging/handler.go).
//! - InfluxDB OSS v2.7.12: zap with zap-logfmt, level key `lvl`: `ts=… lvl=error msg=…`; zap's
//!   console encoder (`ts<TAB>error<TAB>msg<TAB>{…}`) when stdout is a terminal (logger/logger.go).
//! - Loki 3.4.6: go-kit logfmt, `level=` first or after `caller=` (captured lines); go-kit JSON.
//! - Go runtime crashes (`panic: …`, `fatal error: …`) carry no logger level and count as errors.
//!
//! The level is the one the line carries. A healthy Loki writes `level=error … context canceled`
//! when a query's limit is met and while it stops: those classify as Error here; whether such an
//! error matters is for the caller to judge.

/// A log line's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
    Unknown,
}

/// The level `line` carries; when it carries none, journald's PRIORITY (0–3 error, 4 warning,
/// 5–6 info, 7 debug); else `Unknown`. journald files the components' stderr at priority 6, so a
/// level written in the line always wins over the priority.
pub fn classify(line: &str, journald_priority: Option<u8>) -> Level {
    if let Some(level) = own_level(line.trim()) {
        return level;
    }
    match journald_priority {
        Some(0..=3) => Level::Error,
        Some(4) => Level::Warn,
        Some(5 | 6) => Level::Info,
        Some(7) => Level::Debug,
        _ => Level::Unknown,
    }
}

fn own_level(line: &str) -> Option<Level> {
    if line.starts_with('{') {
        if let Some(level) = json_level(line) {
            return Some(level);
        }
    }
    if let Some(level) = telegraf_level(line).or_else(|| console_level(line)).or_else(|| logfmt_level(line)) {
        return Some(level);
    }
    if line.starts_with("panic: ") || line.starts_with("fatal error: ") {
        return Some(Level::Error);
    }
    None
}

/// A level word as the components write it, in any case (slog/Telegraf capitals included).
fn level_word(word: &str) -> Option<Level> {
    match word.to_ascii_lowercase().as_str() {
        "error" | "err" | "fatal" | "panic" | "dpanic" | "crit" | "critical" | "alert" | "emerg" => Some(Level::Error),
        "warn" | "warning" => Some(Level::Warn),
        "info" | "notice" => Some(Level::Info),
        "debug" | "trace" => Some(Level::Debug),
        _ => None,
    }
}

/// Telegraf's text format: an indicator first, or after one timestamp word.
fn telegraf_level(line: &str) -> Option<Level> {
    let mut words = line.splitn(3, ' ');
    let first = words.next()?;
    let mark = if first.len() == 2 && first.ends_with('!') {
        first
    } else if first.starts_with(|c: char| c.is_ascii_digit()) {
        words.next()?
    } else {
        return None;
    };
    match mark {
        "E!" => Some(Level::Error),
        "W!" => Some(Level::Warn),
        "I!" => Some(Level::Info),
        "D!" | "T!" => Some(Level::Debug),
        _ => None,
    }
}

/// zap's console encoder: `timestamp<TAB>level<TAB>message…`.
fn console_level(line: &str) -> Option<Level> {
    let mut fields = line.split('\t');
    let first = fields.next()?;
    let level = fields.next()?;
    fields.next()?;
    if first.starts_with(|c: char| c.is_ascii_digit()) { level_word(level) } else { None }
}

/// logfmt: the first `level=` or `lvl=` key outside quoted values decides; a value that is no
/// level word (`level=errors_total`) decides "none".
fn logfmt_level(line: &str) -> Option<Level> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        let key_start = i;
        while i < b.len() && b[i] != b' ' && b[i] != b'=' {
            i += 1;
        }
        let key = &line[key_start..i];
        if i >= b.len() || b[i] != b'=' {
            continue; // a bare word
        }
        i += 1;
        let value_start = i;
        if i < b.len() && b[i] == b'"' {
            i = string_end(b, i + 1).map_or(b.len(), |e| e + 1);
        } else {
            while i < b.len() && b[i] != b' ' {
                i += 1;
            }
        }
        if key == "level" || key == "lvl" {
            return level_word(line[value_start..i].trim_matches('"'));
        }
    }
    None
}

/// JSON: a top-level `"level"` or `"lvl"` key with a string value; nested objects do not count.
fn json_level(line: &str) -> Option<Level> {
    let b = line.as_bytes();
    let (mut i, mut depth) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'"' => {
                let end = string_end(b, i + 1)?;
                let key = &line[i + 1..end];
                i = skip_spaces(b, end + 1);
                if depth == 1 && i < b.len() && b[i] == b':' {
                    i = skip_spaces(b, i + 1);
                    if key == "level" || key == "lvl" {
                        let value_end = if b.get(i) == Some(&b'"') { string_end(b, i + 1)? } else { return None };
                        return level_word(&line[i + 1..value_end]);
                    }
                }
            }
            b'{' | b'[' => (depth, i) = (depth + 1, i + 1),
            b'}' | b']' => (depth, i) = (depth - 1, i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index of the quote closing a string whose first byte is at `i`.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::{Level, classify};

    const FIXTURE: &str = include_str!("../../tests/fixtures/upstream/log-lines.txt");

    #[test]
    fn every_fixture_line_has_its_level_with_or_without_journald_info_priority() {
        let mut components = std::collections::BTreeSet::new();
        let mut count = 0;
        for (n, row) in FIXTURE.lines().enumerate().filter(|(_, r)| !r.is_empty() && !r.starts_with('#')) {
            let mut cols = row.splitn(3, '\t');
            let (component, want, line) = (cols.next().unwrap(), cols.next().unwrap(), cols.next().unwrap());
            let want = match want {
                "error" => Level::Error,
                "warn" => Level::Warn,
                "info" => Level::Info,
                "debug" => Level::Debug,
                other => panic!("line {}: unknown level {other}", n + 1),
            };
            assert_eq!(classify(line, None), want, "line {}: {line}", n + 1);
            assert_eq!(classify(line, Some(6)), want, "line {} (priority 6): {line}", n + 1);
            assert_eq!(classify(line, Some(3)), want, "line {} (priority 3): {line}", n + 1);
            components.insert(component);
            count += 1;
        }
        assert!(count >= 30, "{count} lines");
        assert_eq!(components.into_iter().collect::<Vec<_>>(), ["alloy", "influxdb", "loki", "telegraf"]);
    }

    #[test]
    fn journald_priority_decides_only_for_lines_without_a_level() {
        let line = "telegraf.service: Main process exited, code=exited, status=1/FAILURE";
        assert_eq!(classify(line, Some(0)), Level::Error);
        assert_eq!(classify(line, Some(3)), Level::Error);
        assert_eq!(classify(line, Some(4)), Level::Warn);
        assert_eq!(classify(line, Some(5)), Level::Info);
        assert_eq!(classify(line, Some(6)), Level::Info);
        assert_eq!(classify(line, Some(7)), Level::Debug);
        assert_eq!(classify(line, Some(9)), Level::Unknown);
        assert_eq!(classify(line, None), Level::Unknown);
        assert_eq!(classify("", None), Level::Unknown);
    }

    #[test]
    fn words_that_only_look_like_levels_are_not_levels() {
        let none = [
            "level=errors_total value=3",
            "ts=2026-11-23T10:00:00Z msg=\"then level=error appeared\" status=ok",
            "{\"ts\":\"2026-11-23T10:00:00Z\",\"msg\":\"level\",\"labels\":{\"level\":\"error\"}}",
            "{\"msg\":\"\\\"level\\\":\\\"error\\\"\"}",
            "2026-11-23T10:00:00Z U! unknown indicator",
            "an error occurred somewhere",
            "E!nothing",
            "{\"level\":3}",
        ];
        for line in none {
            assert_eq!(classify(line, None), Level::Unknown, "{line}");
        }
        assert_eq!(classify("{\"labels\":{\"level\":\"error\"},\"level\":\"info\"}", None), Level::Info);
        assert_eq!(classify("time=2026-11-23T10:00:00Z level=ERROR msg=x", None), Level::Error);
        assert_eq!(classify("  E! [agent] early", None), Level::Error);
        assert_eq!(classify("fatal error: concurrent map writes", Some(6)), Level::Error);
        assert_eq!(classify("level=\"warn\" msg=quoted", None), Level::Warn);
    }
}
