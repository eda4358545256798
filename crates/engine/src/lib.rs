//! opsbook-engine: the Rhai engine runbooks run in, and the verbs they call.
//!
//! The host functions (`verbs/`, one file per namespace: `unit::`, `journal::`, `influx::`, …)
//! over the world's traits, the catalog of runbooks, stdlib modules and templates (embedded at
//! build time, overridable from disk), compiling a runbook and explaining its errors.
//!
//! Architecture invariant: verbs reach the machine only through `opsbook_world`'s traits, so a
//! runbook never sees which transport it runs on; this crate never builds a sandbox or a twin
//! and never parses the command line.

#![deny(missing_docs)]

pub mod catalog;
mod connect;
pub mod engine;
pub mod functions;
mod gathering;
mod import_cycle;
mod locking;
mod parse_bounded;
mod prefetch;
pub mod runbook;
mod syntax;
pub mod verbs;

pub use connect::{Opening, begin as begin_connecting, open as connect_host};
pub use gathering::{Gathering, Left, Waited};
pub use import_cycle::{ImportCycle, find as find_import_cycle};
pub use prefetch::modules_of as prefetch_modules_of;
pub use syntax::parse_settings;
