//! One shared OpenSSH connection to one host for a whole run.
//!
//! `Ssh::connect` starts a ControlMaster (`ssh -M -N -f`) whose control socket lives in a
//! private 0700 directory; everything else is a cheap mux client of it: remote commands
//! (`command`), the host's service manager over `systemd-stdio-bridge` (`dbus_address`) and
//! local ports forwarded to the host's loopback (`forward`). The operator's `~/.ssh/config`,
//! keys and agent apply as they do for their own `ssh`; `BatchMode=yes` means ssh never
//! prompts, it fails with a message we quote. `close` (or drop) ends the master and removes
//! the directory.
//!
//! Lifetime: the master has a short `ControlPersist`, so if opsbook dies it goes away by
//! itself; while opsbook lives, a keeper session (`exec cat`, reading a pipe from us) holds
//! it open, so idle forwarded ports are not dropped mid-run. The keeper ends when that pipe
//! closes, which also happens when opsbook is killed.

use std::fmt;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use zbus::address::transport::{Transport, Unixexec};

use super::shell_quote;
use super::ssh_error::SshError;
use crate::process::{self, Completed, Invocation};

/// How long the master stays after its last session ends: long enough to bridge a pause of
/// the keeper, short enough that a master left behind by a killed opsbook goes away soon.
const CONTROL_PERSIST: &str = "15s";

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
    /// The user manager of `uid`, through that user's session bus.
    User { uid: u32 },
}

/// One shared connection to one host.
pub struct Ssh {
    target: SshTarget,
    /// The private 0700 directory holding the control socket.
    dir: PathBuf,
    control: PathBuf,
    keeper: Mutex<Option<Child>>,
    /// `-L` specs of the forwards opened, to cancel them on close.
    forwards: Mutex<Vec<String>>,
    closed: Mutex<bool>,
}

impl fmt::Debug for Ssh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ssh").field("host", &self.target.name).field("control", &self.control).finish()
    }
}

impl Ssh {
    /// Opens the shared connection: authenticates (or fails, quoting ssh) within the
    /// target's connect timeout.
    pub fn connect(target: SshTarget) -> Result<Ssh, SshError> {
        target.check()?;
        let dir = private_dir().map_err(|reason| SshError::ControlDir { host: target.name.clone(), reason })?;
        let control = dir.join("cm");
        let ssh = Ssh {
            target,
            dir,
            control,
            keeper: Mutex::new(None),
            forwards: Mutex::new(Vec::new()),
            closed: Mutex::new(false),
        };
        // `-f` backgrounds the master once authenticated (its exit status says whether it
        // was) and detaches its stdio, so waiting for our pipes to close does not hang.
        let mut argv = vec!["ssh".to_string(), "-M".into(), "-N".into(), "-f".into()];
        argv.extend(ssh.control_options());
        argv.extend(["-o".into(), format!("ControlPersist={CONTROL_PERSIST}")]);
        argv.extend(ssh.target.options());
        argv.push(ssh.target.destination());
        // Authentication gets its own allowance beyond the TCP connect timeout.
        let limit = ssh.target.connect_timeout * 2 + Duration::from_secs(5);
        ssh.expect_success("connecting", &argv, limit)?;
        ssh.start_keeper()?;
        Ok(ssh)
    }

    /// The target this connection reaches.
    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The control socket (`ssh -S PATH`), for callers that build their own ssh argv.
    pub fn control_path(&self) -> &Path {
        &self.control
    }

    fn control_options(&self) -> Vec<String> {
        vec!["-o".into(), format!("ControlPath={}", self.control.display())]
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
        let mut remote = vec!["systemd-stdio-bridge".to_string()];
        if let BusScope::User { uid } = scope {
            // `--user` does not find the bus over ssh on systemd 252; the explicit path does.
            remote.push(format!("--bus-path=unix:path=/run/user/{uid}/bus"));
        }
        let mut argv = self.client();
        // zbus lets the bridge's stderr through to ours: keep ssh's chatter out of reports.
        argv.splice(1..1, ["-o".to_string(), "LogLevel=ERROR".to_string()]);
        argv.push("--".into());
        argv.push(shell_quote::join(&remote));
        let (program, args) = argv.split_first().expect("ssh is first");
        let exec = Unixexec::new(program.into(), None, args.iter().map(Into::into).collect());
        zbus::Address::from(Transport::Unixexec(exec))
    }

    /// The uid the login user has on the host (for `BusScope::User`).
    pub fn remote_uid(&self) -> Result<u32, SshError> {
        let argv = self.command(&["id".to_string(), "-u".to_string()]);
        let out = self.expect_success("reading the login user's uid", &argv, self.target.connect_timeout * 2)?;
        out.stdout.trim().parse().map_err(|_| SshError::Failed {
            host: self.target.name.clone(),
            what: "reading the login user's uid".into(),
            stderr: format!("`id -u` printed {:?}", out.stdout.trim()),
        })
    }

    /// A port on this machine's loopback forwarded, over the shared connection, to
    /// `remote_host:remote_port` as the host sees it (`127.0.0.1` is the host's own
    /// loopback), so endpoints that listen only there are reached without opening them to the
    /// network. The forward lasts until `cancel_forward` or `close`.
    pub fn forward(&self, remote_host: &str, remote_port: u16) -> Result<SocketAddr, SshError> {
        // `-O forward` does not report a port it picked, so pick a free one here; another
        // process may take it before ssh binds it, hence a few tries.
        let mut last = None;
        for _ in 0..3 {
            let local = free_loopback_port()
                .map_err(|e| SshError::NoSsh { host: self.target.name.clone(), reason: e.to_string() })?;
            let host = if remote_host.contains(':') { format!("[{remote_host}]") } else { remote_host.to_string() };
            let spec = format!("{local}:{host}:{remote_port}");
            match self.control("forward", &["-L", &spec]) {
                Ok(_) => {
                    self.forwards.lock().unwrap_or_else(|p| p.into_inner()).push(spec);
                    return Ok(local);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("three tries"))
    }

    /// Ends a forward opened by `forward`.
    pub fn cancel_forward(&self, local: SocketAddr) -> Result<(), SshError> {
        let prefix = format!("{local}:");
        let spec = {
            let mut forwards = self.forwards.lock().unwrap_or_else(|p| p.into_inner());
            let Some(i) = forwards.iter().position(|s| s.starts_with(&prefix)) else { return Ok(()) };
            forwards.remove(i)
        };
        self.control("cancel", &["-L", &spec]).map(drop)
    }

    /// Ends the shared connection (and with it every forward and session on it) and removes
    /// the private directory. Done once; later calls do nothing.
    pub fn close(&self) {
        {
            let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
            if *closed {
                return;
            }
            *closed = true;
        }
        if let Err(e) = self.control("exit", &[]) {
            tracing::debug!("{e}");
        }
        if let Some(mut keeper) = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take() {
            // Its session ended with the master; closing its stdin ends it in any case.
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
        let _ = std::fs::remove_dir_all(&self.dir);
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

    /// The keeper: a session that holds the master open for as long as we hold its stdin.
    fn start_keeper(&self) -> Result<(), SshError> {
        let argv = self.command(&["exec".to_string(), "cat".to_string()]);
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| SshError::NoSsh { host: self.target.name.clone(), reason: e.to_string() })?;
        *self.keeper.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
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

/// A fresh 0700 directory for one control socket. Socket paths are limited to about 100
/// bytes, so it lives directly under the temporary directory (or `/tmp` when that is long).
fn private_dir() -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir();
    let base = if base.as_os_str().len() > 60 { PathBuf::from("/tmp") } else { base };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    for _ in 0..20 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("opsbook-ssh-{}-{n}-{nanos:x}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        }
    }
    Err(format!("no free name under {}", base.display()))
}

/// A loopback port nothing listens on right now.
fn free_loopback_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
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
        Ssh {
            target: target(),
            dir: PathBuf::from("/nonexistent/d"),
            control: PathBuf::from("/nonexistent/d/cm"),
            keeper: Mutex::new(None),
            forwards: Mutex::new(Vec::new()),
            closed: Mutex::new(true),
        }
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
            bridge_argv(&ssh.dbus_address(BusScope::User { uid: 1000 })).join(" "),
            format!("{common} systemd-stdio-bridge --bus-path=unix:path=/run/user/1000/bus")
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

    #[test]
    fn private_dirs_are_fresh_and_only_ours() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (private_dir().unwrap(), private_dir().unwrap());
        assert_ne!(a, b);
        assert_eq!(std::fs::metadata(&a).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::remove_dir(a).unwrap();
        std::fs::remove_dir(b).unwrap();
    }
}
