//! What a run produced: check records, log lines, and how the run ended.
//!
//! Runbooks add records through `check`/`warn`/`skip`, group them with `section`, and log with
//! `log`/`print`. The `Recorder` keeps the `Report` and hands every event to the chosen
//! `Format` as it happens (so the human format streams progress) and the whole report at the
//! end (so JSON and JUnit are one document). The report decides the exit status.

pub mod human;
pub mod json;
pub mod junit;
mod run;
pub mod tap;

pub use run::{End, Event, Formatter, LOCKED_EXIT, Level, LogLine, Mode, Outcome, Record, Report, Summary, seconds};

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

use crate::secret::RedactingWriter;

/// How a run's report is written to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Readable lines, streamed as checks happen; colour only on a terminal.
    #[default]
    Human,
    /// One JSON document (schema in docs/reports.md).
    Json,
    /// JUnit XML, for CI systems.
    Junit,
    /// Test Anything Protocol, version 13.
    Tap,
    /// Prometheus file_sd targets: what `opsbook hosts` alone prints (where each host's
    /// `opsbook serve` is scraped). Not a report format: the command line refuses it for a
    /// run, and it is left out of the values `--help` lists for reports.
    #[value(hide = true)]
    Prometheus,
}

/// The formatter of `format`, in colour or not (human only).
pub fn formatter(format: Format, colour: bool) -> Box<dyn Formatter> {
    match format {
        Format::Human => Box::new(human::Human::new(colour)),
        // Refused for runs before any starts (`opsbook hosts` alone prints it); a caller that
        // gets here anyway gets the machine-readable report.
        Format::Json | Format::Prometheus => Box::new(json::Json),
        Format::Junit => Box::new(junit::Junit),
        Format::Tap => Box::new(tap::Tap::default()),
    }
}

/// Whether stdout should get colour: a terminal, and `NO_COLOR` unset.
pub fn colour_wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// Collects the report of one run and feeds the formatter.
pub struct Recorder {
    report: Report,
    formatter: Box<dyn Formatter>,
    out: Box<dyn Write + Send>,
    clock: Instant,
    last_mark: Duration,
    section: Option<String>,
}

impl Recorder {
    /// A recorder of `runbook` writing `format` to stdout.
    pub fn new(runbook: &str, source: &str, params: BTreeMap<String, String>, mode: Mode, format: Format) -> Recorder {
        Self::with_output(
            runbook,
            source,
            params,
            mode,
            formatter(format, colour_wanted()),
            Box::new(std::io::stdout()),
        )
    }

    /// A recorder writing to `out`.
    pub fn with_output(
        runbook: &str,
        source: &str,
        params: BTreeMap<String, String>,
        mode: Mode,
        mut formatter: Box<dyn Formatter>,
        out: Box<dyn Write + Send>,
    ) -> Recorder {
        let report = Report {
            runbook: runbook.to_string(),
            source: source.to_string(),
            params,
            dry_run: mode.dry_run,
            sandbox: mode.sandbox,
            host: mode.host,
            started: SystemTime::now(),
            duration: Duration::ZERO,
            events: Vec::new(),
            end: End::Completed,
        };
        let mut out: Box<dyn Write + Send> = Box::new(RedactingWriter::new(out));
        let _ = formatter.begin(&mut out, &report);
        let _ = out.flush();
        Recorder { report, formatter, out, clock: Instant::now(), last_mark: Duration::ZERO, section: None }
    }

    fn push(&mut self, event: Event) {
        let _ = self.formatter.event(&mut self.out, &event);
        let _ = self.out.flush();
        self.report.events.push(event);
    }

    /// Starts a section.
    pub fn section(&mut self, name: &str) {
        self.section = Some(name.to_string());
        self.last_mark = self.clock.elapsed();
        self.push(Event::Section(name.to_string()));
    }

    /// Records a check.
    pub fn record(
        &mut self,
        name: &str,
        outcome: Outcome,
        detail: &str,
        expected: Option<String>,
        actual: Option<String>,
    ) {
        let at = self.clock.elapsed();
        let record = Record {
            section: self.section.clone(),
            name: name.to_string(),
            outcome,
            detail: detail.to_string(),
            expected,
            actual,
            duration: at.saturating_sub(self.last_mark),
            at,
        };
        self.last_mark = at;
        self.push(Event::Record(record));
    }

    /// Logs a line.
    pub fn log(&mut self, level: Level, message: &str) {
        if !self.formatter.shows_logs() {
            let mut err = RedactingWriter::new(std::io::stderr());
            let _ = writeln!(err, "{message}");
        }
        let line =
            LogLine { section: self.section.clone(), level, message: message.to_string(), at: self.clock.elapsed() };
        self.push(Event::Log(line));
    }

    /// The checks counted so far.
    pub fn summary(&self) -> Summary {
        self.report.summary()
    }

    /// Ends the run, writes the final output and returns the report.
    pub fn finish(mut self, end: End) -> Report {
        self.report.end = end;
        self.report.duration = self.clock.elapsed();
        let _ = self.formatter.finish(&mut self.out, &self.report);
        let _ = self.out.flush();
        self.report
    }
}
