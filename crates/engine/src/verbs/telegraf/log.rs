//! The metrics agent's log where the journal does not have it, and a reload confirmed once
//! it settled. Checked in the source of Telegraf v1.32.0 and v1.39.3 (docs/upstream-checked.md
//! §1 and §3):
//!
//! - With `logfile` set, only what is logged before logging is set up (`I! Loading config:
//!   …`, a startup configuration error) reaches the journal; everything after goes to the
//!   file, `2026-11-23T10:00:10Z E! [plugin] …` (text, RFC 3339 UTC) or slog JSON with `time`
//!   and `level` (`logformat = "structured"`). An empty journal then proves nothing: the file
//!   is read over the host's connection, or the check says it could not look.
//! - On SIGHUP `reloadLoop` logs `I! Reloading Telegraf config`, stops the running agent
//!   (flushing first) and loads the configuration again: `I! Loading config`, `I! Starting
//!   Telegraf …`, `I! Loaded inputs: …`, same PID. A bad file ends it seconds later with
//!   `E! [telegraf] Error running agent: …` and exit status 1. The unit is `Type=notify`
//!   without `RELOADING=1`, so `systemctl reload` returns once the signal is sent.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rhai::Map;
use serde::Serialize;

use super::unit::{self, LogTarget};
use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::time::positive_duration_arg;
use crate::verbs::values::{record, text, time_text};
use opsbook_base::config::keys;
use opsbook_wire::log_level::{Level, classify, line_time_us, rfc3339_us};
use opsbook_world::journal::Query;
use opsbook_world::units::{UnitStatus, full_name};
use opsbook_world::{local_micros, local_today};

/// What Telegraf logs when it receives SIGHUP (`cmd/telegraf/telegraf.go` `reloadLoop`).
const RELOADING: &str = "Reloading Telegraf config";

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// "1 hour", "5min", "2h 30m" in microseconds.
fn span_us(text: &str) -> Option<u64> {
    let compact = text.split_whitespace().collect::<Vec<_>>().join(" ");
    opsbook_base::config::parse_duration(&compact)
        .or_else(|| opsbook_base::config::parse_duration(&compact.replace(' ', "")))
        .or_else(|| humantime::parse_duration(&compact).ok())
        .map(|d| d.as_micros() as u64)
}

/// Microseconds since the epoch for the time texts runbooks pass as `since`: `now()`'s
/// `2026-11-22 09:31:05 UTC`, "1 hour ago", "-5min", "@1700000000", RFC 3339, a local
/// `YYYY-MM-DD[ HH:MM[:SS]]`, "now", "today"; `None` for others.
pub(super) fn since_us(text: &str, now: u64) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    match t.as_str() {
        "now" => return Some(now),
        "today" => return local_micros(local_today(now), [0, 0, 0]),
        "yesterday" => {
            return local_micros(local_today(now), [0, 0, 0]).map(|m| m.saturating_sub(86_400_000_000));
        }
        _ => {}
    }
    if let Some(ago) = t.strip_suffix(" ago").or_else(|| t.strip_prefix('-')) {
        return Some(now.saturating_sub(span_us(ago)?));
    }
    if let Some(epoch) = t.strip_prefix('@') {
        return epoch.parse::<f64>().ok().filter(|s| *s >= 0.0).map(|s| (s * 1e6) as u64);
    }
    let (t, utc) = match t.strip_suffix(" utc") {
        Some(rest) => (rest.trim(), true),
        None => (t.as_str(), false),
    };
    let (date, time) = t.split_once([' ', 't']).unwrap_or((t, "00:00:00"));
    let time = if time.len() == 5 { format!("{time}:00") } else { time.to_string() };
    if utc || time.ends_with('z') || time.contains('+') || time.get(1..).is_some_and(|r| r.contains('-')) {
        let zone = if utc { "Z" } else { "" };
        return rfc3339_us(&format!("{date}T{}{zone}", time.to_ascii_uppercase()));
    }
    let number = |s: &str| s.parse::<i32>().ok();
    let d: Vec<i32> = date.split('-').map(number).collect::<Option<_>>()?;
    let h: Vec<i32> = time.split('.').next()?.split(':').map(number).collect::<Option<_>>()?;
    match (d.as_slice(), h.as_slice()) {
        ([y, mo, day], [hh, mm, ss]) => local_micros([*y, *mo, *day], [*hh, *mm, *ss]),
        _ => None,
    }
}

/// One line of a log file, with when it was written.
#[derive(Debug, PartialEq)]
struct FileLine {
    time_us: u64,
    text: String,
}

/// The lines of a log file written at or after `from_us`. A line without a time of its own
/// (a panic's stack, the sources after v1.39's `Loaded inputs:`) takes the time of the line
/// before it; lines before the first timed one cannot be placed and are left out.
fn lines_since(text: &str, from_us: u64) -> Vec<FileLine> {
    let mut last = None;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        last = line_time_us(line).or(last);
        if let Some(t) = last.filter(|t| *t >= from_us) {
            out.push(FileLine { time_us: t, text: line.to_string() });
        }
    }
    out
}

/// An error line of the agent's log file, shaped as `journal::errors` entries are.
#[derive(Serialize)]
struct ErrorLine {
    time: String,
    message: String,
    /// Seconds since the unit's current run began; `()` when unknown.
    after_start: Option<f64>,
}

/// What reading the agent's log file came to.
#[derive(Serialize)]
struct FileErrors {
    /// `journal` (no `logfile`: the journal check covers it), `file`, or `unknown`.
    logs_to: &'static str,
    path: Option<String>,
    /// Whether the file was read.
    looked: bool,
    /// Lines of the file in the window read.
    read: usize,
    errors: Vec<ErrorLine>,
    detail: String,
}

fn unlooked(logs_to: &'static str, path: Option<String>, detail: String) -> VerbResult<Map> {
    record(&FileErrors { logs_to, path, looked: false, read: 0, errors: Vec::new(), detail })
}

/// The agent's log target, or why it cannot be told.
fn target(cx: &Context) -> VerbResult<Result<LogTarget, String>> {
    let command = unit::agent_command(cx)?;
    Ok(match unit::log_target(cx, &command)? {
        Ok(t) if t.file.is_none() && !t.unread.is_empty() => Err(format!("cannot read {}", t.unread.join(", "))),
        other => other,
    })
}

/// When the unit's current run began, in microseconds; `None` when the manager does not say.
fn run_start_us(cx: &Context, unit: &str) -> VerbResult<Option<u64>> {
    let units = cx.world().units.clone();
    let unit = unit.to_string();
    let run = cx.block_on(|| async move { units.current_run(&unit).await })?.unwrap_or_default();
    Ok(run.started.and_then(|s| s.duration_since(UNIX_EPOCH).ok()).map(|d| d.as_micros() as u64))
}

/// Reads a file of the host: its text, `None` when absent, or why it cannot be read.
fn read_file(cx: &Context, path: &str) -> VerbResult<Result<Option<String>, String>> {
    let files = cx.world().files.clone();
    let at = path.to_string();
    Ok(cx.block_on(|| async move { files.read(&at).await })?.map(|found| found.map(|(text, _)| text)))
}

/// `telegraf::logfile_errors(since)`: the error lines of the agent's log file written since
/// `since` in its current run, when its configuration sends its log to a file.
pub(super) fn logfile_errors(cx: &Context, since: &str) -> VerbResult<Map> {
    let target = match target(cx)? {
        Ok(t) => t,
        Err(why) => return unlooked("unknown", None, format!("cannot tell where the agent logs: {why}")),
    };
    let Some(path) = target.file else {
        let read = target.read.join(", ");
        return unlooked("journal", None, format!("logs to the journal (no `logfile` in {read})"));
    };
    let text = match read_file(cx, &path)? {
        Ok(Some(text)) => text,
        Ok(None) => {
            return unlooked("file", Some(path.clone()), format!("logs to {path}, which does not exist on the host"));
        }
        Err(e) => return unlooked("file", Some(path.clone()), format!("logs to {path}, which cannot be read: {e}")),
    };
    let unit = full_name(&cx.config().text(keys::METRICS_AGENT_UNIT));
    let started = run_start_us(cx, &unit)?;
    let asked = since_us(since, now_us());
    // The run's first lines may carry the second before the manager stamped its start.
    let from = asked.unwrap_or(0).max(started.map_or(0, |s| s.saturating_sub(1_000_000)));
    let lines = lines_since(&text, from);
    let errors = lines
        .iter()
        .filter(|l| classify(&l.text, None) == Level::Error)
        .map(|l| ErrorLine {
            time: time_text(UNIX_EPOCH + Duration::from_micros(l.time_us)),
            message: l.text.clone(),
            after_start: started.map(|s| l.time_us.saturating_sub(s) as f64 / 1e6),
        })
        .collect();
    let mut detail = format!("logs to {path}: read {} line(s)", lines.len());
    if asked.is_none() {
        detail.push_str(&format!(" of its current run (`{since}` is not a time opsbook reads)"));
    }
    record(&FileErrors { logs_to: "file", path: Some(path), looked: true, read: lines.len(), errors, detail })
}

/// What watching a reload came to: a check record (`ok`, `detail`) and the facts.
#[derive(Serialize)]
struct Watched {
    ok: bool,
    detail: String,
    /// The main PID watched.
    pid: i64,
    /// Whether the agent logged the reload (`I! Reloading Telegraf config`).
    reloaded: bool,
    /// The agent's log lines since the reload (the last ten).
    lines: Vec<String>,
}

fn unit_status(cx: &Context, unit: &str) -> VerbResult<UnitStatus> {
    let units = cx.world().units.clone();
    let unit = unit.to_string();
    cx.block_on(|| async move { units.status(&unit).await })?.map_err(|e| fail(e.to_string()))
}

/// The agent's log lines since the signal: the file's when it logs to one, else the journal's
/// (systemd's own lines about the unit included).
fn agent_lines(cx: &Context, unit: &str, since: &str, file: Option<&str>) -> VerbResult<Vec<String>> {
    if let Some(path) = file {
        let from = since_us(since, now_us()).unwrap_or(0);
        let text = read_file(cx, path)?.ok().flatten().unwrap_or_default();
        return Ok(lines_since(&text, from).into_iter().map(|l| l.text).collect());
    }
    let query =
        Query { unit: Some(unit.to_string()), since: Some(since.to_string()), lines: Some(200), ..Query::default() };
    Ok(crate::verbs::journal::read_entries(cx, query)?.into_iter().map(|e| e.message).collect())
}

/// The lines from the last reload on (all of them when none was logged), and whether the
/// agent logged the reload and then its start lines again.
fn after_reload(lines: &[String]) -> (&[String], bool, bool) {
    match lines.iter().rposition(|l| l.contains(RELOADING)) {
        Some(i) => {
            let after = &lines[i..];
            let started = after.iter().any(|l| l.contains("Loaded inputs:") || l.contains("Starting Telegraf"));
            (after, true, started)
        }
        None => (lines, false, false),
    }
}

fn last(lines: &[String], n: usize) -> Vec<String> {
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// The lines from the reload on as a detail shows them: the first (the reload's) and the
/// last three.
fn excerpt(after: &[String]) -> String {
    if after.len() <= 4 {
        return after.join(" | ");
    }
    format!("{} | … | {}", after[0], last(after, 3).join(" | "))
}

/// `telegraf::watch_reload(#{pid, since, timeout})`: after the signal, the agent must log the
/// reload and its start lines again, and its main PID `pid` must still run `units.settle`
/// later; it fails, quoting the agent's last lines, when the process exits or `timeout`
/// (30 s) passes first.
pub(super) fn watch_reload(cx: &Context, options: &Map) -> VerbResult<Map> {
    let mut pid = None;
    let mut since = None;
    let mut timeout = Duration::from_secs(30);
    for (k, v) in options {
        match k.as_str() {
            "pid" => pid = Some(v.as_int().map_err(|_| fail("telegraf::watch_reload: `pid` must be an integer"))?),
            "since" => since = Some(text(v)),
            "timeout" => timeout = positive_duration_arg(v, "timeout")?,
            other => {
                return Err(fail(format!("telegraf::watch_reload: unknown option `{other}` (pid, since, timeout)")));
            }
        }
    }
    let (Some(pid), Some(since)) = (pid, since) else {
        return Err(fail(
            "telegraf::watch_reload: give `pid` (the main PID before the reload) and `since` (a time before it)",
        ));
    };
    let unit = full_name(&cx.config().text(keys::METRICS_AGENT_UNIT));
    let settle = cx.config().duration(keys::UNITS_SETTLE);
    let file = target(cx)?.ok().and_then(|t| t.file);
    let began = Instant::now();
    let mut started_again: Option<Instant> = None;
    loop {
        let status = unit_status(cx, &unit)?;
        let lines = agent_lines(cx, &unit, &since, file.as_deref())?;
        let (after, reloaded, restarted) = after_reload(&lines);
        let alive = status.main_pid as i64 == pid && matches!(status.active_state.as_str(), "active" | "reloading");
        if !alive {
            return exited(cx, &unit, &since, file.as_deref(), pid, &status);
        }
        if restarted {
            let at = *started_again.get_or_insert_with(Instant::now);
            if at.elapsed() >= settle {
                let detail = format!(
                    "main PID {pid} still running {} after the reload; its log: {}",
                    humantime::format_duration(settle),
                    excerpt(after)
                );
                return record(&Watched { ok: true, detail, pid, reloaded, lines: last(after, 10) });
            }
        } else if began.elapsed() >= timeout {
            let waited = humantime::format_duration(timeout);
            let detail = if reloaded {
                format!(
                    "the agent logged the reload but not its start lines within {waited}: {}",
                    last(after, 5).join(" | ")
                )
            } else {
                format!("no `I! {RELOADING}` line within {waited}: the agent did not log the reload")
            };
            return record(&Watched { ok: false, detail, pid, reloaded, lines: last(after, 10) });
        }
        crate::verbs::time::sleep(cx, Duration::from_millis(250))?;
    }
}

/// The agent died after the signal: its state and last lines (journald gets a dying
/// process's lines a moment later, so they are waited for up to 3 s).
fn exited(cx: &Context, unit: &str, since: &str, file: Option<&str>, pid: i64, s: &UnitStatus) -> VerbResult<Map> {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut lines = agent_lines(cx, unit, since, file)?;
    while !after_reload(&lines).0.iter().any(|l| classify(l, None) == Level::Error) && Instant::now() < deadline {
        crate::verbs::time::sleep(cx, Duration::from_millis(100))?;
        lines = agent_lines(cx, unit, since, file)?;
    }
    let (after, reloaded, _) = after_reload(&lines);
    let detail = format!(
        "the agent did not survive the reload: {unit} is now {} ({}), main PID {} (was {pid}), result {}, exit status {}; its last log lines: {}",
        s.active_state,
        s.sub_state,
        s.main_pid,
        s.result,
        s.exec_main_status,
        last(after, 5).join(" | ")
    );
    record(&Watched { ok: false, detail, pid, reloaded, lines: last(after, 10) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_795_428_010_000_000; // 2026-11-23T10:00:10Z

    #[test]
    fn since_texts_runbooks_pass() {
        assert_eq!(since_us("2026-11-23 10:00:10 UTC", NOW), Some(NOW));
        assert_eq!(since_us("2026-11-23T10:00:10Z", NOW), Some(NOW));
        assert_eq!(since_us("1 hour ago", NOW), Some(NOW - 3_600_000_000));
        assert_eq!(since_us("10 min ago", NOW), Some(NOW - 600_000_000));
        assert_eq!(since_us("-5min", NOW), Some(NOW - 300_000_000));
        assert_eq!(since_us("now", NOW), Some(NOW));
        assert_eq!(since_us("@1795428010", NOW), Some(NOW));
        assert!(since_us("2026-11-23 10:00", NOW).is_some() && since_us("today", NOW).is_some());
        for bad in ["soon", "2026-11-23 10:00:10 PST", ""] {
            assert_eq!(since_us(bad, NOW), None, "{bad}");
        }
    }

    #[test]
    fn file_lines_since_a_time_keep_their_continuations() {
        let text = "2026-11-23T09:00:00Z E! [agent] old\nstack of the old\n2026-11-23T10:00:10Z I! Loaded inputs: cpu\n  cpu (1x)\n\
{\"time\":\"2026-11-23T10:00:11.5Z\",\"level\":\"ERROR\",\"msg\":\"new\"}\n";
        let lines = lines_since(text, NOW);
        let shown: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            shown,
            [
                "2026-11-23T10:00:10Z I! Loaded inputs: cpu",
                "  cpu (1x)",
                "{\"time\":\"2026-11-23T10:00:11.5Z\",\"level\":\"ERROR\",\"msg\":\"new\"}"
            ]
        );
        assert_eq!(lines[2].time_us, NOW + 1_500_000);
        assert!(lines_since("untimed\n", 0).is_empty());
    }

    #[test]
    fn a_reload_is_seen_from_its_last_reloading_line() {
        let lines: Vec<String> = [
            "I! Loaded inputs: cpu",
            "I! Reloading Telegraf config",
            "I! [agent] Hang on, flushing any cached metrics before shutdown",
        ]
        .iter()
        .map(|l| l.to_string())
        .collect();
        let (after, reloaded, restarted) = after_reload(&lines);
        assert_eq!((after.len(), reloaded, restarted), (2, true, false));
        let mut again = lines.clone();
        again.push("I! Loaded inputs: cpu mem".into());
        assert!(after_reload(&again).2);
        assert_eq!(after_reload(&lines[..1]), (&lines[..1], false, false));
    }
}
