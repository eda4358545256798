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

use super::state::{JobView, State};
use crate::history::now_ms;
use crate::wire::exposition::Writer;

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
        let base = |v: &JobView| [("job", v.spec.name.clone()), ("runbook", v.spec.runbook.clone())];
        // The host the runs watched: this machine, or an inventory host of a job with `hosts`.
        let host = |v: &JobView| ("host", v.host.clone());
        w.family(
            "opsbook_check_success",
            "gauge",
            "Whether the check passed in the job's latest run (1) or failed (0).",
        );
        for v in jobs.values() {
            let Some(report) = &v.latest else { continue };
            for ((section, check), (success, _)) in checks(report) {
                let ([job, runbook], host) = (base(v), host(v));
                w.sample(
                    "opsbook_check_success",
                    &[job_label(&job), job_label(&runbook), job_label(&host), ("section", &section), ("check", &check)],
                    success,
                );
            }
        }
        w.family(
            "opsbook_check_duration_seconds",
            "gauge",
            "What the check took to establish in the job's latest run.",
        );
        for v in jobs.values() {
            let Some(report) = &v.latest else { continue };
            for ((section, check), (_, duration)) in checks(report) {
                let ([job, runbook], host) = (base(v), host(v));
                w.sample(
                    "opsbook_check_duration_seconds",
                    &[job_label(&job), job_label(&runbook), job_label(&host), ("section", &section), ("check", &check)],
                    duration,
                );
            }
        }
        w.family("opsbook_run_outcome", "gauge", "The outcome of the job's latest run: 1 for the current outcome.");
        for v in jobs.values() {
            let Some(latest) = v.runs.back() else { continue };
            for outcome in OUTCOMES {
                let value = if latest.outcome == *outcome { 1.0 } else { 0.0 };
                let ([job, runbook], host) = (base(v), host(v));
                w.sample(
                    "opsbook_run_outcome",
                    &[job_label(&job), job_label(&runbook), job_label(&host), ("outcome", outcome)],
                    value,
                );
            }
        }
        let per_run: [(&str, &str, &str); 3] = [
            ("opsbook_run_duration_seconds", "gauge", "How long the job's latest run took."),
            ("opsbook_run_start_timestamp_seconds", "gauge", "When the job's latest run started (Unix time)."),
            ("opsbook_run_age_seconds", "gauge", "How long ago the job's latest run started."),
        ];
        for (name, kind, help) in per_run {
            w.family(name, kind, help);
            for v in jobs.values() {
                let Some(latest) = v.runs.back() else { continue };
                let value = match name {
                    "opsbook_run_duration_seconds" => latest.duration_s,
                    "opsbook_run_start_timestamp_seconds" => latest.started_ms as f64 / 1000.0,
                    _ => (now - latest.started_ms).max(0) as f64 / 1000.0,
                };
                let ([job, runbook], host) = (base(v), host(v));
                w.sample(name, &[job_label(&job), job_label(&runbook), job_label(&host)], value);
            }
        }
        w.family("opsbook_run_next_timestamp_seconds", "gauge", "When the job's next run is due (Unix time).");
        for v in jobs.values() {
            let Some(due) = v.next_due_ms else { continue };
            let ([job, runbook], host) = (base(v), host(v));
            w.sample(
                "opsbook_run_next_timestamp_seconds",
                &[job_label(&job), job_label(&runbook), job_label(&host)],
                due as f64 / 1000.0,
            );
        }
        w.family("opsbook_runs_total", "counter", "Runs of the job since the service started, by outcome.");
        for v in jobs.values() {
            for outcome in OUTCOMES {
                let n = v.outcomes.get(*outcome).copied().unwrap_or(0);
                let ([job, runbook], host) = (base(v), host(v));
                w.sample(
                    "opsbook_runs_total",
                    &[job_label(&job), job_label(&runbook), job_label(&host), ("outcome", outcome)],
                    n as f64,
                );
            }
        }
        w.family(
            "opsbook_runs_late_total",
            "counter",
            "Runs that started later than due because the job's previous run overran its interval.",
        );
        for v in jobs.values() {
            let ([job, runbook], host) = (base(v), host(v));
            w.sample(
                "opsbook_runs_late_total",
                &[job_label(&job), job_label(&runbook), job_label(&host)],
                v.late as f64,
            );
        }
        w.family("opsbook_job_runnable", "gauge", "Whether the job can run (0: refused or broken, see the page).");
        for v in jobs.values() {
            let ([job, runbook], host) = (base(v), host(v));
            let value = if v.problem.is_none() { 1.0 } else { 0.0 };
            w.sample("opsbook_job_runnable", &[job_label(&job), job_label(&runbook), job_label(&host)], value);
        }
    });
    w.family("opsbook_history_writable", "gauge", "Whether runs are being stored in the history database.");
    w.sample("opsbook_history_writable", &[], if state.history_error().is_none() { 1.0 } else { 0.0 });
    w.finish()
}

/// The job, runbook and host labels are the first three pairs of every series; this keeps
/// their names in one place (`job`, `runbook`, `host`), in that order.
fn job_label<'a>(value: &'a (&'static str, String)) -> (&'static str, &'a str) {
    (value.0, value.1.as_str())
}
