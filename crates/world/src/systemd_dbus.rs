//! The real service manager: systemd over D-Bus (zbus), one cached connection per run, on
//! the system bus or — for `scope = "user"` — the user's session bus. Jobs are awaited
//! through `JobRemoved`, subscribed before the job is queued so a fast job is not missed.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, UNIX_EPOCH};

use futures_util::StreamExt;
use tokio::sync::OnceCell;
use zbus::Connection;
use zbus::zvariant::{OwnedObjectPath, Value};

use super::BoxFuture;
use super::units::{Job, JobOutcome, Run, UnitError, UnitStatus, Units};

/// Every single D-Bus call gives up after this (jobs have their own timeout).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

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
    #[zbus(signal)]
    fn job_removed(&self, id: u32, job: zbus::zvariant::ObjectPath<'_>, unit: &str, result: &str) -> zbus::Result<()>;
}

/// systemd over D-Bus for one scope.
pub(crate) struct SystemdDbus {
    user: bool,
    /// A remote manager: its address (the bridge over ssh) and the host's name for messages.
    remote: Option<(zbus::Address, String)>,
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

    /// The manager on another host, reached at `address` (`Ssh::dbus_address`: the host's
    /// `systemd-stdio-bridge` over the shared ssh connection), for `user` or system scope.
    pub(crate) fn over(address: zbus::Address, user: bool, host: &str) -> SystemdDbus {
        let mut manager = SystemdDbus::new(user);
        manager.remote = Some((address, host.to_string()));
        manager
    }

    fn address(&self) -> String {
        if let Some((_, host)) = &self.remote {
            // The bridge's address is a long ssh command line: name the host instead.
            let scope = if self.user { "user" } else { "system" };
            return format!("the {scope} service manager of host {host}, over ssh (systemd-stdio-bridge)");
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
                let connect = async {
                    let builder = match &self.remote {
                        // Never through text: zbus does not read back the escapes it writes.
                        Some((address, _)) => Ok(zbus::connection::Builder::address(address.clone())?),
                        None if self.user => zbus::connection::Builder::session(),
                        None => zbus::connection::Builder::system(),
                    };
                    builder?.method_timeout(CALL_TIMEOUT).build().await
                };
                let connection = match tokio::time::timeout(CALL_TIMEOUT, connect).await {
                    Ok(Ok(c)) => c,
                    Ok(Err(e)) => return Err(no_bus(e.to_string())),
                    Err(_) => return Err(no_bus(format!("no answer within {}s", CALL_TIMEOUT.as_secs()))),
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

    async fn properties(&self, path: &OwnedObjectPath, interface: &'static str) -> Result<zbus::Message, UnitError> {
        let manager = self.manager().await?;
        // A plain `Properties.GetAll` call: no proxy to build (and none to cache) per read; the
        // reply is read in place by the caller (`properties_of`).
        manager
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
            .map_err(|e| UnitError::Other(format!("reading {interface} properties: {e}")))
    }

    async fn status_of(&self, unit: &str) -> Result<UnitStatus, UnitError> {
        // The unit's object path is its escaped name; systemd loads the unit when the path is
        // read, so one round trip per interface (both in flight at once) is enough.
        let path = unit_path(unit)?;
        let service = async {
            match unit.ends_with(".service") {
                true => self.properties(&path, "org.freedesktop.systemd1.Service").await.ok(),
                false => None,
            }
        };
        let (u, s) = futures_util::future::join(self.properties(&path, "org.freedesktop.systemd1.Unit"), service).await;
        let (u, s) = (u?.body(), s.map(|reply| reply.body()));
        let u = properties_of(&u)?;
        let s = s.as_ref().and_then(|body| properties_of(body).ok()).unwrap_or_default();
        let since_us = get::<u64>(&u, "StateChangeTimestamp");
        Ok(UnitStatus {
            name: text(&u, "Id").unwrap_or_else(|| unit.to_string()),
            description: text(&u, "Description").unwrap_or_default(),
            load_state: text(&u, "LoadState").unwrap_or_default(),
            active_state: text(&u, "ActiveState").unwrap_or_default(),
            sub_state: text(&u, "SubState").unwrap_or_default(),
            unit_file_state: text(&u, "UnitFileState").unwrap_or_default(),
            main_pid: get::<u32>(&s, "MainPID").unwrap_or(0),
            since: since_us.filter(|us| *us > 0).map(|us| UNIX_EPOCH + Duration::from_micros(us)),
            result: text(&s, "Result").unwrap_or_default(),
            exec_main_status: get::<i32>(&s, "ExecMainStatus").unwrap_or(0),
            exec_main_pid: get::<u32>(&s, "ExecMainPID").unwrap_or(0),
            can_reload: get::<bool>(&u, "CanReload").unwrap_or(false),
            exec_start: command_line(&s, "ExecStart"),
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
        Err(_) => {
            Err(UnitError::Other(format!("the service manager did not answer within {}s", CALL_TIMEOUT.as_secs())))
        }
    }
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

/// The properties a `GetAll` reply holds, read in place (names and texts borrowed from the
/// reply; a service has some 200 properties, of which a status reads a dozen).
type Properties<'r> = HashMap<&'r str, Value<'r>>;

fn properties_of(body: &zbus::message::Body) -> Result<Properties<'_>, UnitError> {
    body.deserialize().map_err(|e| UnitError::Other(format!("reading unit properties: {e}")))
}

fn text(map: &Properties<'_>, key: &str) -> Option<String> {
    map.get(key).and_then(|v| v.downcast_ref::<&str>().ok()).map(str::to_string)
}

fn get<T>(map: &Properties<'_>, key: &str) -> Option<T>
where
    T: for<'a> TryFrom<&'a Value<'a>>,
{
    T::try_from(map.get(key)?).ok()
}

/// The first command line of an `ExecStart`-like property (`a(sasbttttuii)`: path, argv,
/// ignore-failure, timestamps, pid, status): its argv.
fn command_line(map: &Properties<'_>, key: &str) -> Vec<String> {
    let Some(Value::Array(commands)) = map.get(key) else { return Vec::new() };
    let argv = commands.iter().find_map(|command| match command {
        Value::Structure(fields) => match fields.fields().get(1) {
            Some(Value::Array(argv)) => Some(argv),
            _ => None,
        },
        _ => None,
    });
    argv.map(|argv| argv.iter().filter_map(|a| <&str>::try_from(a).ok().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// A byte-array property (`ay`), such as `InvocationID`.
fn bytes(map: &Properties<'_>, key: &str) -> Option<Vec<u8>> {
    match map.get(key)? {
        Value::Array(items) => items.iter().map(|v| u8::try_from(v).ok()).collect(),
        _ => None,
    }
}

impl Units for SystemdDbus {
    fn status<'a>(&'a self, unit: &'a str) -> BoxFuture<'a, Result<UnitStatus, UnitError>> {
        Box::pin(self.status_of(unit))
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
            let u = self.properties(&unit_path(unit)?, "org.freedesktop.systemd1.Unit").await?.body();
            let u = properties_of(&u)?;
            let invocation = bytes(&u, "InvocationID")
                .filter(|id| id.iter().any(|b| *b != 0))
                .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
            let started_us = ["InactiveExitTimestamp", "ActiveEnterTimestamp"]
                .iter()
                .filter_map(|k| get::<u64>(&u, k))
                .find(|us| *us > 0);
            let ended_us = get::<u64>(&u, "InactiveEnterTimestamp").filter(|us| *us > 0 && Some(*us) <= started_us);
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
                .map(|(name, description, load_state, active_state, sub_state, ..)| UnitStatus {
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
                })
                .collect())
        })
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
