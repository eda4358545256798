//! The real service manager: systemd over D-Bus (zbus), one cached connection per run, on
//! the system bus or — for `scope = "user"` — the user's session bus. Jobs are awaited
//! through `JobRemoved`, subscribed before the job is queued so a fast job is not missed.

use std::future::Future;
use std::time::{Duration, UNIX_EPOCH};

use futures_util::StreamExt;
use tokio::sync::OnceCell;
use zbus::Connection;
use zbus::zvariant::OwnedObjectPath;

use super::unit_properties::{ServiceProperties, UnitProperties};
use super::units::{Job, JobOutcome, Run, UnitError, UnitStatus, Units};
use crate::future::BoxFuture;
use crate::transport::BusRoute;

/// Every single D-Bus call gives up after this (jobs have their own timeout).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// A connection by the first of `routes` that answers; else why each did not.
async fn connect_first(routes: &[BusRoute]) -> Result<zbus::Connection, String> {
    let mut reasons = Vec::new();
    for route in routes {
        match connect_within(route.address.clone(), route.user_id).await {
            Ok(connection) => return Ok(connection),
            Err(e) => reasons.push(format!("{}: {e}", route.via)),
        }
    }
    Err(reasons.join("; "))
}

/// The connection to the bus at `address` (authenticating as `user_id` when given), or why not
/// within `CALL_TIMEOUT`.
async fn connect_within(address: zbus::Address, user_id: Option<u32>) -> Result<zbus::Connection, String> {
    let connected = async {
        let builder = builder_for(address).await?;
        let builder = match user_id {
            Some(uid) => builder.user_id(uid),
            None => builder,
        };
        builder.method_timeout(CALL_TIMEOUT).build().await.map_err(|e| e.to_string())
    };
    match tokio::time::timeout(CALL_TIMEOUT, connected).await {
        Ok(connection) => connection,
        Err(_) => Err(format!("no answer within {}s", CALL_TIMEOUT.as_secs())),
    }
}

/// A connection builder for `address`. A socket file (every local bus, every forwarded one)
/// is connected here, as any other I/O of the run: zbus would start a blocking thread for
/// each (one more thread a run, one a host of a fleet run). Any other address, zbus connects.
async fn builder_for(address: zbus::Address) -> Result<zbus::connection::Builder<'static>, String> {
    use zbus::address::transport::{Transport, UnixSocket};
    if let Transport::Unix(unix) = address.transport()
        && let UnixSocket::File(path) = unix.path()
    {
        let stream = connect_socket(path).await.map_err(|e| e.to_string())?;
        return Ok(zbus::connection::Builder::unix_stream(stream));
    }
    zbus::connection::Builder::address(address).map_err(|e| e.to_string())
}

/// The socket at `path`, connected. A listener whose backlog is full refuses for now: it is
/// asked again until the caller's time runs out, as a blocking connect would wait.
async fn connect_socket(path: &std::path::Path) -> std::io::Result<tokio::net::UnixStream> {
    loop {
        match tokio::net::UnixStream::connect(path).await {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            connected => return connected,
        }
    }
}

#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1",
    gen_blocking = false
)]
trait Manager {
    fn start_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn restart_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn reload_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    fn enable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<(bool, Vec<(String, String, String)>)>;
    fn disable_unit_files(&self, files: &[&str], runtime: bool) -> zbus::Result<Vec<(String, String, String)>>;
    fn reload(&self) -> zbus::Result<()>;
    fn subscribe(&self) -> zbus::Result<()>;
    #[zbus(property)]
    fn unit_path(&self) -> zbus::Result<Vec<String>>;
    #[allow(clippy::type_complexity)]
    fn list_units_by_patterns(
        &self,
        states: &[&str],
        patterns: &[&str],
    ) -> zbus::Result<
        Vec<(String, String, String, String, String, String, OwnedObjectPath, u32, String, OwnedObjectPath)>,
    >;
    #[allow(clippy::type_complexity)]
    fn list_units_by_names(
        &self,
        names: &[&str],
    ) -> zbus::Result<
        Vec<(String, String, String, String, String, String, OwnedObjectPath, u32, String, OwnedObjectPath)>,
    >;
    #[zbus(signal)]
    fn job_removed(&self, id: u32, job: zbus::zvariant::ObjectPath<'_>, unit: &str, result: &str) -> zbus::Result<()>;
}

/// systemd over D-Bus for one scope.
pub(crate) struct SystemdDbus {
    user: bool,
    /// A remote manager: the ways to it over ssh, best first, and the host's name for messages.
    remote: Option<(Vec<BusRoute>, String)>,
    connection: OnceCell<Result<(Connection, ManagerProxy<'static>), UnitError>>,
    /// The runtime the connection lives on: zbus spawns tasks when a connection is dropped.
    runtime: std::sync::OnceLock<tokio::runtime::Handle>,
    subscribed: OnceCell<()>,
}

impl Drop for SystemdDbus {
    fn drop(&mut self) {
        if let Some(handle) = self.runtime.get() {
            let _inside = handle.enter();
            drop(self.connection.take());
        }
    }
}

impl SystemdDbus {
    pub(crate) fn new(user: bool) -> SystemdDbus {
        SystemdDbus {
            user,
            remote: None,
            connection: OnceCell::new(),
            runtime: std::sync::OnceLock::new(),
            subscribed: OnceCell::new(),
        }
    }

    /// The manager on another host, reached by the first of `routes` that answers
    /// (`Ssh::bus_routes`: its bus socket forwarded, else `systemd-stdio-bridge` over the
    /// shared ssh connection), for `user` or system scope.
    pub(crate) fn over(routes: Vec<BusRoute>, user: bool, host: &str) -> SystemdDbus {
        let mut manager = SystemdDbus::new(user);
        manager.remote = Some((routes, host.to_string()));
        manager
    }

    fn address(&self) -> String {
        if let Some((_, host)) = &self.remote {
            // The bridge's address is a long ssh command line: name the host instead.
            let scope = if self.user { "user" } else { "system" };
            return format!("the {scope} service manager of host {host}, over ssh");
        }
        if self.user {
            std::env::var("DBUS_SESSION_BUS_ADDRESS").unwrap_or_else(|_| {
                let runtime = std::env::var("XDG_RUNTIME_DIR").unwrap_or_else(|_| "/run/user/<uid>".into());
                format!("unix:path={runtime}/bus")
            })
        } else {
            std::env::var("DBUS_SYSTEM_BUS_ADDRESS").unwrap_or_else(|_| "unix:path=/run/dbus/system_bus_socket".into())
        }
    }

    async fn manager(&self) -> Result<&ManagerProxy<'static>, UnitError> {
        let cached = self
            .connection
            .get_or_init(|| async {
                let _ = self.runtime.set(tokio::runtime::Handle::current());
                let no_bus = |reason: String| UnitError::NoBus { address: self.address(), reason };
                let connection = match &self.remote {
                    Some((routes, _)) => connect_first(routes).await.map_err(no_bus)?,
                    None => {
                        let address = if self.user { zbus::Address::session() } else { zbus::Address::system() };
                        let address = address.map_err(|e| no_bus(e.to_string()))?;
                        connect_within(address, None).await.map_err(no_bus)?
                    }
                };
                let manager = ManagerProxy::new(&connection).await.map_err(|e| no_bus(e.to_string()))?;
                Ok((connection, manager))
            })
            .await;
        match cached {
            Ok((_, manager)) => Ok(manager),
            Err(e) => Err(e.clone()),
        }
    }

    /// One interface's properties of the object at `path`, read into `T` (`unit_properties`).
    async fn properties<T>(&self, path: &OwnedObjectPath, interface: &'static str) -> Result<T, UnitError>
    where
        T: for<'d> serde::Deserialize<'d> + zbus::zvariant::Type,
    {
        let manager = self.manager().await?;
        // A plain `Properties.GetAll` call: no proxy to build (and none to cache) per read.
        let reply = manager
            .inner()
            .connection()
            .call_method(
                Some("org.freedesktop.systemd1"),
                path.as_ref(),
                Some("org.freedesktop.DBus.Properties"),
                "GetAll",
                &(interface,),
            )
            .await
            .map_err(|e| UnitError::Other(format!("reading {interface} properties: {e}")))?;
        reply.body().deserialize().map_err(|e| UnitError::Other(format!("reading {interface} properties: {e}")))
    }

    async fn status_of(&self, unit: &str) -> Result<UnitStatus, UnitError> {
        // The unit's object path is its escaped name; systemd loads the unit when the path is
        // read, so one round trip per interface (both in flight at once) is enough.
        let path = unit_path(unit)?;
        let service = async {
            if unit.ends_with(".service") {
                self.properties(&path, "org.freedesktop.systemd1.Service").await.unwrap_or_default()
            } else {
                ServiceProperties::default()
            }
        };
        let (u, s) = futures_util::future::join(self.properties(&path, "org.freedesktop.systemd1.Unit"), service).await;
        let u: UnitProperties = u?;
        Ok(UnitStatus {
            name: u.id.unwrap_or_else(|| unit.to_string()),
            description: u.description.unwrap_or_default(),
            load_state: u.load_state.unwrap_or_default(),
            active_state: u.active_state.unwrap_or_default(),
            sub_state: u.sub_state.unwrap_or_default(),
            unit_file_state: u.unit_file_state.unwrap_or_default(),
            main_pid: s.main_pid.unwrap_or(0),
            since: u.state_change_timestamp.filter(|us| *us > 0).map(|us| UNIX_EPOCH + Duration::from_micros(us)),
            exec_start: s.exec_start(),
            result: s.result.unwrap_or_default(),
            exec_main_status: s.exec_main_status.unwrap_or(0),
            exec_main_pid: s.exec_main_pid.unwrap_or(0),
            can_reload: u.can_reload.unwrap_or(false),
        })
    }

    async fn job(&self, job: Job, unit: &str, timeout: Duration) -> Result<JobOutcome, UnitError> {
        let manager = self.manager().await?;
        // Without a subscription systemd emits no JobRemoved signals to us; only jobs need it.
        self.subscribed
            .get_or_init(|| async {
                if let Err(e) = manager.subscribe().await {
                    tracing::debug!("Subscribe: {e}");
                }
            })
            .await;
        // Subscribe to JobRemoved first: a fast job may finish before the call returns.
        let mut removed = call(unit, job.verb(), manager.receive_job_removed()).await?;
        let queued = match job {
            Job::Start => manager.start_unit(unit, "replace").await,
            Job::Stop => manager.stop_unit(unit, "replace").await,
            Job::Restart => manager.restart_unit(unit, "replace").await,
            Job::Reload => manager.reload_unit(unit, "replace").await,
        };
        let job_path = queued.map_err(|e| classify(e, unit, job.verb(), Some(job)))?;
        let wait = async {
            while let Some(signal) = removed.next().await {
                if let Ok(args) = signal.args()
                    && args.job().as_str() == job_path.as_str()
                {
                    return Ok(args.result().to_string());
                }
            }
            Err(UnitError::Other("the service manager closed the connection".into()))
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(result) => Ok(JobOutcome { unit: unit.to_string(), job, result: result? }),
            Err(_) => Err(UnitError::Timeout { unit: unit.to_string(), job, after: timeout }),
        }
    }
}

/// `/org/freedesktop/systemd1/unit/loki_2eservice`: systemd's bus path escaping.
fn unit_path(unit: &str) -> Result<OwnedObjectPath, UnitError> {
    let mut path = String::from("/org/freedesktop/systemd1/unit/");
    if unit.is_empty() {
        path.push('_');
    }
    for (i, b) in unit.bytes().enumerate() {
        if b.is_ascii_alphabetic() || (b.is_ascii_digit() && i > 0) {
            path.push(b as char);
        } else {
            path.push_str(&format!("_{b:02x}"));
        }
    }
    OwnedObjectPath::try_from(path).map_err(|e| UnitError::Other(format!("unit name `{unit}`: {e}")))
}

/// Runs one D-Bus call with the call timeout, classifying its error.
async fn call<T>(unit: &str, action: &str, f: impl Future<Output = zbus::Result<T>>) -> Result<T, UnitError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => r.map_err(|e| classify(e, unit, action, None)),
        Err(_) => Err(no_answer()),
    }
}

/// A call the manager did not answer within `CALL_TIMEOUT`.
fn no_answer() -> UnitError {
    UnitError::Other(format!("the service manager did not answer within {}s", CALL_TIMEOUT.as_secs()))
}

fn classify(e: zbus::Error, unit: &str, action: &str, job: Option<Job>) -> UnitError {
    let (name, message) = match &e {
        zbus::Error::MethodError(name, message, _) => (name.as_str().to_string(), message.clone().unwrap_or_default()),
        zbus::Error::FDO(fdo) => match fdo.as_ref() {
            zbus::fdo::Error::AccessDenied(m) => ("org.freedesktop.DBus.Error.AccessDenied".into(), m.clone()),
            zbus::fdo::Error::InteractiveAuthorizationRequired(m) => {
                ("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired".into(), m.clone())
            }
            other => (String::new(), other.to_string()),
        },
        other => (String::new(), other.to_string()),
    };
    match name.as_str() {
        "org.freedesktop.systemd1.NoSuchUnit" | "org.freedesktop.systemd1.LoadFailed" => {
            UnitError::NotFound { unit: unit.into() }
        }
        "org.freedesktop.systemd1.JobTypeNotApplicable" => {
            UnitError::NotApplicable { unit: unit.into(), job: job.unwrap_or(Job::Reload) }
        }
        "org.freedesktop.systemd1.UnitInactive" => UnitError::Inactive { unit: unit.into() },
        "org.freedesktop.DBus.Error.AccessDenied" | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" => {
            UnitError::AccessDenied { unit: unit.into(), action: action.into(), detail: message }
        }
        _ if message.contains("not found") || message.contains("No such file") => {
            UnitError::NotFound { unit: unit.into() }
        }
        _ => UnitError::Other(format!("{action} `{unit}`: {message}")),
    }
}

impl Units for SystemdDbus {
    fn status<'a>(&'a self, unit: &'a str) -> BoxFuture<'a, Result<UnitStatus, UnitError>> {
        Box::pin(self.status_of(unit))
    }

    fn warm_up(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {
            let _ = self.manager().await;
        })
    }

    fn run_job<'a>(
        &'a self,
        job: Job,
        unit: &'a str,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<JobOutcome, UnitError>> {
        Box::pin(self.job(job, unit, timeout))
    }

    fn set_enabled<'a>(&'a self, units: &'a [String], enabled: bool) -> BoxFuture<'a, Result<Vec<String>, UnitError>> {
        Box::pin(async move {
            let manager = self.manager().await?;
            let files: Vec<&str> = units.iter().map(String::as_str).collect();
            let first = units.first().map(String::as_str).unwrap_or("");
            let action = if enabled { "enable" } else { "disable" };
            let changes = if enabled {
                call(first, action, manager.enable_unit_files(&files, false, false)).await?.1
            } else {
                call(first, action, manager.disable_unit_files(&files, false)).await?
            };
            // As `systemctl enable` does: the manager re-reads its unit files.
            call(first, "reload the manager for", manager.reload()).await?;
            Ok(changes.into_iter().map(|(kind, file, target)| change_text(&kind, &file, &target)).collect())
        })
    }

    fn daemon_reload(&self) -> BoxFuture<'_, Result<(), UnitError>> {
        Box::pin(async move {
            let manager = self.manager().await?;
            call("", "daemon-reload", manager.reload()).await
        })
    }

    fn unit_path(&self) -> BoxFuture<'_, Result<Vec<String>, UnitError>> {
        Box::pin(async move {
            let manager = self.manager().await?;
            call("", "read the unit search path", manager.unit_path()).await
        })
    }

    fn current_run<'a>(&'a self, unit: &'a str) -> BoxFuture<'a, Result<Run, UnitError>> {
        Box::pin(async move {
            let u: UnitProperties = self.properties(&unit_path(unit)?, "org.freedesktop.systemd1.Unit").await?;
            let invocation = u
                .invocation_id
                .filter(|id| id.iter().any(|b| *b != 0))
                .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
            let started_us =
                [u.inactive_exit_timestamp, u.active_enter_timestamp].into_iter().flatten().find(|us| *us > 0);
            let ended_us = u.inactive_enter_timestamp.filter(|us| *us > 0 && Some(*us) <= started_us);
            let time = |us: u64| UNIX_EPOCH + Duration::from_micros(us);
            Ok(Run { invocation, started: started_us.map(time), previous_end: ended_us.map(time) })
        })
    }

    fn list<'a>(&'a self, pattern: &'a str) -> BoxFuture<'a, Result<Vec<UnitStatus>, UnitError>> {
        Box::pin(async move {
            let manager = self.manager().await?;
            let units = call(pattern, "list", manager.list_units_by_patterns(&[], &[pattern])).await?;
            Ok(units
                .into_iter()
                .map(|(name, description, load, active, sub, ..)| listed(name, description, load, active, sub))
                .collect())
        })
    }

    fn states<'a>(&'a self, units: &'a [String]) -> BoxFuture<'a, Result<Vec<UnitStatus>, UnitError>> {
        Box::pin(async move {
            let manager = self.manager().await?;
            let names: Vec<&str> = units.iter().map(String::as_str).collect();
            let first = names.first().copied().unwrap_or("");
            match tokio::time::timeout(CALL_TIMEOUT, manager.list_units_by_names(&names)).await {
                Ok(Ok(found)) => Ok(found
                    .into_iter()
                    .map(|(name, description, load, active, sub, ..)| listed(name, description, load, active, sub))
                    .collect()),
                // A manager older than systemd 227 has no `ListUnitsByNames`: each unit's status.
                Ok(Err(zbus::Error::MethodError(name, ..))) if name.as_str().ends_with("UnknownMethod") => {
                    futures_util::future::try_join_all(units.iter().map(|u| self.status_of(u))).await
                }
                Ok(Err(e)) => Err(classify(e, first, "read the state of", None)),
                Err(_) => Err(no_answer()),
            }
        })
    }
}

/// A unit as the manager lists it: its states, the rest empty.
fn listed(
    name: String,
    description: String,
    load_state: String,
    active_state: String,
    sub_state: String,
) -> UnitStatus {
    UnitStatus {
        name,
        description,
        load_state,
        active_state,
        sub_state,
        unit_file_state: String::new(),
        main_pid: 0,
        since: None,
        result: String::new(),
        exec_main_status: 0,
        exec_main_pid: 0,
        can_reload: false,
        exec_start: Vec::new(),
    }
}

/// One change of `EnableUnitFiles`/`DisableUnitFiles` (`symlink`, `unlink`…), as systemctl words it.
fn change_text(kind: &str, file: &str, target: &str) -> String {
    match kind {
        "symlink" => format!("created symlink {file} → {target}"),
        "unlink" => format!("removed {file}"),
        other => format!("{other} {file} {target}").trim_end().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bus whose listen backlog is full: the connect waits, and succeeds once a connection is
    /// accepted, as the blocking connect zbus made did; a missing socket is said at once.
    #[tokio::test]
    async fn a_connect_to_a_full_backlog_waits_for_room() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let mut pending = Vec::new();
        let full = loop {
            match tokio::net::UnixStream::connect(&path).await {
                Ok(stream) => pending.push(stream),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break pending.len(),
                Err(e) => panic!("{e}"),
            }
            assert!(pending.len() < 10_000, "the backlog never filled");
        };
        let waiting = tokio::spawn({
            let path = path.clone();
            async move { connect_socket(&path).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "it waits while the backlog is full ({full} pending)");
        let _accepted = listener.accept().await.unwrap();
        let connected = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        assert!(connected.is_ok(), "{connected:?}");
        let missing = connect_socket(&dir.path().join("none")).await.unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }
}
