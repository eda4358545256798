//! The sandbox's service manager: the four components as simulated units with systemd's
//! semantics — states and sub-states, the time a unit entered its state, enable/disable,
//! job results, reload refused for a unit without reload support exactly as systemd refuses
//! it, and a failed start recorded the way systemd records one (result `exit-code`, status 1,
//! the same journal lines). Starting a unit starts its in-process component; stopping it
//! stops the component, so a stopped server's port refuses connections.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::journal::MemJournal;
use opsbook_world::BoxFuture;
use opsbook_world::units::{Job, JobOutcome, UnitError, UnitStatus, Units};

/// What a simulated unit runs.
pub trait Component: Send + Sync {
    /// Starts it as process `pid`; `Err` is what the process would print before exiting
    /// with status 1.
    fn start(&self, pid: u32) -> BoxFuture<'_, Result<(), String>>;
    fn stop(&self) -> BoxFuture<'_, ()>;
    /// Re-reads configuration (only called for units with reload support).
    fn reload(&self) -> BoxFuture<'_, Result<(), String>>;
}

/// The result of a job, as systemd's `JobRemoved` signal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobResult {
    Done,
    Failed,
}

impl JobResult {
    pub fn as_str(self) -> &'static str {
        match self {
            JobResult::Done => "done",
            JobResult::Failed => "failed",
        }
    }
}

/// Why a job could not even be queued (systemd answers these as D-Bus errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NotFound(String),
    /// `org.freedesktop.systemd1.JobTypeNotApplicable`
    NotApplicable {
        unit: String,
        job: &'static str,
    },
    /// Reload of an inactive unit: `org.freedesktop.systemd1.UnitInactive`.
    Inactive(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotFound(u) => write!(f, "Unit {u} not found."),
            Refusal::NotApplicable { unit, job } => write!(f, "Job type {job} is not applicable for unit {unit}."),
            Refusal::Inactive(u) => write!(f, "Unit {u} is not active."),
        }
    }
}

/// A unit's properties: the same record the real manager reports.
pub(crate) type SimStatus = UnitStatus;

struct SimUnit {
    status: SimStatus,
    identifier: String,
    component: Arc<dyn Component>,
}

/// The simulated manager.
pub struct SimManager {
    units: Mutex<BTreeMap<String, SimUnit>>,
    journal: Arc<MemJournal>,
    next_pid: Mutex<u32>,
    /// Serialises jobs, as systemd runs one job per unit at a time.
    jobs: tokio::sync::Mutex<()>,
    /// The fault `lost-mid-change`: the units whose start, restart or reload loses the host,
    /// and what a lost host's callers are told; `lost` once it happened (shared with the
    /// host's commands).
    loses_host: Mutex<Option<(Vec<String>, String)>>,
    pub(crate) lost: Arc<std::sync::atomic::AtomicBool>,
}

impl SimManager {
    pub fn new(journal: Arc<MemJournal>) -> SimManager {
        SimManager {
            units: Mutex::default(),
            journal,
            next_pid: Mutex::new(4100),
            jobs: tokio::sync::Mutex::new(()),
            loses_host: Mutex::default(),
            lost: Arc::default(),
        }
    }

    /// Arms the fault `lost-mid-change`: once `unit` starts, restarts or reloads, the host
    /// answers nothing more; `why` is what its callers are told.
    pub(crate) fn lose_host_after(&self, unit: &str, why: &str) {
        let mut armed = self.loses_host.lock().unwrap_or_else(|p| p.into_inner());
        let (units, said) = armed.get_or_insert_with(|| (Vec::new(), why.to_string()));
        units.push(unit.to_string());
        *said = why.to_string();
    }

    /// What a caller of a lost host is told, once it is lost.
    fn unreachable(&self) -> Result<(), UnitError> {
        if !self.lost.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let armed = self.loses_host.lock().unwrap_or_else(|p| p.into_inner());
        Err(UnitError::Other(armed.as_ref().map(|(_, why)| why.clone()).unwrap_or_default()))
    }

    /// After a job on `unit`: the host is lost when the fault is armed for it.
    fn maybe_lost(&self, unit: &str, job: Job) {
        let armed = self.loses_host.lock().unwrap_or_else(|p| p.into_inner());
        if job != Job::Stop && armed.as_ref().is_some_and(|(units, _)| units.iter().any(|u| *u == self.resolve(unit))) {
            self.lost.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    pub fn journal(&self) -> &Arc<MemJournal> {
        &self.journal
    }

    /// Adds an enabled, stopped unit.
    pub fn add(
        &self,
        name: &str,
        description: &str,
        identifier: &str,
        can_reload: bool,
        component: Arc<dyn Component>,
    ) {
        let status = SimStatus {
            name: name.to_string(),
            description: description.to_string(),
            load_state: "loaded".into(),
            active_state: "inactive".into(),
            sub_state: "dead".into(),
            unit_file_state: "enabled".into(),
            main_pid: 0,
            since: Some(SystemTime::now()),
            result: "success".into(),
            exec_main_status: 0,
            exec_main_pid: 0,
            can_reload,
            exec_start: vec![format!("/usr/bin/{identifier}")],
        };
        self.lock().insert(name.to_string(), SimUnit { status, identifier: identifier.to_string(), component });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SimUnit>> {
        self.units.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `name`, or `name.service` when that is what exists.
    pub fn resolve(&self, name: &str) -> String {
        let units = self.lock();
        if units.contains_key(name) || name.contains('.') { name.to_string() } else { format!("{name}.service") }
    }

    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// The unit's status; an unknown unit reads as systemd shows one: `not-found`, inactive.
    pub fn status(&self, name: &str) -> SimStatus {
        let name = self.resolve(name);
        match self.lock().get(&name) {
            Some(u) => u.status.clone(),
            None => SimStatus {
                name: name.clone(),
                description: name,
                load_state: "not-found".into(),
                active_state: "inactive".into(),
                sub_state: "dead".into(),
                unit_file_state: String::new(),
                main_pid: 0,
                since: None,
                result: "success".into(),
                exec_main_status: 0,
                exec_main_pid: 0,
                can_reload: false,
                exec_start: Vec::new(),
            },
        }
    }

    fn component(&self, name: &str) -> Result<(Arc<dyn Component>, String, String), Refusal> {
        let units = self.lock();
        let u = units.get(name).ok_or_else(|| Refusal::NotFound(name.to_string()))?;
        Ok((u.component.clone(), u.status.description.clone(), u.identifier.clone()))
    }

    fn set_state(&self, name: &str, active: &str, sub: &str, f: impl FnOnce(&mut SimStatus)) {
        if let Some(u) = self.lock().get_mut(name) {
            u.status.active_state = active.into();
            u.status.sub_state = sub.into();
            u.status.since = Some(SystemTime::now());
            f(&mut u.status);
        }
    }

    fn manager_log(&self, name: &str, priority: u8, message: String) {
        // The manager's own lines carry the unit, as journald attributes them.
        self.journal.append(name, "systemd", 1, priority, message);
    }

    pub async fn start(&self, name: &str) -> Result<JobResult, Refusal> {
        let _job = self.jobs.lock().await;
        let name = self.resolve(name);
        self.start_locked(&name).await
    }

    async fn start_locked(&self, name: &str) -> Result<JobResult, Refusal> {
        let (component, description, identifier) = self.component(name)?;
        if self.status(name).active_state == "active" {
            return Ok(JobResult::Done);
        }
        self.set_state(name, "activating", "start", |_| {});
        self.manager_log(name, 6, format!("Starting {description}..."));
        let pid = {
            let mut next = self.next_pid.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            *next
        };
        match component.start(pid).await {
            Ok(()) => {
                self.set_state(name, "active", "running", |s| {
                    s.main_pid = pid;
                    s.exec_main_pid = pid;
                    s.result = "success".into();
                    s.exec_main_status = 0;
                });
                self.manager_log(name, 6, format!("Started {description}."));
                Ok(JobResult::Done)
            }
            Err(message) => {
                self.journal.append(name, &identifier, pid, 3, message);
                self.manager_log(name, 5, format!("{name}: Main process exited, code=exited, status=1/FAILURE"));
                self.manager_log(name, 4, format!("{name}: Failed with result 'exit-code'."));
                self.manager_log(name, 3, format!("Failed to start {description}."));
                self.set_state(name, "failed", "failed", |s| {
                    s.main_pid = 0;
                    s.exec_main_pid = pid;
                    s.result = "exit-code".into();
                    s.exec_main_status = 1;
                });
                Ok(JobResult::Failed)
            }
        }
    }

    pub async fn stop(&self, name: &str) -> Result<JobResult, Refusal> {
        let _job = self.jobs.lock().await;
        let name = self.resolve(name);
        self.stop_locked(&name).await
    }

    async fn stop_locked(&self, name: &str) -> Result<JobResult, Refusal> {
        let (component, description, _) = self.component(name)?;
        let state = self.status(name).active_state;
        if state != "active" {
            // Stopping a failed unit clears nothing but is "done", as systemd answers.
            return Ok(JobResult::Done);
        }
        self.set_state(name, "deactivating", "stop-sigterm", |_| {});
        self.manager_log(name, 6, format!("Stopping {description}..."));
        component.stop().await;
        self.set_state(name, "inactive", "dead", |s| s.main_pid = 0);
        self.manager_log(name, 6, format!("Stopped {description}."));
        Ok(JobResult::Done)
    }

    pub async fn restart(&self, name: &str) -> Result<JobResult, Refusal> {
        let _job = self.jobs.lock().await;
        let name = self.resolve(name);
        self.component(&name)?;
        self.stop_locked(&name).await?;
        self.start_locked(&name).await
    }

    pub async fn reload(&self, name: &str) -> Result<JobResult, Refusal> {
        let _job = self.jobs.lock().await;
        let name = self.resolve(name);
        let (component, description, _) = self.component(&name)?;
        let status = self.status(&name);
        if !status.can_reload {
            return Err(Refusal::NotApplicable { unit: name, job: "reload" });
        }
        if status.active_state != "active" {
            return Err(Refusal::Inactive(name));
        }
        self.set_state(&name, "reloading", "reload", |_| {});
        self.manager_log(&name, 6, format!("Reloading {description}..."));
        let result = component.reload().await;
        self.set_state(&name, "active", "running", |_| {});
        match result {
            Ok(()) => {
                self.manager_log(&name, 6, format!("Reloaded {description}."));
                Ok(JobResult::Done)
            }
            Err(e) => {
                self.manager_log(
                    &name,
                    3,
                    format!("{name}: Control process exited, code=exited, status=1/FAILURE ({e})"),
                );
                self.manager_log(&name, 3, format!("Reload failed for {description}."));
                Ok(JobResult::Failed)
            }
        }
    }

    /// The unit's main process exited on its own with status 1 (after a reload that failed
    /// later, as Telegraf's does): systemd's lines and a failed unit, as it records them.
    pub(crate) async fn main_process_failed(&self, name: &str, pid: u32) {
        let (component, description, _) = match self.component(name) {
            Ok(c) => c,
            Err(_) => return,
        };
        let status = self.status(name);
        if status.active_state != "active" || status.main_pid != pid {
            return;
        }
        component.stop().await;
        self.manager_log(name, 5, format!("{name}: Main process exited, code=exited, status=1/FAILURE"));
        self.manager_log(name, 4, format!("{name}: Failed with result 'exit-code'."));
        self.set_state(name, "failed", "failed", |s| {
            s.main_pid = 0;
            s.result = "exit-code".into();
            s.exec_main_status = 1;
        });
        let _ = description;
    }

    /// Enables or disables; returns whether the state changed.
    pub fn set_enabled(&self, name: &str, enabled: bool) -> Result<bool, Refusal> {
        let name = self.resolve(name);
        let mut units = self.lock();
        let u = units.get_mut(&name).ok_or_else(|| Refusal::NotFound(name.clone()))?;
        let wanted = if enabled { "enabled" } else { "disabled" };
        let changed = u.status.unit_file_state != wanted;
        u.status.unit_file_state = wanted.into();
        Ok(changed)
    }
}

impl Refusal {
    fn into_error(self, job: Job) -> UnitError {
        match self {
            Refusal::NotFound(unit) => UnitError::NotFound { unit },
            Refusal::NotApplicable { unit, .. } => UnitError::NotApplicable { unit, job },
            Refusal::Inactive(unit) => UnitError::Inactive { unit },
        }
    }
}

/// `*` and `?` globs, as `systemctl list-units PATTERN` matches them.
fn glob(pattern: &str, name: &str) -> bool {
    fn at(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => at(&p[1..], n) || (!n.is_empty() && at(p, &n[1..])),
            (Some(b'?'), Some(_)) => at(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => at(&p[1..], &n[1..]),
            _ => false,
        }
    }
    at(pattern.as_bytes(), name.as_bytes())
}

impl Units for SimManager {
    fn status<'a>(&'a self, unit: &'a str) -> BoxFuture<'a, Result<UnitStatus, UnitError>> {
        Box::pin(async move {
            self.unreachable()?;
            Ok(SimManager::status(self, unit))
        })
    }

    fn run_job<'a>(
        &'a self,
        job: Job,
        unit: &'a str,
        timeout: std::time::Duration,
    ) -> BoxFuture<'a, Result<JobOutcome, UnitError>> {
        Box::pin(async move {
            self.unreachable()?;
            let work = async {
                match job {
                    Job::Start => self.start(unit).await,
                    Job::Stop => self.stop(unit).await,
                    Job::Restart => self.restart(unit).await,
                    Job::Reload => self.reload(unit).await,
                }
            };
            let result = tokio::time::timeout(timeout, work).await.map_err(|_| UnitError::Timeout {
                unit: self.resolve(unit),
                job,
                after: timeout,
            })?;
            let result = result.map_err(|r| r.into_error(job))?;
            self.maybe_lost(unit, job);
            Ok(JobOutcome { unit: self.resolve(unit), job, result: result.as_str().to_string() })
        })
    }

    fn set_enabled<'a>(&'a self, units: &'a [String], enabled: bool) -> BoxFuture<'a, Result<Vec<String>, UnitError>> {
        Box::pin(async move {
            let mut changes = Vec::new();
            for u in units {
                // A unit file installed in the sandbox's directory is not run by it: say so,
                // rather than call a file just written "not installed".
                let switched = SimManager::set_enabled(self, u, enabled).map_err(|r| match r {
                    Refusal::NotFound(unit) => UnitError::Other(format!(
                        "the sandbox runs only the stack's own units ({}); `{unit}` is not one of them, so it cannot be {}",
                        self.names().join(", "),
                        if enabled { "enabled" } else { "disabled" }
                    )),
                    other => other.into_error(Job::Start),
                })?;
                if switched {
                    let state = if enabled { "enabled" } else { "disabled" };
                    changes.push(format!("{state} {}", self.resolve(u)));
                }
            }
            Ok(changes)
        })
    }

    fn daemon_reload(&self) -> BoxFuture<'_, Result<(), UnitError>> {
        Box::pin(async { Ok(()) })
    }

    fn list<'a>(&'a self, pattern: &'a str) -> BoxFuture<'a, Result<Vec<UnitStatus>, UnitError>> {
        Box::pin(async move {
            Ok(self.names().into_iter().filter(|n| glob(pattern, n)).map(|n| SimManager::status(self, &n)).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    struct Fake {
        fail: AtomicBool,
        running: AtomicBool,
        reloads: AtomicUsize,
    }

    impl Component for Fake {
        fn start(&self, _pid: u32) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async move {
                if self.fail.load(Ordering::SeqCst) {
                    return Err("fake: cannot bind".into());
                }
                self.running.store(true, Ordering::SeqCst);
                Ok(())
            })
        }
        fn stop(&self) -> BoxFuture<'_, ()> {
            Box::pin(async move { self.running.store(false, Ordering::SeqCst) })
        }
        fn reload(&self) -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async move {
                self.reloads.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    fn fake() -> Arc<Fake> {
        Arc::new(Fake { fail: AtomicBool::new(false), running: AtomicBool::new(false), reloads: AtomicUsize::new(0) })
    }

    #[tokio::test]
    async fn lifecycle_follows_systemd() {
        let m = SimManager::new(Arc::default());
        let f = fake();
        m.add("a.service", "A", "a", false, f.clone());
        assert_eq!(m.status("a").active_state, "inactive");
        assert_eq!(m.start("a").await, Ok(JobResult::Done));
        let s = m.status("a.service");
        assert_eq!((s.active_state.as_str(), s.sub_state.as_str()), ("active", "running"));
        assert!(f.running.load(Ordering::SeqCst));
        assert_eq!(m.reload("a").await, Err(Refusal::NotApplicable { unit: "a.service".into(), job: "reload" }));
        assert_eq!(m.stop("a").await, Ok(JobResult::Done));
        assert!(!f.running.load(Ordering::SeqCst));
        f.fail.store(true, Ordering::SeqCst);
        assert_eq!(m.start("a").await, Ok(JobResult::Failed));
        let s = m.status("a");
        assert_eq!((s.active_state.as_str(), s.result.as_str(), s.exec_main_status), ("failed", "exit-code", 1));
        let lines = m.journal().select(|e| e.unit == "a.service", 10);
        assert!(lines.iter().any(|e| e.message == "fake: cannot bind" && e.priority == 3));
        assert!(lines.iter().any(|e| e.message == "Failed to start A."));
        assert_eq!(m.status("nope").load_state, "not-found");
        assert!(matches!(m.start("nope").await, Err(Refusal::NotFound(_))));
        assert_eq!(m.set_enabled("a", false), Ok(true));
        assert_eq!(m.status("a").unit_file_state, "disabled");
    }

    #[tokio::test]
    async fn reload_of_a_reloadable_unit_reaches_the_component() {
        let m = SimManager::new(Arc::default());
        let f = fake();
        m.add("r.service", "R", "r", true, f.clone());
        assert_eq!(m.reload("r").await, Err(Refusal::Inactive("r.service".into())));
        m.start("r").await.unwrap();
        assert_eq!(m.reload("r").await, Ok(JobResult::Done));
        assert_eq!(f.reloads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn the_units_trait_reports_refusals_as_systemd_errors() {
        let m = SimManager::new(Arc::default());
        m.add("loki.service", "Loki", "loki", false, fake());
        let t = std::time::Duration::from_secs(1);
        assert_eq!(m.run_job(Job::Start, "loki", t).await.unwrap().result, "done");
        let e = m.run_job(Job::Reload, "loki", t).await.unwrap_err();
        assert_eq!(e, UnitError::NotApplicable { unit: "loki.service".into(), job: Job::Reload });
        assert_eq!(
            m.run_job(Job::Stop, "nope", t).await.unwrap_err(),
            UnitError::NotFound { unit: "nope.service".into() }
        );
        assert_eq!(m.list("lo*").await.unwrap().len(), 1);
        assert!(m.list("*.socket").await.unwrap().is_empty());
    }
}
