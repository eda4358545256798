//! The service-manager seam: what `unit::` needs from systemd, as a small trait.
//! Implemented over D-Bus (`systemd_dbus.rs`) and by the sandbox's simulated manager.

use std::time::{Duration, SystemTime};

use crate::future::BoxFuture;

/// A unit's state, as `systemctl status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitStatus {
    /// The unit's full name (`loki.service`).
    pub name: String,
    /// Its `Description=`.
    pub description: String,
    /// `loaded`, `not-found`, `masked`, `error`…
    pub load_state: String,
    /// `active`, `inactive`, `failed`, `activating`, `deactivating`, `reloading`.
    pub active_state: String,
    /// `running`, `dead`, `exited`, `failed`, `start`…
    pub sub_state: String,
    /// `enabled`, `disabled`, `static`, `masked`…; empty when there is no unit file.
    pub unit_file_state: String,
    /// The PID of its main process, 0 when none runs.
    pub main_pid: u32,
    /// When the unit entered its current state; `None` if it never changed.
    pub since: Option<SystemTime>,
    /// The service's last result: `success`, `exit-code`, `signal`, `timeout`…
    pub result: String,
    /// The exit status of the last main process.
    pub exec_main_status: i32,
    /// The PID of the last main process, kept after it exited (0 when it never ran).
    pub exec_main_pid: u32,
    /// Whether it has `ExecReload=`.
    pub can_reload: bool,
    /// The command line the unit starts (`ExecStart`'s first argv); empty when unknown.
    pub exec_start: Vec<String>,
}

/// `loki.service - Loki · loaded (enabled) · active (running) since … ago`, as a report shows it.
impl std::fmt::Display for UnitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self;
        if s.load_state == "not-found" {
            return write!(f, "{} - not installed (load state not-found)", s.name);
        }
        let since = match s.since {
            Some(t) => {
                let ago = SystemTime::now().duration_since(t).unwrap_or_default();
                let ago = humantime::format_duration(Duration::from_secs(ago.as_secs()));
                format!(" since {}; {ago} ago", humantime::format_rfc3339_seconds(t))
            }
            None => String::new(),
        };
        let file = if s.unit_file_state.is_empty() { String::new() } else { format!(" ({})", s.unit_file_state) };
        let failure = if s.active_state == "failed" {
            format!(", result {} status {}", s.result, s.exec_main_status)
        } else {
            String::new()
        };
        write!(
            f,
            "{} - {} · {}{file} · {} ({}){since}{failure}",
            s.name, s.description, s.load_state, s.active_state, s.sub_state
        )
    }
}

/// A state-changing job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// `start`.
    Start,
    /// `stop`.
    Stop,
    /// `restart`.
    Restart,
    /// `reload`.
    Reload,
}

impl Job {
    /// Its name, as `systemctl` takes it.
    pub fn verb(self) -> &'static str {
        match self {
            Job::Start => "start",
            Job::Stop => "stop",
            Job::Restart => "restart",
            Job::Reload => "reload",
        }
    }
}

/// Why a request to the manager failed (the job never ran, or its result is unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitError {
    /// The unit file does not exist.
    NotFound {
        /// The unit asked for.
        unit: String,
    },
    /// systemd refuses the job type for this unit (e.g. reload without `ExecReload`).
    NotApplicable {
        /// The unit asked for.
        unit: String,
        /// The job refused.
        job: Job,
    },
    /// Reload of a unit that is not running.
    Inactive {
        /// The unit asked for.
        unit: String,
    },
    /// The manager (or polkit) refused the request.
    AccessDenied {
        /// The unit asked for.
        unit: String,
        /// What was asked (`start`, `enable`, …).
        action: String,
        /// The manager's words.
        detail: String,
    },
    /// The manager's bus could not be reached.
    NoBus {
        /// The bus address tried.
        address: String,
        /// Why it failed.
        reason: String,
    },
    /// The job did not finish within the timeout.
    Timeout {
        /// The unit asked for.
        unit: String,
        /// The job that ran out of time.
        job: Job,
        /// How long it was given.
        after: Duration,
    },
    /// Any other failure, in words.
    Other(String),
}

impl std::fmt::Display for UnitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnitError::NotFound { unit } => write!(f, "unit `{unit}` is not installed on this host"),
            UnitError::NotApplicable { unit, job } => {
                write!(f, "unit `{unit}` does not support {} (systemd refuses the job)", job.verb())
            }
            UnitError::Inactive { unit } => write!(f, "unit `{unit}` is not active, so it cannot be reloaded"),
            UnitError::AccessDenied { unit, action, detail } => write!(
                f,
                "access denied to {action} `{unit}` ({detail})\n  help: the system's units need root (or a polkit rule that allows you); `--user` manages your own user manager's units"
            ),
            UnitError::NoBus { address, reason } => write!(
                f,
                "cannot reach the service manager at `{address}`: {reason}\n  help: is systemd running here? `--user` talks to your user manager"
            ),
            UnitError::Timeout { unit, job, after } => {
                write!(f, "{} of `{unit}` did not finish within {}", job.verb(), humantime::format_duration(*after))
            }
            UnitError::Other(message) => f.write_str(message),
        }
    }
}

/// What a finished job reports: `done`, `failed`, `canceled`, `timeout`, `dependency`,
/// `skipped` (systemd's `JobRemoved` results).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// The unit.
    pub unit: String,
    /// The job.
    pub job: Job,
    /// systemd's result word.
    pub result: String,
}

/// A unit's current (or, once stopped, last) run: what tells its log lines from those of the
/// process before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Run {
    /// systemd's invocation ID (32 hex digits), the `_SYSTEMD_INVOCATION_ID` of the run's lines;
    /// `None` when the manager does not say.
    pub invocation: Option<String>,
    /// When the run began: leaving `inactive` (`InactiveExitTimestamp`), else entering `active`
    /// (`ActiveEnterTimestamp`); `None` when the unit never ran.
    pub started: Option<SystemTime>,
    /// When the run before it ended (`InactiveEnterTimestamp`, when earlier than `started`):
    /// every line after it is this run's, since the process before was gone by then. A run's
    /// first lines can reach journald a few milliseconds before the manager stamps `started`.
    pub previous_end: Option<SystemTime>,
}

/// The service manager.
pub trait Units: Send + Sync {
    /// The unit's state.
    fn status<'a>(&'a self, unit: &'a str) -> BoxFuture<'a, Result<UnitStatus, UnitError>>;
    /// Opens the connection to the manager ahead of the first request (a failure is kept for
    /// that request to report); nothing to open by default.
    fn warm_up(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// Queues a job (mode `replace`) and waits for it to finish, at most `timeout`.
    fn run_job<'a>(
        &'a self,
        job: Job,
        unit: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<JobOutcome, UnitError>>;
    /// Enables or disables unit files, then reloads the manager as `systemctl` does. Returns
    /// what changed, as systemctl prints it (`created symlink A → B`, `removed A`); empty when
    /// the units already were so.
    fn set_enabled<'a>(&'a self, units: &'a [String], enabled: bool) -> BoxFuture<'a, Result<Vec<String>, UnitError>>;
    /// Makes the manager read its unit files again (`systemctl daemon-reload`).
    fn daemon_reload(&self) -> BoxFuture<'_, Result<(), UnitError>>;
    /// The states of several units, read as `systemctl is-active` reads them: name,
    /// description, load, active and sub state (the other fields empty, as `list` leaves them).
    /// A manager answers them in one call; by default each unit's `status`.
    fn states<'a>(&'a self, units: &'a [String]) -> BoxFuture<'a, Result<Vec<UnitStatus>, UnitError>> {
        Box::pin(async move { futures_util::future::try_join_all(units.iter().map(|u| self.status(u))).await })
    }
    /// The directories the manager reads unit files from, highest first (its `UnitPath`);
    /// empty when it cannot say (the sandbox).
    fn unit_path(&self) -> BoxFuture<'_, Result<Vec<String>, UnitError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Loaded units whose names match a glob pattern (`*.service`, `loki*`).
    fn list<'a>(&'a self, pattern: &'a str) -> BoxFuture<'a, Result<Vec<UnitStatus>, UnitError>>;
    /// The unit's current run. Without an invocation ID of its own a manager names only the
    /// time an active unit entered its state.
    fn current_run<'a>(&'a self, unit: &'a str) -> BoxFuture<'a, Result<Run, UnitError>> {
        Box::pin(async move {
            let s = self.status(unit).await?;
            Ok(Run { started: s.since.filter(|_| s.active_state == "active"), ..Run::default() })
        })
    }
}

/// `loki` → `loki.service`; names with a type suffix stay as they are.
pub fn full_name(name: &str) -> String {
    const TYPES: &[&str] = &[
        ".service",
        ".socket",
        ".target",
        ".timer",
        ".mount",
        ".path",
        ".slice",
        ".scope",
        ".device",
        ".swap",
        ".automount",
    ];
    if TYPES.iter().any(|t| name.ends_with(t)) || name.contains('*') {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}
