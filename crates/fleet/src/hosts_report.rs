//! The report of one runbook run on several hosts: each host's report, then the fleet's.
//!
//! Human: a section per host (its report as a single run would print it, the host named in
//! its header), then a summary table (host, roles, passed, failed, time). JSON: one document
//! whose `runs` are the single-run documents (schema 2, `host` on each), with a per-host
//! summary. JUnit: one `testsuite` per host. TAP: one stream and one plan, each line's
//! description starting with `[host]`. The exit status is the worst of the hosts'. Where hosts
//! were reached over ssh, the summary says how many connections were reused and how many new.
//! A host whose run was interrupted (Ctrl-C, SIGTERM, SIGHUP) is counted and named as
//! interrupted, not as failed.

use std::io::Write;
use std::time::Duration;

use serde_json::json;

use opsbook_base::report::{
    End, Format, Formatter, Report, colour_wanted, formatter, human, json, junit, seconds, tap,
};

/// A host's finished run, with the roles it plays there.
pub(crate) struct HostRun {
    pub roles: Vec<String>,
    pub report: Report,
    /// Over ssh: whether the host's lasting connection was reused (`false`: a new one).
    pub ssh_reused: Option<bool>,
}

/// How many hosts were reached over a reused ssh connection and how many over a new one;
/// `None` when no host was reached over ssh.
pub(crate) fn connections(runs: &[HostRun]) -> Option<(usize, usize)> {
    let reused = runs.iter().filter(|r| r.ssh_reused == Some(true)).count();
    let new = runs.iter().filter(|r| r.ssh_reused == Some(false)).count();
    (reused + new > 0).then_some((reused, new))
}

/// Whether the host's run was stopped by an operator's signal.
fn interrupted(run: &HostRun) -> bool {
    run.report.end == End::Interrupted
}

/// The hosts that failed (not counting the interrupted ones) and those interrupted.
fn failed_and_interrupted(runs: &[HostRun]) -> (Vec<&HostRun>, Vec<&HostRun>) {
    runs.iter().filter(|r| r.report.exit_code() != 0).partition(|r| !interrupted(r))
}

/// 0 when every host passed; else the highest of the hosts' statuses (1 failed, 2 script
/// error, 130 interrupted).
pub(crate) fn exit_code(runs: &[HostRun]) -> u8 {
    runs.iter().map(|r| r.report.exit_code()).max().unwrap_or(0)
}

/// Writes the fleet's report in `format`; `took` is the wall time of the whole run.
pub(crate) fn write(out: &mut dyn Write, format: Format, runs: &[HostRun], took: Duration) -> std::io::Result<()> {
    match format {
        Format::Human => write_human(out, runs, took),
        // Prometheus: as in `formatter`, refused before any run.
        Format::Json | Format::Prometheus => {
            serde_json::to_writer_pretty(&mut *out, &document(runs, took))?;
            writeln!(out)
        }
        Format::Junit => {
            let reports: Vec<Report> = runs.iter().map(|r| r.report.clone()).collect();
            junit::document(out, &reports)
        }
        Format::Tap => write_tap(out, runs),
    }
}

/// Each host's report, replayed through the single-run formatter.
pub(super) fn replay(out: &mut dyn Write, f: &mut dyn Formatter, report: &Report) -> std::io::Result<()> {
    f.begin(out, report)?;
    for event in &report.events {
        f.event(out, event)?;
    }
    f.finish(out, report)
}

fn write_human(out: &mut dyn Write, runs: &[HostRun], took: Duration) -> std::io::Result<()> {
    let colour = colour_wanted();
    for run in runs {
        replay(out, formatter(Format::Human, colour).as_mut(), &run.report)?;
        writeln!(out)?;
    }
    let rows: Vec<[String; 5]> = runs
        .iter()
        .map(|r| {
            let s = r.report.summary();
            [
                r.report.host.clone().unwrap_or_default(),
                if r.roles.is_empty() { "-".into() } else { r.roles.join(", ") },
                s.passed.to_string(),
                match &r.report.end {
                    End::Interrupted | End::TimedOut(_) | End::Locked(_) => {
                        format!("{}, {}", s.failed, r.report.outcome())
                    }
                    _ => (s.failed + usize::from(r.report.outcome() != "passed" && s.failed == 0)).to_string(),
                },
                human::millis(r.report.duration),
            ]
        })
        .collect();
    // A host's name and roles come from an inventory: shown with control characters escaped.
    let rows: Vec<[String; 5]> =
        rows.into_iter().map(|r| r.map(|cell| opsbook_base::escaped(&cell).into_owned())).collect();
    let header = ["HOST", "ROLES", "PASSED", "FAILED", "TIME"];
    let widths: Vec<usize> =
        (0..5).map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0)).collect();
    let line = |cells: [&str; 5]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            text.push_str(cell);
            if i < 4 {
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        text
    };
    writeln!(out, "{}", line(header))?;
    for row in &rows {
        writeln!(out, "{}", line([&row[0], &row[1], &row[2], &row[3], &row[4]]))?;
    }
    let (failed, stopped) = failed_and_interrupted(runs);
    let mut parts = Vec::new();
    if !failed.is_empty() {
        parts.push(format!("{} failed ({})", failed.len(), names(&failed)));
    }
    if !stopped.is_empty() {
        parts.push(format!("{} interrupted ({})", stopped.len(), names(&stopped)));
    }
    let verdict = match parts.is_empty() {
        true => format!("{} host(s): all passed", runs.len()),
        false => format!("{} host(s): {}", runs.len(), parts.join(", ")),
    };
    writeln!(out, "\n{verdict}  ({})", human::millis(took))?;
    match connections(runs) {
        Some((reused, new)) => writeln!(out, "ssh connections: {reused} reused, {new} new"),
        None => Ok(()),
    }
}

fn names(runs: &[&HostRun]) -> String {
    // Names come from an inventory: shown with control characters escaped.
    let name = |r: &&HostRun| opsbook_base::escaped(r.report.host.as_deref().unwrap_or_default()).into_owned();
    runs.iter().map(name).collect::<Vec<_>>().join(", ")
}

fn write_tap(out: &mut dyn Write, runs: &[HostRun]) -> std::io::Result<()> {
    let mut tap = tap::Tap::default();
    writeln!(out, "TAP version 13")?;
    for run in runs {
        tap.begin_host(out, &run.report)?;
        for event in &run.report.events {
            tap.event(out, event)?;
        }
        tap.end(out, &run.report, false)?;
    }
    tap.plan(out)?;
    let (failed, stopped) = failed_and_interrupted(runs);
    let stopped = if stopped.is_empty() { String::new() } else { format!(", {} interrupted", stopped.len()) };
    writeln!(out, "# {} host(s), {} failed{stopped}", runs.len(), failed.len())?;
    match connections(runs) {
        Some((reused, new)) => writeln!(out, "# ssh connections: {reused} reused, {new} new"),
        None => Ok(()),
    }
}

/// The fleet's JSON document (schema 2).
pub(crate) fn document(runs: &[HostRun], took: Duration) -> serde_json::Value {
    let hosts: Vec<_> = runs
        .iter()
        .map(|r| {
            let s = r.report.summary();
            json!({
                "host": r.report.host, "roles": r.roles, "outcome": r.report.outcome(),
                "exit_code": r.report.exit_code(), "duration_s": seconds(r.report.duration),
                "summary": {"passed": s.passed, "failed": s.failed, "warnings": s.warnings, "skipped": s.skipped},
            })
        })
        .collect();
    let (failed, stopped) = failed_and_interrupted(runs);
    let (failed, stopped) = (failed.len(), stopped.len());
    let code = exit_code(runs);
    let outcome = match code {
        0 => "passed",
        _ if stopped > 0 => "interrupted",
        _ => "failed",
    };
    let mut summary = json!({
        "hosts": runs.len(), "passed": runs.len() - failed - stopped, "failed": failed, "interrupted": stopped,
    });
    if let Some((reused, new)) = connections(runs) {
        summary["ssh_connections"] = json!({"reused": reused, "new": new});
    }
    json!({
        "schema": json::SCHEMA,
        "opsbook": env!("CARGO_PKG_VERSION"),
        "fleet": true,
        "runbook": runs.first().map(|r| r.report.runbook.clone()),
        "outcome": outcome,
        "exit_code": code,
        "duration_s": seconds(took),
        "summary": summary,
        "hosts": hosts,
        "runs": runs.iter().map(|r| json::document(&r.report)).collect::<Vec<_>>(),
    })
}
