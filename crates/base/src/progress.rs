//! A one-line status on stderr during long waits ("waiting for loki ready… 12s of 60s"),
//! shown only when stderr is a terminal and erased when the wait ends, so logs and pipes
//! never see it.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;
use std::time::Duration;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb"))
}

/// Shows `label` with elapsed and total time, replacing the previous status line.
pub fn show(label: &str, elapsed: Duration, total: Duration) {
    if enabled() {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K  … {label} {}s of {}s", elapsed.as_secs(), total.as_secs().max(1));
        let _ = err.flush();
    }
}

/// Erases the status line.
pub fn clear() {
    if enabled() {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}
