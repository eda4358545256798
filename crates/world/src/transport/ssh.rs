//! One shared OpenSSH connection to one host for a whole run.
//!
//! `Ssh::connect_with` starts a ControlMaster (`ssh -M`) already holding the forwards
//! the run needs, or finds the one an earlier run left (`SshTarget::persist`, as Ansible's
//! ControlPersist; see `control`); everything else is a cheap client of it: remote commands
//! (`command`), unix sockets, the operator's alone, forwarded to the host's endpoints and to
//! its bus (`forwards`, `bus`), and requests to the master itself spoken on its control
//! socket (`mux`), not run as `ssh -O`. The operator's `~/.ssh/config`, keys and agent apply
//! as they do for their own `ssh`; `BatchMode=yes` means ssh never prompts, it fails with a
//! message we quote. `close` (or drop) ends a master of this run alone; a lasting one stays
//! for its `persist` time.
//!
//! A connection costs one process: the master. Its forwards are given when it starts (`-L`)
//! and, on a lasting master, added through the control socket when a run needs one it lacks.
//!
//! Lifetime: a master of this run alone is opsbook's own child (`ssh -M`, no `-f`, no
//! ControlPersist), whose one session is `exec cat` reading a pipe from us
//! (`process::start_staying`): it lasts exactly as long as we hold that pipe, ends when asked
//! (`let_go`, `close`), and goes with opsbook however opsbook dies, since the kernel then
//! closes the pipe. Not forking saves what the background fork of `-f` costs (about 1.6 ms of
//! CPU a host). A lasting master (`ssh -M -N -f` with a `ControlPersist`) must
//! outlive us: if it could end while idle during a run (forwarded ports alone do not hold it),
//! a keeper session (`exec cat` over it, reading a socket of ours; `keeper`) starts after a
//! quarter of its persist time, and ends when that socket closes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod bus;
mod connecting;
mod forwards;
mod keeper;

use keeper::Keeper;

pub use bus::BusRoute;
pub use connecting::{Connecting, Contention};

use super::control::{Control, Forward, Remote};
use super::mux::Mux;
use super::session::Ended;
use super::shell_quote;
use super::ssh_error::SshError;
use opsbook_base::process::{self, Completed, Invocation};

/// A client ssh's own failure (exit status 255) in words: what it said, or what its silence
/// means.
fn client_failed(host: &str, stderr: &str) -> String {
    match stderr.trim() {
        "" => format!(
            "ssh to host {host} failed: the connection closed without a message (ssh exited with status 255: \
             the host or its sshd ended the session, or the shared connection was stopped)"
        ),
        said => format!("ssh to host {host} failed: {said}"),
    }
}

/// What a master of this run alone prints once it is connected, authenticated, holding its
/// forwards and listening on its control socket: its session runs, so all of that is done.
const READY: &str = "opsbook-master-ready";

/// How many lasting masters stay unless `ssh.max_masters` says otherwise.
pub const DEFAULT_MAX_MASTERS: usize = 64;

/// How many lasting masters this process uses now: when the last is done, the run is over and
/// the lasting masters past `max_masters` are asked to end (`Ssh::trim`).
static LASTING_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// A master of this run alone asked to exit is gone within milliseconds; one still there after
/// this is killed (its directory is removed only once it is gone).
const MASTER_EXIT: Duration = Duration::from_secs(2);

/// Requests to a master (forward, cancel, exit) answer at once; this bounds a stuck master.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how to reach one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// The host's name in the inventory, used in messages.
    pub name: String,
    /// What ssh connects to: an address, a DNS name or a `Host` alias of `~/.ssh/config`.
    pub address: String,
    /// The ssh user; `None`: ssh's own choice.
    pub user: Option<String>,
    /// The ssh port; `None`: ssh's own choice.
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
    /// The forwards a master of this run alone holds (a lasting master's are in `control`).
    held: Mutex<Vec<Forward>>,
    /// While this run uses a lasting master: nobody asks it to exit.
    in_use: Mutex<Option<super::control::InUse>>,
    /// Whether the lasting master an earlier run left was found (no new connection).
    reused: bool,
    /// A master of this run alone, once started (empty for a lasting one).
    master: process::Staying,
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
        Ssh::connect_with(target, &[])
    }

    /// `connect`, with a forward to each of `wanted` held when it returns: given to a new
    /// master as it starts, asked of a lasting one that lacks some (`forward_socket` names
    /// their sockets). `begin` does the same in two halves, for many hosts at once.
    pub fn connect_with(target: SshTarget, wanted: &[Remote]) -> Result<Ssh, SshError> {
        Ssh::begin(target, wanted, Contention::Wait)?.wait()
    }

    fn unconnected(target: SshTarget, control: Control) -> Ssh {
        Ssh {
            target,
            control,
            keeper: Arc::default(),
            held: Mutex::new(Vec::new()),
            in_use: Mutex::new(None),
            reused: false,
            master: process::Staying::default(),
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
    /// Counting them reads the directory of every lasting connection, so a run over many hosts
    /// does it once per `max_masters / 8` connections it ends, and when its last one ends.
    fn trim(&self) {
        static ENDED: AtomicUsize = AtomicUsize::new(0);
        let max = self.target.max_masters.max(1);
        let ended = ENDED.fetch_add(1, Ordering::SeqCst) + 1;
        let last = LASTING_IN_USE.fetch_sub(1, Ordering::SeqCst) == 1;
        if !last && ended < (max / 8).max(1) {
            return;
        }
        ENDED.store(0, Ordering::SeqCst);
        let asked = self.control.trim(max, |socket| {
            if let Err(e) = Mux::connect(socket, CONTROL_TIMEOUT).and_then(|mut m| m.terminate()) {
                tracing::debug!("asking the ssh master at {} to end: {e}", socket.display());
            }
        });
        if asked > 0 {
            tracing::debug!("asked {asked} lasting ssh connection(s) to end (ssh.max_masters)");
        }
    }

    /// A new master, with a `-L` for each of `forwards`, started (`Connecting` waits for it).
    /// A lasting one is `ssh -M -N -f`: `-f` backgrounds it once authenticated (its exit status
    /// says whether it was) and detaches its stdio, so waiting for our pipes to close does not
    /// hang. One of this run alone stays our child (`process::start_staying`): its session
    /// prints `READY`, then reads our pipe until we end it.
    fn start_master(&mut self, limit: Duration, forwards: &[Forward]) -> Result<process::Running, SshError> {
        let mut argv = vec!["ssh".to_string(), "-M".into()];
        argv.extend(self.control_options());
        match self.control.lasting {
            Some(persist) => {
                argv.extend(["-N".into(), "-f".into()]);
                argv.extend(["-o".into(), format!("ControlPersist={}s", persist.as_secs().max(1))]);
            }
            None => argv.extend(["-T".into(), "-o".into(), "ControlPersist=no".into()]),
        }
        // A master whose host vanished ends within 30 s, so a later run connects afresh
        // instead of waiting on a dead one.
        argv.extend(["-o".into(), "ServerAliveInterval=10".into(), "-o".into(), "ServerAliveCountMax=3".into()]);
        // A forward's socket left by a master that died is replaced, not refused; the sockets
        // it makes are the operator's alone (0600, ssh's default mask, said here anyway).
        argv.extend(["-o".into(), "StreamLocalBindUnlink=yes".into(), "-o".into(), "StreamLocalBindMask=0177".into()]);
        // A forward that cannot listen is the connection's failure, said now, not later as a
        // refused request.
        argv.extend(["-o".into(), "ExitOnForwardFailure=yes".into()]);
        for forward in forwards {
            argv.extend(["-L".into(), forward.spec()]);
        }
        argv.extend(self.target.options());
        argv.push(self.target.destination());
        let invocation = |argv| Invocation { argv, timeout: limit, ..Invocation::default() };
        if self.control.lasting.is_some() {
            return process::start(invocation(argv)).map_err(|e| self.no_ssh(e));
        }
        argv.extend(["--".into(), format!("echo {READY}; exec cat >/dev/null")]);
        let (running, master) = process::start_staying(invocation(argv), READY).map_err(|e| self.no_ssh(e))?;
        self.master = master;
        Ok(running)
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

    /// Runs `argv` on the host (every argument quoted for its login shell) as a session of this
    /// connection's master, giving it `stdin`, for at most `limit`: its exit status and output
    /// as they are (a status of 255 is the command's own). Should the master be gone, a client
    /// `ssh` runs it instead, opening a connection of its own. `Err`, in words, when it could
    /// not run or its session ended without an exit status.
    pub async fn exec(&self, argv: &[String], stdin: Option<String>, limit: Duration) -> Result<Completed, String> {
        let program = argv.first().map(String::as_str).unwrap_or_default();
        let host = &self.target.name;
        let command = shell_quote::join(argv);
        let input = stdin.as_deref().map(str::as_bytes);
        match super::session::blocking(|| super::session::run(&self.control.socket, &command, input, limit)) {
            Ok(Ended::Completed(done)) => Ok(done),
            // The run's wait (`Cancel::watch_here`'s caller) ends with its own interruption.
            Ok(Ended::Interrupted) => std::future::pending().await,
            Ok(Ended::NoStatus { stderr, .. }) => Err(match stderr.trim() {
                "" => format!(
                    "ssh to host {host} failed: the session ended without an exit status (the connection was \
                     lost, or a signal killed the command)"
                ),
                said => format!("ssh to host {host} failed: the session ended without an exit status: {said}"),
            }),
            Ok(Ended::TooMuch(pipe)) => Err(process::too_much(program, pipe)),
            Err(_) => {
                let client = Invocation { argv: self.command(argv), timeout: limit, stdin, ..Invocation::default() };
                let done = process::run(&client).await?;
                // 255 is the client's own failure (the connection, not the command).
                match done.code {
                    Some(255) => Err(client_failed(host, &done.stderr)),
                    _ => Ok(done),
                }
            }
        }
    }

    /// A session on the host running `command` (one string, for its login shell) over this
    /// connection's master: no new connection and no local process. Returns the control
    /// connection the session lasts with (keep it), not yet confirmed (`Mux::confirm_session`:
    /// read it once the command said something, when the answer waits there already), and our
    /// end of its stdin, stdout and stderr, which closes at once when the master refuses.
    pub fn session(&self, command: &str) -> Result<(Mux, std::os::unix::net::UnixStream), String> {
        use std::os::fd::AsRawFd;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|e| e.to_string())?;
        let fd = theirs.as_raw_fd();
        let control = Mux::ask_session(&self.control.socket, CONTROL_TIMEOUT, command, [fd, fd, fd])?;
        Ok((control, ours))
    }

    /// Ends this run's use of the connection: the keeper, and a master of this run alone (with
    /// every forward and session on it), waiting for it to be gone before its private
    /// directory is removed. A lasting master stays for its persist time. Done once; later
    /// calls do nothing.
    pub fn close(&self) {
        if !self.keeper.close() {
            return;
        }
        self.let_go();
        if self.in_use.lock().unwrap_or_else(|p| p.into_inner()).take().is_some() {
            self.trim();
        }
        self.keeper.end();
        // Its directory goes once the master is gone: removing it while the master still
        // holds its sockets there had the kernel busy-wait for them (a few ms of CPU per host).
        if !self.master.end(MASTER_EXIT) {
            tracing::debug!("the ssh master of {} had not exited: killed", self.target.name);
        }
        self.control.remove_private();
    }

    /// Asks a master of this run alone to exit now, without waiting for it; `close` (or drop)
    /// then waits for it to be gone and removes its directory. For a run over many hosts that
    /// is done with all of them: every master ends at once, not one after another. Nothing may
    /// use the connection after this. A lasting master stays for its persist time.
    pub fn let_go(&self) {
        self.master.stop();
    }

    /// Has the keeper (`keeper`) start before a lasting master could end while idle: after a
    /// quarter of its persist time, since its idle time may have begun in an earlier run. A
    /// master of this run alone has no persist time: it needs none.
    fn keep_when_long(&self) {
        if let Some(persist) = self.control.lasting {
            self.keeper.schedule(Instant::now() + persist / 4, self.control.socket.clone());
        }
    }

    /// Why ssh could not be started or was stopped, in words: installing OpenSSH is the remedy
    /// only when it is missing.
    fn no_ssh(&self, reason: String) -> SshError {
        let host = self.target.name.clone();
        if reason.contains("not found") {
            SshError::NoSsh { host, reason: "`ssh` is not installed or not in PATH".into() }
        } else if reason.contains("is not executable") {
            SshError::NoSsh { host, reason }
        } else {
            SshError::NotRun { host, reason }
        }
    }

    /// How a local ssh invocation ended; anything but exit status 0 is an error quoting ssh.
    fn expect_success(
        &self,
        what: &str,
        ended: Result<Completed, String>,
        limit: Duration,
    ) -> Result<Completed, SshError> {
        let host = self.target.name.clone();
        let out = ended.map_err(|e| self.no_ssh(e))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ssh_failure_says_what_happened_even_when_ssh_said_nothing() {
        assert_eq!(
            client_failed("killer", " \n"),
            "ssh to host killer failed: the connection closed without a message (ssh exited with status 255: the \
             host or its sshd ended the session, or the shared connection was stopped)"
        );
        assert_eq!(
            client_failed("c1", "Connection to c1 closed by remote host.\n"),
            "ssh to host c1 failed: Connection to c1 closed by remote host."
        );
    }

    fn target() -> SshTarget {
        let mut t = SshTarget::new("c1", "10.0.0.5");
        t.user = Some("root".into());
        t.port = Some(2222);
        t.key = Some(PathBuf::from("/keys/id"));
        t.options = vec!["StrictHostKeyChecking=no".into()];
        t
    }

    /// An `Ssh` that never connected, to look at the argv it builds.
    pub(super) fn unconnected() -> Ssh {
        let ssh = Ssh::unconnected(target(), Control::at(Path::new("/nonexistent/d")));
        ssh.keeper.close();
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
