//! The report of a rollout: a change run over several hosts in batches, each host gated by its
//! own run's checks, rolled back when its gate failed, the rollout stopped once more hosts
//! failed than its budget allows (`crates/fleet/src/rollout.rs` runs it).
//!
//! Human: each batch's hosts are written as they finish (the change's report, then the
//! rollback's when there was one), then the batches with their timings, the hosts with their
//! outcome — `changed`, `rolled back`, `failed`, `unreachable`, `not attempted` — and why, and a verdict.
//! JSON: the fleet's document of the changes' reports, with a `rollout` object (plan, batches,
//! hosts, each rollback's own document). JUnit and TAP: the changes' and rollbacks' reports as
//! the fleet writes them. Exit status: 0 every host changed, 1 otherwise, 130 interrupted.

use std::io::Write;
use std::time::Duration;

use serde_json::json;

use crate::hosts_report::{self as fleet, HostRun};
use opsbook_base::report::{End, Format, Outcome, Report, colour_wanted, formatter, human, seconds};

/// What became of one host of a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostOutcome {
    /// The change ran and its gate passed.
    Changed,
    /// The gate failed and the rollback put the host back, verified healthy.
    RolledBack,
    /// The gate failed and the host is not back: no rollback (`--no-rollback`, nothing to
    /// roll back to), or the rollback failed too.
    Failed,
    /// The host stopped answering during its change or its gate and its gate failed: not
    /// verified, not rolled back, its rollback point kept (`crate::liveness`).
    Unreachable,
    /// Never started: the rollout stopped before its batch. Untouched.
    NotAttempted,
    /// Under `--dry-run`: its plan was shown, nothing changed.
    Planned,
}

impl HostOutcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HostOutcome::Changed => "changed",
            HostOutcome::RolledBack => "rolled back",
            HostOutcome::Failed => "failed",
            HostOutcome::Unreachable => "unreachable",
            HostOutcome::NotAttempted => "not attempted",
            HostOutcome::Planned => "planned",
        }
    }
}

/// One host of a rollout.
#[derive(Debug, Clone)]
pub(crate) struct HostResult {
    pub host: String,
    pub roles: Vec<String>,
    /// 1-based.
    pub batch: usize,
    pub outcome: HostOutcome,
    /// Why, in a line: the gate's failing checks, the rollback's verdict, why not attempted.
    pub reason: String,
    /// The change's report (or the rollback point's, when keeping it failed).
    pub change: Option<Report>,
    pub rollback: Option<Report>,
    pub took: Option<Duration>,
}

/// One batch: its hosts, when it started (since the rollout began) and what it took.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batch {
    pub hosts: Vec<String>,
    pub started: Option<Duration>,
    pub took: Option<Duration>,
}

/// The rollout as asked for, in words and numbers.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// `1`, `25%`, or `all` (a canary then the rest).
    pub serial: String,
    pub canary: bool,
    /// `--max-fail` as given (`0`, `10%`).
    pub max_fail: String,
    /// How many hosts may fail: more than this stops the rollout.
    pub budget: usize,
    pub rollback: bool,
}

/// The whole rollout.
#[derive(Debug, Clone)]
pub(crate) struct Rollout {
    pub runbook: String,
    pub plan: Plan,
    pub batches: Vec<Batch>,
    pub hosts: Vec<HostResult>,
    /// Why no further batch started, when one did not.
    pub stopped: Option<String>,
    /// Ctrl-C came: no batch started after it.
    pub interrupted: bool,
    pub dry_run: bool,
}

impl Rollout {
    fn count(&self, outcome: HostOutcome) -> usize {
        self.hosts.iter().filter(|h| h.outcome == outcome).count()
    }

    /// 130 interrupted; under `--dry-run` the worst of the plans (as a fleet run's); else 0
    /// when every host changed, 2 when a change was a script error, else 1.
    pub(crate) fn exit_code(&self) -> u8 {
        if self.interrupted {
            return 130;
        }
        if self.dry_run {
            return fleet::exit_code(&self.runs());
        }
        let script_error = self.hosts.iter().any(|h| h.change.as_ref().is_some_and(|r| r.exit_code() == 2));
        match () {
            _ if self.count(HostOutcome::Changed) == self.hosts.len() => 0,
            _ if script_error => 2,
            _ => 1,
        }
    }

    /// The changes' reports, as a fleet run's.
    fn runs(&self) -> Vec<HostRun> {
        self.hosts
            .iter()
            .filter_map(|h| h.change.clone().map(|report| HostRun { roles: h.roles.clone(), report, ssh_reused: None }))
            .collect()
    }

    /// What the rollout is, in a line.
    fn describe(&self) -> String {
        let p = &self.plan;
        let pace = match (p.canary, p.serial.as_str()) {
            (true, "all") => "a canary, then the rest".to_string(),
            (true, s) => format!("a canary, then {s} at a time"),
            (false, s) => format!("{s} at a time"),
        };
        let batches = format!("{} host(s) in {} batch(es), {pace}", self.hosts.len(), self.batches.len());
        if self.dry_run {
            return format!("rollout of {} (dry run: nothing changes): {batches}", self.runbook);
        }
        let back = if p.rollback { "rolled back" } else { "kept as it is (--no-rollback)" };
        format!(
            "rollout of {}: {batches}; stop once more than {} host(s) fail (--max-fail {}); a host whose gate fails is {back}",
            self.runbook, p.budget, p.max_fail
        )
    }
}

/// Writes the hosts of a batch that just finished (human format only: the other formats are
/// one document at the end).
pub(crate) fn write_batch(out: &mut dyn Write, format: Format, hosts: &[&HostResult]) -> std::io::Result<()> {
    if format != Format::Human {
        return Ok(());
    }
    for host in hosts {
        for report in host.change.iter().chain(&host.rollback) {
            fleet::replay(out, formatter(Format::Human, colour_wanted()).as_mut(), report)?;
            writeln!(out)?;
        }
    }
    out.flush()
}

/// Writes the rollout's summary (human), or its whole document (the other formats).
pub(crate) fn write(out: &mut dyn Write, format: Format, rollout: &Rollout, took: Duration) -> std::io::Result<()> {
    match format {
        Format::Human => write_human(out, rollout, took),
        // Prometheus: as in `formatter`, refused before any run.
        Format::Json | Format::Prometheus => {
            serde_json::to_writer_pretty(&mut *out, &document(rollout, took))?;
            writeln!(out)
        }
        // A rollback is one more run on its host: a suite (a stream) of its own.
        Format::Junit | Format::Tap => {
            let mut runs = Vec::new();
            for h in &rollout.hosts {
                for report in h.change.iter().chain(&h.rollback) {
                    runs.push(HostRun { roles: h.roles.clone(), report: report.clone(), ssh_reused: None });
                }
            }
            fleet::write(out, format, &runs, took)
        }
    }
}

fn write_human(out: &mut dyn Write, rollout: &Rollout, took: Duration) -> std::io::Result<()> {
    writeln!(out, "{}", rollout.describe())?;
    let batches: Vec<Vec<String>> = rollout
        .batches
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let time = b.took.map(human::millis).unwrap_or_default();
            vec![(i + 1).to_string(), b.hosts.join(", "), batch_outcome(rollout, i + 1), time]
        })
        .collect();
    write!(out, "{}", table(&["BATCH", "HOSTS", "OUTCOME", "TIME"], &batches))?;
    writeln!(out)?;
    let hosts: Vec<Vec<String>> = rollout
        .hosts
        .iter()
        .map(|h| {
            let roles = if h.roles.is_empty() { "-".to_string() } else { h.roles.join(", ") };
            vec![h.host.clone(), roles, h.batch.to_string(), h.outcome.as_str().to_string(), h.reason.clone()]
        })
        .collect();
    write!(out, "{}", table(&["HOST", "ROLES", "BATCH", "OUTCOME", "WHY"], &hosts))?;
    writeln!(out, "\n{}  ({})", verdict(rollout), human::millis(took))
}

/// What a batch came to: `2 changed`, `1 changed, 1 rolled back`, `not attempted`.
fn batch_outcome(rollout: &Rollout, batch: usize) -> String {
    let of: Vec<&HostResult> = rollout.hosts.iter().filter(|h| h.batch == batch).collect();
    let parts: Vec<String> = OUTCOMES
        .iter()
        .filter_map(|o| {
            let n = of.iter().filter(|h| h.outcome == *o).count();
            (n > 0).then(|| {
                if n == of.len() && *o == HostOutcome::NotAttempted {
                    o.as_str().to_string()
                } else {
                    format!("{n} {}", o.as_str())
                }
            })
        })
        .collect();
    parts.join(", ")
}

const OUTCOMES: [HostOutcome; 6] = [
    HostOutcome::Changed,
    HostOutcome::RolledBack,
    HostOutcome::Failed,
    HostOutcome::Unreachable,
    HostOutcome::NotAttempted,
    HostOutcome::Planned,
];

/// The closing line: how many hosts came to what (named unless all did), and why it stopped.
fn verdict(rollout: &Rollout) -> String {
    let n = rollout.hosts.len();
    if rollout.dry_run {
        return format!("{n} host(s) planned in {} batch(es); nothing changed", rollout.batches.len());
    }
    if rollout.count(HostOutcome::Changed) == n {
        return format!("{n} host(s): all changed");
    }
    let parts: Vec<String> = OUTCOMES
        .iter()
        .filter_map(|o| {
            let names: Vec<&str> = rollout.hosts.iter().filter(|h| h.outcome == *o).map(|h| h.host.as_str()).collect();
            (!names.is_empty()).then(|| format!("{} {} ({})", names.len(), o.as_str(), names.join(", ")))
        })
        .collect();
    let stopped = rollout.stopped.as_ref().map(|s| format!("; {s}")).unwrap_or_default();
    format!("{n} host(s): {}{stopped}", parts.join(", "))
}

/// Rows under a header, columns as wide as their widest cell; the last column unpadded.
/// Cells (host names, reasons) are shown with their control characters escaped.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|r| r.iter().map(|cell| opsbook_base::escaped(cell).into_owned()).collect()).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            text.push_str(cell);
            if i + 1 < cells.len() {
                text.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        text.trim_end().to_string() + "\n"
    };
    let mut text = line(header.to_vec());
    for row in &rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

/// Why a run did not pass, in a line: how it ended, else its failed checks (the first two).
pub(crate) fn why_failed(report: &Report) -> String {
    match &report.end {
        End::Aborted(message) => return format!("aborted: {}", first_line(message)),
        End::ScriptError(message) => return format!("script error: {}", first_line(message)),
        End::Interrupted => return "interrupted".to_string(),
        End::TimedOut(message) => return format!("timed out: {}", first_line(message)),
        End::Locked(message) => return format!("locked: {}", first_line(message)),
        End::Stopped { code, at } => return format!("stopped: {}", End::stopped_message(*code, at)),
        End::Completed => {}
    }
    let failed: Vec<String> = report
        .records()
        .filter(|r| r.outcome == Outcome::Fail)
        .map(|r| {
            let said = match (&r.detail, &r.actual) {
                (d, _) if !d.is_empty() => first_line(d),
                (_, Some(actual)) => first_line(actual),
                _ => String::new(),
            };
            if said.is_empty() { r.name.clone() } else { format!("{} — {said}", r.name) }
        })
        .collect();
    match failed.len() {
        0 => "no check failed".to_string(),
        1 | 2 => failed.join("; "),
        n => format!("{}; and {} more", failed[..2].join("; "), n - 2),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_string()
}

/// The rollout's JSON document: the fleet's document of the changes' reports (schema 2), its
/// verdict the rollout's, and a `rollout` object.
pub(crate) fn document(rollout: &Rollout, took: Duration) -> serde_json::Value {
    let mut doc = fleet::document(&rollout.runs(), took);
    let code = rollout.exit_code();
    doc["runbook"] = json!(rollout.runbook);
    doc["exit_code"] = json!(code);
    doc["outcome"] = json!(match code {
        0 => "passed",
        130 => "interrupted",
        _ => "failed",
    });
    let p = &rollout.plan;
    let batches: Vec<_> = rollout
        .batches
        .iter()
        .enumerate()
        .map(|(i, b)| {
            json!({
                "batch": i + 1, "hosts": b.hosts, "outcome": batch_outcome(rollout, i + 1),
                "started_s": b.started.map(seconds), "duration_s": b.took.map(seconds),
            })
        })
        .collect();
    let hosts: Vec<_> = rollout
        .hosts
        .iter()
        .map(|h| {
            json!({
                "host": h.host, "roles": h.roles, "batch": h.batch, "outcome": h.outcome.as_str(),
                "reason": h.reason, "duration_s": h.took.map(seconds),
                "rollback": h.rollback.as_ref().map(|r| json!({
                    "outcome": r.outcome(), "exit_code": r.exit_code(), "run": opsbook_base::report::json::document(r),
                })),
            })
        })
        .collect();
    let counts: serde_json::Map<String, serde_json::Value> =
        OUTCOMES.iter().map(|o| (o.as_str().replace(' ', "_"), json!(rollout.count(*o)))).collect();
    doc["rollout"] = json!({
        "serial": p.serial, "canary": p.canary, "max_fail": p.max_fail, "budget": p.budget,
        "rollback": p.rollback, "dry_run": rollout.dry_run, "interrupted": rollout.interrupted,
        "stopped": rollout.stopped, "summary": counts, "batches": batches, "hosts": hosts,
    });
    doc
}
