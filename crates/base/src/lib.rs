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

#![deny(missing_docs)]

mod atomic;
mod background;
mod cancel;
pub mod components;
pub mod config;
mod diagnostic;
mod error;
mod input;
mod memory;
mod pattern;
pub mod process;
mod progress;
pub mod report;
mod runtime;
pub mod secret;
mod shown;
mod suggest;

pub use atomic::{Atomic, temporary as atomic_temporary, write as write_atomically};
pub use background::helper_thread;
pub use cancel::{Cancel, catch_set_up, on_signals, on_signals_draining, set_up_interrupted};
pub use diagnostic::Diagnostic;
pub use error::{Error, read_text_or};
pub use input::{Kind as InputKind, Refused, file_type, read_text, read_text_or_explain};
pub use memory::{Counting as CountingAllocator, in_use as heap_in_use, two_heaps};
pub use pattern::{Matcher, Pattern};
pub use progress::{clear as clear_progress, show as show_progress};
pub use runtime::shared as shared_runtime;
pub use shown::{escaped, html as html_escaped, padded, xml as xml_escaped};
pub use suggest::{did_you_mean, suggest};
