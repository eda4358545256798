//! A host's change lock: one run changes a host at a time, and anyone else is told who.
//!
//! The lock lives on the host (so operators on different machines see each other) as an
//! exclusive `flock(2)` on a file — `/run/opsbook/change.lock` for the system's service
//! manager, `$XDG_RUNTIME_DIR/opsbook/change.lock` for a user's — held by a process of this
//! run: opsbook itself on this machine (`local`), a shell of this run's own ssh connection on a
//! remote host (`remote`: in the own session of a master of this run alone, else in a session
//! opened on the lasting master: no new connection either way). So it dies
//! with its holder — a killed opsbook, a dropped connection — and the kernel frees it: no lease
//! to expire, nothing to clear by hand. Beside it, `change.json` names the holder (`Record`);
//! a run that ends removes it, so a record found beside a free lock was left by a holder that
//! is gone, and is reported as taken over. The sandbox simulates the lock (`simulated`), a
//! second operator's hold rehearsed with `--fault lock-held`.
//!
//! `HostLock` is what a world carries: taken once per run (`take`, idempotent), waited for when
//! asked (`--lock-timeout`), released in two halves so many hosts are released together: let
//! go at once (`let_go`), the host's word read later (`confirm_release`). A fleet run's host is
//! let go as its run ends, and the hosts' words, there by then, are read once every host is done.

mod backend;
mod local;
pub mod record;
pub(crate) mod remote;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use opsbook_base::Cancel;

pub use backend::{Backend, Holding, Try};
pub use local::{LocalLock, lock_dir};
pub use record::{Answer, Holder, Record};
pub use remote::RemoteLock;

/// How often a run waiting for a lock tries it again.
const RETRY: Duration = Duration::from_millis(500);
/// How often a long wait says again whom it waits for.
const PROGRESS: Duration = Duration::from_secs(15);

/// Why a run could not take a host's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// Another run holds it (after waiting `waited`, when the run was asked to wait).
    Held {
        /// The host whose lock it is.
        host: String,
        /// Who holds it.
        holder: Box<Holder>,
        /// How long this run waited for it, when it was asked to wait.
        waited: Option<Duration>,
    },
    /// The lock could not be tried: the run does not change the host blind.
    Failed {
        /// The host whose lock it is.
        host: String,
        /// Why it could not be tried, in words.
        why: String,
    },
    /// The run was interrupted while it waited.
    Interrupted,
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held { host, holder, waited: None } => write!(f, "{host}: held by {holder}"),
            LockError::Held { host, holder, waited: Some(waited) } => {
                write!(f, "{host}: still held by {holder} after waiting {}", humantime::format_duration(*waited))
            }
            LockError::Failed { host, why } => write!(f, "{host}: its change lock could not be taken: {why}"),
            LockError::Interrupted => write!(f, "interrupted while waiting for a change lock"),
        }
    }
}

/// What taking the lock came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// This run held it already.
    Already,
    /// Taken now; with the record a holder that is gone left behind, if any.
    Now {
        /// The record a holder that is gone left behind, if any.
        took_over: Option<Holder>,
    },
}

/// A host's change lock as a world carries it.
pub struct HostLock {
    host: String,
    backend: Box<dyn Backend>,
    held: Mutex<Option<Box<dyn Holding>>>,
    /// Let go (`let_go`), its release not yet confirmed (`confirm_release`).
    letting_go: Mutex<Option<Box<dyn Holding>>>,
}

impl std::fmt::Debug for HostLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLock").field("host", &self.host).finish()
    }
}

impl HostLock {
    /// The lock of `host` (its name in messages), tried through `backend`.
    pub fn new(host: &str, backend: Box<dyn Backend>) -> HostLock {
        HostLock { host: host.to_string(), backend, held: Mutex::new(None), letting_go: Mutex::new(None) }
    }

    /// The host's name, as messages say it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Whether this run holds it.
    pub fn is_held(&self) -> bool {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Takes the lock for `record`, or says who holds it. With `wait`, tries again until it is
    /// free or `wait` has passed, telling `waiting` whom it waits for at the start, whenever
    /// the holder changes, and every 15 s; `cancel` ends the wait.
    pub fn take(
        &self,
        record: &Record,
        wait: Duration,
        cancel: &Cancel,
        waiting: &mut dyn FnMut(&str),
    ) -> Result<Taken, LockError> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_some() {
            return Ok(Taken::Already);
        }
        self.confirm_release();
        let started = Instant::now();
        let mut told: Option<(Holder, Instant)> = None;
        loop {
            match self.backend.try_take(record) {
                Err(why) => return Err(LockError::Failed { host: self.host.clone(), why }),
                Ok(Try::Taken { holding, took_over }) => {
                    *held = Some(holding);
                    return Ok(Taken::Now { took_over });
                }
                Ok(Try::Held(holder)) => {
                    let waited = started.elapsed();
                    if waited >= wait {
                        let waited = (!wait.is_zero()).then_some(wait);
                        return Err(LockError::Held { host: self.host.clone(), holder: Box::new(holder), waited });
                    }
                    let due = told.as_ref().is_none_or(|(h, at)| *h != holder || at.elapsed() >= PROGRESS);
                    if due {
                        let left = humantime::format_duration(Duration::from_secs(
                            (wait - waited).as_secs_f64().ceil() as u64,
                        ));
                        waiting(&format!("waiting for {}: held by {holder} (at most {left} more)", self.host));
                        told = Some((holder, Instant::now()));
                    }
                    if sleep_unless_cancelled(RETRY.min(wait - waited), cancel) {
                        return Err(LockError::Interrupted);
                    }
                }
            }
        }
    }

    /// Lets the lock go without waiting for the host's word (`confirm_release` reads it): the
    /// host frees it as soon as it hears, and this run no longer holds it.
    pub fn let_go(&self) {
        let holding = self.held.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut holding) = holding {
            holding.begin_release();
            let earlier = self.letting_go.lock().unwrap_or_else(|p| p.into_inner()).replace(holding);
            if let Some(earlier) = earlier {
                earlier.finish_release();
            }
        }
    }

    /// Waits until the host confirmed the release `let_go` began; nothing when none is pending.
    /// Before the connection it rides is closed: a session cut short may leave the record.
    pub fn confirm_release(&self) {
        let letting_go = self.letting_go.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(holding) = letting_go {
            holding.finish_release();
        }
    }
}

impl Drop for HostLock {
    fn drop(&mut self) {
        self.confirm_release();
    }
}

/// Sleeps `pause`, waking early when `cancel` fires; true when it did.
fn sleep_unless_cancelled(pause: Duration, cancel: &Cancel) -> bool {
    let until = Instant::now() + pause;
    while Instant::now() < until {
        if cancel.is_cancelled() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())));
    }
    cancel.is_cancelled()
}

/// The sandbox's lock: free, or held by the second operator a `--fault lock-held` rehearses.
pub struct Simulated {
    /// The rehearsed holder; `None`: the lock is free.
    pub held_by: Option<Record>,
}

struct SimulatedHolding;

impl Holding for SimulatedHolding {
    fn begin_release(&mut self) {}
    fn finish_release(self: Box<Self>) {}
}

impl Backend for Simulated {
    fn try_take(&self, _record: &Record) -> Result<Try, String> {
        Ok(match &self.held_by {
            Some(record) => Try::Held(Holder::Known(record.clone())),
            None => Try::Taken { holding: Box::new(SimulatedHolding), took_over: None },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn other() -> Record {
        Record {
            who: "alice@laptop".into(),
            run: "20261128T210307Z-abcd".into(),
            runbook: "configure".into(),
            component: String::new(),
            pid: 7,
            since: 0,
        }
    }

    #[test]
    fn a_held_lock_refuses_at_once_or_after_the_wait_saying_whom_it_waited_for() {
        let lock = HostLock::new("c1", Box::new(Simulated { held_by: Some(other()) }));
        let mine = Record::this_run("deploy", "");
        let mut said = Vec::new();
        let err = lock.take(&mine, Duration::ZERO, &Cancel::default(), &mut |s| said.push(s.to_string()));
        assert_eq!(
            err,
            Err(LockError::Held { host: "c1".into(), holder: Box::new(Holder::Known(other())), waited: None })
        );
        assert!(said.is_empty(), "no wait, no word of waiting");
        let started = Instant::now();
        let err = lock.take(&mine, Duration::from_millis(700), &Cancel::default(), &mut |s| said.push(s.to_string()));
        assert!(started.elapsed() >= Duration::from_millis(700));
        let err = err.unwrap_err().to_string();
        assert!(
            err.starts_with("c1: still held by alice@laptop — run 20261128T210307Z-abcd, configure, pid 7, since ")
        );
        assert!(err.ends_with(" after waiting 700ms"), "{err}");
        assert_eq!(said.len(), 1, "told once: {said:?}");
        assert!(said[0].starts_with("waiting for c1: held by alice@laptop — run "), "{said:?}");
        assert!(!lock.is_held());
    }

    #[test]
    fn a_free_lock_is_taken_once_per_run() {
        let lock = HostLock::new("c1", Box::new(Simulated { held_by: None }));
        let mine = Record::this_run("deploy", "");
        let take = || lock.take(&mine, Duration::ZERO, &Cancel::default(), &mut |_| {});
        assert_eq!(take(), Ok(Taken::Now { took_over: None }));
        assert_eq!(take(), Ok(Taken::Already));
        lock.let_go();
        lock.confirm_release();
        assert!(!lock.is_held());
        assert_eq!(take(), Ok(Taken::Now { took_over: None }));
    }

    /// A lock whose holdings write down each half of their release.
    struct Noted(std::sync::Arc<Mutex<Vec<&'static str>>>);
    struct NotedHolding(std::sync::Arc<Mutex<Vec<&'static str>>>);

    impl Holding for NotedHolding {
        fn begin_release(&mut self) {
            self.0.lock().unwrap().push("begin");
        }
        fn finish_release(self: Box<Self>) {
            self.0.lock().unwrap().push("finish");
        }
    }

    impl Backend for Noted {
        fn try_take(&self, _record: &Record) -> Result<Try, String> {
            self.0.lock().unwrap().push("take");
            Ok(Try::Taken { holding: Box::new(NotedHolding(self.0.clone())), took_over: None })
        }
    }

    #[test]
    fn a_lock_let_go_is_no_longer_held_and_its_release_is_confirmed_before_the_next_take_or_its_end() {
        let notes = std::sync::Arc::new(Mutex::new(Vec::new()));
        let lock = HostLock::new("c1", Box::new(Noted(notes.clone())));
        let mine = Record::this_run("deploy", "");
        let take = || lock.take(&mine, Duration::ZERO, &Cancel::default(), &mut |_| {});
        assert_eq!(take(), Ok(Taken::Now { took_over: None }));
        lock.let_go();
        assert!(!lock.is_held());
        assert_eq!(*notes.lock().unwrap(), ["take", "begin"]);
        assert_eq!(take(), Ok(Taken::Now { took_over: None }));
        lock.let_go();
        lock.confirm_release();
        lock.confirm_release();
        assert_eq!(*notes.lock().unwrap(), ["take", "begin", "finish", "take", "begin", "finish"]);
        assert_eq!(take(), Ok(Taken::Now { took_over: None }));
        lock.let_go();
        drop(lock);
        assert_eq!(notes.lock().unwrap()[6..], ["take", "begin", "finish"]);
    }
}
