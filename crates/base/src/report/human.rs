//! The human format: one line per check as it happens, details indented below a failure,
//! log lines in between, and a closing `N passed, N failed` line. Colour only when asked.
//! Every text that may have come from outside (a detail, a log line, a name, an error) is shown
//! with its control characters escaped (`crate::shown`).

use std::io::Write;

use super::run::{End, Event, Formatter, Level, Outcome, Report};
use crate::shown::escaped;

/// The report for people: a line per check, colours on a terminal.
pub struct Human {
    colour: bool,
}

impl Human {
    /// The human format, in colour or not.
    pub fn new(colour: bool) -> Human {
        Human { colour }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }
}

/// A duration as the report writes it (`12ms`, `1.5s`).
pub fn millis(d: std::time::Duration) -> String {
    if d.as_millis() >= 1000 { format!("{:.1}s", d.as_secs_f64()) } else { format!("{}ms", d.as_millis()) }
}

impl Formatter for Human {
    fn begin(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        let mut mode = String::new();
        if let Some(faults) = &report.sandbox {
            // Never mistaken for a verdict on the real stack.
            mode.push_str("  [sandbox: in-process stack");
            if !faults.is_empty() {
                mode.push_str(&format!(", faults {}", faults.join(" ")));
            }
            mode.push(']');
        }
        if report.dry_run {
            mode.push_str("  (dry run: nothing will be changed)");
        }
        let on = report.host.as_ref().map(|h| format!(" on {}", self.paint("1", &escaped(h)))).unwrap_or_default();
        writeln!(
            out,
            "{}{on} {}{}",
            self.paint("1", &escaped(&report.runbook)),
            self.paint("2", &format!("({})", escaped(&report.source))),
            escaped(&mode)
        )
    }

    fn event(&mut self, out: &mut dyn Write, event: &Event) -> std::io::Result<()> {
        match event {
            Event::Section(name) => writeln!(out, "\n{}", self.paint("1", &format!("== {}", escaped(name)))),
            Event::Log(line) => {
                let message = escaped(&line.message);
                match line.level {
                    Level::Info => writeln!(out, "  {message}"),
                    Level::Warn => writeln!(out, "  {} {message}", self.paint("33", "warning:")),
                    Level::Plan => writeln!(out, "  {} {message}", self.paint("36", "plan:")),
                }
            }
            Event::Record(r) => {
                let tag = match r.outcome {
                    Outcome::Pass => self.paint("32", "ok  "),
                    Outcome::Fail => self.paint("1;31", "FAIL"),
                    Outcome::Warn => self.paint("33", "WARN"),
                    Outcome::Skip => self.paint("2", "skip"),
                };
                // Continuation lines of a detail (a remedy, a hint) stay under the check.
                let detail = if r.detail.is_empty() {
                    String::new()
                } else {
                    format!(" — {}", escaped(&r.detail).replace('\n', "\n          "))
                };
                let took = if r.duration.as_millis() >= 100 {
                    self.paint("2", &format!("  ({})", millis(r.duration)))
                } else {
                    String::new()
                };
                writeln!(out, "  {tag}  {}{detail}{took}", escaped(&r.name))?;
                if r.outcome != Outcome::Pass {
                    if let Some(e) = &r.expected {
                        writeln!(out, "          expected: {}", escaped(e))?;
                    }
                    if let Some(a) = &r.actual {
                        writeln!(out, "          actual:   {}", escaped(a))?;
                    }
                }
                Ok(())
            }
        }
    }

    fn finish(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        writeln!(out)?;
        match &report.end {
            End::Completed => {}
            End::Aborted(message) => writeln!(out, "{} {}\n", self.paint("1;31", "aborted:"), escaped(message))?,
            End::ScriptError(_) => writeln!(out, "{}\n", self.paint("1;31", "stopped by a script error (see stderr)"))?,
            End::Interrupted => writeln!(out, "{}\n", self.paint("1;33", "interrupted"))?,
            End::TimedOut(message) => writeln!(out, "{} {}\n", self.paint("1;33", "timed out:"), escaped(message))?,
            End::Locked(message) => writeln!(out, "{} {}\n", self.paint("1;33", "locked:"), escaped(message))?,
            End::Stopped { code, at } => {
                writeln!(out, "{} {}\n", self.paint("1;33", "stopped:"), escaped(&End::stopped_message(*code, at)))?
            }
        }
        let summary = report.summary();
        let line = summary.line();
        let line = if summary.failed > 0 || report.end != End::Completed {
            self.paint("1;31", &line)
        } else {
            self.paint("1;32", &line)
        };
        writeln!(out, "{line}  {}", self.paint("2", &format!("({})", millis(report.duration))))
    }

    fn shows_logs(&self) -> bool {
        true
    }
}
