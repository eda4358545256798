//! A rollout's hold on its hosts' change locks: before its first batch it takes the lock of
//! every host it will change — all or none — so two rollouts over the same hosts never
//! interleave, and lets them go when it ends. A host another run holds stops the rollout
//! before anything changed: every host is reported "not attempted", the held ones naming
//! their holder, and the exit status is 75 (`LOCKED_EXIT`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::rollout_report::{HostOutcome, HostResult, Rollout};
use crate::targets::Target;
use opsbook_base::Cancel;
use opsbook_inventory::Inventory;
use opsbook_world::change_lock::LockError;

/// Takes every reachable host's lock for `runbook` with `params` (the component they name),
/// `forks` hosts at a time (`--lock-timeout` waits, each host's session
/// says how long); the refusal of each host that could not be locked, in the targets' order
/// (`None`: locked, or no session: such a host fails in its batch as it would).
/// A first Ctrl-C (`drain`) ends the waiting: no batch starts, so nothing waits for the second
/// (the hosts' own flags are raised to wake their waits, then lowered again for the rest).
pub(crate) fn hold_all(
    targets: &[Target],
    inventory: &Arc<Inventory>,
    (runbook, params): (&str, &[(String, String)]),
    forks: usize,
    drain: &Cancel,
) -> Vec<Option<LockError>> {
    let given = |k: &str| params.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let component = given("service").or_else(|| given("component")).unwrap_or_default();
    let cancels: Vec<&Cancel> =
        targets.iter().filter_map(|t| t.session.as_ref().ok()).map(|s| &s.context.cancel).collect();
    let done = AtomicBool::new(false);
    let refused = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Acquire) {
                if drain.is_cancelled() {
                    cancels.iter().for_each(|c| c.cancel());
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let refused = crate::runner::each(
            targets,
            inventory,
            forks,
            |target| {
                let session = target.session.as_ref().ok()?;
                session.context.lock_for(runbook, &component);
                session.context.hold_change_lock().err()
            },
            |_, _, _| {},
        );
        done.store(true, Ordering::Release);
        refused
    });
    if !drain.is_cancelled() {
        return refused;
    }
    // Interrupted: no host is refused, the rollout stops before its first batch as Ctrl-C does.
    cancels.iter().for_each(|c| c.reset());
    refused.into_iter().map(|_| None).collect()
}

/// Lets every host's lock go, all at once, then waits until each host confirmed.
pub(crate) fn release_all(targets: &[Target]) {
    on_every_context(targets, |context| context.release_after(0));
}

/// Waits until every host confirmed the release its run began (`Context::let_go_after`):
/// words there by now are read at once; a host slow to answer holds up only its share.
pub(crate) fn confirm_all(targets: &[Target]) {
    on_every_context(targets, |context| context.confirm_releases());
}

/// Calls `act` on each host's context, the hosts shared among eight threads.
fn on_every_context(targets: &[Target], act: impl Fn(&opsbook_engine::verbs::Context) + Sync) {
    let contexts: Vec<_> = targets.iter().filter_map(|t| t.session.as_ref().ok()).map(|s| &s.context).collect();
    let act = &act;
    std::thread::scope(|scope| {
        for chunk in contexts.chunks(contexts.len().div_ceil(8).max(1)) {
            scope.spawn(move || {
                for context in chunk {
                    act(context);
                }
            });
        }
    });
}

/// The rollout refused before its first batch: the line it stops with, and every host not
/// attempted, the held ones naming their holder. True when it was.
pub(crate) fn refuse(targets: &[Target], refused: &[Option<LockError>], rollout: &mut Rollout) -> bool {
    let held = refused.iter().filter(|r| r.is_some()).count();
    if held == 0 {
        return false;
    }
    rollout.stopped = Some(format!(
        "refused: {held} of {} host(s) could not be locked (another run changes them); nothing was changed",
        targets.len()
    ));
    for (target, refusal) in targets.iter().zip(refused) {
        let reason = match refusal {
            Some(LockError::Held { waited: None, .. }) => {
                format!(
                    "locked: {}; `--lock-timeout 10m` waits for it",
                    refusal.as_ref().map(|r| r.to_string()).unwrap_or_default()
                )
            }
            Some(other) => format!("locked: {other}"),
            None => "not changed: a rollout locks all of its hosts or none".to_string(),
        };
        let batch = rollout.batches.iter().position(|b| b.hosts.contains(&target.name)).unwrap_or(0) + 1;
        rollout.hosts.push(HostResult {
            host: target.name.clone(),
            roles: target.roles.clone(),
            batch,
            outcome: HostOutcome::NotAttempted,
            reason,
            change: None,
            rollback: None,
            took: None,
        });
    }
    true
}
