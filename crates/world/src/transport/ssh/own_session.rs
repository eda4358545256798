//! The session of a master of this run alone, lent to one user at a time.
//!
//! A master of this run alone has a session of its own, which lasts as long as the run holds
//! its input (`process::Staying`). That session (started in `connection`'s `start_master`)
//! runs each line the run sends it, one after another, as a command of the host's `sh`, its
//! input the session's input, its output the session's output: a command there costs no new
//! session of the master, no local socket and no descriptors passed (the change lock's holder
//! rides it). One user at a time: the lines and the answers of two would mix. A user who lost
//! track of what the session says (a timeout, an answer it could not read) keeps it claimed
//! for the rest of the run: nobody reads a stale answer for their own.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::connection::Ssh;

/// The session of a master of this run alone, claimed (`Ssh::own_session`).
pub struct OwnSession {
    ssh: Arc<Ssh>,
    /// Whether every answer asked for was read: only then is it lent again.
    in_step: bool,
}

impl Ssh {
    /// This connection's own session, when it has one (a master of this run alone, ready) and
    /// nobody else holds it; `None` otherwise: then use a session of the master (`session`).
    pub fn own_session(self: &Arc<Ssh>) -> Option<OwnSession> {
        self.master.pid()?;
        self.own_session_lent.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok()?;
        Some(OwnSession { ssh: self.clone(), in_step: true })
    }
}

impl OwnSession {
    /// Writes `line` to the session: a command of `sh` for it to run when none runs, else
    /// what the command running reads next.
    pub fn say(&mut self, line: &str) -> Result<(), String> {
        if line.contains('\n') {
            return Err("a line for the session must be one line".into());
        }
        self.ssh.master.say(line).inspect_err(|_| self.in_step = false)
    }

    /// The next line the session prints, waiting at most `limit`.
    pub fn hear_line(&mut self, limit: Duration) -> Result<String, String> {
        self.ssh.master.hear_line(limit).inspect_err(|_| self.in_step = false)
    }

    /// Keeps the session from being lent again: the caller no longer knows what it will say.
    pub fn lose_step(&mut self) {
        self.in_step = false;
    }
}

impl Drop for OwnSession {
    fn drop(&mut self) {
        if self.in_step {
            self.ssh.own_session_lent.store(false, Ordering::Release);
        }
    }
}
