//! How opsbook reaches hosts other than the one it runs on: the operator's own OpenSSH, with
//! their `~/.ssh/config`, keys and agent, never an agent or protocol of ours.
//!
//! `ssh` holds one shared connection per host (a ControlMaster) and hands out what runs over
//! it: remote commands, routes to the host's service manager, and unix sockets forwarded to
//! the host's endpoints and bus; `control` is where its socket lives and what a lasting master
//! remembers between runs; `mux` speaks to the master on that socket (`fd_passing` hands it a
//! session's stdio); `session` runs a remote command as a session of the master, with no local
//! process. `shell_quote` makes argv safe for the remote login shell; `ssh_error` words what
//! goes wrong for operators.

pub mod control;
mod fd_passing;
pub mod mux;
mod session;
pub mod shell_quote;
pub mod ssh;
pub mod ssh_error;

pub use ssh::{BusRoute, BusScope, Connecting, Contention, OwnSession, Ssh, SshTarget};
pub use ssh_error::SshError;
