//! The JUnit XML format: one `testsuite` per run, one `testcase` per check. Failures carry
//! the detail and expected/actual; skips are `skipped`; warnings pass with the warning in
//! `system-out`; an aborted or broken run adds an `error` test case.

use std::io::Write;

use crate::shown::xml as esc;

use super::run::{End, Event, Formatter, Outcome, Report, seconds};

/// The JUnit XML format.
pub struct Junit;

impl Formatter for Junit {
    fn finish(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        document(out, std::slice::from_ref(report))
    }
}

/// Counts of a run as JUnit counts them: (tests, failures, errors, skipped).
fn counts(report: &Report) -> (usize, usize, usize, usize) {
    let s = report.summary();
    let errors = usize::from(report.end != End::Completed);
    (s.passed + s.failed + s.warnings + s.skipped + errors, s.failed, errors, s.skipped)
}

/// The whole XML document: one `testsuite` per run (per host, in a run over several hosts).
pub fn document(out: &mut dyn Write, reports: &[Report]) -> std::io::Result<()> {
    let (mut tests, mut failures, mut errors, mut skipped, mut time) = (0, 0, 0, 0, 0.0);
    for r in reports {
        let (t, f, e, s) = counts(r);
        (tests, failures, errors, skipped) = (tests + t, failures + f, errors + e, skipped + s);
        time = f64::max(time, seconds(r.duration));
    }
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="opsbook" tests="{tests}" failures="{failures}" errors="{errors}" skipped="{skipped}" time="{time:.3}">"#
    )?;
    for report in reports {
        suite(out, report)?;
    }
    writeln!(out, "</testsuites>")
}

fn suite(out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
    let (tests, failures, errors, skipped) = counts(report);
    let suite = match &report.host {
        Some(host) => esc(&format!("{host}: {}", report.runbook)),
        None => esc(&report.runbook),
    };
    let hostname = report.host.as_ref().map(|h| format!(r#" hostname="{}""#, esc(h))).unwrap_or_default();
    writeln!(
        out,
        r#"  <testsuite name="{suite}"{hostname} tests="{tests}" failures="{failures}" errors="{errors}" skipped="{skipped}" time="{:.3}" timestamp="{}">"#,
        seconds(report.duration),
        humantime::format_rfc3339_seconds(report.started)
    )?;
    for r in report.records() {
        let class = match &r.section {
            Some(section) => format!("{suite}.{}", esc(section)),
            None => suite.clone(),
        };
        write!(out, r#"    <testcase name="{}" classname="{class}" time="{:.3}""#, esc(&r.name), seconds(r.duration))?;
        let mut body = String::new();
        match r.outcome {
            Outcome::Pass => {}
            Outcome::Fail => {
                let mut text = r.detail.clone();
                if let Some(e) = &r.expected {
                    text.push_str(&format!("\nexpected: {e}"));
                }
                if let Some(a) = &r.actual {
                    text.push_str(&format!("\nactual: {a}"));
                }
                body = format!(r#"      <failure message="{}">{}</failure>"#, esc(&r.detail), esc(&text));
            }
            Outcome::Skip => body = format!(r#"      <skipped message="{}"/>"#, esc(&r.detail)),
            Outcome::Warn => body = format!("      <system-out>warning: {}</system-out>", esc(&r.detail)),
        }
        if body.is_empty() {
            writeln!(out, "/>")?;
        } else {
            writeln!(out, ">\n{body}\n    </testcase>")?;
        }
    }
    let (kind, message) = match &report.end {
        End::Completed => ("", String::new()),
        End::Aborted(m) => ("aborted", m.clone()),
        End::ScriptError(m) => ("script error", m.clone()),
        End::Interrupted => ("interrupted", "interrupted by the operator".to_string()),
        End::TimedOut(m) => ("timed out", m.clone()),
        End::Locked(m) => ("locked", m.clone()),
        End::Stopped { code, at } => ("stopped", End::stopped_message(*code, at)),
    };
    if !kind.is_empty() {
        writeln!(out, r#"    <testcase name="{kind}" classname="{suite}" time="0">"#)?;
        writeln!(out, r#"      <error message="{}" type="{kind}">{}</error>"#, esc(&message), esc(&message))?;
        writeln!(out, "    </testcase>")?;
    }
    let logs: Vec<String> = report
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Log(l) => Some(format!("[{}] {}", l.level.as_str(), l.message)),
            _ => None,
        })
        .collect();
    if !logs.is_empty() {
        writeln!(out, "    <system-out>{}</system-out>", esc(&logs.join("\n")))?;
    }
    writeln!(out, "  </testsuite>")
}
