//! The lasting history: every run `opsbook serve` makes, kept in an embedded SQLite database.
//!
//! One table, one row per run: the job, the host it ran on, the runbook, when it started, how long it took, its
//! outcome, a note (late, timed out, refused) and the whole JSON report (the `--format json`
//! document). The database lives in the state directory (`state_dir`) as `history.sqlite`,
//! readable by its user alone (0600, and so are SQLite's `-wal` and `-shm` beside it).
//! Each write is one transaction that also applies the retention (older than the retention
//! period, or beyond the last N runs of the job). A database that cannot be opened or
//! written (corrupt, locked, read-only disk) is not fatal: the error is kept for the service
//! to report, and it goes on from memory; the next write tries again.

pub(crate) mod command;
pub(crate) mod flapping;
mod store;

pub(crate) use store::{
    Filter, History, Retention, Run, database_path, default_state_dir, now_ms, rehearsals_path, rfc3339,
};
