//! The TAP (version 13) format, streamed: one test line per check as it happens, YAML
//! diagnostics under failures, log lines as comments, the plan at the end.

use std::io::Write;

use super::run::{End, Event, Formatter, Outcome, Report};

#[derive(Default)]
/// The TAP format (Test Anything Protocol).
pub struct Tap {
    count: usize,
    /// `[host] ` before each description in a run over several hosts.
    prefix: String,
}

impl Tap {
    /// Starts a host's part of a fleet's stream: its lines carry `[host]`.
    pub fn begin_host(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        self.prefix = report.host.as_ref().map(|h| format!("[{}] ", one_line(h))).unwrap_or_default();
        writeln!(out, "# {}opsbook run {} ({})", self.prefix, report.runbook, report.source)
    }
}

/// `text` on one line, `#` escaped, control characters written visibly (`crate::shown`).
fn one_line(text: &str) -> String {
    crate::shown::escaped(&text.replace('\n', " ")).replace('#', "\\#")
}

fn yaml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

impl Formatter for Tap {
    fn begin(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        writeln!(out, "TAP version 13")?;
        self.begin_host(out, report)
    }

    fn event(&mut self, out: &mut dyn Write, event: &Event) -> std::io::Result<()> {
        match event {
            Event::Section(name) => writeln!(out, "# == {}", one_line(name)),
            Event::Log(l) => writeln!(
                out,
                "# {}{}",
                if l.level.as_str() == "info" { String::new() } else { format!("{}: ", l.level.as_str()) },
                one_line(&l.message)
            ),
            Event::Record(r) => {
                self.count += 1;
                let name = format!("{}{}", self.prefix, one_line(&r.name));
                match r.outcome {
                    Outcome::Pass => writeln!(out, "ok {} - {name}", self.count),
                    Outcome::Skip => writeln!(out, "ok {} - {name} # SKIP {}", self.count, one_line(&r.detail)),
                    Outcome::Warn => {
                        writeln!(out, "ok {} - {name}", self.count)?;
                        writeln!(out, "# warning: {}", one_line(&r.detail))
                    }
                    Outcome::Fail => {
                        writeln!(out, "not ok {} - {name}", self.count)?;
                        writeln!(out, "  ---")?;
                        writeln!(out, "  message: {}", yaml_string(&r.detail))?;
                        if let Some(e) = &r.expected {
                            writeln!(out, "  expected: {}", yaml_string(e))?;
                        }
                        if let Some(a) = &r.actual {
                            writeln!(out, "  actual: {}", yaml_string(a))?;
                        }
                        if let Some(s) = &r.section {
                            writeln!(out, "  section: {}", yaml_string(s))?;
                        }
                        writeln!(out, "  ...")
                    }
                }
            }
        }
    }

    fn finish(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        self.end(out, report, true)?;
        writeln!(out, "1..{}", self.count)?;
        writeln!(out, "# {}", report.summary().line())
    }

    fn shows_logs(&self) -> bool {
        true
    }
}

impl Tap {
    /// How a host's run ended: `Bail out!` stops a TAP consumer, so a fleet (`bail` false)
    /// says it in a comment and goes on with the next host.
    pub fn end(&mut self, out: &mut dyn Write, report: &Report, bail: bool) -> std::io::Result<()> {
        let why = match &report.end {
            End::Completed => return Ok(()),
            End::Aborted(m) | End::ScriptError(m) => one_line(m),
            End::Interrupted => "interrupted".to_string(),
            End::TimedOut(m) => format!("timed out: {}", one_line(m)),
            End::Locked(m) => format!("locked: {}", one_line(m)),
            End::Stopped { code, at } => End::stopped_message(*code, at),
        };
        if bail { writeln!(out, "Bail out! {why}") } else { writeln!(out, "# {}stopped: {why}", self.prefix) }
    }

    /// The plan line, once every host's lines are out.
    pub fn plan(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out, "1..{}", self.count)
    }
}
