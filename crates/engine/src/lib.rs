//! opsbook-engine: the Rhai engine runbooks run in, and the verbs they call.
//!
//! The host functions (`verbs/`, one file per namespace: `unit::`, `journal::`, `influx::`, …)
//! over the world's traits, the catalog of runbooks, stdlib modules and templates (embedded at
//! build time, overridable from disk), compiling a runbook and explaining its errors.
//!
//! Architecture invariant: verbs reach the machine only through `opsbook_world`'s traits, so a
//! runbook never sees which transport it runs on; this crate never builds a sandbox or a twin
//! and never parses the command line.

pub mod catalog;
pub mod connect;
pub mod engine;
pub mod functions;
pub mod gathering;
pub mod import_cycle;
pub mod locking;
pub mod parse_bounded;
pub mod prefetch;
pub mod runbook;
pub mod syntax;
pub mod verbs;
