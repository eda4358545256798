//! `/metrics`: the jobs' latest results as Prometheus exposition text.
//!
//! Per check of each job's latest run: success and duration, labelled by job, runbook, host,
//! section and check. Per job: the latest run's outcome (one series per outcome, 1 for the
//! current one), duration, start time and age, the next due time, and counters of runs by
//! outcome and of late runs since the service started. Label values are escaped by the
//! exposition writer; a check name that appears twice in a run keeps its worst outcome, so no
//! series is written twice.

use std::collections::BTreeMap;

use serde_json::Value;

use super::state::{JobView, Key, State};
use crate::history::now_ms;
use opsbook_wire::exposition::Writer;

const OUTCOMES: &[&str] = &["passed", "failed", "error", "interrupted"];

/// One check's latest result: (section, name) → (success, duration).
fn checks(report: &Value) -> BTreeMap<(String, String), (f64, f64)> {
    let mut out: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
    for c in report["checks"].as_array().into_iter().flatten() {
        let outcome = c["outcome"].as_str().unwrap_or_default();
        if outcome == "skip" {
            continue;
        }
        let key =
            (c["section"].as_str().unwrap_or_default().to_string(), c["name"].as_str().unwrap_or_default().to_string());
        let success = if outcome == "fail" { 0.0 } else { 1.0 };
        let duration = c["duration_s"].as_f64().unwrap_or(0.0);
        let entry = out.entry(key).or_insert((success, duration));
        if success < entry.0 {
            *entry = (success, duration);
        }
    }
    out
}

/// The whole exposition.
pub(super) fn render(state: &State) -> String {
    let now = now_ms();
    let mut w = Writer::new();
    state.with_jobs(|jobs| {
        check_families(&mut w, jobs);
        run_families(&mut w, jobs, now);
        job_families(&mut w, jobs);
    });
    w.family("opsbook_history_writable", "gauge", "Whether runs are being stored in the history database.");
    w.sample("opsbook_history_writable", &[], if state.history_error().is_none() { 1.0 } else { 0.0 });
    w.finish()
}

type Jobs = BTreeMap<Key, JobView>;

/// The job, runbook and host labels are the first three pairs of every series (the host the
/// runs watched: this machine, or an inventory host of a job with `hosts`); this keeps their
/// names in one place, in that order, followed by the series' own.
fn labels<'a>(v: &'a JobView, own: &[(&'static str, &'a str)]) -> Vec<(&'static str, &'a str)> {
    let mut all = vec![("job", v.spec.name.as_str()), ("runbook", v.spec.runbook.as_str()), ("host", v.host.as_str())];
    all.extend_from_slice(own);
    all
}

/// Per check of each job's latest run: its success and duration.
fn check_families(w: &mut Writer, jobs: &Jobs) {
    let families = [
        ("opsbook_check_success", "Whether the check passed in the job's latest run (1) or failed (0)."),
        ("opsbook_check_duration_seconds", "What the check took to establish in the job's latest run."),
    ];
    for (index, (name, help)) in families.into_iter().enumerate() {
        w.family(name, "gauge", help);
        for v in jobs.values() {
            let Some(report) = &v.latest else { continue };
            for ((section, check), (success, duration)) in checks(report) {
                let value = if index == 0 { success } else { duration };
                w.sample(name, &labels(v, &[("section", &section), ("check", &check)]), value);
            }
        }
    }
}

/// Per job's latest run: its outcome, duration, start and age, and when the next is due.
fn run_families(w: &mut Writer, jobs: &Jobs, now: i64) {
    w.family("opsbook_run_outcome", "gauge", "The outcome of the job's latest run: 1 for the current outcome.");
    for v in jobs.values() {
        let Some(latest) = v.runs.back() else { continue };
        for outcome in OUTCOMES {
            let value = if latest.outcome == *outcome { 1.0 } else { 0.0 };
            w.sample("opsbook_run_outcome", &labels(v, &[("outcome", outcome)]), value);
        }
    }
    let per_run: [(&str, &str); 3] = [
        ("opsbook_run_duration_seconds", "How long the job's latest run took."),
        ("opsbook_run_start_timestamp_seconds", "When the job's latest run started (Unix time)."),
        ("opsbook_run_age_seconds", "How long ago the job's latest run started."),
    ];
    for (name, help) in per_run {
        w.family(name, "gauge", help);
        for v in jobs.values() {
            let Some(latest) = v.runs.back() else { continue };
            let value = match name {
                "opsbook_run_duration_seconds" => latest.duration_s,
                "opsbook_run_start_timestamp_seconds" => latest.started_ms as f64 / 1000.0,
                _ => (now - latest.started_ms).max(0) as f64 / 1000.0,
            };
            w.sample(name, &labels(v, &[]), value);
        }
    }
    w.family("opsbook_run_next_timestamp_seconds", "gauge", "When the job's next run is due (Unix time).");
    for v in jobs.values() {
        let Some(due) = v.next_due_ms else { continue };
        w.sample("opsbook_run_next_timestamp_seconds", &labels(v, &[]), due as f64 / 1000.0);
    }
}

/// Per job since the service started: runs by outcome, late runs, and whether it can run.
fn job_families(w: &mut Writer, jobs: &Jobs) {
    w.family("opsbook_runs_total", "counter", "Runs of the job since the service started, by outcome.");
    for v in jobs.values() {
        for outcome in OUTCOMES {
            let n = v.outcomes.get(*outcome).copied().unwrap_or(0);
            w.sample("opsbook_runs_total", &labels(v, &[("outcome", outcome)]), n as f64);
        }
    }
    w.family(
        "opsbook_runs_late_total",
        "counter",
        "Runs that started later than due because the job's previous run overran its interval.",
    );
    for v in jobs.values() {
        w.sample("opsbook_runs_late_total", &labels(v, &[]), v.late as f64);
    }
    w.family("opsbook_job_runnable", "gauge", "Whether the job can run (0: refused or broken, see the page).");
    for v in jobs.values() {
        let value = if v.problem.is_none() { 1.0 } else { 0.0 };
        w.sample("opsbook_job_runnable", &labels(v, &[]), value);
    }
}
