//! `journal::` — unit logs: read with filters (last N, since/until, priority, grep,
//! identifier), errors and warnings since a time, follow with a callback, and emit a tagged
//! line (what the end-to-end log flow searches for). Through the `Journal` world seam.

use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use rhai::{Array, Dynamic, FnPtr, Map, Module, NativeCallContext};

use super::time::duration_arg;
use super::{Host, HostResult, fail};
use crate::register;
use crate::world::journal::{Entry, PRIORITIES, Query, priority_number};
use crate::world::units::full_name;

pub fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "read",
        ["query: Map", "Array"],
        "/// Journal entries, oldest first: `[#{time, time_us, priority, priority_name, unit,\n\
         /// identifier, pid, message}]`. Query keys: `unit` (short names work), `lines` (50),\n\
         /// `since`/`until` (journalctl texts: \"1 hour ago\", \"09:00\", \"2026-11-22 09:00:00\"),\n\
         /// `priority` (\"err\", \"warning\", 0–7: that or worse), `grep` (a regex), `identifier`.",
        move |q: Map| read(&h, &q)
    );
    let h = host.clone();
    register!(
        &mut m,
        "errors",
        ["unit: &str", "since: &str", "Array"],
        "/// The unit's entries at priority err or worse since a time (e.g. `now()` before a restart):\n\
         /// by journald's priority, or by the level written in the line (Telegraf's `E!`, logfmt\n\
         /// `level=error` / `lvl=error`), since the components log plain text that journald files\n\
         /// at priority info. Such entries keep the priority journald gave them.",
        move |unit: &str, since: &str| by_priority(&h, unit, since, 3)
    );
    let h = host.clone();
    register!(
        &mut m,
        "warnings",
        ["unit: &str", "since: &str", "Array"],
        "/// The unit's entries at priority warning or worse since a time: by journald's priority\n\
         /// or by the level in the line (`W!`/`E!`, `level=warn`, `lvl=warn`, or worse), as `errors`.",
        move |unit: &str, since: &str| by_priority(&h, unit, since, 4)
    );
    let h = host.clone();
    register!(
        &mut m,
        "follow",
        ["query: Map", "callback: FnPtr", "i64"],
        "/// Follows new entries matching `query` (as `read`, plus `timeout`) and calls\n\
         /// `callback(entry)` for each until it returns false, the timeout passes or Ctrl-C.\n\
         /// Returns how many entries were seen.",
        move |ctx: NativeCallContext, q: Map, callback: FnPtr| follow(&h, &ctx, &q, &callback)
    );
    let h = host.clone();
    register!(
        &mut m,
        "emit",
        ["tag: &str", "message: &str", "priority: &str", "String"],
        "/// Writes `message [MARKER]` into the journal under identifier `tag` at `priority`\n\
         /// (\"info\", \"err\", …) and returns MARKER, unique to this call, to search for.",
        move |tag: &str, message: &str, priority: &str| emit(&h, tag, message, priority)
    );
    m
}

fn query_from(q: &Map) -> HostResult<(Query, Option<Duration>)> {
    let mut query = Query { lines: Some(50), ..Query::default() };
    let mut timeout = None;
    for (k, v) in q {
        let text = super::core::text(v);
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
pub fn entry_map(e: &Entry) -> Map {
    let time = UNIX_EPOCH + Duration::from_micros(e.realtime_us);
    let mut m = Map::new();
    m.insert("time".into(), crate::host::core::time_text(time).into());
    m.insert("time_us".into(), (e.realtime_us as i64).into());
    m.insert("priority".into(), (e.priority as i64).into());
    m.insert("priority_name".into(), PRIORITIES.get(e.priority as usize).copied().unwrap_or("?").into());
    m.insert("unit".into(), e.unit.clone().into());
    m.insert("identifier".into(), e.identifier.clone().into());
    m.insert("pid".into(), (e.pid as i64).into());
    m.insert("message".into(), e.message.clone().into());
    m
}

/// Reads entries through the world (also used for the hints of failed unit jobs).
pub fn read_entries(host: &Host, query: Query) -> HostResult<Vec<Entry>> {
    let journal = host.world.journal.clone();
    host.block_on(|| async move { journal.read(&query).await })?.map_err(fail)
}

fn read(host: &Host, q: &Map) -> HostResult<Array> {
    let (query, _) = query_from(q)?;
    Ok(read_entries(host, query)?.iter().map(|e| Dynamic::from_map(entry_map(e))).collect())
}

/// Lines whose own text says err or worse: Telegraf's `E!`, and logfmt's `level=` (Loki,
/// Alloy) or `lvl=` (InfluxDB). A capital in the pattern makes journalctl's --grep match case.
const ERROR_MARKS: &str = r"(^|\s)(E!|(level|lvl)=(error|crit|critical|alert|emerg|fatal|panic|dpanic))(\s|$)";
/// The same for warning or worse.
const WARNING_MARKS: &str =
    r"(^|\s)(E!|W!|(level|lvl)=(warn|warning|error|crit|critical|alert|emerg|fatal|panic|dpanic))(\s|$)";

/// Entries at priority `max` or worse: those journald filed so (a `<N>` prefix, syslog, the
/// journal API), and those filed at its default priority whose text carries the level, which
/// is how the real components log (plain text on stderr).
fn by_priority(host: &Host, unit: &str, since: &str, max: u8) -> HostResult<Array> {
    let base =
        Query { unit: Some(full_name(unit)), since: Some(since.to_string()), lines: Some(1000), ..Query::default() };
    let marks = if max <= 3 { ERROR_MARKS } else { WARNING_MARKS };
    let mut entries = read_entries(host, Query { max_priority: Some(max), ..base.clone() })?;
    entries.extend(read_entries(host, Query { grep: Some(marks.to_string()), ..base })?);
    entries.sort_by(|a, b| (a.realtime_us, a.pid, &a.message).cmp(&(b.realtime_us, b.pid, &b.message)));
    entries.dedup();
    Ok(entries.iter().map(|e| Dynamic::from_map(entry_map(e))).collect())
}

fn follow(host: &Host, ctx: &NativeCallContext, q: &Map, callback: &FnPtr) -> HostResult<i64> {
    let (query, timeout) = query_from(q)?;
    let query = Query { lines: Some(0), ..query };
    let journal = host.world.journal.clone();
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
        let keep_going = callback.call_within_context::<Dynamic>(ctx, (Dynamic::from_map(entry_map(&entry)),))?;
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
    let journal = host.world.journal.clone();
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
