//! opsbook-fleet: sessions, and one runbook run over many hosts.
//!
//! A session is one host's configuration, world, verbs context and engine, built once. The
//! fleet runner selects hosts, runs a runbook on each in parallel (at most `forks` at a time,
//! meeting at barriers) and gathers their reports.
//!
//! Architecture invariant: a host's failure is that host's: nothing here lets one host stop
//! the others; this crate parses no command line (its options are plain data).

#![deny(missing_docs)]

mod hosts_report;
mod job;
mod liveness;
mod locks;
mod options;
pub mod rollout;
mod rollout_report;
pub mod run;
pub mod runner;
mod session;
pub mod targets;

pub use job::Job;
pub use options::{GlobalOptions, RolloutOptions, Share};
pub use session::{Reach, Session};
