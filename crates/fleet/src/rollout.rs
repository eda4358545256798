//! A change rolled out over several hosts in batches (`opsbook run deploy --serial 1`): the
//! next batch starts only when every host of this one passed its gate; a host whose gate failed
//! is rolled back; once more hosts failed than `--max-fail` allows, no further batch starts and
//! the hosts never started are reported "not attempted", untouched.
//!
//! Only the mechanics are here; the procedure stays in runbooks. The gate is the change's own
//! report on that host, then the component's verification (`rollback` with `step=gate`: its
//! data reaching the servers; deploy and configure verified it already): a host whose run
//! or verification failed failed its gate, its failing checks the reason. What a host had is kept,
//! put back and dropped by `runbooks/rollback.rhai` (`step=save`, `restore`, `release`), run
//! on that host's own session before the change, after a failed gate, after a passed one.
//!
//! Ctrl-C: the hosts in flight finish (their gate, or their rollback) and no new one starts; a
//! second Ctrl-C stops them and rolls them back (`cancel::on_signals_draining`). Under
//! `--dry-run` every host's plan is shown at once, with the batches it would run in.

use std::io::IsTerminal;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::job::Job;
use crate::liveness::{Lost, Step, Watch};
use crate::options::RolloutOptions;
use crate::rollout_report::{self, Batch, HostOutcome, HostResult, Plan, Rollout, why_failed};
use crate::run::run_compiled;
use crate::session::Session;
use crate::targets::Target;
use opsbook_base::Cancel;
use opsbook_base::Error;
use opsbook_engine::runbook::Compiled;
use opsbook_inventory::Inventory;

/// The runbook that keeps, restores and drops what a host had (its `step` parameter).
const ROLLBACK: &str = "rollback";

/// The change's runbook and the rollback runbook, compiled once for every host (they share one
/// catalog), or compiled by each host when no host could be reached to compile them.
#[derive(Default)]
struct Runbooks {
    change: Option<Compiled>,
    rollback: Option<Compiled>,
}

impl Runbooks {
    /// Runs `name` — the change's runbook, or `ROLLBACK` — on `target` with `params`.
    fn run(&self, target: &Target, name: &str, params: &[(String, String)]) -> opsbook_base::report::Report {
        let compiled = if name == ROLLBACK { &self.rollback } else { &self.change };
        run_compiled(target, name, compiled.as_ref(), params)
    }
}

/// Rolls `job` out over `targets` (in the inventory's order) as `options` ask, writes the
/// report to stdout and returns the exit status: 0 every host changed, 1 otherwise, 75 another
/// run holds a host's change lock (nothing changed), 130 interrupted (under `--dry-run`: the
/// worst of the plans').
pub fn run(targets: Vec<Target>, inventory: Arc<Inventory>, job: &Job, options: &RolloutOptions) -> Result<u8, Error> {
    if targets.is_empty() {
        return Err(Error::Usage("no host matches: nothing to roll out".into()));
    }
    let drain = Cancel::default();
    // Whether a batch began: a Ctrl-C before (the locks' wait) has nothing in flight to finish.
    let begun = Arc::new(AtomicBool::new(false));
    let sessions: Vec<&Session> = targets.iter().filter_map(|t| t.session.as_ref().ok()).collect();
    let mut runbooks = Runbooks::default();
    if let Some(first) = sessions.first() {
        // A script or parameter error is the same on every host: say it once, before any acts.
        let (change, rollback) = (first.compile(job.runbook)?, first.compile(ROLLBACK)?);
        change.bind(job.params)?;
        rollback.bind(&rollback_params(job.params, "save"))?;
        runbooks = Runbooks { change: Some(change), rollback: Some(rollback) };
        let cancels = sessions.iter().map(|s| s.context.cancel.clone()).collect();
        opsbook_base::on_signals_draining(first.context.runtime(), drain.clone(), cancels, begun.clone());
    }
    let ranges = batches(targets.len(), options);
    let mut rollout = Rollout {
        runbook: job.runbook.to_string(),
        plan: plan(targets.len(), options),
        batches: ranges.iter().map(|r| Batch { hosts: names(&targets[r.clone()]), ..Batch::default() }).collect(),
        hosts: Vec::new(),
        stopped: None,
        interrupted: false,
        dry_run: job.dry_run,
    };
    let started = Instant::now();
    let mut out = opsbook_base::secret::RedactingWriter::new(std::io::stdout().lock());
    let written = |e| Error::Io { context: "cannot write the report".into(), source: e };
    let mut locked = false;
    if job.dry_run {
        plan_all(&targets, &inventory, (job, &runbooks), &ranges, &mut rollout);
        let all: Vec<&HostResult> = rollout.hosts.iter().collect();
        rollout_report::write_batch(&mut out, job.format, &all).map_err(written)?;
    } else {
        // Every host it will change is locked before the first batch, all or none (`locks`).
        let refused = crate::locks::hold_all(&targets, &inventory, (job.runbook, job.params), job.forks, &drain);
        locked = crate::locks::refuse(&targets, &refused, &mut rollout);
        for (i, range) in ranges.iter().enumerate().filter(|_| !locked) {
            if let Some((stopped, why)) = stop_before(&rollout, i, &drain) {
                rollout.stopped = Some(stopped);
                not_attempted(&targets, &ranges[i..], i, &why, &mut rollout);
                break;
            }
            begun.store(true, Ordering::Release);
            let began = started.elapsed();
            let batch = &targets[range.clone()];
            let results = run_batch(batch, &inventory, (job, &runbooks), (i + 1, ranges.len()), !options.no_rollback);
            rollout.batches[i].started = Some(began);
            rollout.batches[i].took = Some(started.elapsed() - began);
            rollout_report::write_batch(&mut out, job.format, &results.iter().collect::<Vec<_>>()).map_err(written)?;
            rollout.hosts.extend(results);
        }
        crate::locks::release_all(&targets);
    }
    rollout.interrupted = drain.is_cancelled();
    rollout_report::write(&mut out, job.format, &rollout, started.elapsed()).map_err(written)?;
    if let Some(path) = job.save_json {
        opsbook_base::report::json::save(path, &rollout_report::document(&rollout, started.elapsed()))?;
    }
    Ok(if locked { opsbook_base::report::LOCKED_EXIT } else { rollout.exit_code() })
}

/// The batches: a canary of one first when asked, then `--serial` hosts at a time (a share of
/// all the hosts, at least one), or all the rest at once.
pub fn batches(total: usize, options: &RolloutOptions) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    if options.canary && total > 0 {
        ranges.push(0..1);
        start = 1;
    }
    let size = options.serial.map_or(total, |s| s.of(total)).max(1);
    while start < total {
        let end = (start + size).min(total);
        ranges.push(start..end);
        start = end;
    }
    ranges
}

/// The rollout as asked for, for the report.
fn plan(total: usize, options: &RolloutOptions) -> Plan {
    Plan {
        serial: options.serial.map_or("all".to_string(), |s| s.to_string()),
        canary: options.canary,
        max_fail: options.max_fail.map_or("0".to_string(), |s| s.to_string()),
        budget: options.max_fail.map_or(0, |s| s.of(total)),
        rollback: !options.no_rollback,
    }
}

fn names(targets: &[Target]) -> Vec<String> {
    targets.iter().map(|t| t.name.clone()).collect()
}

/// Why batch `index` (0-based) must not start: `(the rollout's line, each host's reason)`.
fn stop_before(rollout: &Rollout, index: usize, drain: &Cancel) -> Option<(String, String)> {
    let total = rollout.batches.len();
    if drain.is_cancelled() {
        let line = if index == 0 {
            "interrupted before the first batch: nothing was changed".to_string()
        } else {
            format!("interrupted: no batch started after batch {index} of {total}")
        };
        return Some((line, format!("interrupted before batch {}", index + 1)));
    }
    let failed = rollout.hosts.iter().filter(|h| h.outcome != HostOutcome::Changed).count();
    let budget = rollout.plan.budget;
    (failed > budget).then(|| {
        let line = format!(
            "stopped after batch {index} of {total}: {failed} host(s) failed, more than --max-fail {} allows",
            rollout.plan.max_fail
        );
        (line, format!("stopped after batch {index}: {failed} host(s) failed, more than {budget}"))
    })
}

/// The hosts of the batches that will not start, untouched.
fn not_attempted(targets: &[Target], ranges: &[Range<usize>], first: usize, why: &str, rollout: &mut Rollout) {
    for (k, range) in ranges.iter().enumerate() {
        for target in &targets[range.clone()] {
            rollout.hosts.push(HostResult {
                host: target.name.clone(),
                roles: target.roles.clone(),
                batch: first + k + 1,
                outcome: HostOutcome::NotAttempted,
                reason: why.to_string(),
                change: None,
                rollback: None,
                took: None,
            });
        }
    }
}

/// Every host's plan at once (`--dry-run`: nothing changes, so nothing is gated).
fn plan_all(
    targets: &[Target],
    inventory: &Arc<Inventory>,
    (job, runbooks): (&Job, &Runbooks),
    ranges: &[Range<usize>],
    rollout: &mut Rollout,
) {
    let change = |t: &Target| runbooks.run(t, job.runbook, job.params);
    let reports = crate::runner::each(targets, inventory, job.forks, change, |_, _, _| {});
    for (i, (target, report)) in targets.iter().zip(reports).enumerate() {
        let batch = ranges.iter().position(|r| r.contains(&i)).unwrap_or(0) + 1;
        let reason = if report.exit_code() == 0 { String::new() } else { why_failed(&report) };
        rollout.hosts.push(HostResult {
            host: target.name.clone(),
            roles: target.roles.clone(),
            batch,
            outcome: HostOutcome::Planned,
            reason,
            change: Some(report),
            rollback: None,
            took: None,
        });
    }
}

/// One batch, its hosts side by side (at most `forks` acting at a time); a line on stderr as
/// each starts and ends when stderr is a terminal.
fn run_batch(
    batch: &[Target],
    inventory: &Arc<Inventory>,
    (job, runbooks): (&Job, &Runbooks),
    (number, of): (usize, usize),
    rollback: bool,
) -> Vec<HostResult> {
    let tell = std::io::stderr().is_terminal();
    if tell {
        opsbook_base::say!("batch {number}/{of}: {}", names(batch).join(", "));
    }
    crate::runner::each(
        batch,
        inventory,
        job.forks,
        |target| one_host(target, (job, runbooks), number, rollback),
        |target, result, finished| {
            if tell {
                opsbook_base::say!("  {} done: {} ({finished}/{})", target.name, result.outcome.as_str(), batch.len());
            }
        },
    )
}

/// One host: keep what it has, change it, and by the change's own report (its gate) drop what
/// was kept, or put it back.
fn one_host(target: &Target, (job, runbooks): (&Job, &Runbooks), batch: usize, rollback: bool) -> HostResult {
    let started = Instant::now();
    let mut result = HostResult {
        host: target.name.clone(),
        roles: target.roles.clone(),
        batch,
        outcome: HostOutcome::Failed,
        reason: String::new(),
        change: None,
        rollback: None,
        took: None,
    };
    let Ok(session) = &target.session else {
        // Unreachable from the start: its report says so, and nothing was changed there.
        let report = runbooks.run(target, job.runbook, job.params);
        result.reason = why_failed(&report);
        result.change = Some(report);
        result.took = Some(started.elapsed());
        return result;
    };
    let step = |name: &str| runbooks.run(target, ROLLBACK, &rollback_params(job.params, name));
    // The point records the change it was kept for (a later run names an unfinished one).
    let mut save = rollback_params(job.params, "save");
    save.push(("change".to_string(), job.runbook.to_string()));
    let point = runbooks.run(target, ROLLBACK, &save);
    if point.exit_code() != 0 {
        result.reason = format!("nothing changed: no rollback point could be kept ({})", why_failed(&point));
        result.change = Some(point);
        result.took = Some(started.elapsed());
        return result;
    }
    let world = session.context.world();
    let watch = Watch::start(&world);
    session.context.take_in_place();
    let change = runbooks.run(target, job.runbook, job.params);
    let in_place = session.context.take_in_place();
    // The gate: the change's own report, then the component's verification now (its data
    // reaching the servers), which the rollback runbook skips where the change ran it itself.
    let change = if change.exit_code() == 0 {
        watch.gate();
        let mut params = rollback_params(job.params, "gate");
        params.push(("change".to_string(), job.runbook.to_string()));
        let gate = runbooks.run(target, ROLLBACK, &params);
        if gate.exit_code() == 0 { change } else { gate }
    } else {
        change
    };
    let lost = watch.finish(change.exit_code() != 0, &world);
    if let (Some(lost), false) = (&lost, change.exit_code() == 0) {
        // Nothing known of what it runs now: it is not rolled back, its point stays.
        result.outcome = HostOutcome::Unreachable;
        let hint = restore_hint(target, job.params);
        result.reason = unreachable(lost, in_place, job.runbook, &why_failed(&change), &hint);
    } else if change.exit_code() == 0 {
        let released = step("release");
        result.outcome = HostOutcome::Changed;
        if released.exit_code() != 0 {
            result.reason = format!("its rollback point was not removed: {}", why_failed(&released));
        }
    } else {
        let gate = format!("gate: {}", why_failed(&change));
        if !rollback {
            result.reason = format!("{gate}; kept as it is (--no-rollback): {}", restore_hint(target, job.params));
        } else {
            // A second Ctrl-C stopped the change: the rollback itself must run.
            session.context.cancel.reset();
            let back = step("restore");
            if back.exit_code() == 0 {
                result.outcome = HostOutcome::RolledBack;
                result.reason = format!("{gate}; the rollback passed");
            } else {
                result.reason = format!("{gate}; the rollback failed: {}", why_failed(&back));
            }
            result.rollback = Some(back);
        }
    }
    result.change = Some(change);
    result.took = Some(started.elapsed());
    result
}

/// What is known of a host lost during its change or gate, in words. `in_place`: the runbook
/// said its change was wholly made (`fleet::change_in_place()`) before the loss.
fn unreachable(lost: &Lost, in_place: bool, runbook: &str, gate: &str, hint: &str) -> String {
    let (when, state) = match lost.step {
        Step::Change if !in_place => ("its change", format!("{runbook}'s change may be partly in place")),
        Step::Change => ("its change", format!("{runbook}'s change in place")),
        Step::Gate => ("its gate", format!("{runbook}'s change in place")),
    };
    format!(
        "unreachable during {when} ({}): {state}, not verified, not rolled back; rollback point kept \
         ({gate}); once it answers, {hint}",
        lost.why
    )
}

/// How an operator puts the host back later, by hand.
fn restore_hint(target: &Target, params: &[(String, String)]) -> String {
    let service = rollback_params(params, "restore").remove(0).1;
    let set = if service.is_empty() { String::new() } else { format!(" --set service={service}") };
    format!("`opsbook run rollback --host {}{set}` restores it", target.name)
}

/// The rollback runbook's parameters for `step`, from the change's: the component it changed
/// (`service`, or restart's `component`; none: every component of the host) and its deadline.
fn rollback_params(params: &[(String, String)], step: &str) -> Vec<(String, String)> {
    let given = |k: &str| params.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let service = given("service").or_else(|| given("component")).unwrap_or_default();
    let mut out = vec![("service".to_string(), service), ("step".to_string(), step.to_string())];
    if let Some(deadline) = given("deadline") {
        out.push(("deadline".to_string(), deadline));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Share;

    fn options(serial: Option<Share>, canary: bool) -> RolloutOptions {
        RolloutOptions { serial, canary, ..RolloutOptions::default() }
    }

    #[test]
    fn batches_of_n_a_share_and_a_canary_first() {
        assert_eq!(batches(5, &options(Some(Share::Hosts(2)), false)), [0..2, 2..4, 4..5]);
        assert_eq!(batches(3, &options(Some(Share::Hosts(1)), true)), [0..1, 1..2, 2..3]);
        assert_eq!(batches(5, &options(None, true)), [0..1, 1..5]);
        // A share of all the hosts, rounded down, at least one.
        assert_eq!(batches(10, &options(Some(Share::Percent(30)), false)), [0..3, 3..6, 6..9, 9..10]);
        assert_eq!(batches(3, &options(Some(Share::Percent(10)), true)), [0..1, 1..2, 2..3]);
        assert_eq!(batches(2, &options(Some(Share::Hosts(0)), false)), [0..1, 1..2]);
    }

    #[test]
    fn the_rollback_acts_on_what_the_change_named() {
        let p = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(
            rollback_params(&p(&[("service", "c1:alloy"), ("deadline", "5s")]), "save"),
            p(&[("service", "c1:alloy"), ("step", "save"), ("deadline", "5s")])
        );
        assert_eq!(
            rollback_params(&p(&[("component", "loki")]), "restore"),
            p(&[("service", "loki"), ("step", "restore")])
        );
        assert_eq!(rollback_params(&p(&[("settle", "1s")]), "release"), p(&[("service", ""), ("step", "release")]));
    }
}
