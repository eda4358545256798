//! Cancellation of a run: set by Ctrl-C (or SIGTERM, or SIGHUP when the terminal closes), seen by the engine between script
//! operations and by every host call that waits, so a run ends within a second even while
//! blocked on I/O or a sleep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

thread_local! {
    /// The handle work blocking this thread looks at (`Cancel::watch_here`).
    static WATCHED: std::cell::RefCell<Option<Cancel>> = const { std::cell::RefCell::new(None) };
}

#[derive(Debug)]
struct Inner {
    // The atomic is what the engine polls after every operation; the channel wakes waiters.
    flag: AtomicBool,
    tx: watch::Sender<bool>,
    /// Set when the run's time limit cancelled it (`time_out`), not an operator.
    limit: std::sync::Mutex<Option<std::time::Duration>>,
}

/// A cloneable flag that async code can wait on.
#[derive(Clone, Debug)]
pub struct Cancel(Arc<Inner>);

impl Default for Cancel {
    fn default() -> Self {
        Cancel(Arc::new(Inner { flag: AtomicBool::new(false), tx: watch::channel(false).0, limit: Default::default() }))
    }
}

impl Cancel {
    /// Cancels every wait on this handle, now and until `reset`.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.tx.send_replace(true);
    }

    /// Cancels because the run reached its time limit `limit` (`timed_out` then says so).
    pub fn time_out(&self, limit: std::time::Duration) {
        *self.0.limit.lock().unwrap_or_else(|e| e.into_inner()) = Some(limit);
        self.cancel();
    }

    /// The time limit that cancelled the run, when that is what did.
    pub fn timed_out(&self) -> Option<std::time::Duration> {
        *self.0.limit.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Times the run out once `limit` has passed (on `runtime`, from now).
    pub fn time_out_after(&self, runtime: &tokio::runtime::Runtime, limit: std::time::Duration) {
        let cancel = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(limit).await;
            cancel.time_out(limit);
        });
    }

    /// Clears the flag (the REPL cancels one statement, then goes on).
    pub fn reset(&self) {
        *self.0.limit.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.0.flag.store(false, Ordering::SeqCst);
        self.0.tx.send_replace(false);
    }

    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::Relaxed)
    }

    /// Runs `work` with this handle as the one this thread watches (`cancelled_here`): work
    /// that blocks the thread instead of awaiting (a remote command's session) looks at it to
    /// end early. The caller races `work`'s future against `cancelled`, which ends the wait:
    /// work that saw the cancel may then wait for ever.
    pub fn watch_here<T>(&self, work: impl FnOnce() -> T) -> T {
        struct Restore(Option<Cancel>);
        impl Drop for Restore {
            fn drop(&mut self) {
                WATCHED.with(|w| *w.borrow_mut() = self.0.take());
            }
        }
        let _restore = Restore(WATCHED.with(|w| w.borrow_mut().replace(self.clone())));
        work()
    }

    /// Whether the handle this thread watches (`watch_here`) was cancelled; false when none.
    pub fn cancelled_here() -> bool {
        WATCHED.with(|w| w.borrow().as_ref().is_some_and(Cancel::is_cancelled))
    }

    /// Resolves once `cancel()` has been called.
    pub async fn cancelled(&self) {
        let mut rx = self.0.tx.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }
}

/// The signals that end a run with its partial report: Ctrl-C, SIGTERM, and SIGHUP (the
/// terminal the run was started from closed — without this the run would die reportless).
const STOPPING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A line on stderr that may be gone (SIGHUP: the terminal closed): never a panic.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The signal (of `STOPPING`) that arrived while a set-up was catching them; 0: none.
static SET_UP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// What the `STOPPING` signals did before `catch_set_up`, restored by `end_set_up`.
static BEFORE_SET_UP: std::sync::Mutex<Vec<(libc::c_int, libc::sigaction)>> = std::sync::Mutex::new(Vec::new());

extern "C" fn note_signal(signal: libc::c_int) {
    // Only an atomic store: all a signal handler may safely do.
    SET_UP_SIGNAL.store(signal, Ordering::SeqCst);
}

/// From now until the run's own handling is in place (`on_signals`, which calls
/// `end_set_up`), Ctrl-C, SIGTERM and SIGHUP are noted instead of killing the process: a long set-up
/// (a sandbox's fleet) stops between two steps and says how far it got
/// (`set_up_interrupted`), and a run that was about to start ends at once with its report.
pub fn catch_set_up() {
    let mut before = BEFORE_SET_UP.lock().unwrap_or_else(|e| e.into_inner());
    if !before.is_empty() {
        return;
    }
    SET_UP_SIGNAL.store(0, Ordering::SeqCst);
    for signal in STOPPING {
        // SAFETY: zeroed sigaction structs are valid; the handler only stores an atomic.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, &action, &mut old);
            before.push((signal, old));
        }
    }
}

/// Gives the `STOPPING` signals back what they did before `catch_set_up` (nothing when it was not
/// called); the signal noted meanwhile, if any.
pub(crate) fn end_set_up() -> Option<&'static str> {
    let mut before = BEFORE_SET_UP.lock().unwrap_or_else(|e| e.into_inner());
    for (signal, old) in before.drain(..) {
        // SAFETY: restores the action `catch_set_up` replaced.
        unsafe {
            libc::sigaction(signal, &old, std::ptr::null_mut());
        }
    }
    set_up_interrupted()
}

/// The signal noted since `catch_set_up`, by name, if one arrived: what a set-up step checks
/// before the next.
pub fn set_up_interrupted() -> Option<&'static str> {
    match SET_UP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        libc::SIGINT => Some("Ctrl-C (SIGINT)"),
        libc::SIGHUP => Some("SIGHUP (the terminal closed)"),
        _ => Some("SIGTERM"),
    }
}

/// Ctrl-C, SIGTERM or SIGHUP cancels every run in `cancels` (each ends with a partial report, exit
/// 130); a second quits at once. Registered before it returns (an early Ctrl-C must not kill
/// the process), in `runtime`'s context.
pub fn on_signals(runtime: &tokio::runtime::Runtime, cancels: Vec<Cancel>, what: &'static str) {
    use tokio::signal::unix::{SignalKind, signal};
    let noted = end_set_up();
    let _context = runtime.enter();
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) =
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), signal(SignalKind::hangup()))
    else {
        return;
    };
    // A signal during the set-up: the run ends at once, with its report.
    if let Some(signal) = noted {
        say(&format!("\ninterrupted by {signal} while {what} was being set up"));
        cancels.iter().for_each(Cancel::cancel);
    }
    runtime.spawn(async move {
        loop {
            let by = tokio::select! {
                _ = int.recv() => "",
                _ = term.recv() => " by SIGTERM",
                _ = hup.recv() => " by SIGHUP (the terminal closed)",
            };
            if cancels.iter().any(Cancel::is_cancelled) {
                std::process::exit(130);
            }
            say(&format!("\ninterrupted{by}: stopping {what} (Ctrl-C again to quit at once)"));
            cancels.iter().for_each(Cancel::cancel);
        }
    });
}

/// For a rollout: the first Ctrl-C, SIGTERM or SIGHUP sets `drain` — the hosts in flight finish
/// (their gate passes, or they are rolled back) and no new one starts; the second cancels the
/// runs in `cancels` (their hosts are then rolled back); a third quits at once. Before the
/// first batch (`begun` false: the hosts' locks are being taken) the first says nothing is changed.
pub fn on_signals_draining(
    runtime: &tokio::runtime::Runtime,
    drain: Cancel,
    cancels: Vec<Cancel>,
    begun: Arc<AtomicBool>,
) {
    use tokio::signal::unix::{SignalKind, signal};
    let noted = end_set_up();
    let _context = runtime.enter();
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) =
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), signal(SignalKind::hangup()))
    else {
        return;
    };
    // A signal during the set-up: nothing starts.
    if let Some(signal) = noted {
        say(&format!("\ninterrupted by {signal} while the rollout was being set up: no batch starts"));
        drain.cancel();
    }
    runtime.spawn(async move {
        // Counted here, not read from the flags: a rollback resets its host's flag.
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = int.recv() => {},
                _ = term.recv() => {},
                _ = hup.recv() => {},
            }
            seen += 1;
            match seen {
                1 if !begun.load(Ordering::Acquire) => {
                    say("\ninterrupted before the first batch: no host starts, nothing is changed");
                    drain.cancel();
                }
                1 => {
                    say(
                        "\ninterrupted: finishing the hosts in flight (their gate, or their rollback); no new host \
                         starts (Ctrl-C again to stop them and roll them back)",
                    );
                    drain.cancel();
                }
                2 => {
                    say("\ninterrupted again: stopping the hosts in flight and rolling them back (Ctrl-C again to quit at once)");
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
