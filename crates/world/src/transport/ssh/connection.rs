//! The shared connection itself (`Ssh`): its master (of this run alone, or lasting), its control
//! socket and keeper, commands and sessions run over it, and closing it. Connecting is
//! `connecting`'s, forwards `forwards`', the bus `bus`'s.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::keeper::Keeper;
use super::target::SshTarget;
use crate::transport::control::{Control, Forward};
use crate::transport::mux::Mux;
use crate::transport::session::Ended;
use crate::transport::shell_quote;
use crate::transport::ssh_error::SshError;
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

/// How many lasting masters this process uses now: when the last is done, the run is over and
/// the lasting masters past `max_masters` are asked to end (`Ssh::trim`).
pub(super) static LASTING_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// A master of this run alone asked to exit is gone within milliseconds; one still there after
/// this is killed (its directory is removed only once it is gone).
const MASTER_EXIT: Duration = Duration::from_secs(2);

/// Requests to a master (forward, cancel, exit) answer at once; this bounds a stuck master.
pub(super) const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// One shared connection to one host.
pub struct Ssh {
    pub(super) target: SshTarget,
    pub(super) control: Control,
    /// The keeper session, once started, and whether the connection was closed (which stops
    /// the keeper's timer).
    pub(super) keeper: Arc<Keeper>,
    /// The forwards a master of this run alone holds (a lasting master's are in `control`).
    pub(super) held: Mutex<Vec<Forward>>,
    /// While this run uses a lasting master: nobody asks it to exit.
    pub(super) in_use: Mutex<Option<crate::transport::control::InUse>>,
    /// Whether the lasting master an earlier run left was found (no new connection).
    pub(super) reused: bool,
    /// A master of this run alone, once started (empty for a lasting one).
    pub(super) master: process::Staying,
    /// Whether the master's own session is lent (`own_session`).
    pub(super) own_session_lent: AtomicBool,
    /// The connection to its socket that found a lasting master listening, kept for the first
    /// session asked of it (`control_connection`): the check and that session are one
    /// connection, not two.
    pub(super) found: Mutex<Option<std::os::unix::net::UnixStream>>,
}

impl fmt::Debug for Ssh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ssh").field("host", &self.target.name).field("control", &self.control.socket).finish()
    }
}

impl Ssh {
    pub(super) fn unconnected(target: SshTarget, control: Control) -> Ssh {
        Ssh {
            target,
            control,
            keeper: Arc::default(),
            held: Mutex::new(Vec::new()),
            in_use: Mutex::new(None),
            reused: false,
            master: process::Staying::default(),
            own_session_lent: AtomicBool::new(false),
            found: Mutex::new(None),
        }
    }

    /// Whether this run found the lasting connection an earlier one left (else it opened one).
    pub fn reused(&self) -> bool {
        self.reused
    }

    pub(super) fn dir_error(&self, reason: String) -> SshError {
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
    /// prints `READY`, then runs each line it reads from our pipe (`OwnSession`, handed over
    /// to the host's `sh`) until we end it.
    pub(super) fn start_master(&mut self, limit: Duration, forwards: &[Forward]) -> Result<process::Running, SshError> {
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
        let own_session = shell_quote::quote(r#"while read -r c; do eval "$c"; done"#);
        argv.extend(["--".into(), format!("echo {READY}; exec sh -c {own_session}")]);
        let (running, master) = process::start_staying(invocation(argv), READY).map_err(|e| self.no_ssh(e))?;
        self.master = master;
        Ok(running)
    }

    pub(super) fn lock(&self, limit: Duration) -> Result<crate::transport::control::Locked, SshError> {
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
    pub(super) fn client(&self) -> Vec<String> {
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
        let session = || crate::transport::session::run(self.control_connection()?, &command, input, limit);
        match crate::transport::session::blocking(session) {
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
        let control = Mux::ask_session(self.control_connection()?, CONTROL_TIMEOUT, command, [fd, fd, fd])?;
        Ok((control, ours))
    }

    /// A new connection to the master's socket for a session: the one that found a lasting
    /// master, while nobody took it yet, else one made now.
    fn control_connection(&self) -> Result<std::os::unix::net::UnixStream, String> {
        match self.found.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(found) => Ok(found),
            None => Mux::reach(&self.control.socket),
        }
    }

    /// Ends this run's use of the connection: the keeper, and a master of this run alone (with
    /// every forward and session on it), waiting for it to be gone before its private
    /// directory is removed. A lasting master stays for its persist time. Done once; later
    /// calls do nothing.
    pub fn close(&self) {
        if !self.keeper.close() {
            return;
        }
        drop(self.found.lock().unwrap_or_else(|p| p.into_inner()).take());
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
    pub(super) fn keep_when_long(&self) {
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
    pub(super) fn expect_success(
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
pub(super) mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::transport::ssh::target::SshTarget;

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
    pub(in crate::transport::ssh) fn unconnected() -> Ssh {
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
