//! A job over inventory hosts (`hosts = "PATTERN"`): each run reaches every selected host
//! afresh, runs the runbook on all of them in parallel and gives one report per host.
//!
//! A service runs for days, and ssh connections do not: a host reboots, a network drops, an
//! sshd restarts. Each run therefore opens its hosts' sessions (one ssh connection per host,
//! in parallel, through the fleet code), runs, and closes them, so a host that was gone is
//! simply reached again at the next run — nothing to notice, repair or leak. Its price is one
//! ssh connect per host per run, small beside the run itself. A host that cannot
//! be reached is that host's failed run, naming it and quoting ssh; the others go on. At most
//! `--forks` hosts run at a time, through the same fleet runner as `opsbook run --hosts`
//! (`opsbook_fleet::runner`), so barriers and `fleet::on` work in a job too.

use serde_json::{Value, json};

use super::capture;
use super::job_run::{Cancels, error_document, execute};
use crate::cli::GlobalOptions;
use opsbook_base::config::serve::Job;
use opsbook_fleet::targets::Target;

/// The hosts a job watches, and how to reach them.
pub(super) struct Hosts {
    /// The selected inventory hosts, in the inventory's order.
    pub hosts: Vec<opsbook_inventory::Host>,
    /// The inventory they were selected from (runbooks on them see it through `inventory::`).
    pub inventory: std::sync::Arc<opsbook_inventory::Inventory>,
    /// The command line's options: runbook directories and `--dry-run` for each host's session.
    pub global: GlobalOptions,
}

impl Hosts {
    /// One run on every host: (host, JSON report, note) each, in the inventory's order.
    /// While it goes on, `cancels` holds the hosts' cancel flags (the service's stop uses them).
    pub(super) fn run(&self, spec: &Job, cancels: &Cancels) -> Vec<(String, Value, Option<String>)> {
        let selected: Vec<&opsbook_inventory::Host> = self.hosts.iter().collect();
        let targets = opsbook_fleet::targets::inventory_targets(&self.global, &selected);
        *cancels.lock().unwrap_or_else(|e| e.into_inner()) =
            targets.iter().filter_map(|t| t.session.as_ref().ok()).map(|s| s.context.cancel.clone()).collect();
        // At most `--forks` hosts run at a time (10 by default), as `opsbook run --hosts`.
        let results = opsbook_fleet::runner::each(
            &targets,
            &self.inventory,
            self.global.forks,
            |target| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one(spec, target))).unwrap_or_else(|_| {
                    let message = format!("the run on {} panicked: this is a bug in opsbook", target.name);
                    (target.name.clone(), error_document(spec, &message), Some(message))
                })
            },
            |_, _, _| {},
        );
        cancels.lock().unwrap_or_else(|e| e.into_inner()).clear();
        // Dropping the sessions closes their ssh connections (and the ports forwarded on them).
        drop(targets);
        results
    }
}

/// The run on one host.
fn one(spec: &Job, target: &Target) -> (String, Value, Option<String>) {
    let name = target.name.clone();
    let session = match &target.session {
        Ok(session) => session,
        Err(absent) => {
            let why = opsbook_base::secret::redact(&absent.why).into_owned();
            // ssh's words are the run's error already: no note repeating them.
            return (name.clone(), unreachable(spec, &name, &absent.check, &why), None);
        }
    };
    match session.compile(&spec.runbook) {
        Ok(compiled) => {
            let (document, note) = execute(spec, session, &compiled);
            (name, document, note)
        }
        Err(e) => {
            let message = opsbook_base::secret::redact(&e.to_string()).into_owned();
            (name, error_document(spec, &message), Some(message))
        }
    }
}

/// The report of a run on a host that could not be reached: one failed check naming it, and
/// ssh's words as the run's error (so `/healthz` quotes them).
fn unreachable(spec: &Job, host: &str, check: &str, why: &str) -> Value {
    let mut document = capture::unreachable(&spec.runbook, host, check, why);
    document["error"] = json!({"kind": "unreachable", "message": why});
    document
}
