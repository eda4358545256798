//! Runs each job on its interval: one thread per job, and one session per job on this
//! machine (a job with `hosts` opens its hosts' sessions for each run, see `remote`).
//!
//! A job never overlaps itself: its thread runs, records, then waits for the next due time;
//! a run that takes longer than the interval delays the next one, which starts at once and
//! is counted (and noted in its record) as late. Jobs run in parallel up to `parallel` at a
//! time (a small counting semaphore). Each run is given a random delay up to the jitter, so
//! many hosts started together do not all fire at the same second. A run still going at the
//! job's deadline is interrupted through its host's cancel flag, as Ctrl-C would.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use super::job_run::{Cancels, execute};
use super::remote::Hosts;
use super::state::State;
use opsbook_base::Cancel;
use opsbook_base::config::serve::Job;
use opsbook_engine::runbook::Compiled;
use opsbook_fleet::Session;

/// Wakes sleeping job threads when the service stops or reloads.
#[derive(Default)]
pub(super) struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    pub(super) fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_all();
    }

    pub(super) fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sleeps until `when`; true when stopped meanwhile.
    fn sleep_until(&self, when: Instant) -> bool {
        let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        while !*stopped {
            let now = Instant::now();
            if now >= when {
                return false;
            }
            stopped = self.wake.wait_timeout(stopped, when - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

/// At most `n` runs at a time.
pub(super) struct Permits {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Permits {
    pub(super) fn new(n: usize) -> Permits {
        Permits { free: Mutex::new(n.max(1)), freed: Condvar::new() }
    }

    /// Takes a permit, waiting for one; `None` when the service stops meanwhile.
    fn acquire<'a>(&'a self, stop: &Stop) -> Option<Permit<'a>> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if stop.is_stopped() {
                return None;
            }
            if *free > 0 {
                *free -= 1;
                return Some(Permit(self));
            }
            free = self.freed.wait_timeout(free, Duration::from_millis(200)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

struct Permit<'a>(&'a Permits);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// A random duration below `max` (no crate for this: the std hasher is randomly seeded).
fn random_below(max: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    if max.is_zero() {
        return Duration::ZERO;
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    Duration::from_nanos(h.finish() % (max.as_nanos() as u64).max(1))
}

/// The jitter of a job: configured, else a tenth of its interval, at most 30 s.
pub(super) fn jitter(spec: &Job, configured: Option<Duration>) -> Duration {
    configured.unwrap_or_else(|| (spec.every / 10).min(Duration::from_secs(30))).min(spec.every)
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Where a job runs.
pub(super) enum Place {
    /// This machine: one session and compiled runbook for the service's life.
    Here { session: Box<Session>, compiled: Compiled },
    /// Inventory hosts, reached afresh for each run.
    Hosts(Hosts),
}

/// A job ready to run.
pub(super) struct Ready {
    pub spec: Job,
    pub place: Place,
}

/// The running job threads.
pub(super) struct Running {
    pub stop: Arc<Stop>,
    threads: Vec<(Cancels, JoinHandle<()>)>,
}

impl Running {
    /// Starts one thread per job.
    pub(super) fn start(
        jobs: Vec<Ready>,
        state: Arc<State>,
        parallel: usize,
        jitter_setting: Option<Duration>,
    ) -> Running {
        let stop = Arc::new(Stop::default());
        let permits = Arc::new(Permits::new(parallel));
        let mut threads = Vec::new();
        for ready in jobs {
            let cancels: Cancels = Arc::default();
            if let Place::Here { session, .. } = &ready.place {
                lock(&cancels).push(session.context.cancel.clone());
            }
            let (stop, permits, state, current) = (stop.clone(), permits.clone(), state.clone(), cancels.clone());
            let jitter = jitter(&ready.spec, jitter_setting);
            let spawned = std::thread::Builder::new()
                .name(format!("job {}", ready.spec.name))
                .spawn(move || job_loop(ready, &state, &stop, &permits, jitter, &current));
            match spawned {
                Ok(handle) => threads.push((cancels, handle)),
                Err(e) => tracing::error!("cannot start a thread for a job: {e}"),
            }
        }
        Running { stop, threads }
    }

    /// Lets running jobs finish within `deadline`, then interrupts them; returns the names
    /// of the jobs that had to be interrupted.
    pub(super) fn finish(self, deadline: Duration) -> usize {
        self.stop.stop();
        let until = Instant::now() + deadline;
        while Instant::now() < until && self.threads.iter().any(|(_, t)| !t.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut interrupted = 0;
        for (cancels, thread) in self.threads {
            if !thread.is_finished() {
                interrupted += 1;
                lock(&cancels).iter().for_each(Cancel::cancel);
            }
            let _ = thread.join();
        }
        interrupted
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn job_loop(ready: Ready, state: &State, stop: &Stop, permits: &Permits, jitter: Duration, cancels: &Cancels) {
    let Ready { spec, place } = ready;
    let every = spec.every;
    // `grid` is when runs are due without jitter; a run that overran moves it to its end.
    let mut grid = Instant::now();
    let mut late_by: Option<Duration> = None;
    loop {
        let delay = random_below(jitter);
        let due = grid + delay;
        state.scheduled(&spec.name, ms(SystemTime::now() + due.saturating_duration_since(Instant::now())));
        if stop.sleep_until(due) {
            return;
        }
        let Some(permit) = permits.acquire(stop) else { return };
        state.running(&spec.name, Some(ms(SystemTime::now())), late_by.is_some());
        let note = late_by.map(|d| {
            format!("late by {}: the previous run overran its interval", humantime::format_duration(round(d)))
        });
        let results = match &place {
            Place::Here { session, compiled } => {
                let (document, end_note) = execute(&spec, session, compiled);
                vec![(state.hostname.clone(), document, end_note)]
            }
            Place::Hosts(hosts) => hosts.run(&spec, cancels),
        };
        drop(permit);
        for (host, document, end_note) in results {
            let note = match (note.clone(), end_note) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            };
            let id = state.record(&spec, &host, document, note);
            tracing::debug!("job {} on {host}: run {id} recorded", spec.name);
        }
        state.running(&spec.name, None, false);
        grid += every;
        let now = Instant::now();
        late_by = (now > grid).then(|| now - grid);
        if late_by.is_some() {
            grid = now;
        }
    }
}

fn round(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsbook_base::config::Config;
    use opsbook_engine::verbs::Context;

    #[test]
    fn a_watch_only_host_refuses_a_mutating_call_and_stops_the_run() {
        let config = Config::defaults();
        let world = opsbook_world::World::real(&config);
        let host = Context::new(Arc::new(config), world, false);
        assert!(!host.plan("nothing yet") || host.dry_run);
        host.set_watch_only(true);
        assert!(host.plan("restart loki.service"), "the caller must not act");
        assert!(host.cancel.is_cancelled());
        assert_eq!(
            host.take_refusal().as_deref(),
            Some(
                "refused to restart loki.service: this job only watches the stack (add `mutating = true` to the job \
                 to allow changes)"
            )
        );
        assert_eq!(host.take_refusal(), None);
    }

    #[test]
    fn jitter_is_a_tenth_of_the_interval_at_most_thirty_seconds() {
        let job = opsbook_base::config::serve::job_from_arg("q@10s").unwrap();
        assert_eq!(jitter(&job, None), Duration::from_secs(1));
        let job = opsbook_base::config::serve::job_from_arg("q@1h").unwrap();
        assert_eq!(jitter(&job, None), Duration::from_secs(30));
        assert_eq!(jitter(&job, Some(Duration::from_secs(2))), Duration::from_secs(2));
        assert!(random_below(Duration::from_secs(1)) < Duration::from_secs(1));
    }
}
