//! A run's hold on the change locks of the hosts it changes (`opsbook_world::change_lock`).
//!
//! A runbook that declares it changes the host (`Entry::changes_hosts`) has its run take the
//! lock before anything runs; a rollout takes every host's before its first batch. Anything
//! else takes it lazily, at its first change (`Context::plan`, which every changing verb
//! passes): the REPL, an operator's runbook that does not declare it, a `fleet::on` that
//! changes another host. Reading never locks, nor does `--dry-run`. The locks a run took are
//! let go when it ends (`release_after`), the rollout's when the rollout ends.

use std::sync::Arc;
use std::time::Duration;

use crate::verbs::context::{Context, Locking};
use opsbook_base::report::Level;
use opsbook_world::change_lock::{HostLock, LockError, Record, Taken};

impl Context {
    fn locking(&self) -> std::sync::MutexGuard<'_, Locking> {
        self.locking.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long runs wait for a lock another run holds (`--lock-timeout`).
    pub fn set_lock_wait(&self, wait: Duration) {
        self.locking().wait = wait;
    }

    /// Names what the records of locks taken from now on say: `runbook` changing `component`
    /// (`HOST:ROLE` or a role; empty: the host).
    pub fn lock_for(&self, runbook: &str, component: &str) {
        let mut locking = self.locking();
        locking.runbook = runbook.to_string();
        locking.component = component.rsplit(':').next().unwrap_or_default().to_string();
    }

    /// Takes the change lock of the host calls act on now, waiting as `set_lock_wait` asks;
    /// a record a gone holder left is said in the run's log. Nothing when this run holds it.
    pub fn hold_change_lock(&self) -> Result<(), LockError> {
        let lock = self.world().change_lock;
        if lock.is_held() {
            return Ok(());
        }
        let (record, wait) = {
            let locking = self.locking();
            let runbook = if locking.runbook.is_empty() { "opsbook" } else { &locking.runbook };
            (Record::this_run(runbook, &locking.component), locking.wait)
        };
        let taken = lock.take(&record, wait, &self.cancel, &mut |line| opsbook_base::say!("{line}"))?;
        if let Taken::Now { took_over } = taken {
            if let Some(holder) = took_over {
                let host = lock.host();
                self.log(
                    Level::Warn,
                    &format!("{host}: took over the change lock left by {holder}: its holder is gone"),
                );
            }
            self.locking().held.push(lock);
        }
        Ok(())
    }

    /// `plan`'s part: the lock before a change; false (the run stopped, the change not made)
    /// when another run holds it.
    pub(crate) fn hold_change_lock_before(&self, action: &str) -> bool {
        match self.hold_change_lock() {
            Ok(()) => true,
            Err(e) => {
                if e != LockError::Interrupted {
                    self.log(Level::Warn, &format!("refused to {action}: {e}"));
                }
                self.locking().refused.get_or_insert(e);
                self.cancel.cancel();
                false
            }
        }
    }

    /// The lock that stopped the last run, cleared by reading it.
    pub fn take_lock_refusal(&self) -> Option<LockError> {
        self.locking().refused.take()
    }

    /// How many locks this context holds (a run lets go of those it took after this count).
    pub fn locks_held(&self) -> usize {
        self.locking().held.len()
    }

    /// Lets go of the locks taken after the first `kept` without waiting for the hosts' word:
    /// each host frees its lock as soon as it hears; `confirm_releases` (or the next take of
    /// the same lock) reads the word.
    pub fn let_go_after(&self, kept: usize) {
        let taken: Vec<Arc<HostLock>> = {
            let mut locking = self.locking();
            let kept = kept.min(locking.held.len());
            locking.held.split_off(kept)
        };
        for lock in &taken {
            lock.let_go();
        }
        self.locking().letting_go.extend(taken);
    }

    /// Waits until every host `let_go_after` let go of confirmed it.
    pub fn confirm_releases(&self) {
        let letting_go = std::mem::take(&mut self.locking().letting_go);
        for lock in letting_go {
            lock.confirm_release();
        }
    }

    /// Lets go of the locks taken after the first `kept`, all at once, then waits until each
    /// host confirmed.
    pub fn release_after(&self, kept: usize) {
        self.let_go_after(kept);
        self.confirm_releases();
    }
}
