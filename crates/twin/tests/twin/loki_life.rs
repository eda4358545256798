//! The warn and error lines Loki 3.4.6 logged over one life (the capture
//! `tests/fixtures/wire/loki-3.4.6/log-levels-one-life.txt`), read as patterns the twin's lines
//! must match. Shared by the twin crate's tests (the log store in this process) and the root
//! tests/twin_processes.rs (the `opsbook twin log-store` process), which includes this file:
//! one reading of the capture for both.

use regex::Regex;

/// The phases of the captured Loki life (`log-levels-one-life.txt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Start,
    Queries,
    Stop,
}

/// Each warn/error line Loki 3.4.6 logged over one life, as a regex over the whole line with
/// its timestamp and trace ID masked, and the phase it belongs to (from the capture's times:
/// start at :00, two `limit=1` queries at :20, SIGTERM at :25).
pub(crate) fn loki_life(captured: &str) -> Vec<(Phase, Regex)> {
    let ts = Regex::new(r"ts=2026-11-23T14:46:(\d\d)\.\d+Z").unwrap();
    captured
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let second = &ts.captures(line).expect("a timestamp in each captured line")[1];
            let phase = match second {
                "00" => Phase::Start,
                "20" => Phase::Queries,
                _ => Phase::Stop,
            };
            // Mask the timestamp and trace ID first, then escape the rest of the line.
            let masked = ts.replace_all(line, "ts=TIMESTAMP");
            let masked = Regex::new(r"traceID=[0-9a-f]{16}").unwrap().replace_all(&masked, "traceID=TRACE").to_string();
            let pattern = regex::escape(&masked)
                .replace("TIMESTAMP", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z")
                .replace("TRACE", "[0-9a-f]{16}");
            (phase, Regex::new(&format!("^{pattern}$")).unwrap())
        })
        .collect()
}

/// The lines, one for one, each matching its pattern as a whole.
pub(crate) fn assert_lines_match(lines: &[&str], patterns: &[&Regex]) {
    assert_eq!(lines.len(), patterns.len(), "lines: {lines:#?}\nexpected: {patterns:#?}");
    for (line, pattern) in lines.iter().zip(patterns) {
        assert!(pattern.is_match(line), "`{line}`\ndoes not match\n`{pattern}`");
    }
}
