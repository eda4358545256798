//! `opsbook run NAME --hosts PATTERN`: one runbook on several hosts at once, through the fleet
//! runner (`runner`), each host's report kept until it is done and then written whole,
//! followed by the fleet's summary (`report::fleet`); a line on stderr says when each host is
//! done, when stderr is a terminal. A host's failure stays that host's: it is reported for it
//! and never stops the others. The `--save-json` file is written before stdout, and a reader
//! that goes away (`| head -1`) ends the writing quietly, as with a single run.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use crate::hosts_report::{self, HostRun};
use crate::job::Job;
use crate::session::Session;
use crate::targets::Target;
use opsbook_base::Cancel;
use opsbook_base::Error;
use opsbook_base::config::keys;
use opsbook_base::report::Mode;
use opsbook_base::report::{Formatter, Outcome, Recorder, Report};
use opsbook_inventory::Inventory;

/// Runs `job` — its runbook with its parameters — on every target, `forks` acting at a time,
/// writes the fleet's report to stdout (and its JSON document to `save_json` when given) and
/// returns the exit status (the worst of the hosts'). Runbooks see `inventory` through
/// `inventory::` and meet at `fleet::barrier`s.
pub fn run(targets: Vec<Target>, inventory: Arc<Inventory>, job: &Job) -> Result<u8, Error> {
    let Job { runbook, params, forks, format, save_json, .. } = *job;
    if targets.is_empty() {
        return Err(Error::Usage("no host matches: nothing to run".into()));
    }
    let sessions: Vec<&Session> = targets.iter().filter_map(|t| t.session.as_ref().ok()).collect();
    let mut compiled = None;
    if let Some(first) = sessions.first() {
        // The time limit and Ctrl-C hold from the start: compiling a large runbook takes a
        // while. The limit is the whole run's: every host's run stops when it passes.
        let cancels: Vec<Cancel> = sessions.iter().map(|s| s.context.cancel.clone()).collect();
        opsbook_base::on_signals(first.context.runtime(), cancels, "the runbook on every host");
        let limit = job.timeout.unwrap_or_else(|| first.config.duration(keys::LIMITS_RUN_TIMEOUT));
        if !limit.is_zero() {
            sessions.iter().for_each(|s| s.context.cancel.time_out_after(s.context.runtime(), limit));
        }
        // A script or parameter error is the same on every host: say it once, before any acts.
        // The hosts share one catalog, so what compiled here serves them all.
        let once = match first.compile_or_stop(runbook, format)? {
            Ok(once) => once,
            Err(stopped) => {
                if let Some(path) = save_json {
                    opsbook_base::report::json::save(path, &opsbook_base::report::json::document(&stopped))?;
                }
                return Ok(stopped.exit_code());
            }
        };
        once.bind(params)?;
        compiled = Some(once);
    }

    let started = Instant::now();
    let total = targets.len();
    let tell = std::io::stderr().is_terminal();
    // Each host's locks go as its run ends; the hosts' words are read once all are done.
    targets.iter().filter_map(|t| t.session.as_ref().ok()).for_each(|s| s.confirm_releases_later());
    let reports = crate::runner::each(
        &targets,
        &inventory,
        forks,
        |target| run_compiled(target, runbook, compiled.as_ref(), params),
        |target, report, finished| {
            if tell {
                opsbook_base::say!("  {} done: {} ({finished}/{total})", target.name, report.outcome());
            }
        },
    );
    // Every host is done: the hosts' words on their locks, there by now, are read; then this
    // run's own ssh masters are all asked to end now, and end while the report is written
    // (each host's connection is closed, waiting for its master, when the targets drop).
    crate::locks::confirm_all(&targets);
    for target in &targets {
        if let Some(ssh) = target.session.as_ref().ok().and_then(|s| s.context.world().connection.clone()) {
            ssh.let_go();
        }
    }
    let runs: Vec<HostRun> = targets
        .iter()
        .zip(reports)
        .map(|(target, report)| HostRun {
            roles: target.roles.clone(),
            report,
            ssh_reused: target.session.as_ref().ok().and_then(|s| s.context.world().ssh_reused()),
        })
        .collect();
    // The saved report first: it must not depend on who reads stdout (`| head -1`).
    let took = started.elapsed();
    if let Some(path) = save_json {
        opsbook_base::report::json::save(path, &hosts_report::document(&runs, took))?;
    }
    let mut out = opsbook_base::secret::RedactingWriter::new(std::io::stdout().lock());
    match hosts_report::write(&mut out, format, &runs, took) {
        // The reader went away (`| head`): what it wanted it has; the run's status stands.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.map_err(|source| Error::Io { context: "cannot write the report".into(), source })?,
    }
    Ok(hosts_report::exit_code(&runs))
}

/// One host's run, its report kept in memory (the fleet writes it when the host is done), with
/// the runbook compiled already (by another session of the same catalog), or compiled here
/// when `None`.
pub(crate) fn run_compiled(
    target: &Target,
    runbook: &str,
    compiled: Option<&opsbook_engine::runbook::Compiled>,
    params: &[(String, String)],
) -> Report {
    let quiet = |name: &str, source: &str, shown, mode| {
        Recorder::with_output(name, source, shown, mode, Box::new(Kept), Box::new(std::io::sink()))
    };
    let session = match &target.session {
        Ok(session) => session,
        Err(absent) => {
            let mode = Mode { host: Some(target.name.clone()), ..Mode::default() };
            let mut recorder = quiet(runbook, runbook, Default::default(), mode);
            recorder.record(&absent.check, Outcome::Fail, &absent.why, None, None);
            return recorder.finish(opsbook_base::report::End::Completed);
        }
    };
    let result = match compiled {
        Some(c) => session.run_recorded(c, params, quiet),
        None => session.compile(runbook).and_then(|c| session.run_recorded(&c, params, quiet)),
    };
    match result {
        Ok(report) => report,
        // Compiled and bound once already: what fails here is this host's own (its catalog).
        Err(e) => {
            let recorder = quiet(runbook, runbook, Default::default(), session.mode().clone());
            recorder.finish(opsbook_base::report::End::ScriptError(e.to_string()))
        }
    }
}

/// Writes nothing while the run goes on: the fleet prints each host's report when it is done.
struct Kept;

impl Formatter for Kept {
    fn finish(&mut self, _out: &mut dyn std::io::Write, _report: &Report) -> std::io::Result<()> {
        Ok(())
    }

    fn shows_logs(&self) -> bool {
        // Kept in the report, shown with the host's section: not interleaved on stderr.
        true
    }
}
