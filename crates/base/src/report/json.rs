//! The JSON format: one document per run (schema version 2, documented in docs/reports.md); a run
//! over several hosts nests one such document per host (`opsbook_fleet`'s hosts report).

use std::io::Write;

use serde_json::{Value, json};

use super::run::{End, Event, Formatter, Report, seconds};

/// The JSON format: one document for the run.
pub struct Json;

/// The version of the documents this module writes; bumped on incompatible changes (2: `host`
/// on the run and every check, and the fleet document).
pub const SCHEMA: u32 = 2;

/// Writes `document` to `path` (`--save-json`), through the secret redactor as stdout is,
/// whole or not at all (`atomic`), readable by this user alone (0600).
pub fn save(path: &std::path::Path, document: &Value) -> Result<(), crate::error::Error> {
    let write = || -> std::io::Result<()> {
        let mut file = crate::atomic::Atomic::create(path)?;
        let mut out = crate::secret::RedactingWriter::new(std::io::BufWriter::new(file.file()));
        serde_json::to_writer_pretty(&mut out, document)?;
        writeln!(out)?;
        out.flush()?;
        drop(out);
        file.commit(0o600)
    };
    write().map_err(|source| crate::error::Error::Io {
        context: format!("cannot write the JSON report to `{}`", path.display()),
        source,
    })
}

/// The run's JSON document.
pub fn document(report: &Report) -> Value {
    let summary = report.summary();
    let checks: Vec<Value> = report
        .records()
        .map(|r| {
            json!({
                "host": report.host,
                "section": r.section,
                "name": r.name,
                "outcome": r.outcome.as_str(),
                "detail": r.detail,
                "expected": r.expected,
                "actual": r.actual,
                "duration_s": seconds(r.duration),
                "at_s": seconds(r.at),
            })
        })
        .collect();
    let log: Vec<Value> = report
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Log(l) => Some(json!({
                "host": report.host, "section": l.section, "level": l.level.as_str(), "message": l.message, "at_s": seconds(l.at),
            })),
            _ => None,
        })
        .collect();
    let error = match &report.end {
        End::Aborted(m) => json!({"kind": "aborted", "message": m}),
        End::ScriptError(m) => json!({"kind": "script", "message": m}),
        End::Interrupted => json!({"kind": "interrupted", "message": "interrupted"}),
        End::TimedOut(m) => json!({"kind": "timed_out", "message": m}),
        End::Locked(m) => json!({"kind": "locked", "message": m}),
        End::Stopped { code, at } => {
            json!({"kind": "stopped", "code": code, "message": End::stopped_message(*code, at)})
        }
        End::Completed => Value::Null,
    };
    json!({
        "schema": SCHEMA,
        "opsbook": env!("CARGO_PKG_VERSION"),
        "host": report.host,
        "runbook": report.runbook,
        "source": report.source,
        "params": report.params,
        "dry_run": report.dry_run,
        "sandbox": report.sandbox.is_some(),
        "faults": report.sandbox.clone().unwrap_or_default(),
        "started_at": humantime::format_rfc3339_millis(report.started).to_string(),
        "duration_s": seconds(report.duration),
        "outcome": report.outcome(),
        "exit_code": report.exit_code(),
        "summary": {
            "passed": summary.passed, "failed": summary.failed,
            "warnings": summary.warnings, "skipped": summary.skipped,
        },
        "checks": checks,
        "log": log,
        "error": error,
    })
}

impl Formatter for Json {
    fn finish(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &document(report))?;
        writeln!(out)
    }
}
