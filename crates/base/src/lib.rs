//! opsbook-base: what every layer of opsbook shares.
//!
//! The effective configuration and its keys, errors and rustc-style diagnostics, the secret
//! token and the redactor every output passes through, control characters from outside shown
//! escaped, the records and formats of a report,
//! cancellation, child processes with timeouts, and the syntax of host patterns.
//!
//! Architecture invariant: this crate never touches the world (no D-Bus, journal, network or
//! host commands beyond running a configured token command) and knows nothing of Rhai, the
//! twin or the fleet; everything above may depend on it.

#![warn(missing_docs)]

pub mod atomic;
pub mod cancel;
pub mod components;
pub mod config;
pub mod diagnostic;
pub mod error;
pub mod input;
pub mod memory;
pub mod pattern;
pub mod process;
pub mod progress;
pub mod report;
pub mod runtime;
pub mod secret;
pub mod shown;
pub mod suggest;
