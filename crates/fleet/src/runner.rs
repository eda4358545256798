//! The one fleet runner: a function run on every host of a run by a small pool of worker
//! threads, at most `forks` hosts acting at a time, the hosts meeting at `fleet::barrier`s
//! and reaching each other with `fleet::on`; the results in the order of the targets.
//! `opsbook run --hosts`, the sandbox's simulated fleet and `serve`'s jobs over inventory
//! hosts all run through here.
//!
//! The pool: a thread per host would cost each host a new thread's stack and heap, the largest
//! part of opsbook's own CPU per host on a cold run, so `workers` threads take
//! the hosts in order, each host from its start to its end. A host waiting at a barrier holds
//! its worker, so the pool grows by one for each host waiting (the calling thread watches the
//! gathering for that): the hosts it waits for still get a worker.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::targets::Target;
use opsbook_engine::Gathering;
use opsbook_engine::verbs::Ground;
use opsbook_engine::verbs::Place;
use opsbook_inventory::Inventory;

/// The most worker threads a run keeps acting (hosts waiting at barriers aside): a host's run
/// mostly waits on the network, so a few threads keep many hosts' requests in flight.
const MAX_WORKERS: usize = 16;

/// How often the calling thread looks again at the hosts waiting at barriers, when nothing
/// woke it.
const WATCH: Duration = Duration::from_millis(100);

/// Runs `each` on every target (`done` is told of each as it ends, with how many have), at
/// most `forks` at a time, and returns the results in the targets' order. Runbooks on the
/// targets see `inventory` through `inventory::` and meet at `fleet::barrier`s; a target with
/// no session is ended at once, so nobody waits for it.
pub fn each<R: Send>(
    targets: &[Target],
    inventory: &Arc<Inventory>,
    forks: usize,
    each: impl Fn(&Target) -> R + Sync,
    done: impl Fn(&Target, &R, usize) + Sync,
) -> Vec<R> {
    let names = targets.iter().map(|t| t.name.clone()).collect();
    let gathering = Arc::new(Gathering::new(names, forks));
    place(targets, inventory, &gathering);
    let results: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(targets.len()));
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let index = next.fetch_add(1, Ordering::SeqCst);
            let Some(target) = targets.get(index) else { break };
            if index + 1 == targets.len() {
                gathering.wake_watcher(); // every host is taken: the watcher's loop is over
            }
            gathering.acquire();
            let result = each(target);
            gathering.release();
            gathering.end(&target.name);
            let mut results = results.lock().unwrap_or_else(|e| e.into_inner());
            done(target, &result, results.len() + 1);
            results.push((index, result));
        }
    };
    let workers = forks.clamp(1, MAX_WORKERS).min(targets.len());
    std::thread::scope(|scope| {
        let (mut started, mut waiting) = (0, 0);
        while next.load(Ordering::SeqCst) < targets.len() {
            while started < (workers + waiting).min(targets.len()) {
                scope.spawn(work);
                started += 1;
            }
            waiting = gathering.waiting_at_barriers(waiting, WATCH, || next.load(Ordering::SeqCst) >= targets.len());
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}

/// Gives each target's session its place in the run: the inventory, the gathering, and the
/// other hosts' grounds (`fleet::on` reaches them through their own sessions' connections).
fn place(targets: &[Target], inventory: &Arc<Inventory>, gathering: &Arc<Gathering>) {
    let grounds: Arc<BTreeMap<String, Ground>> = Arc::new(
        targets.iter().filter_map(|t| t.session.as_ref().ok().map(|s| (t.name.clone(), s.context.ground()))).collect(),
    );
    for target in targets {
        match &target.session {
            Ok(session) => {
                let place = match session.mode().sandbox {
                    Some(_) => Place::simulated(inventory.clone(), grounds.clone()),
                    None => Place::with_inventory(inventory.clone()).sharing(grounds.clone()),
                };
                session.context.set_place(place.in_run(gathering.clone(), target.name.clone()))
            }
            // Nobody waits at a barrier for a host that cannot run.
            Err(_) => gathering.end(&target.name),
        }
    }
}
