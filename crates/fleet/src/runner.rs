//! The one fleet runner: a function run on every host of a run, each in its own thread, at
//! most `forks` acting at a time, the hosts meeting at `fleet::barrier`s and reaching each
//! other with `fleet::on`; the results in the order of the targets. `opsbook run --hosts`, the
//! sandbox's simulated fleet and `serve`'s jobs over inventory hosts all run through here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::targets::Target;
use opsbook_engine::gathering::Gathering;
use opsbook_engine::verbs::ground::Ground;
use opsbook_engine::verbs::place::Place;
use opsbook_inventory::Inventory;

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
    // A thread per host; the gathering's permits keep `forks` of them acting at a time (a pool
    // of `forks` workers would deadlock when a host waiting at a barrier holds a slot).
    std::thread::scope(|scope| {
        for (index, target) in targets.iter().enumerate() {
            let (gathering, results, each, done) = (&gathering, &results, &each, &done);
            scope.spawn(move || {
                gathering.acquire();
                let result = each(target);
                gathering.release();
                gathering.end(&target.name);
                let mut results = results.lock().unwrap_or_else(|e| e.into_inner());
                done(target, &result, results.len() + 1);
                results.push((index, result));
            });
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
