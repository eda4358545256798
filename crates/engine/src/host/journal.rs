//! `journal::` — unit logs: read with filters (last N, since/until, priority, grep,
//! identifier), errors and warnings of the unit's current run since a time, the run itself,
//! follow with a callback, and emit a tagged line (what the end-to-end log flow searches
//! for). Through the `Journal` world seam; the run comes from the `Units` seam.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rhai::{Array, Dynamic, Engine, FnPtr, Map, Module, NativeCallContext};
use serde::Serialize;

use super::time::duration_arg;
use super::values::{record, time_text};
use super::{Host, HostResult, fail};
use crate::register;
use crate::world::journal::{Entry, PRIORITIES, Query, priority_number};
use crate::world::units::{Run, full_name};

/// Registers the `journal::` namespace.
pub(crate) fn register(engine: &mut Engine, host: &Arc<Host>) {
    engine.register_static_module("journal", module(host).into());
}

fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "read",
        Reads,
        ["query: Map", "Array"],
        "/// Journal entries, oldest first: `[#{time, time_us, priority, priority_name, unit,\n\
         /// identifier, pid, message}]`. Query keys: `unit` (short names work), `lines` (50),\n\
         /// `since`/`until` (journalctl texts: \"1 hour ago\", \"09:00\", \"2026-11-22 09:00:00\"),\n\
         /// `priority` (\"err\", \"warning\", 0–7: that or worse), `grep` (a regex), `identifier`.",
        "journal::read(#{ unit: \"loki\", since: \"10 min ago\", lines: 20 })",
        move |q: Map| read(&h, &q)
    );
    let h = host.clone();
    register!(
        &mut m,
        "errors",
        Reads,
        ["unit: &str", "since: &str", "Array"],
        "/// The unit's entries at priority err or worse of its CURRENT RUN (systemd's invocation ID,\n\
         /// else the run's start time) logged since a time (e.g. `now()` before a restart): never the\n\
         /// lines of the process before it. By journald's priority, or by the level written in the\n\
         /// line (Telegraf's `E!`, logfmt `level=error` / `lvl=error`), since the components log\n\
         /// plain text that journald files at priority info; such entries keep the priority journald\n\
         /// gave them. Each entry also has `after_start`: seconds since the run began.",
        "journal::errors(\"telegraf\", \"10 min ago\")",
        move |unit: &str, since: &str| by_priority(&h, unit, since, 3)
    );
    let h = host.clone();
    register!(
        &mut m,
        "warnings",
        Reads,
        ["unit: &str", "since: &str", "Array"],
        "/// The unit's entries at priority warning or worse of its current run since a time: by\n\
         /// journald's priority or by the level in the line (`W!`/`E!`, `level=warn`, `lvl=warn`, or\n\
         /// worse), as `errors`.",
        "journal::warnings(\"telegraf\", \"10 min ago\")",
        move |unit: &str, since: &str| by_priority(&h, unit, since, 4)
    );
    let h = host.clone();
    register!(
        &mut m,
        "current_run",
        Reads,
        ["unit: &str", "Map"],
        "/// The unit's current run (its last, once stopped): `#{unit, invocation, started,\n\
         /// started_us}`; `invocation` is systemd's invocation ID, `started` when the run began.\n\
         /// Either is `()` when the service manager does not say.",
        "journal::current_run(\"alloy\")",
        move |unit: &str| -> HostResult<Map> {
            let run = current_run(&h, unit)?;
            record(&RunRecord {
                unit: full_name(unit),
                invocation: run.invocation,
                started: run.started.map(time_text),
                started_us: run.started.map(micros),
            })
        }
    );
    let h = host.clone();
    register!(
        &mut m,
        "follow",
        Reads,
        ["query: Map", "callback: FnPtr", "i64"],
        "/// Follows new entries matching `query` (as `read`, plus `timeout`) and calls\n\
         /// `callback(entry)` for each until it returns false, the timeout passes or Ctrl-C.\n\
         /// Returns how many entries were seen.",
        "journal::follow(#{ unit: \"loki\", lines: 5, timeout: \"1s\" }, |entry| false)",
        move |ctx: NativeCallContext, q: Map, callback: FnPtr| follow(&h, &ctx, &q, &callback)
    );
    let h = host.clone();
    register!(
        &mut m,
        "emit",
        Changes,
        ["tag: &str", "message: &str", "priority: &str", "String"],
        "/// Writes `message [MARKER]` into the journal under identifier `tag` at `priority`\n\
         /// (\"info\", \"err\", …) and returns MARKER, unique to this call, to search for.",
        "journal::emit(\"opsbook-demo\", \"hello from a runbook\", \"info\")",
        move |tag: &str, message: &str, priority: &str| emit(&h, tag, message, priority)
    );
    m
}

fn query_from(q: &Map) -> HostResult<(Query, Option<Duration>)> {
    let mut query = Query { lines: Some(50), ..Query::default() };
    let mut timeout = None;
    for (k, v) in q {
        let text = super::values::text(v);
        match k.as_str() {
            "unit" => query.unit = Some(full_name(&text)),
            "lines" => {
                query.lines = Some(v.as_int().map_err(|_| fail("journal: `lines` must be an integer"))?.max(0) as usize)
            }
            "since" => query.since = Some(text),
            "until" => query.until = Some(text),
            "priority" => {
                let p = priority_number(&text).ok_or_else(|| {
                    fail(format!("journal: priority `{text}`: use one of {} or 0–7", PRIORITIES.join(", ")))
                })?;
                query.max_priority = Some(p);
            }
            "grep" => query.grep = Some(text),
            "identifier" => query.identifier = Some(text),
            "timeout" => timeout = Some(duration_arg(v)?),
            other => {
                return Err(fail(format!(
                    "journal: unknown key `{other}` (unit, lines, since, until, priority, grep, identifier)"
                )));
            }
        }
    }
    Ok((query, timeout))
}

/// An entry as scripts see it.
#[derive(Serialize)]
struct EntryRecord<'a> {
    time: String,
    time_us: u64,
    priority: u8,
    priority_name: &'a str,
    unit: &'a str,
    identifier: &'a str,
    pid: u32,
    message: &'a str,
    /// Seconds between the start of the unit's current run and this line (`errors` and
    /// `warnings` only; `()` when the run's start is unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    after_start: Option<f64>,
}

/// An entry as scripts see it; `run_start_us` adds how long after that start it was logged.
fn entry_record(e: &Entry, run_start_us: Option<u64>) -> HostResult<Dynamic> {
    let time = UNIX_EPOCH + Duration::from_micros(e.realtime_us);
    // A run's first lines can reach journald a few milliseconds before the manager stamps
    // the run's start: those read 0, not a negative time.
    let after_start = run_start_us.map(|s| e.realtime_us.saturating_sub(s) as f64 / 1e6);
    record(&EntryRecord {
        time: time_text(time),
        time_us: e.realtime_us,
        priority: e.priority,
        priority_name: PRIORITIES.get(e.priority as usize).copied().unwrap_or("?"),
        unit: &e.unit,
        identifier: &e.identifier,
        pid: e.pid,
        message: &e.message,
        after_start,
    })
    .map(Dynamic::from_map)
}

/// A unit's current run as scripts see it.
#[derive(Serialize)]
struct RunRecord {
    unit: String,
    /// systemd's invocation ID, `()` when the manager does not say.
    invocation: Option<String>,
    /// When the run began (`YYYY-MM-DD HH:MM:SS UTC`), `()` when the unit never ran.
    started: Option<String>,
    started_us: Option<u64>,
}

fn micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// The unit's current run; a manager that cannot be asked leaves both unknown, and the
/// reading falls back to the time given.
fn current_run(host: &Host, unit: &str) -> HostResult<Run> {
    let units = host.world().units.clone();
    let unit = full_name(unit);
    Ok(host.block_on(|| async move { units.current_run(&unit).await })?.unwrap_or_default())
}

/// Reads entries through the world (also used for the hints of failed unit jobs).
pub(crate) fn read_entries(host: &Host, query: Query) -> HostResult<Vec<Entry>> {
    let journal = host.world().journal.clone();
    host.block_on(|| async move { journal.read(&query).await })?.map_err(fail)
}

fn read(host: &Host, q: &Map) -> HostResult<Array> {
    let (query, _) = query_from(q)?;
    read_entries(host, query)?.iter().map(|e| entry_record(e, None)).collect()
}

/// Lines whose own text says err or worse: Telegraf's `E!`, and logfmt's `level=` (Loki,
/// Alloy) or `lvl=` (InfluxDB). A capital in the pattern makes journalctl's --grep match case.
const ERROR_MARKS: &str = r"(^|\s)(E!|(level|lvl)=(error|crit|critical|alert|emerg|fatal|panic|dpanic))(\s|$)";
/// The same for warning or worse.
const WARNING_MARKS: &str =
    r"(^|\s)(E!|W!|(level|lvl)=(warn|warning|error|crit|critical|alert|emerg|fatal|panic|dpanic))(\s|$)";

/// The unit's entries of its current run since `since`, at priority `max` or worse: those
/// journald filed so (a `<N>` prefix, syslog, the journal API), and those filed at its default
/// priority whose text carries the level, which is how the real components log (plain text on
/// stderr). Lines of the process before it (a restart's shutdown lines) are never among them.
fn by_priority(host: &Host, unit: &str, since: &str, max: u8) -> HostResult<Array> {
    let run = current_run(host, unit)?;
    let started_us = run.started.map(micros);
    // Lines after the previous run ended are this run's; for a first run, a second's grace
    // before its start (its first lines can reach journald before the manager stamps it).
    let boundary_us = run.previous_end.map(micros).or(started_us.map(|s| s.saturating_sub(1_000_000)));
    let base =
        Query { unit: Some(full_name(unit)), since: Some(since.to_string()), lines: Some(1000), ..Query::default() };
    // Reading by invocation ID needs journald to have recorded it: when the run has no line
    // under its ID at all, its lines are read by unit and start time instead.
    let by_run = run.invocation.clone().filter(|id| {
        let probe = Query { invocation: Some(id.clone()), since: None, lines: Some(1), ..base.clone() };
        read_entries(host, probe).is_ok_and(|found| !found.is_empty())
    });
    let base = Query { invocation: by_run, ..base };
    let marks = if max <= 3 { ERROR_MARKS } else { WARNING_MARKS };
    let mut entries = read_entries(host, Query { max_priority: Some(max), ..base.clone() })?;
    entries.extend(read_entries(host, Query { grep: Some(marks.to_string()), ..base })?);
    if let Some(boundary) = boundary_us {
        entries.retain(|e| e.realtime_us >= boundary);
    }
    entries.sort_by(|a, b| (a.realtime_us, a.pid, &a.message).cmp(&(b.realtime_us, b.pid, &b.message)));
    entries.dedup();
    entries.iter().map(|e| entry_record(e, started_us)).collect()
}

fn follow(host: &Host, ctx: &NativeCallContext, q: &Map, callback: &FnPtr) -> HostResult<i64> {
    let (query, timeout) = query_from(q)?;
    let query = Query { lines: Some(0), ..query };
    let journal = host.world().journal.clone();
    let feed_query = query.clone();
    let mut feed = host.block_on(|| async move { journal.follow(&feed_query).await })?.map_err(fail)?;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut seen = 0;
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            break;
        }
        let next = host.block_on(|| async {
            match left {
                Some(l) => tokio::time::timeout(l, feed.recv()).await.unwrap_or(None),
                None => feed.recv().await,
            }
        })?;
        let Some(entry) = next else { break };
        let entry = entry.map_err(fail)?;
        seen += 1;
        let keep_going = callback.call_within_context::<Dynamic>(ctx, (entry_record(&entry, None)?,))?;
        if keep_going.as_bool() == Ok(false) {
            break;
        }
    }
    Ok(seen)
}

fn emit(host: &Host, tag: &str, message: &str, priority: &str) -> HostResult<String> {
    let p = priority_number(priority)
        .ok_or_else(|| fail(format!("journal::emit: priority `{priority}`: use one of {}", PRIORITIES.join(", "))))?;
    let nanos = std::time::SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let marker = format!("opsbook-{}-{nanos:x}", std::process::id());
    let line = format!("{message} [{marker}]");
    if host.plan(&format!("write `{line}` to the journal as {tag}")) {
        return Ok(marker);
    }
    let journal = host.world().journal.clone();
    let tag = tag.to_string();
    host.block_on(|| async move { journal.emit(&tag, &line, p).await })?.map_err(fail)?;
    Ok(marker)
}

#[cfg(test)]
mod tests {
    use super::{ERROR_MARKS, WARNING_MARKS};

    #[test]
    fn level_marks_match_the_components_own_lines() {
        let errors = regex::Regex::new(ERROR_MARKS).unwrap();
        let warnings = regex::Regex::new(WARNING_MARKS).unwrap();
        let error_lines = [
            "2026-11-23T00:07:22Z E! [outputs.influxdb_v2] When writing to [http://127.0.0.1:8086]: connection refused",
            "ts=2026-11-23T00:07:32.4Z level=error msg=\"failed to reload config\" err=\"unknown key\"",
            "ts=2026-11-23T00:07:32.4Z lvl=error msg=\"Failed to open engine\" log_id=0pS",
            "level=error ts=2026-11-23T00:07:32Z caller=main.go:1 msg=\"error running loki\"",
        ];
        let warning_lines = [
            "2026-11-23T00:07:22Z W! [agent] Collection took longer than expected",
            "ts=2026-11-23T00:07:32Z level=warn msg=\"error sending batch, will retry\" status=-1",
        ];
        let quiet_lines = [
            "2026-11-23T00:07:22Z I! Loaded inputs: cpu disk mem",
            "ts=2026-11-23T00:07:32Z level=info msg=\"no error\" errors=0",
            "ts=2026-11-23T00:07:32Z level=debug msg=\"batch sent\" status=204",
            "level=errors_total value=3",
        ];
        for l in error_lines {
            assert!(errors.is_match(l) && warnings.is_match(l), "{l}");
        }
        for l in warning_lines {
            assert!(!errors.is_match(l) && warnings.is_match(l), "{l}");
        }
        for l in quiet_lines {
            assert!(!warnings.is_match(l), "{l}");
        }
    }
}
