//! The note a read runbook run on this machine starts with when the configured inventory does
//! not name this machine. An operator with an inventory who leaves out `--hosts` most likely
//! meant the inventory's hosts, and the checks failing here ("cannot reach the service
//! manager", timeouts) would not say why. The run itself is unchanged: the same checks, the
//! same exit status; only its first line says where it ran and what was probably meant.

use opsbook_base::Error;
use opsbook_engine::runbook::Compiled;
use opsbook_fleet::GlobalOptions;
use opsbook_fleet::Session;
use opsbook_inventory::Role;

/// The note for a run of runbook `name` on this machine, when one is due: an inventory is
/// configured, it names neither this machine nor a host without an address, and the runbook
/// only reads. A runbook named after a role (`verify-log-store`) suggests the hosts playing
/// it, any other `--hosts all`. An inventory that cannot be read gives no note: the run says
/// nothing it could not check.
pub(crate) fn note(global: &GlobalOptions, session: &Session, compiled: &Compiled, name: &str) -> Option<String> {
    if global.sandbox {
        return None;
    }
    // The inventory the runbook sees too: read once for both.
    let inventory = session.context.inventory().ok()?;
    let here = session.context.hostname();
    if inventory.hosts().iter().any(|h| h.is_local() || h.name == here) {
        return None;
    }
    let changes: Result<Vec<_>, Error> = crate::serve::scan::mutating_calls(session, compiled);
    if !changes.ok()?.is_empty() {
        return None;
    }
    let playing = |pattern: &str| inventory.select(pattern).map(|hosts| hosts.len()).unwrap_or(0);
    let (pattern, count) = Role::all()
        .map(Role::name)
        .filter(|role| name.contains(role))
        .map(|role| (role, playing(role)))
        .find(|(_, count)| *count > 0)
        .unwrap_or(("all", playing("all")));
    Some(format!(
        "note: this machine ({here}) is not in the inventory, so `{name}` checks it alone; \
         `--hosts {pattern}` runs it on the inventory's {count} host(s)"
    ))
}
