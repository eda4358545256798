//! Opening a host's shared connection in two halves, so one thread opens a whole fleet's:
//! `Ssh::begin` does what is quick (the control directory, a lasting master found and its
//! forwards asked for) and starts a new master without waiting for it;
//! `Connecting::finish` takes how that start ended. Between the two, the caller watches every
//! host's master at once (`process::Children`), instead of a thread waiting on each.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::connection::{LASTING_IN_USE, Ssh};
use super::target::SshTarget;
use crate::transport::control::{Control, Forward, Locked, Remote};
use crate::transport::mux::Mux;
use crate::transport::ssh_error::SshError;
use opsbook_base::process::{self, Children, Completed};

/// What `begin` does when a lasting master's lock is held by another connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contention {
    /// Waits for it, at most the connect limit (a connection opened alone).
    Wait,
    /// Leaves this connection for `finish` (a connection opened with others, one of which may
    /// hold that lock until its own master has started).
    Defer,
}

/// A connection being opened: ready already, waiting for its master's start, or left for
/// `finish` to open whole.
pub struct Connecting(Stage);

enum Stage {
    /// A lasting master was found and holds every forward wanted.
    Ready(Ssh),
    /// A new master is starting.
    Starting(Box<Starting>),
    /// Another connection held the lasting master's lock (`Contention::Defer`).
    Later { target: SshTarget, wanted: Vec<Remote> },
}

/// A connection whose new master is starting with `forwards`; `locked` is a lasting master's
/// lock, held until its forwards are remembered.
struct Starting {
    ssh: Ssh,
    master: Option<process::Running>,
    forwards: Vec<Forward>,
    locked: Option<Locked>,
}

/// How long a new master may take to connect and authenticate: the TCP connect timeout, and
/// as long again plus a moment for the authentication.
fn limit(target: &SshTarget) -> Duration {
    target.connect_timeout * 2 + Duration::from_secs(5)
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

    /// The first half of `connect_with`: reuses a lasting master an earlier run left, or
    /// starts a new one (`Connecting::master` to watch it, `finish` when it ended).
    pub fn begin(target: SshTarget, wanted: &[Remote], contention: Contention) -> Result<Connecting, SshError> {
        target.check()?;
        let control = match target.persist.filter(|p| !p.is_zero()) {
            Some(persist) => Control::lasting(&target.identity(), persist),
            None => Control::private(),
        }
        .map_err(|reason| SshError::ControlDir { host: target.name.clone(), reason })?;
        let limit = limit(&target);
        let mut ssh = Ssh::unconnected(target, control);
        if ssh.control.lasting.is_none() {
            let forwards = ssh.forwards_to(wanted);
            let master = Some(ssh.start_master(limit, &forwards)?);
            return Ok(Connecting(Stage::Starting(Box::new(Starting { ssh, master, forwards, locked: None }))));
        }
        let locked = match contention {
            Contention::Wait => ssh.lock(limit)?,
            Contention::Defer => match ssh.control.try_lock().map_err(|reason| ssh.dir_error(reason))? {
                Some(locked) => locked,
                None => {
                    ssh.keeper.close(); // never connected: nothing to end
                    return Ok(Connecting(Stage::Later { target: ssh.target.clone(), wanted: wanted.to_vec() }));
                }
            },
        };
        let in_use = ssh.control.in_use(&locked).map_err(|reason| ssh.dir_error(reason))?;
        *ssh.in_use.get_mut().unwrap_or_else(|p| p.into_inner()) = Some(in_use);
        // A master listens on its socket: connecting is the check (no ssh process to start),
        // and as a client of it this also restarts the master's persist time, so it outlives
        // this run's start. The connection is kept for the run's first session (the change
        // lock's, or its first command's). Past `max_masters`, idle masters are asked to exit
        // when a run ends with its own (`close`), not here: one this run is about to reuse
        // may be among them.
        let found = Mux::reach(&ssh.control.socket).ok();
        ssh.reused = found.is_some();
        *ssh.found.get_mut().unwrap_or_else(|p| p.into_inner()) = found;
        if ssh.reused {
            ssh.open_missing(Some(&locked), wanted)?;
            LASTING_IN_USE.fetch_add(1, Ordering::SeqCst);
            ssh.keep_when_long();
            return Ok(Connecting(Stage::Ready(ssh)));
        }
        ssh.control.reset(&locked);
        let forwards = ssh.forwards_to(wanted);
        let master = Some(ssh.start_master(limit, &forwards)?);
        Ok(Connecting(Stage::Starting(Box::new(Starting { ssh, master, forwards, locked: Some(locked) }))))
    }
}

impl Connecting {
    /// The new master's ssh while it starts, for the caller to watch (with others,
    /// `process::Children`) and hand back how it ended to `finish`; `None` when there is
    /// nothing to wait for.
    pub fn master(&mut self) -> Option<process::Running> {
        match &mut self.0 {
            Stage::Starting(starting) => starting.master.take(),
            Stage::Ready(_) | Stage::Later { .. } => None,
        }
    }

    /// The second half: the connection, once its master started (`started`: how the ssh that
    /// `master` gave ended), or why it could not be opened. One left for later is opened
    /// whole here, waiting for the lock another connection held.
    pub fn finish(self, started: Option<Result<Completed, String>>) -> Result<Ssh, SshError> {
        let Starting { ssh, master, forwards, locked } = match self.0 {
            Stage::Ready(ssh) => return Ok(ssh),
            Stage::Later { target, wanted } => return Ssh::connect_with(target, &wanted),
            Stage::Starting(starting) => *starting,
        };
        let started = match (started, master) {
            (Some(started), _) => started,
            (None, Some(running)) => {
                let mut one = Children::new();
                one.add((), running);
                one.next_done().expect("one child was added").1
            }
            (None, None) => Err("the master's ssh was never waited for".into()),
        };
        ssh.expect_success("connecting", started, limit(&ssh.target))?;
        match &locked {
            Some(locked) => {
                for forward in &forwards {
                    ssh.control.remember(locked, forward).map_err(|reason| ssh.dir_error(reason))?;
                }
                LASTING_IN_USE.fetch_add(1, Ordering::SeqCst);
            }
            None => *ssh.held.lock().unwrap_or_else(|p| p.into_inner()) = forwards,
        }
        ssh.keep_when_long();
        Ok(ssh)
    }

    /// Waits for the master here, then `finish`es: `connect_with` of one connection.
    pub fn wait(self) -> Result<Ssh, SshError> {
        self.finish(None)
    }
}
