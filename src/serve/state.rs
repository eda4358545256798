//! What the service knows: each job's recent runs, schedule and problems, and the history.
//!
//! A job is seen once per host it watches: a job on this machine once, a job with `hosts`
//! once per inventory host it selects, each with its own runs and verdict.
//!
//! The scheduler writes here after every run; the endpoints read. Recent runs are kept in
//! memory (the last `KEEP` per job, loaded from the history at start), so the page and
//! `/metrics` never wait on the database, and a broken database costs the service its
//! lasting record, not its answers. Each run is stored in the history as it is recorded.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::history::{Filter, History, Retention, Run, now_ms};
use opsbook_base::config::serve::Job;

/// Runs kept in memory per job: what the page's strip and chart show, and `/api/runs` without
/// a database.
pub(super) const KEEP: usize = 200;

/// Of those, the newest this many keep their whole report in memory (the rest keep outcome,
/// times and note; their reports are read from the history when asked for).
pub(super) const KEEP_REPORTS: usize = 40;

/// Drops the report text of the runs older than the newest `KEEP_REPORTS`.
fn slim(runs: &mut VecDeque<Arc<Run>>) {
    let n = runs.len().saturating_sub(KEEP_REPORTS);
    for run in runs.iter_mut().take(n) {
        if !run.report.is_empty() {
            *run = Arc::new(Run { report: String::new(), ..(**run).clone() });
        }
    }
}

/// One job as the endpoints see it.
#[derive(Debug, Clone)]
pub(super) struct JobView {
    pub spec: Job,
    /// The host these runs watched (this machine's name for a job without `hosts`).
    pub host: String,
    /// Oldest first.
    pub runs: VecDeque<Arc<Run>>,
    /// The newest run's report, parsed once.
    pub latest: Option<Arc<Value>>,
    /// When the next run is due (ms since the epoch), once scheduled.
    pub(crate) next_due_ms: Option<i64>,
    pub(crate) running_since_ms: Option<i64>,
    /// Runs since this service started, by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Runs that started later than due because the previous one overran.
    pub late: u64,
    /// Why the job cannot run (refused as mutating, unknown runbook…), if it cannot.
    pub problem: Option<String>,
}

impl JobView {
    /// How the endpoints name it: the job, and the host when the job watches other hosts.
    pub(super) fn title(&self) -> String {
        if self.spec.hosts.is_some() { format!("{} on {}", self.spec.name, self.host) } else { self.spec.name.clone() }
    }

    /// Whether it ran since the service started (or cannot run at all, which is final).
    pub(super) fn ready(&self) -> bool {
        self.problem.is_some() || self.outcomes.values().sum::<u64>() > 0
    }
}

/// A view's key: the job's name and the host.
pub(super) type Key = (String, String);

struct Inner {
    jobs: BTreeMap<Key, JobView>,
}

/// Shared between the scheduler and the endpoints.
pub(super) struct State {
    inner: Mutex<Inner>,
    pub history: History,
    pub retention: Retention,
    pub hostname: String,
    /// Why the history cannot be read or written, when it cannot.
    history_error: Mutex<Option<String>>,
    next_id: AtomicI64,
}

impl State {
    pub(super) fn new(history: History, opened: Result<(), String>, retention: Retention, hostname: String) -> State {
        let last = history.last_id();
        let error = opened.err().or_else(|| last.as_ref().err().cloned());
        if let Some(e) = &error {
            tracing::error!("history: {e}; runs are kept in memory only until it can be written");
        }
        State {
            inner: Mutex::new(Inner { jobs: BTreeMap::new() }),
            history,
            retention,
            hostname,
            history_error: Mutex::new(error),
            next_id: AtomicI64::new(last.unwrap_or(0) + 1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why the history is not working, if it is not.
    pub(super) fn history_error(&self) -> Option<String> {
        self.history_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn history_result(&self, result: Result<(), String>) {
        let mut error = self.history_error.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(()) => {
                if error.take().is_some() {
                    tracing::warn!("history: writable again ({})", self.history.path().display());
                }
            }
            Err(e) => {
                if error.is_none() {
                    tracing::error!("history: {e}; runs are kept in memory only until it can be written");
                }
                *error = Some(e);
            }
        }
    }

    /// Installs the job list (at start and on reload), one entry per job and host: each
    /// keeps its runs by name and host; one new to this service gets its recent runs from the
    /// history.
    pub(super) fn set_jobs(&self, specs: Vec<(Job, String, Option<String>)>) {
        let mut inner = self.lock();
        let mut old = std::mem::take(&mut inner.jobs);
        for (spec, host, problem) in specs {
            let view = match old.remove(&(spec.name.clone(), host.clone())) {
                Some(mut view) => {
                    view.spec = spec;
                    view.problem = problem;
                    view
                }
                None => {
                    let filter = Filter {
                        job: Some(spec.name.clone()),
                        host: Some(host.clone()),
                        limit: Some(KEEP),
                        ..Filter::default()
                    };
                    let mut runs: VecDeque<Arc<Run>> = match self.history.list(&filter) {
                        Ok(runs) => runs.into_iter().map(Arc::new).collect(),
                        Err(e) => {
                            self.history_result(Err(e));
                            VecDeque::new()
                        }
                    };
                    slim(&mut runs);
                    let latest = runs.back().and_then(|r| serde_json::from_str(&r.report).ok()).map(Arc::new);
                    JobView {
                        spec,
                        host,
                        runs,
                        latest,
                        next_due_ms: None,
                        running_since_ms: None,
                        outcomes: BTreeMap::new(),
                        late: 0,
                        problem,
                    }
                }
            };
            inner.jobs.insert((view.spec.name.clone(), view.host.clone()), view);
        }
    }

    /// Every job, by name.
    pub(super) fn jobs(&self) -> Vec<JobView> {
        self.lock().jobs.values().cloned().collect()
    }

    /// Runs a closure over the jobs without copying them.
    pub(super) fn with_jobs<T>(&self, f: impl FnOnce(&BTreeMap<Key, JobView>) -> T) -> T {
        f(&self.lock().jobs)
    }

    pub(super) fn scheduled(&self, job: &str, due_ms: i64) {
        for v in self.lock().jobs.values_mut().filter(|v| v.spec.name == job) {
            v.next_due_ms = Some(due_ms);
        }
    }

    /// A run of the job starts (on each of its hosts) or, with `None`, ended.
    pub(super) fn running(&self, job: &str, since_ms: Option<i64>, late: bool) {
        for v in self.lock().jobs.values_mut().filter(|v| v.spec.name == job) {
            v.running_since_ms = since_ms;
            if late {
                v.late += 1;
            }
        }
    }

    /// Records a finished run on `host`: in memory at once, then in the history. Returns its id.
    pub(super) fn record(&self, spec: &Job, host: &str, document: Value, note: Option<String>) -> i64 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let started_ms = document["started_at"]
            .as_str()
            .and_then(|t| humantime::parse_rfc3339(t).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or_else(now_ms, |d| d.as_millis() as i64);
        let run = Arc::new(Run {
            id,
            job: spec.name.clone(),
            host: host.to_string(),
            runbook: spec.runbook.clone(),
            started_ms,
            duration_s: document["duration_s"].as_f64().unwrap_or(0.0),
            outcome: document["outcome"].as_str().unwrap_or("error").to_string(),
            note,
            report: document.to_string(),
        });
        {
            let mut inner = self.lock();
            if let Some(v) = inner.jobs.get_mut(&(spec.name.clone(), host.to_string())) {
                v.runs.push_back(run.clone());
                while v.runs.len() > KEEP {
                    v.runs.pop_front();
                }
                slim(&mut v.runs);
                v.latest = Some(Arc::new(document));
                v.running_since_ms = None;
                *v.outcomes.entry(run.outcome.clone()).or_default() += 1;
            }
        }
        let stored = self.history.insert(&run, self.retention);
        self.history_result(stored);
        id
    }

    /// A run by id: from memory, else from the history.
    pub(super) fn run(&self, id: i64) -> Option<Arc<Run>> {
        let found =
            self.lock().jobs.values().find_map(|v| v.runs.iter().find(|r| r.id == id && !r.report.is_empty()).cloned());
        found.or_else(|| self.history.get(id).ok().flatten().map(Arc::new))
    }

    /// The newest runs (of one job, or all; on one host, or all), newest first: from the
    /// history, else from memory.
    pub(super) fn recent(&self, job: Option<&str>, host: Option<&str>, limit: usize) -> Vec<Arc<Run>> {
        let filter = Filter {
            job: job.map(str::to_string),
            host: host.map(str::to_string),
            limit: Some(limit),
            ..Filter::default()
        };
        if self.history_error().is_none()
            && let Ok(runs) = self.history.list(&filter)
        {
            return runs.into_iter().rev().map(Arc::new).collect();
        }
        let mut runs: Vec<Arc<Run>> = self
            .lock()
            .jobs
            .values()
            .filter(|v| job.is_none_or(|j| v.spec.name == j) && host.is_none_or(|h| v.host == h))
            .flat_map(|v| v.runs.iter().cloned())
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse(r.id));
        runs.truncate(limit);
        runs
    }
}
