//! `journal::` — unit logs: read with filters (last N, since/until, priority, grep,
//! identifier), errors and warnings of the unit's current run since a time, the run itself,
//! follow with a callback, and emit a tagged line (what the end-to-end log flow searches
//! for). Through the `Journal` world seam; the run comes from the `Units` seam.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rhai::{Array, Dynamic, FnPtr, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::time::positive_duration_arg;
use super::values::{record, time_text};
use crate::register;
use opsbook_wire::log_level::{Level, classify};
use opsbook_world::journal::{Entry, PRIORITIES, Query, priority_number};
use opsbook_world::units::{Run, full_name};

/// The `journal::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
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
        |call: NativeCallContext, q: Map| read(&context(&call), &q)
    );
    register!(
        &mut m,
        "errors",
        Reads,
        ["unit: &str", "since: &str", "Array"],
        "/// The unit's error entries of its CURRENT RUN (systemd's invocation ID, else the run's\n\
         /// start time) logged since a time (e.g. `now()` before a restart): never the lines of the\n\
         /// process before it. The level the line carries decides, in every shape the stack logs:\n\
         /// Telegraf's `E!` and structured `\"level\":\"ERROR\"`, logfmt `level=error` / `lvl=error`,\n\
         /// JSON `\"level\":\"error\"`, zap's console, Go's `panic: `; journald's priority (err or\n\
         /// worse) only for a line that carries none. Entries keep the priority journald gave them\n\
         /// and have `after_start`: seconds since the run began.",
        "journal::errors(\"telegraf\", \"10 min ago\")",
        |call: NativeCallContext, unit: &str, since: &str| by_level(&context(&call), unit, since, Level::Error)
    );
    register!(
        &mut m,
        "warnings",
        Reads,
        ["unit: &str", "since: &str", "Array"],
        "/// The unit's entries at warning level or worse of its current run since a time, read as\n\
         /// `errors` reads them (`W!`, `\"level\":\"WARN\"`, `level=warn`, …, or priority warning).",
        "journal::warnings(\"telegraf\", \"10 min ago\")",
        |call: NativeCallContext, unit: &str, since: &str| by_level(&context(&call), unit, since, Level::Warn)
    );
    more(&mut m);
    m
}

/// The run, following and writing verbs of `journal::`.
fn more(m: &mut Module) {
    register!(
        m,
        "current_run",
        Reads,
        ["unit: &str", "Map"],
        "/// The unit's current run (its last, once stopped): `#{unit, invocation, started,\n\
         /// started_us}`; `invocation` is systemd's invocation ID, `started` when the run began.\n\
         /// Either is `()` when the service manager does not say.",
        "journal::current_run(\"alloy\")",
        |call: NativeCallContext, unit: &str| -> VerbResult<Map> {
            let h = context(&call);
            let run = current_run(&h, unit)?;
            record(&RunRecord {
                unit: full_name(unit),
                invocation: run.invocation,
                started: run.started.map(time_text),
                started_us: run.started.map(micros),
            })
        }
    );
    register!(
        m,
        "follow",
        Reads,
        ["query: Map", "callback: FnPtr", "i64"],
        "/// Follows new entries matching `query` (as `read`, plus `timeout`) and calls\n\
         /// `callback(entry)` for each until it returns false, the timeout passes or Ctrl-C.\n\
         /// Returns how many entries were seen.",
        "journal::follow(#{ unit: \"loki\", lines: 5, timeout: \"1s\" }, |entry| false)",
        |ctx: NativeCallContext, q: Map, callback: FnPtr| follow(&context(&ctx), &ctx, &q, &callback)
    );
    register!(
        m,
        "emit",
        Changes,
        ["tag: &str", "message: &str", "priority: &str", "String"],
        "/// Writes `message [MARKER]` into the journal under identifier `tag` at `priority`\n\
         /// (\"info\", \"err\", …) and returns MARKER, unique to this call, to search for.",
        "journal::emit(\"opsbook-demo\", \"hello from a runbook\", \"info\")",
        |call: NativeCallContext, tag: &str, message: &str, priority: &str| emit(
            &context(&call),
            tag,
            message,
            priority
        )
    );
}

fn query_from(q: &Map) -> VerbResult<(Query, Option<Duration>)> {
    let mut query = Query { lines: Some(50), ..Query::default() };
    let mut timeout = None;
    for (k, v) in q {
        let text = super::values::text(v);
        match k.as_str() {
            "unit" => query.unit = Some(full_name(&text)),
            "lines" => {
                let n = v.as_int().map_err(|_| fail("journal: `lines` must be an integer"))?;
                if n < 0 {
                    return Err(fail(format!("journal: `lines` is {n}: how many lines, zero or more")));
                }
                query.lines = Some(n as usize)
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
            "timeout" => timeout = Some(positive_duration_arg(v, "timeout")?),
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
fn entry_record(e: &Entry, run_start_us: Option<u64>) -> VerbResult<Dynamic> {
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
fn current_run(cx: &Context, unit: &str) -> VerbResult<Run> {
    let units = cx.world().units.clone();
    let unit = full_name(unit);
    Ok(cx.block_on(|| async move { units.current_run(&unit).await })?.unwrap_or_default())
}

/// Reads entries through the world (also used for the hints of failed unit jobs).
pub(crate) fn read_entries(cx: &Context, query: Query) -> VerbResult<Vec<Entry>> {
    let journal = cx.world().journal.clone();
    cx.block_on(|| async move { journal.read(&query).await })?.map_err(fail)
}

fn read(cx: &Context, q: &Map) -> VerbResult<Array> {
    let (query, _) = query_from(q)?;
    read_entries(cx, query)?.iter().map(|e| entry_record(e, None)).collect()
}

/// For journalctl's `--grep`: every line whose own text may carry warning or worse, in each
/// shape `log_level::classify` reads (Telegraf's `E!`/`W!`, logfmt `level=`/`lvl=`, JSON
/// `"level":"ERROR"`, zap's console `\terror\t`, Go's `panic: `), and some lines that do not
/// (the classifier decides), so a chatty unit's info lines never crowd them out of the read.
/// Lower case and `(?i)`: any case matches, in journalctl (PCRE2) as in the sandbox's journal.
const LEVEL_CANDIDATES: &str = r#"(?i)(^|\s)[ew]!(\s|$)|(^|[\s{,"])(level|lvl)"?\s*[=:]\s*"?(err|crit|alert|emerg|fatal|d?panic|warn)|\t(err|crit|alert|emerg|fatal|d?panic|warn)[a-z]*\t|^(panic|fatal error): "#;

/// The unit's entries of its current run since `since`, at level `max` or worse, as
/// `log_level::classify` reads them: by the level the line carries (how the real components
/// log: text or JSON on stderr, which journald files at priority info), else by the priority
/// journald filed it at (a `<N>` prefix, syslog, the journal API). Lines of the process before
/// it (a restart's shutdown lines) are never among them.
fn by_level(host: &Context, unit: &str, since: &str, max: Level) -> VerbResult<Array> {
    let run = current_run(host, unit)?;
    let started_us = run.started.map(micros);
    // Lines after the previous run ended are this run's; for a first run, a second's grace
    // before its start (its first lines can reach journald before the manager stamps it).
    let boundary_us = run.previous_end.map(micros).or(started_us.map(|s| s.saturating_sub(1_000_000)));
    let base =
        Query { unit: Some(full_name(unit)), since: Some(since.to_string()), lines: Some(1000), ..Query::default() };
    // Reading by invocation ID needs journald to have recorded it: when the run has no line
    // under its ID at all, its lines are read by unit and start time instead. A run seen
    // logging once is not looked at again.
    let by_run = run.invocation.clone().filter(|id| {
        if host.seen_logged(id) {
            return true;
        }
        let probe = Query { invocation: Some(id.clone()), since: None, lines: Some(1), ..base.clone() };
        let logged = read_entries(host, probe).is_ok_and(|found| !found.is_empty());
        if logged {
            host.saw_logged(id);
        }
        logged
    });
    let base = Query { invocation: by_run, ..base };
    let priority = if max == Level::Error { 3 } else { 4 };
    // Both reads in one call: one round trip on an ssh host.
    let queries = [
        Query { max_priority: Some(priority), ..base.clone() },
        Query { grep: Some(LEVEL_CANDIDATES.to_string()), ..base },
    ];
    let journal = host.world().journal.clone();
    let read = host.block_on(|| async move { journal.read_each(&queries).await })?.map_err(fail)?;
    let mut entries: Vec<Entry> = read.into_iter().flatten().collect();
    // The level a line carries decides; journald's priority only for lines that carry none.
    entries.retain(|e| {
        boundary_us.is_none_or(|b| e.realtime_us >= b) && classify(&e.message, Some(e.priority)).at_or_worse(max)
    });
    entries.sort_by(|a, b| (a.realtime_us, a.pid, &a.message).cmp(&(b.realtime_us, b.pid, &b.message)));
    entries.dedup();
    entries.iter().map(|e| entry_record(e, started_us)).collect()
}

fn follow(host: &Context, ctx: &NativeCallContext, q: &Map, callback: &FnPtr) -> VerbResult<i64> {
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

fn emit(host: &Context, tag: &str, message: &str, priority: &str) -> VerbResult<String> {
    let p = priority_number(priority)
        .ok_or_else(|| fail(format!("journal::emit: priority `{priority}`: use one of {}", PRIORITIES.join(", "))))?;
    let nanos = std::time::SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    static EMITTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = EMITTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let marker = format!("opsbook-{n}-{nanos:x}");
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
    use super::LEVEL_CANDIDATES;
    use opsbook_wire::log_level::{Level, classify};

    /// journalctl's `--grep` must let through every line the classifier calls a warning or
    /// an error (the fixture: real shapes of Telegraf v1.32/v1.39, Alloy v1.9/v1.18, InfluxDB
    /// 2.7.12 and Loki 3.4.6), and keeps most info lines out.
    #[test]
    fn the_grep_lets_through_every_warning_and_error_shape_of_the_fixture() {
        let fixture = include_str!("../../../../tests/fixtures/upstream/log-lines.txt");
        let grep = regex::Regex::new(LEVEL_CANDIDATES).unwrap();
        let (mut kept_quiet, mut quiet) = (0, 0);
        for line in fixture.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let line = line.splitn(3, '\t').nth(2).unwrap();
            if classify(line, Some(6)).at_or_worse(Level::Warn) {
                assert!(grep.is_match(line), "{line}");
            } else {
                quiet += 1;
                kept_quiet += usize::from(grep.is_match(line));
            }
        }
        assert!(quiet > 20 && kept_quiet == 0, "{kept_quiet} of {quiet} quiet lines pass the grep");
        for line in ["level=errors_total value=3", "an error occurred", "E!nothing"] {
            assert!(!classify(line, Some(6)).at_or_worse(Level::Warn), "{line}");
        }
    }
}
