//! Cancellation of a run: set by Ctrl-C (or SIGTERM), seen by the engine between script
//! operations and by every host call that waits, so a run ends within a second even while
//! blocked on I/O or a sleep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

#[derive(Debug)]
struct Inner {
    // The atomic is what the engine polls after every operation; the channel wakes waiters.
    flag: AtomicBool,
    tx: watch::Sender<bool>,
}

/// A cloneable flag that async code can wait on.
#[derive(Clone, Debug)]
pub struct Cancel(Arc<Inner>);

impl Default for Cancel {
    fn default() -> Self {
        Cancel(Arc::new(Inner { flag: AtomicBool::new(false), tx: watch::channel(false).0 }))
    }
}

impl Cancel {
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.tx.send_replace(true);
    }

    /// Clears the flag (the REPL cancels one statement, then goes on).
    pub fn reset(&self) {
        self.0.flag.store(false, Ordering::SeqCst);
        self.0.tx.send_replace(false);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::Relaxed)
    }

    /// Resolves once `cancel()` has been called.
    pub async fn cancelled(&self) {
        let mut rx = self.0.tx.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }
}

/// The signal (SIGINT or SIGTERM) that arrived while `SetUp` was catching them; 0: none.
static SET_UP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn note_signal(signal: libc::c_int) {
    // Only an atomic store: all a signal handler may safely do.
    SET_UP_SIGNAL.store(signal, Ordering::SeqCst);
}

/// Ctrl-C and SIGTERM while something long is set up before a run (a sandbox's fleet):
/// noted instead of killing the process, so the set-up can stop between two steps and say
/// what it had done (`interrupted`). Dropping it restores what the signals did before.
pub struct SetUp {
    before: [(libc::c_int, libc::sigaction); 2],
}

impl SetUp {
    pub fn catch() -> SetUp {
        SET_UP_SIGNAL.store(0, Ordering::SeqCst);
        let before = [libc::SIGINT, libc::SIGTERM].map(|signal| {
            // SAFETY: zeroed sigaction structs are valid; the handler only stores an atomic.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, &action, &mut old);
                (signal, old)
            }
        });
        SetUp { before }
    }

    /// The signal that arrived since `catch`, by name (`SIGTERM`), if one did.
    pub fn interrupted(&self) -> Option<&'static str> {
        set_up_interrupted()
    }
}

/// The signal a `SetUp` noted, by name, if one arrived while it was catching them: what a
/// set-up step checks before the next.
pub fn set_up_interrupted() -> Option<&'static str> {
    match SET_UP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        libc::SIGINT => Some("Ctrl-C (SIGINT)"),
        _ => Some("SIGTERM"),
    }
}

impl Drop for SetUp {
    fn drop(&mut self) {
        for (signal, old) in &self.before {
            // SAFETY: restores the action `catch` replaced.
            unsafe {
                libc::sigaction(*signal, old, std::ptr::null_mut());
            }
        }
    }
}

/// Ctrl-C or SIGTERM cancels every run in `cancels` (each ends with a partial report, exit
/// 130); a second quits at once. Registered before it returns (an early Ctrl-C must not kill
/// the process), in `runtime`'s context.
pub fn on_signals(runtime: &tokio::runtime::Runtime, cancels: Vec<Cancel>, what: &'static str) {
    use tokio::signal::unix::{SignalKind, signal};
    let _context = runtime.enter();
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return;
    };
    runtime.spawn(async move {
        loop {
            tokio::select! {
                _ = int.recv() => {},
                _ = term.recv() => {},
            }
            if cancels.iter().any(Cancel::is_cancelled) {
                std::process::exit(130);
            }
            eprintln!("\ninterrupted: stopping {what} (Ctrl-C again to quit at once)");
            cancels.iter().for_each(Cancel::cancel);
        }
    });
}

/// For a rollout: the first Ctrl-C or SIGTERM sets `drain` — the hosts in flight finish
/// (their gate passes, or they are rolled back) and no new one starts; the second cancels the
/// runs in `cancels` (their hosts are then rolled back); a third quits at once.
pub fn on_signals_draining(runtime: &tokio::runtime::Runtime, drain: Cancel, cancels: Vec<Cancel>) {
    use tokio::signal::unix::{SignalKind, signal};
    let _context = runtime.enter();
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return;
    };
    runtime.spawn(async move {
        // Counted here, not read from the flags: a rollback resets its host's flag.
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = int.recv() => {},
                _ = term.recv() => {},
            }
            seen += 1;
            match seen {
                1 => {
                    eprintln!(
                        "\ninterrupted: finishing the hosts in flight (their gate, or their rollback); no new host \
                         starts (Ctrl-C again to stop them and roll them back)"
                    );
                    drain.cancel();
                }
                2 => {
                    eprintln!("\ninterrupted again: stopping the hosts in flight and rolling them back (Ctrl-C again to quit at once)");
                    cancels.iter().for_each(Cancel::cancel);
                }
                _ => std::process::exit(130),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_wake_on_cancel() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let c = Cancel::default();
        let c2 = c.clone();
        rt.block_on(async move {
            tokio::spawn(async move { c2.cancel() });
            tokio::time::timeout(std::time::Duration::from_secs(1), c.cancelled()).await.unwrap();
            assert!(c.is_cancelled());
        });
    }
}
