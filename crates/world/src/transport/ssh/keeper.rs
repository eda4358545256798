//! The keeper of a connection: a session (`exec cat`, reading a pipe from us) that holds the
//! master open for as long as we hold its stdin, started shortly before the master's persist
//! time is up (forwarded sockets alone do not hold a master; any session ending
//! restarts that time, so until then it cannot end). Short runs finish before and never pay
//! for the session; it ends when the connection closes, or when opsbook dies (the pipe closes).
//!
//! One timer thread for the whole process starts the keepers that come due, rather than a
//! waiting thread per connection: a run over a thousand hosts holds a thousand connections.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// One connection's keeper: its session once started, and whether the connection closed.
#[derive(Default)]
pub(super) struct Keeper {
    /// Taken under this lock: a keeper never starts for a closed connection.
    closed: Mutex<bool>,
    child: Mutex<Option<Child>>,
}

impl Keeper {
    /// Has the keeper session (`argv`) start at `due`, unless the connection closed before.
    pub(super) fn schedule(self: &Arc<Keeper>, due: Instant, argv: Vec<String>) {
        let timer = timer();
        timer.pending.lock().unwrap_or_else(|p| p.into_inner()).push(Due {
            at: due,
            keeper: Arc::downgrade(self),
            argv,
        });
        timer.wake.notify_one();
    }

    /// Marks the connection closed; false when it already was.
    pub(super) fn close(&self) -> bool {
        let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        !std::mem::replace(&mut *closed, true)
    }

    /// Ends the keeper session, if it started: closing its stdin ends its `cat`, and with it
    /// the session; killed if it has not ended within `limit`.
    pub(super) fn end(&self, limit: Duration) {
        let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        drop(child.stdin.take());
        let started = Instant::now();
        while !matches!(child.try_wait(), Ok(Some(_))) {
            if started.elapsed() > limit {
                child.kill().ok();
                child.wait().ok();
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn start(&self, argv: &[String]) {
        let closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if *closed {
            return;
        }
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match child {
            Ok(child) => *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child),
            Err(e) => tracing::debug!("cannot start the ssh keeper: {e}"),
        }
        drop(closed);
    }
}

/// A keeper to start at `at`.
struct Due {
    at: Instant,
    keeper: Weak<Keeper>,
    argv: Vec<String>,
}

/// The keepers waiting for their time, and the thread that starts them.
struct Timer {
    pending: Mutex<Vec<Due>>,
    wake: Condvar,
}

/// The process's timer, its thread started on first use.
fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer { pending: Mutex::default(), wake: Condvar::new() }));
        if let Err(e) = std::thread::Builder::new().name("opsbook-ssh-keeper".into()).spawn(move || timer.run()) {
            tracing::debug!("cannot start the ssh keepers' timer: {e}");
        }
        timer
    })
}

impl Timer {
    fn run(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            // Connections that closed (their keeper dropped) are forgotten.
            pending.retain(|d| d.keeper.strong_count() > 0);
            let now = Instant::now();
            let (due, waiting): (Vec<Due>, Vec<Due>) =
                std::mem::take(&mut *pending).into_iter().partition(|d| d.at <= now);
            *pending = waiting;
            if !due.is_empty() {
                drop(pending);
                for d in due {
                    if let Some(keeper) = d.keeper.upgrade() {
                        keeper.start(&d.argv);
                    }
                }
                pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            pending = match pending.iter().map(|d| d.at).min() {
                Some(next) => self.wake.wait_timeout(pending, next - now).unwrap_or_else(|p| p.into_inner()).0,
                None => self.wake.wait(pending).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keeper_starts_when_due_and_never_for_a_closed_connection() {
        let (due, closed) = (Arc::new(Keeper::default()), Arc::new(Keeper::default()));
        let argv = vec!["sleep".to_string(), "30".into()];
        let soon = Instant::now() + Duration::from_millis(50);
        due.schedule(soon, argv.clone());
        closed.schedule(soon, argv);
        assert!(closed.close());
        assert!(!closed.close(), "closing twice does nothing");
        std::thread::sleep(Duration::from_millis(300));
        assert!(due.child.lock().unwrap().is_some(), "started when due");
        assert!(closed.child.lock().unwrap().is_none(), "never started once closed");
        due.close();
        due.end(Duration::from_secs(2));
        assert!(due.child.lock().unwrap().is_none());
    }
}
