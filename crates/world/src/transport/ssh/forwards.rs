//! Unix sockets on this machine forwarded over a host's shared connection: to the host's
//! endpoints (`127.0.0.1` is the host's own loopback) and to its bus. Each lives in the
//! connection's 0700 directory with mode 0600, so only the operator can connect through it (a
//! loopback TCP port would serve every local user). A master gets its forwards when it starts
//! (`Ssh::connect_with`); one it lacks is asked of it on its control socket (`mux`), and a
//! lasting master's forwards stay for later runs to reuse.

use std::path::{Path, PathBuf};

use super::connection::{CONTROL_TIMEOUT, Ssh};
use crate::transport::control::{Forward, Locked, Remote};
use crate::transport::mux::Mux;
use crate::transport::ssh_error::SshError;

impl Ssh {
    /// A unix socket forwarded to `remote_host:remote_port` as the host sees it, so endpoints
    /// that listen only on the host's loopback are reached without opening them to the
    /// network. The forward lasts until `cancel_forward` or `close` — or, on a lasting master,
    /// as long as the master.
    pub fn forward(&self, remote_host: &str, remote_port: u16) -> Result<PathBuf, SshError> {
        let mut locals = self.forward_all(&[Remote::Port(remote_host.to_string(), remote_port)])?;
        Ok(locals.remove(0))
    }

    /// `forward` for several destinations at once, in their order: those the master does not
    /// hold yet are asked of it.
    pub fn forward_all(&self, wanted: &[Remote]) -> Result<Vec<PathBuf>, SshError> {
        let locked = match self.control.lasting {
            Some(_) => Some(self.lock(CONTROL_TIMEOUT)?),
            None => None,
        };
        self.open_missing(locked.as_ref(), wanted)?;
        Ok(wanted.iter().map(|r| self.forward_socket(r)).collect())
    }

    /// Where the forward to `remote` listens (whether or not it is open yet).
    pub fn forward_socket(&self, remote: &Remote) -> PathBuf {
        self.control.forward_to(remote).local
    }

    /// The forwards to `wanted`, each once.
    pub(super) fn forwards_to(&self, wanted: &[Remote]) -> Vec<Forward> {
        let mut forwards: Vec<Forward> = Vec::new();
        for remote in wanted {
            let forward = self.control.forward_to(remote);
            if !forwards.contains(&forward) {
                forwards.push(forward);
            }
        }
        forwards
    }

    /// Asks the master for each forward to `wanted` it does not hold (`locked`: the lasting
    /// master's lock, under which its forwards are read and remembered).
    pub(super) fn open_missing(&self, locked: Option<&Locked>, wanted: &[Remote]) -> Result<(), SshError> {
        let held = match locked {
            Some(l) => self.control.forwards(l),
            None => self.held.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        };
        let missing: Vec<Forward> = self.forwards_to(wanted).into_iter().filter(|f| !held.contains(f)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let mut mux = self.mux()?;
        for forward in missing {
            mux.open_forward(&forward).map_err(|e| self.mux_error("forward", e))?;
            match locked {
                Some(l) => self.control.remember(l, &forward).map_err(|reason| self.dir_error(reason))?,
                None => self.held.lock().unwrap_or_else(|p| p.into_inner()).push(forward),
            }
        }
        Ok(())
    }

    /// Ends a forward opened by `forward` on a master of this run alone (a lasting master's
    /// forwards stay for the next run).
    pub fn cancel_forward(&self, local: &Path) -> Result<(), SshError> {
        let forward = {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            let Some(i) = held.iter().position(|f| f.local == local) else { return Ok(()) };
            held.remove(i)
        };
        let done = self.mux().and_then(|mut m| m.close_forward(&forward).map_err(|e| self.mux_error("cancel", e)));
        let _ = std::fs::remove_file(local);
        done
    }

    /// A conversation with the master on its control socket.
    pub(super) fn mux(&self) -> Result<Mux, SshError> {
        Mux::connect(&self.control.socket, CONTROL_TIMEOUT).map_err(|e| self.mux_error("reach", e))
    }

    /// A request to the master that failed, as an operator reads it.
    pub(super) fn mux_error(&self, what: &str, reason: String) -> SshError {
        SshError::Failed {
            host: self.target.name.clone(),
            what: format!("asking the ssh master to {what}"),
            stderr: reason,
        }
    }
}
