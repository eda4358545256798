//! The process seam: running a command (argv, no shell) with a deadline. The real
//! implementation is the one process runner (`crate::process`): its own process group, killed
//! whole on timeout or when the caller gives up, so nothing it started lingers.

use super::BoxFuture;
pub use crate::process::{Completed, Invocation};

pub trait Commands: Send + Sync {
    /// Runs the command; `Err` when it could not start (e.g. not in PATH: "`x` not found in PATH").
    fn run<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>>;
}

/// Real child processes.
pub struct Processes;

impl Commands for Processes {
    fn run<'a>(&'a self, inv: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>> {
        Box::pin(crate::process::run(inv))
    }
}
