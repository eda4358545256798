//! One shared OpenSSH connection to one host for a whole run.
//!
//! `Ssh::connect` starts a ControlMaster (`ssh -M -N -f`), or finds the one an earlier run
//! left (`SshTarget::persist`, as Ansible's ControlPersist; see `control`); everything else is
//! a cheap mux client of it: remote commands (`command`), the host's service manager over
//! `systemd-stdio-bridge` (`dbus_address`) and unix sockets, the operator's alone, forwarded
//! to the host's loopback (`forward`). The operator's `~/.ssh/config`, keys and agent apply as
//! they do for their own `ssh`; `BatchMode=yes` means ssh never prompts, it fails with a
//! message we quote. `close` (or drop) ends a master of this run alone; a lasting one stays
//! for its `persist` time.
//!
//! Lifetime: the master has a `ControlPersist` (short for a master of this run alone), so if
//! opsbook dies it goes away by itself. A run that lasts long enough for the master to end
//! while idle (forwarded ports alone do not hold it) gets a keeper session (`exec cat`,
//! reading a pipe from us), started after a quarter of that time; short runs never pay for
//! it. The keeper ends when that pipe closes, which also happens when opsbook is killed.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use zbus::address::transport::{Transport, Unixexec};

use super::control::{Control, Forward};
use super::shell_quote;
use super::ssh_error::SshError;
use crate::process::{self, Completed, Invocation};

/// How long a master of this run alone stays after its last session ends: long enough to
/// bridge the start of the keeper, short enough that one left behind by a killed opsbook goes
/// away soon.
const RUN_PERSIST: Duration = Duration::from_secs(15);

/// How many lasting masters stay unless `ssh.max_masters` says otherwise.
pub const DEFAULT_MAX_MASTERS: usize = 64;

/// `-O` control commands (exit, forward, cancel) answer at once; this bounds a stuck master.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how to reach one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// The host's name in the inventory, used in messages.
    pub name: String,
    /// What ssh connects to: an address, a DNS name or a `Host` alias of `~/.ssh/config`.
    pub address: String,
    pub user: Option<String>,
    pub port: Option<u16>,
    /// A private key file (`-i`); the agent and `~/.ssh/config` keys are still tried.
    pub key: Option<PathBuf>,
    /// Further `-o` options, each `Name=value`.
    pub options: Vec<String>,
    /// Gives up connecting after this (TCP connect and authentication).
    pub connect_timeout: Duration,
    /// How long the connection outlives the run for the next one to reuse; `None` or zero:
    /// it ends with the run.
    pub persist: Option<Duration>,
    /// At most this many lasting masters stay (`ssh.max_masters`): past it, the least
    /// recently used that no run uses are asked to exit.
    pub max_masters: usize,
}

impl SshTarget {
    /// A target with ssh's defaults for user, port and key, and a 10 s connect timeout.
    pub fn new(name: impl Into<String>, address: impl Into<String>) -> SshTarget {
        SshTarget {
            name: name.into(),
            address: address.into(),
            user: None,
            port: None,
            key: None,
            options: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            persist: None,
            max_masters: DEFAULT_MAX_MASTERS,
        }
    }

    /// An address or user that ssh would read as an option (`-oProxyCommand=…`) or split is
    /// refused: they come from inventories, which are not always ours.
    fn check(&self) -> Result<(), SshError> {
        let bad = |what: &str, value: &str| {
            let problem = if value.is_empty() {
                format!("the {what} is empty")
            } else if value.starts_with('-') {
                format!("the {what} {value:?} starts with `-`, which ssh would read as an option")
            } else if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                format!("the {what} {value:?} contains blanks or control characters")
            } else {
                return None;
            };
            Some(SshError::BadTarget { host: self.name.clone(), problem })
        };
        let user = self.user.as_deref().and_then(|u| bad("ssh user", u));
        match bad("address", &self.address).or(user) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Everything that makes a connection to this target what it is: two targets alike share
    /// a lasting master.
    fn identity(&self) -> String {
        let key = self.key.as_ref().map(|k| k.display().to_string()).unwrap_or_default();
        format!("{}|{}|{key}|{}", self.destination(), self.port.unwrap_or(0), self.options.join(","))
    }

    /// `user@address`, or the address alone when no user is given.
    fn destination(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.address),
            None => self.address.clone(),
        }
    }

    /// The options every ssh invocation for this target carries (before the destination).
    fn options(&self) -> Vec<String> {
        let secs = self.connect_timeout.as_secs().max(1);
        let mut o: Vec<String> =
            vec!["-o".into(), "BatchMode=yes".into(), "-o".into(), format!("ConnectTimeout={secs}")];
        if let Some(port) = self.port {
            o.extend(["-p".into(), port.to_string()]);
        }
        if let Some(key) = &self.key {
            o.extend(["-i".into(), key.display().to_string()]);
        }
        for option in &self.options {
            o.extend(["-o".into(), option.clone()]);
        }
        o
    }
}

/// Which service manager of the host a D-Bus connection reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusScope {
    /// The system manager (PID 1), through the system bus.
    System,
    /// The login user's manager, through that user's session bus.
    User,
}

/// One shared connection to one host.
pub struct Ssh {
    target: SshTarget,
    control: Control,
    /// The keeper session, once started, and whether the connection was closed (which stops
    /// the keeper's timer).
    keeper: Arc<Keeper>,
    /// `-L` specs of the forwards this run opened on a master of its own, to cancel on close.
    forwards: Mutex<Vec<String>>,
    /// While this run uses a lasting master: nobody asks it to exit.
    in_use: Mutex<Option<super::control::InUse>>,
    /// Whether the lasting master an earlier run left was found (no new connection).
    reused: bool,
}

#[derive(Default)]
struct Keeper {
    child: Mutex<Option<Child>>,
    closed: Mutex<bool>,
    wake: Condvar,
}

impl fmt::Debug for Ssh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ssh").field("host", &self.target.name).field("control", &self.control.socket).finish()
    }
}

impl Ssh {
    /// Opens the shared connection, or reuses the lasting one an earlier run left: in either
    /// case authenticated (or failed, quoting ssh) within the target's connect timeout.
    pub fn connect(target: SshTarget) -> Result<Ssh, SshError> {
        target.check()?;
        let control = match target.persist.filter(|p| !p.is_zero()) {
            Some(persist) => Control::lasting(&target.identity(), persist),
            None => Control::private(),
        }
        .map_err(|reason| SshError::ControlDir { host: target.name.clone(), reason })?;
        let mut ssh = Ssh::unconnected(target, control);
        // Authentication gets its own allowance beyond the TCP connect timeout.
        let limit = ssh.target.connect_timeout * 2 + Duration::from_secs(5);
        match ssh.control.lasting {
            Some(_) => {
                let locked = ssh.lock(limit)?;
                let in_use = ssh.control.in_use(&locked).map_err(|reason| ssh.dir_error(reason))?;
                *ssh.in_use.get_mut().unwrap_or_else(|p| p.into_inner()) = Some(in_use);
                // A master listens on its socket: connecting is the check (no ssh process to
                // start), and as a client of it for a moment this also restarts the master's
                // persist time, so it outlives this run's start.
                ssh.reused = std::os::unix::net::UnixStream::connect(&ssh.control.socket).is_ok();
                // Past `max_masters`, idle masters are asked to exit when a run ends with its
                // own (`close`), not here: one this run is about to reuse may be among them.
                if !ssh.reused {
                    ssh.control.reset(&locked);
                    ssh.start_master(limit)?;
                }
            }
            None => ssh.start_master(limit)?,
        }
        ssh.keep_when_long();
        Ok(ssh)
    }

    fn unconnected(target: SshTarget, control: Control) -> Ssh {
        Ssh {
            target,
            control,
            keeper: Arc::default(),
            forwards: Mutex::new(Vec::new()),
            in_use: Mutex::new(None),
            reused: false,
        }
    }

    /// Whether this run found the lasting connection an earlier one left (else it opened one).
    pub fn reused(&self) -> bool {
        self.reused
    }

    fn dir_error(&self, reason: String) -> SshError {
        SshError::ControlDir { host: self.target.name.clone(), reason }
    }

    /// Past `max_masters` lasting masters, asks the least recently used idle ones to exit.
    fn trim(&self) {
        let asked = self.control.trim(self.target.max_masters.max(1), |socket| {
            let mut argv = vec!["ssh".to_string(), "-o".into(), format!("ControlPath={}", socket.display())];
            argv.extend(["-O".into(), "exit".into(), "opsbook-lasting".into()]);
            let _ = process::run_blocking(Invocation { argv, timeout: CONTROL_TIMEOUT, ..Invocation::default() });
        });
        if asked > 0 {
            tracing::debug!("asked {asked} lasting ssh connection(s) to end (ssh.max_masters)");
        }
    }

    /// `ssh -M -N -f`: `-f` backgrounds the master once authenticated (its exit status says
    /// whether it was) and detaches its stdio, so waiting for our pipes to close does not hang.
    fn start_master(&self, limit: Duration) -> Result<(), SshError> {
        let persist = self.control.lasting.unwrap_or(RUN_PERSIST);
        let mut argv = vec!["ssh".to_string(), "-M".into(), "-N".into(), "-f".into()];
        argv.extend(self.control_options());
        argv.extend(["-o".into(), format!("ControlPersist={}s", persist.as_secs().max(1))]);
        // A master whose host vanished ends within 30 s, so a later run connects afresh
        // instead of waiting on a dead one.
        argv.extend(["-o".into(), "ServerAliveInterval=10".into(), "-o".into(), "ServerAliveCountMax=3".into()]);
        // A forward's socket left by a master that died is replaced, not refused; the sockets
        // it makes are the operator's alone (0600, ssh's default mask, said here anyway).
        argv.extend(["-o".into(), "StreamLocalBindUnlink=yes".into(), "-o".into(), "StreamLocalBindMask=0177".into()]);
        argv.extend(self.target.options());
        argv.push(self.target.destination());
        self.expect_success("connecting", &argv, limit).map(drop)
    }

    fn lock(&self, limit: Duration) -> Result<super::control::Locked, SshError> {
        self.control.lock(limit).map_err(|reason| self.dir_error(reason))
    }

    /// The target this connection reaches.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The control socket (`ssh -S PATH`), for callers that build their own ssh argv.
    pub fn control_path(&self) -> &Path {
        &self.control.socket
    }

    fn control_options(&self) -> Vec<String> {
        vec!["-o".into(), format!("ControlPath={}", self.control.socket.display())]
    }

    /// `ssh` with every option a client of the shared connection needs, up to and including
    /// the destination. Should the master be gone, the same options open a direct connection.
    fn client(&self) -> Vec<String> {
        let mut argv = vec!["ssh".to_string()];
        argv.extend(self.control_options());
        argv.extend(["-o".into(), "ControlMaster=no".into(), "-T".into()]);
        argv.extend(self.target.options());
        argv.push(self.target.destination());
        argv
    }

    /// The argv that runs `argv` on the host over the shared connection. Every argument is
    /// quoted for the remote login shell, so it arrives as exactly the word given.
    pub fn command(&self, argv: &[String]) -> Vec<String> {
        let mut out = self.client();
        out.push("--".into());
        out.push(shell_quote::join(argv));
        out
    }

    /// Runs `argv` on the host and waits at most `timeout`; the remote command's exit status
    /// and output come back as they are. `Err` only when ssh cannot be started.
    pub fn run(&self, argv: &[String], timeout: Duration) -> Result<Completed, SshError> {
        process::run_blocking(Invocation { argv: self.command(argv), timeout, ..Invocation::default() })
            .map_err(|reason| SshError::NoSsh { host: self.target.name.clone(), reason })
    }

    /// A zbus address that reaches the host's service manager for `scope`: ssh over the shared
    /// connection runs `systemd-stdio-bridge`, as `systemctl -H` does. One connection made
    /// from it serves a whole run (`zbus::connection::Builder::address(…)`).
    ///
    /// It is an `Address`, not text, on purpose: zbus 5 writes `unixexec` arguments
    /// percent-escaped but does not decode them when it parses such text, so a round trip
    /// through a string would hand ssh `ControlPath%3d…`.
    pub fn dbus_address(&self, scope: BusScope) -> zbus::Address {
        let remote = match scope {
            BusScope::System => vec!["systemd-stdio-bridge".to_string()],
            // `--user` does not find the bus over ssh on systemd 252; the explicit path does.
            // root's uid is known; any other login user's is the host's to say: `sh` expands
            // it there, which saves a round trip for `id -u`.
            BusScope::User if self.target.user.as_deref() == Some("root") => {
                vec!["systemd-stdio-bridge".to_string(), "--bus-path=unix:path=/run/user/0/bus".into()]
            }
            BusScope::User => vec![
                "sh".to_string(),
                "-c".into(),
                "exec systemd-stdio-bridge --bus-path=unix:path=/run/user/$(id -u)/bus".into(),
            ],
        };
        let mut argv = self.client();
        // zbus lets the bridge's stderr through to ours: keep ssh's chatter out of reports.
        argv.splice(1..1, ["-o".to_string(), "LogLevel=ERROR".to_string()]);
        argv.push("--".into());
        argv.push(shell_quote::join(&remote));
        let (program, args) = argv.split_first().expect("ssh is first");
        let exec = Unixexec::new(program.into(), None, args.iter().map(Into::into).collect());
        zbus::Address::from(Transport::Unixexec(exec))
    }

    /// A unix socket on this machine forwarded, over the shared connection, to
    /// `remote_host:remote_port` as the host sees it (`127.0.0.1` is the host's own
    /// loopback), so endpoints that listen only there are reached without opening them to the
    /// network. The socket lives in the connection's 0700 directory with mode 0600: only the
    /// operator can connect through it (a loopback TCP port would serve every local user).
    /// The forward lasts until `cancel_forward` or `close` — or, on a lasting master, as long
    /// as the master, for later runs to reuse.
    pub fn forward(&self, remote_host: &str, remote_port: u16) -> Result<PathBuf, SshError> {
        let mut locals = self.forward_all(&[(remote_host.to_string(), remote_port)])?;
        Ok(locals.remove(0))
    }

    /// `forward` for several destinations at once: one `ssh -O forward` for all those the
    /// master does not hold yet.
    pub(crate) fn forward_all(&self, wanted: &[(String, u16)]) -> Result<Vec<PathBuf>, SshError> {
        let locked = match self.control.lasting {
            Some(_) => Some(self.lock(CONTROL_TIMEOUT)?),
            None => None,
        };
        let held = locked.as_ref().map(|l| self.control.forwards(l)).unwrap_or_default();
        let forwards: Vec<Forward> = wanted
            .iter()
            .map(|(host, port)| Forward {
                local: self.control.forward_socket(host, *port),
                host: host.clone(),
                port: *port,
            })
            .collect();
        let mut missing: Vec<&Forward> = Vec::new();
        for forward in &forwards {
            if !held.contains(forward) && !missing.contains(&forward) {
                missing.push(forward);
            }
        }
        if !missing.is_empty() {
            let specs: Vec<String> = missing.iter().map(|f| spec(f)).collect();
            let mut args = Vec::new();
            for spec in &specs {
                args.extend(["-L", spec.as_str()]);
            }
            self.control("forward", &args)?;
            for forward in missing {
                match &locked {
                    Some(l) => self.control.remember(l, forward).map_err(|reason| self.dir_error(reason))?,
                    None => self.forwards.lock().unwrap_or_else(|p| p.into_inner()).push(spec(forward)),
                }
            }
        }
        Ok(forwards.into_iter().map(|f| f.local).collect())
    }

    /// Ends a forward opened by `forward` on a master of this run alone (a lasting master's
    /// forwards stay for the next run).
    pub fn cancel_forward(&self, local: &Path) -> Result<(), SshError> {
        let prefix = format!("{}:", local.display());
        let spec = {
            let mut forwards = self.forwards.lock().unwrap_or_else(|p| p.into_inner());
            let Some(i) = forwards.iter().position(|s| s.starts_with(&prefix)) else { return Ok(()) };
            forwards.remove(i)
        };
        let done = self.control("cancel", &["-L", &spec]).map(drop);
        let _ = std::fs::remove_file(local);
        done
    }

    /// Ends this run's use of the connection: the keeper, and a master of this run alone (with
    /// every forward and session on it, and its private directory). A lasting master stays
    /// for its persist time. Done once; later calls do nothing.
    pub fn close(&self) {
        {
            let mut closed = self.keeper.closed.lock().unwrap_or_else(|p| p.into_inner());
            if *closed {
                return;
            }
            *closed = true;
            self.keeper.wake.notify_all();
        }
        if self.control.lasting.is_none()
            && let Err(e) = self.control("exit", &[])
        {
            tracing::debug!("{e}");
        }
        if self.in_use.lock().unwrap_or_else(|p| p.into_inner()).take().is_some() {
            self.trim();
        }
        if let Some(mut keeper) = self.keeper.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // Closing its stdin ends its `cat`, and with it the session.
            drop(keeper.stdin.take());
            let started = Instant::now();
            while !matches!(keeper.try_wait(), Ok(Some(_))) {
                if started.elapsed() > CONTROL_TIMEOUT {
                    keeper.kill().ok();
                    keeper.wait().ok();
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.control.remove_private();
    }

    /// `ssh -O VERB` to the master.
    fn control(&self, verb: &str, extra: &[&str]) -> Result<Completed, SshError> {
        let mut argv = vec!["ssh".to_string()];
        argv.extend(self.control_options());
        argv.extend(["-O".into(), verb.into()]);
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv.extend(self.target.options());
        argv.push(self.target.destination());
        self.expect_success(&format!("`ssh -O {verb}`"), &argv, CONTROL_TIMEOUT)
    }

    /// Starts the keeper, a session that holds the master open for as long as we hold its
    /// stdin, once the run has lasted a quarter of the master's persist time (forwarded ports
    /// alone do not hold it; any session ending restarts that time, so until then it cannot
    /// end). Short runs finish before and never pay for the session.
    fn keep_when_long(&self) {
        let after = self.control.lasting.unwrap_or(RUN_PERSIST) / 4;
        let argv = self.command(&["exec".to_string(), "cat".to_string()]);
        let keeper = self.keeper.clone();
        let spawned = std::thread::Builder::new().name("opsbook-ssh-keeper".into()).spawn(move || {
            let closed = keeper.closed.lock().unwrap_or_else(|p| p.into_inner());
            let (closed, _) =
                keeper.wake.wait_timeout_while(closed, after, |closed| !*closed).unwrap_or_else(|p| p.into_inner());
            if *closed {
                return;
            }
            let child = Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            match child {
                Ok(child) => *keeper.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child),
                Err(e) => tracing::debug!("cannot start the ssh keeper: {e}"),
            }
        });
        if let Err(e) = spawned {
            tracing::debug!("cannot start the ssh keeper's timer: {e}");
        }
    }

    /// Runs a local ssh invocation; anything but exit status 0 is an error quoting ssh.
    fn expect_success(&self, what: &str, argv: &[String], limit: Duration) -> Result<Completed, SshError> {
        let host = self.target.name.clone();
        let invocation = Invocation { argv: argv.to_vec(), timeout: limit, ..Invocation::default() };
        let out = process::run_blocking(invocation).map_err(|reason| SshError::NoSsh {
            host: host.clone(),
            reason: if reason.contains("not found") { "`ssh` is not installed or not in PATH".into() } else { reason },
        })?;
        if out.timed_out {
            return Err(SshError::TimedOut { host, what: what.into(), after: limit });
        }
        if out.code != Some(0) {
            return Err(SshError::Failed { host, what: what.into(), stderr: out.stderr });
        }
        Ok(out)
    }
}

impl Drop for Ssh {
    fn drop(&mut self) {
        self.close();
    }
}

/// The `-L` spec of a forward: `SOCKET:HOST:PORT`.
fn spec(f: &Forward) -> String {
    let host = if f.host.contains(':') { format!("[{}]", f.host) } else { f.host.clone() };
    format!("{}:{host}:{}", f.local.display(), f.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> SshTarget {
        let mut t = SshTarget::new("c1", "10.0.0.5");
        t.user = Some("root".into());
        t.port = Some(2222);
        t.key = Some(PathBuf::from("/keys/id"));
        t.options = vec!["StrictHostKeyChecking=no".into()];
        t
    }

    /// An `Ssh` that never connected, to look at the argv it builds.
    fn unconnected() -> Ssh {
        let ssh = Ssh::unconnected(target(), Control::at(Path::new("/nonexistent/d")));
        *ssh.keeper.closed.lock().unwrap() = true;
        ssh
    }

    #[test]
    fn command_runs_over_the_shared_connection_with_every_argument_quoted() {
        let argv = unconnected().command(&["journalctl".into(), "-u".into(), "my unit".into(), "$x".into()]);
        assert_eq!(
            argv.join(" "),
            "ssh -o ControlPath=/nonexistent/d/cm -o ControlMaster=no -T -o BatchMode=yes -o ConnectTimeout=10 \
             -p 2222 -i /keys/id -o StrictHostKeyChecking=no root@10.0.0.5 -- journalctl -u 'my unit' '$x'"
        );
    }

    /// The bridge's argv, as ssh will get it.
    fn bridge_argv(address: &zbus::Address) -> Vec<String> {
        let Transport::Unixexec(exec) = address.transport() else { panic!("not unixexec: {address}") };
        let mut argv = vec![exec.path().display().to_string()];
        argv.extend(exec.args().iter().map(|a| a.to_string_lossy().into_owned()));
        argv
    }

    #[test]
    fn dbus_address_runs_the_bridge_over_the_shared_connection() {
        let ssh = unconnected();
        let common = "ssh -o LogLevel=ERROR -o ControlPath=/nonexistent/d/cm -o ControlMaster=no -T -o BatchMode=yes \
                      -o ConnectTimeout=10 -p 2222 -i /keys/id -o StrictHostKeyChecking=no root@10.0.0.5 --";
        assert_eq!(
            bridge_argv(&ssh.dbus_address(BusScope::User)).join(" "),
            format!("{common} systemd-stdio-bridge --bus-path=unix:path=/run/user/0/bus")
        );
        let mut deploy = unconnected();
        deploy.target.user = Some("deploy".into());
        assert_eq!(
            bridge_argv(&deploy.dbus_address(BusScope::User)).join(" "),
            format!("{common} sh -c 'exec systemd-stdio-bridge --bus-path=unix:path=/run/user/$(id -u)/bus'")
                .replace("root@", "deploy@")
        );
        assert_eq!(
            bridge_argv(&ssh.dbus_address(BusScope::System)).join(" "),
            format!("{common} systemd-stdio-bridge")
        );
    }

    #[test]
    fn targets_ssh_would_misread_are_refused_before_ssh_runs() {
        let mut t = target();
        t.address = "-oProxyCommand=touch /tmp/x".into();
        assert_eq!(
            Ssh::connect(t).unwrap_err().to_string(),
            "host `c1`: the address \"-oProxyCommand=touch /tmp/x\" starts with `-`, which ssh would read as an \
             option; remedy: correct the host's entry in the inventory"
        );
        let mut t = target();
        t.user = Some("root x".into());
        assert_eq!(
            Ssh::connect(t).unwrap_err().to_string(),
            "host `c1`: the ssh user \"root x\" contains blanks or control characters; remedy: correct the host's \
             entry in the inventory"
        );
    }

    #[test]
    fn one_connection_can_be_shared_by_every_task_of_a_run() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Ssh>();
    }
}
