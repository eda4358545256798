//! The hosts of one fleet run, meeting at named points: the stack's order across machines.
//!
//! A runbook runs on every host at once, yet some steps must wait for others elsewhere: the
//! servers stop only once every client host has stopped its clients. `fleet::barrier(name)`
//! in a runbook waits until every host of the run has reached the same point or ended (done,
//! failed or unreachable), so one host's failure never holds the others up.
//!
//! The run's `--forks` bound is kept here too, as permits: at most `forks` hosts *act* at a
//! time, and a host waiting at a barrier gives its permit back. A plain thread pool of
//! `forks` workers would deadlock as soon as a waiting host holds a slot that a host it waits
//! for needs (twenty hosts, ten forks): the fleet's pool adds a worker for each host waiting
//! at a barrier (`waiting_at_barriers`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use opsbook_base::Cancel;

/// The hosts of a run, where each stands, and the permits to act.
pub struct Gathering {
    hosts: Vec<String>,
    state: Mutex<State>,
    /// Hosts waiting for a permit: one is woken for each permit given back (waking them all,
    /// a hundred hosts would wake a hundred times each as the others finish).
    permit_returned: Condvar,
    /// Hosts waiting at a barrier: all are woken when a host reaches one or ends.
    moved: Condvar,
    /// The pool's watcher (`waiting_at_barriers`): woken when a host starts waiting at a
    /// barrier, or when told (`wake_watcher`) — not as each host ends, which would wake it
    /// once a host on a run whose hosts end one by one.
    watcher: Condvar,
}

#[derive(Default)]
struct State {
    /// Barrier name → hosts that reached it.
    reached: BTreeMap<String, BTreeSet<String>>,
    /// Hosts whose run is over.
    ended: BTreeSet<String>,
    permits: usize,
    /// Hosts waiting at a barrier now.
    waiting: usize,
}

/// How a wait at a barrier went.
#[derive(Debug, Clone, PartialEq)]
pub struct Waited {
    /// The other hosts this one waited for (reached later or ended), in run order.
    pub(crate) for_hosts: Vec<String>,
    /// How long it waited.
    pub elapsed: Duration,
}

/// Why a barrier was left without everyone there.
#[derive(Debug, Clone, PartialEq)]
pub enum Left {
    /// The run was cancelled.
    Cancelled,
    /// Still missing when the deadline came, in run order.
    TimedOut(Vec<String>),
}

/// How often a waiting host looks at its cancellation flag.
const POLL: Duration = Duration::from_millis(100);

impl Gathering {
    /// A run of `hosts`, at most `forks` of them acting at a time.
    pub fn new(hosts: Vec<String>, forks: usize) -> Gathering {
        let state = State { permits: forks.max(1), ..State::default() };
        Gathering {
            hosts,
            state: Mutex::new(state),
            permit_returned: Condvar::new(),
            moved: Condvar::new(),
            watcher: Condvar::new(),
        }
    }

    /// The run's hosts, in run order.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until this host may act.
    pub fn acquire(&self) {
        let mut state = self.lock();
        while state.permits == 0 {
            state = self.permit_returned.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.permits -= 1;
    }

    /// Lets another host act (after `acquire`).
    pub fn release(&self) {
        self.lock().permits += 1;
        self.permit_returned.notify_one();
    }

    /// This host's run is over: nobody waits for it any more.
    pub fn end(&self, host: &str) {
        self.lock().ended.insert(host.to_string());
        self.moved.notify_all();
    }

    /// How many hosts wait at a barrier now; first waits (at most `limit`) while that is still
    /// `seen`, `over` is false (looked at under the gathering's lock, so a `wake_watcher` after
    /// what makes it true is never missed) and nobody woke the watcher.
    pub fn waiting_at_barriers(&self, seen: usize, limit: Duration, over: impl Fn() -> bool) -> usize {
        let state = self.lock();
        if state.waiting != seen || over() {
            return state.waiting;
        }
        self.watcher.wait_timeout(state, limit).unwrap_or_else(|e| e.into_inner()).0.waiting
    }

    /// Wakes the pool's watcher waiting in `waiting_at_barriers`, once what its `over` looks at
    /// changed.
    pub fn wake_watcher(&self) {
        let _state = self.lock();
        self.watcher.notify_all();
    }

    /// `host` reached `barrier`; waits (its permit given back meanwhile) until every host of
    /// the run reached it or ended, `deadline` passed, or `cancel` was raised.
    pub fn barrier(&self, host: &str, barrier: &str, deadline: Duration, cancel: &Cancel) -> Result<Waited, Left> {
        let started = Instant::now();
        let mut state = self.lock();
        state.reached.entry(barrier.to_string()).or_default().insert(host.to_string());
        let missing = |state: &State| -> Vec<String> {
            let reached = state.reached.get(barrier);
            self.hosts
                .iter()
                .filter(|h| !state.ended.contains(*h) && !reached.is_some_and(|r| r.contains(*h)))
                .cloned()
                .collect()
        };
        let first_missing = missing(&state);
        if first_missing.is_empty() {
            drop(state);
            self.moved.notify_all();
            return Ok(Waited { for_hosts: Vec::new(), elapsed: started.elapsed() });
        }
        state.permits += 1;
        state.waiting += 1;
        self.permit_returned.notify_one();
        self.watcher.notify_all();
        self.moved.notify_all();
        let result = loop {
            let now_missing = missing(&state);
            if now_missing.is_empty() {
                break Ok(Waited { for_hosts: first_missing, elapsed: started.elapsed() });
            }
            if cancel.is_cancelled() {
                break Err(Left::Cancelled);
            }
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                break Err(Left::TimedOut(now_missing));
            }
            state = self.moved.wait_timeout(state, left.min(POLL)).unwrap_or_else(|e| e.into_inner()).0;
        };
        state.waiting -= 1;
        // Act again only with a permit, as before the wait.
        while state.permits == 0 {
            state = self.permit_returned.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.permits -= 1;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_barrier_holds_each_host_until_the_others_reach_it_or_end() {
        let g = Arc::new(Gathering::new(names(&["server", "c1", "c2"]), 1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let hosts: Vec<_> = ["server", "c1", "c2"]
            .into_iter()
            .map(|h| {
                let (g, order) = (g.clone(), order.clone());
                std::thread::spawn(move || {
                    g.acquire();
                    if h == "c2" {
                        // c2 fails before the barrier: it ends, and is not waited for.
                        order.lock().unwrap().push(format!("{h} ended"));
                        g.release();
                        g.end(h);
                        return;
                    }
                    order.lock().unwrap().push(format!("{h} before"));
                    g.barrier(h, "clients stopped", Duration::from_secs(10), &Cancel::default()).unwrap();
                    order.lock().unwrap().push(format!("{h} after"));
                    g.release();
                    g.end(h);
                })
            })
            .collect();
        hosts.into_iter().for_each(|t| t.join().unwrap());
        let order = order.lock().unwrap().clone();
        let last_before = order.iter().rposition(|e| e.ends_with("before") || e.ends_with("ended")).unwrap();
        let first_after = order.iter().position(|e| e.ends_with("after")).unwrap();
        assert!(last_before < first_after, "{order:?}");
        assert_eq!(order.len(), 5, "{order:?}");
    }

    #[test]
    fn one_fork_is_enough_for_many_hosts_meeting_at_a_barrier() {
        // With a pool of one worker this would wait forever: the waiting host gives its permit back.
        let g = Arc::new(Gathering::new(names(&["a", "b", "c", "d"]), 1));
        let threads: Vec<_> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|h| {
                let g = g.clone();
                std::thread::spawn(move || {
                    g.acquire();
                    let waited = g.barrier(h, "x", Duration::from_secs(10), &Cancel::default());
                    g.release();
                    g.end(h);
                    waited.map(|w| w.for_hosts.len())
                })
            })
            .collect();
        let waited: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(waited.iter().all(|w| w.is_ok()), "{waited:?}");
        assert_eq!(waited.iter().filter(|w| **w == Ok(0)).count(), 1, "only the last to arrive waits for nobody");
    }

    #[test]
    fn a_barrier_nobody_else_reaches_times_out_naming_who_is_missing() {
        let g = Gathering::new(names(&["server", "c1"]), 2);
        g.acquire();
        let left = g.barrier("server", "clients stopped", Duration::from_millis(150), &Cancel::default());
        assert_eq!(left, Err(Left::TimedOut(names(&["c1"]))));
    }

    #[test]
    fn hosts_waiting_at_a_barrier_are_counted_until_it_opens() {
        let g = Arc::new(Gathering::new(names(&["a", "b", "c"]), 3));
        let threads: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|h| {
                let g = g.clone();
                std::thread::spawn(move || {
                    g.acquire();
                    g.barrier(h, "x", Duration::from_secs(10), &Cancel::default()).unwrap();
                    g.release();
                    g.end(h);
                })
            })
            .collect();
        let mut seen = 0;
        while seen < 2 {
            seen = g.waiting_at_barriers(seen, Duration::from_secs(10), || false);
        }
        g.acquire();
        g.barrier("c", "x", Duration::from_secs(10), &Cancel::default()).unwrap();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(g.waiting_at_barriers(1, Duration::ZERO, || false), 0);
    }

    #[test]
    fn a_cancelled_wait_returns_at_once() {
        let g = Gathering::new(names(&["server", "c1"]), 2);
        let cancel = Cancel::default();
        cancel.cancel();
        g.acquire();
        assert_eq!(g.barrier("server", "x", Duration::from_secs(30), &cancel), Err(Left::Cancelled));
    }
}
