//! Jobs on units (start, stop, restart, reload) as the `unit::` verbs run them: each unit's job
//! through the world, a started unit watched until it settles, a failure worded with the unit's
//! state and its last log lines, and what each job came to as scripts see it.

use std::time::Duration;

use rhai::{Array, Dynamic, Map};
use serde::Serialize;

use super::state::{names, status};
use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::time::positive_duration_arg;
use crate::verbs::values::record;
use opsbook_base::config::keys;
use opsbook_world::units::{Job, UnitError};

/// What one job came to, as scripts see it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct JobRecord {
    pub(super) unit: String,
    pub(super) job: &'static str,
    /// systemd's job result (`done`, `failed`…), or why there was none (`not-found`…).
    pub(super) result: String,
    pub(super) ok: bool,
    /// The failure as an operator reads it: unit, result, last log lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
    /// Under `--dry-run`: nothing was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dry_run: Option<bool>,
    /// `reload_or_restart`: "reloaded" or "restarted".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) action: Option<&'static str>,
}

fn outcome(unit: &str, job: &'static str, result: &str) -> JobRecord {
    JobRecord {
        unit: unit.to_string(),
        job,
        result: result.to_string(),
        ok: result == "done",
        error: None,
        dry_run: None,
        action: None,
    }
}

/// A failed job's record, and its message.
fn failed(unit: &str, job: &'static str, result: &str, message: String) -> (JobRecord, String) {
    (JobRecord { error: Some(message.clone()), ..outcome(unit, job, result) }, message)
}

fn job_timeout(cx: &Context, options: &Map) -> VerbResult<Duration> {
    for k in options.keys() {
        if k != "timeout" {
            return Err(fail(format!("unknown option `{k}` (timeout)")));
        }
    }
    match options.get("timeout") {
        Some(t) => positive_duration_arg(t, "timeout"),
        None => Ok(cx.config().duration(keys::UNITS_JOB_TIMEOUT)),
    }
}

/// The failure message of a job that began at `began`: unit, result, the unit's state, its
/// last log lines, and a hint.
fn failure(cx: &Context, job: Job, unit: &str, result: &str, began: std::time::SystemTime) -> String {
    let mut message = format!("{} of `{unit}` {result}", job.verb());
    let state = status(cx, unit).ok();
    if let Some(s) = &state {
        message.push_str(&format!(
            " (now {} ({}), result {}, exit status {})",
            s.active_state, s.sub_state, s.result, s.exec_main_status
        ));
    }
    let lines = last_lines(cx, unit, state.map_or(0, |s| s.exec_main_pid), began);
    if !lines.is_empty() {
        message.push_str("\n  its last log lines:");
        for line in lines {
            message.push_str(&format!("\n    {line}"));
        }
    }
    message.push_str(&format!("\n  hint: `journalctl -u {unit} -n 20` shows more"));
    message
}

/// The unit's last five log lines. journald writes a dying unit's lines asynchronously, so
/// they get a moment (under load well over a second). And a process that died before journald
/// could read its metadata leaves lines attributed to no unit: those are found by the main
/// process's PID since the job began, as `systemctl status` finds them by invocation.
fn last_lines(cx: &Context, unit: &str, pid: u32, began: std::time::SystemTime) -> Vec<String> {
    use opsbook_world::journal::Query;
    let by_unit = Query { unit: Some(unit.to_string()), lines: Some(5), ..Default::default() };
    let since = crate::verbs::values::time_text(began - Duration::from_secs(1));
    let by_pid = (pid > 0).then(|| Query { pid: Some(pid), since: Some(since), lines: Some(5), ..Default::default() });
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        for query in [Some(&by_unit), by_pid.as_ref()].into_iter().flatten() {
            match crate::verbs::journal::read_entries(cx, query.clone()) {
                Ok(entries) if !entries.is_empty() => return entries.into_iter().map(|e| e.message).collect(),
                Ok(_) => {}
                Err(_) => return Vec::new(),
            }
        }
        if std::time::Instant::now() >= deadline || crate::verbs::time::sleep(cx, Duration::from_millis(100)).is_err() {
            return Vec::new();
        }
    }
}

pub(super) fn run_one(
    cx: &Context,
    job: Job,
    unit: &str,
    timeout: Duration,
) -> VerbResult<Result<JobRecord, (JobRecord, String)>> {
    if cx.plan(&format!("{} {unit}", job.verb())) {
        return Ok(Ok(JobRecord { dry_run: Some(true), ok: true, ..outcome(unit, job.verb(), "skipped") }));
    }
    let units = cx.world().units.clone();
    let name = unit.to_string();
    let began = std::time::SystemTime::now();
    let done = cx.block_on(|| async move { units.run_job(job, &name, timeout).await })?;
    Ok(match done {
        // A simple service's start job is "done" once forked; watch it settle so a process
        // that dies at once (ExecStart=/bin/false) is a failed start, as an operator sees it.
        Ok(o) if o.result == "done" && matches!(job, Job::Start | Job::Restart) => match settled(cx, unit)? {
            None => Ok(outcome(unit, job.verb(), "done")),
            Some(state) => {
                let message =
                    failure(cx, job, unit, &format!("failed: the unit is {state} right after starting"), began);
                Err(failed(unit, job.verb(), "failed", message))
            }
        },
        Ok(o) if o.result == "done" => Ok(outcome(unit, job.verb(), "done")),
        Ok(o) => Err(failed(unit, job.verb(), &o.result, failure(cx, job, unit, &o.result, began))),
        Err(e) => {
            let kind = match &e {
                UnitError::NotFound { .. } => "not-found",
                UnitError::NotApplicable { .. } => "not-applicable",
                UnitError::Timeout { .. } => "timeout",
                UnitError::AccessDenied { .. } => "access-denied",
                _ => "error",
            };
            Err(failed(unit, job.verb(), kind, e.to_string()))
        }
    })
}

/// Watches a just-started unit for `units.settle`; the state if it fell over.
fn settled(cx: &Context, unit: &str) -> VerbResult<Option<String>> {
    let deadline = std::time::Instant::now() + cx.config().duration(keys::UNITS_SETTLE);
    loop {
        let s = status(cx, unit)?;
        if s.active_state == "failed" || s.active_state == "inactive" {
            return Ok(Some(format!("{} ({})", s.active_state, s.sub_state)));
        }
        if std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        crate::verbs::time::sleep(cx, Duration::from_millis(50))?;
    }
}

pub(super) fn jobs(cx: &Context, job: Job, units: &Dynamic, options: &Map, raise: bool) -> VerbResult<Array> {
    let timeout = job_timeout(cx, options)?;
    let mut outcomes = Array::new();
    let mut failures = Vec::new();
    for unit in names(units)? {
        match run_one(cx, job, &unit, timeout)? {
            Ok(r) => outcomes.push(record(&r)?.into()),
            Err((r, message)) => {
                outcomes.push(record(&r)?.into());
                failures.push(message);
            }
        }
    }
    if raise && !failures.is_empty() {
        return Err(fail(failures.join("\n")));
    }
    Ok(outcomes)
}
