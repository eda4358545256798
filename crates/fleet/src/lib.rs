//! opsbook-fleet: sessions, and one runbook run over many hosts.
//!
//! A session is one host's configuration, world, verbs context and engine, built once. The
//! fleet runner selects hosts, runs a runbook on each in parallel (at most `forks` at a time,
//! meeting at barriers) and gathers their reports.
//!
//! Architecture invariant: a host's failure is that host's: nothing here lets one host stop
//! the others; this crate parses no command line (its options are plain data).

#![warn(missing_docs)]

pub mod hosts_report;
pub mod job;
pub mod liveness;
pub mod locks;
pub mod options;
pub mod rollout;
pub mod rollout_report;
pub mod run;
pub mod runner;
pub mod session;
pub mod targets;
