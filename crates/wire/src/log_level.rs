//! The level a log line of the monitoring stack carries, read from the line itself, with
//! journald's PRIORITY as the fallback when the line says nothing of its own.
//!
//! Pure std; used by `journal::errors`/`journal::warnings` and by the reading of the metrics
//! agent's own log file. Checked against the upstream source (docs/upstream-checked.md, §1):
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
    /// An error, or a Go crash (`panic:`, `fatal error:`).
    Error,
    /// A warning.
    Warn,
    /// Information.
    Info,
    /// Debugging or tracing.
    Debug,
    /// No level the line or its priority says.
    Unknown,
}

impl Level {
    /// `Error` 0 … `Debug` 3, `Unknown` 4: lower is worse.
    fn rank(self) -> u8 {
        match self {
            Level::Error => 0,
            Level::Warn => 1,
            Level::Info => 2,
            Level::Debug => 3,
            Level::Unknown => 4,
        }
    }

    /// Whether this level is `max` or worse (`Unknown` is never worse than anything).
    pub fn at_or_worse(self, max: Level) -> bool {
        self != Level::Unknown && self.rank() <= max.rank()
    }

    /// The level of a syslog priority (0–3 error, 4 warning, 5–6 info, 7 debug).
    pub fn of_priority(priority: u8) -> Level {
        match priority {
            0..=3 => Level::Error,
            4 => Level::Warn,
            5 | 6 => Level::Info,
            7 => Level::Debug,
            _ => Level::Unknown,
        }
    }
}

/// The level `line` carries; when it carries none, journald's PRIORITY (0–3 error, 4 warning,
/// 5–6 info, 7 debug); else `Unknown`. journald files the components' stderr at priority 6, so a
/// level written in the line always wins over the priority.
pub fn classify(line: &str, journald_priority: Option<u8>) -> Level {
    if let Some(level) = own_level(line.trim()) {
        return level;
    }
    journald_priority.map_or(Level::Unknown, Level::of_priority)
}

fn own_level(line: &str) -> Option<Level> {
    if line.starts_with('{')
        && let Some(level) = json_level(line)
    {
        return Some(level);
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
    level_word(json_field(line, &["level", "lvl"])?)
}

/// The (still escaped) text of the first top-level key of `wanted` in a JSON object line;
/// `None` when there is none or its value is not a string. Nested objects do not count.
pub fn json_field<'a>(line: &'a str, wanted: &[&str]) -> Option<&'a str> {
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
                    if wanted.contains(&key) {
                        let value_end = if b.get(i) == Some(&b'"') { string_end(b, i + 1)? } else { return None };
                        return Some(&line[i + 1..value_end]);
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

/// When a line of a log file was written, in microseconds since the epoch: the RFC 3339 time
/// that starts a text line (Telegraf's `2026-11-23T10:00:10Z E! …`, zap's console encoder) or
/// the `time`/`ts` field of a JSON line (slog's and go-kit's). `None` for lines without one
/// (a panic's stack, the sources listed after Telegraf v1.39's `Loaded inputs:`).
pub fn line_time_us(line: &str) -> Option<u64> {
    let line = line.trim_start();
    if line.starts_with('{') {
        return rfc3339_us(json_field(line, &["time", "ts"])?);
    }
    rfc3339_us(line.split([' ', '\t']).next()?)
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (a space for the `T` too) as microseconds since
/// the epoch; `None` for anything else or a time before 1970.
pub fn rfc3339_us(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = text.get(from..from + len)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if b[16] != b':' || !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        let fraction = &text[i + 1..i + 1 + digits];
        micros = format!("{fraction:0<6}")[..6].parse().ok()?;
        i += 1 + digits;
    }
    let offset_s = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if b.len() == i + 6 && b[i + 3] == b':' => {
            let s = num(i + 1, 2)? * 3600 + num(i + 4, 2)? * 60;
            if *sign == b'+' { s } else { -s }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    u64::try_from(secs * 1_000_000 + micros).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    use super::{Level, classify, line_time_us, rfc3339_us};

    const FIXTURE: &str = include_str!("../../../tests/fixtures/upstream/log-lines.txt");

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

    #[test]
    fn levels_compare_by_severity() {
        assert!(Level::Error.at_or_worse(Level::Error) && Level::Error.at_or_worse(Level::Warn));
        assert!(Level::Warn.at_or_worse(Level::Warn) && !Level::Warn.at_or_worse(Level::Error));
        assert!(!Level::Info.at_or_worse(Level::Warn) && !Level::Unknown.at_or_worse(Level::Debug));
    }

    #[test]
    fn times_of_telegraf_text_and_json_lines() {
        // 2026-11-23T10:00:10Z
        let t = 1_795_428_010_000_000;
        assert_eq!(line_time_us("2026-11-23T10:00:10Z E! [agent] x"), Some(t));
        assert_eq!(line_time_us("2026-11-23T11:00:10+01:00 E! [agent] x"), Some(t));
        assert_eq!(line_time_us("2026-11-23T10:00:10.123456789Z\terror\tmsg\t{}"), Some(t + 123_456));
        assert_eq!(line_time_us(r#"{"time":"2026-11-23T10:00:10.5Z","level":"ERROR","msg":"x"}"#), Some(t + 500_000));
        assert_eq!(line_time_us(r#"{"ts":"2026-11-23T10:00:10Z","level":"error"}"#), Some(t));
        for none in ["panic: boom", "  cpu disk mem", "2026-11-23 E!", "{\"time\":3}", "2026-13-23T10:00:10Z x", ""] {
            assert_eq!(line_time_us(none), None, "{none}");
        }
        assert_eq!(rfc3339_us("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_us("1969-12-31T23:59:59Z"), None);
    }
}
