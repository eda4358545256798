//! What a run's report holds — its checks, log lines and sections in order, how it ended, the
//! counts — and the `Formatter` each output format implements over it.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, SystemTime};

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It passed.
    Pass,
    /// It failed.
    Fail,
    /// It passed with a warning.
    Warn,
    /// It was skipped.
    Skip,
}

impl Outcome {
    /// Its word in reports (`pass`, `fail`, `warn`, `skip`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Warn => "warn",
            Outcome::Skip => "skip",
        }
    }
}

/// One check as it happened.
#[derive(Debug, Clone)]
pub struct Record {
    /// The section it was recorded in, if any.
    pub section: Option<String>,
    /// What was checked.
    pub name: String,
    /// How it came out.
    pub outcome: Outcome,
    /// What was found, in words.
    pub detail: String,
    /// What the check expected, when it says.
    pub expected: Option<String>,
    /// What came back instead, when it says.
    pub actual: Option<String>,
    /// Time since the previous record or section: what this check took to establish.
    pub duration: Duration,
    /// Time since the run started.
    pub at: Duration,
}

/// Importance of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Information.
    Info,
    /// A warning.
    Warn,
    /// A mutating call not carried out under `--dry-run`.
    Plan,
}

impl Level {
    /// Its word in reports (`info`, `warn`, `plan`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Plan => "plan",
        }
    }
}

#[derive(Debug, Clone)]
/// A line a runbook logged.
pub struct LogLine {
    /// The section it was logged in, if any.
    pub section: Option<String>,
    /// How important it is.
    pub level: Level,
    /// The line.
    pub message: String,
    /// Time since the run started.
    pub at: Duration,
}

/// The exit status of a run refused because another run holds a host's change lock
/// (sysexits' `EX_TEMPFAIL`: the same command may pass later).
pub const LOCKED_EXIT: u8 = 75;

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The script ran to its end.
    Completed,
    /// A host call or `throw` stopped the script: an operational failure (exit 1).
    Aborted(String),
    /// The script itself is wrong: unknown function, wrong types… (exit 2).
    ScriptError(String),
    /// Ctrl-C (exit 130).
    Interrupted,
    /// Stopped at its time limit (`--timeout`, `limits.run_timeout`): where it was (exit 124).
    TimedOut(String),
    /// The runbook called `exit(code)`, at `at`: the run's exit status is `code` (1 when a
    /// check failed and the code is 0: a failure is never hidden).
    Stopped {
        /// The code it gave.
        code: u8,
        /// Where it called `exit`.
        at: String,
    },
    /// Another run holds the host's change lock: who holds it, and since when (exit 75).
    Locked(String),
}

impl End {
    /// What a stop by `exit(code)` says, for every format.
    pub fn stopped_message(code: u8, at: &str) -> String {
        format!("the runbook called exit({code}) at {at}")
    }
}

/// Something that happened during a run, in order.
#[derive(Debug, Clone)]
pub enum Event {
    /// A section began.
    Section(String),
    /// A check was recorded.
    Record(Record),
    /// A line was logged.
    Log(LogLine),
}

/// How and where a run acts: changing things or only planning, on this machine or in the
/// sandbox, and on which host of a fleet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mode {
    /// Changing verbs only said what they would do (`--dry-run`).
    pub dry_run: bool,
    /// `Some(faults)` when the run is against the in-process stack.
    pub sandbox: Option<Vec<String>>,
    /// The host's name in a run over several hosts (`None`: this machine, alone).
    pub host: Option<String>,
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The runbook's name.
    pub runbook: String,
    /// Where it was read from.
    pub source: String,
    /// Its parameters, as given.
    pub params: BTreeMap<String, String>,
    /// Whether it ran under `--dry-run`.
    pub dry_run: bool,
    /// Run against the in-process stack (`--sandbox`), with these faults injected.
    pub sandbox: Option<Vec<String>>,
    /// The host it ran on, in a run over several hosts.
    pub host: Option<String>,
    /// When it started.
    pub started: SystemTime,
    /// How long it ran.
    pub duration: Duration,
    /// What happened, in order.
    pub events: Vec<Event>,
    /// How it ended.
    pub end: End,
}

/// Counts per outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks that passed with a warning.
    pub warnings: usize,
    /// Checks that were skipped.
    pub skipped: usize,
}

impl Report {
    /// The checks recorded, in order.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.events.iter().filter_map(|e| match e {
            Event::Record(r) => Some(r),
            _ => None,
        })
    }

    /// The checks counted by outcome.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for r in self.records() {
            match r.outcome {
                Outcome::Pass => s.passed += 1,
                Outcome::Fail => s.failed += 1,
                Outcome::Warn => s.warnings += 1,
                Outcome::Skip => s.skipped += 1,
            }
        }
        s
    }

    /// `passed`, `failed`, `error`, `interrupted`, `timed out`, `stopped` or `locked`.
    pub fn outcome(&self) -> &'static str {
        match &self.end {
            End::Locked(_) => "locked",
            End::Interrupted => "interrupted",
            End::Stopped { .. } => "stopped",
            End::TimedOut(_) => "timed out",
            End::ScriptError(_) => "error",
            End::Aborted(_) => "failed",
            End::Completed if self.summary().failed > 0 => "failed",
            End::Completed => "passed",
        }
    }

    /// 0 all checks passed; 1 a check failed or the run aborted; 2 script error; 75 another
    /// run holds the host's change lock (`EX_TEMPFAIL`: try again later); 124 timed out (as
    /// `timeout(1)`); 130 interrupted; the code `exit(code)` gave (1 for `exit(0)` after a
    /// failed check).
    pub fn exit_code(&self) -> u8 {
        if let End::Stopped { code, .. } = self.end {
            return if code == 0 && self.summary().failed > 0 { 1 } else { code };
        }
        match self.outcome() {
            "passed" => 0,
            "failed" => 1,
            "locked" => LOCKED_EXIT,
            "timed out" => 124,
            "interrupted" => 130,
            _ => 2,
        }
    }
}

impl Summary {
    /// `3 passed, 1 failed` plus skipped and warnings when there are any.
    pub fn line(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            line.push_str(&format!(", {} skipped", self.skipped));
        }
        if self.warnings > 0 {
            let s = if self.warnings == 1 { "" } else { "s" };
            line.push_str(&format!(", {} warning{s}", self.warnings));
        }
        line
    }
}

/// An output format: sees each event as it happens and the report at the end.
pub trait Formatter: Send {
    /// Called once, before the first event.
    fn begin(&mut self, _out: &mut dyn Write, _report: &Report) -> std::io::Result<()> {
        Ok(())
    }
    /// Called for each event as it happens.
    fn event(&mut self, _out: &mut dyn Write, _event: &Event) -> std::io::Result<()> {
        Ok(())
    }
    /// Called once at the end, with the whole report.
    fn finish(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()>;
    /// Whether log lines appear in this format's stream; if not they go to stderr as well.
    fn shows_logs(&self) -> bool {
        false
    }
}

/// Seconds with millisecond precision, as the machine formats want them.
pub fn seconds(d: Duration) -> f64 {
    (d.as_millis() as f64) / 1000.0
}
