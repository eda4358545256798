//! The hosts of a run and how each is reached: a session per host (this machine, another
//! over ssh, or a simulated host of the sandbox), or why there is none. Which hosts a run acts
//! on is the inventory's to say (`Inventory::targets`, the one place patterns are applied),
//! for the sandbox's simulated fleet as for a real one.

use std::sync::Arc;

use crate::options::GlobalOptions;
use crate::session::Session;
use opsbook_base::Error;
use opsbook_base::config::Config;
use opsbook_base::process::Children;
use opsbook_base::report::Mode;
use opsbook_engine::Opening;
use opsbook_engine::catalog::Catalog;
use opsbook_inventory::Inventory;
use opsbook_sandbox::Sandbox;
use opsbook_world::transport::Contention;

/// A host of the run: its name, the roles it plays, and its session — or why there is none
/// (an unreachable host is a failed check naming it, never a stop for the others).
pub struct Target {
    /// The host's name.
    pub name: String,
    /// The roles it plays, by name.
    pub roles: Vec<String>,
    /// Its session, or why it has none.
    pub session: Result<Session, Absent>,
}

/// Why a host of the run has no session: the failed check its report holds instead.
pub struct Absent {
    /// `monitor3 reachable over ssh`, `monitor3 resolved from the inventory`.
    pub check: String,
    /// Why, in words.
    pub why: String,
}

impl Absent {
    /// A host that could not be reached over ssh, `why` saying how it failed.
    pub fn unreachable(host: &str, why: String) -> Absent {
        Absent { check: format!("{host} reachable over ssh"), why }
    }
}

/// The targets of `--sandbox --fleet N`: a session per simulated host, the inventory they
/// make, and the sandbox they act on (keep it alive for the run).
pub fn sandbox_targets(
    global: &GlobalOptions,
    clients: usize,
) -> Result<(Vec<Target>, Arc<Inventory>, Sandbox), Error> {
    if !global.sandbox {
        return Err(Error::Usage(format!(
            "`--fleet {clients}` simulates a fleet of hosts in the sandbox: add `--sandbox`"
        )));
    }
    let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
    let config = global.load_config()?;
    // Setting up hundreds of hosts takes a while: Ctrl-C or SIGTERM meanwhile ends it, saying
    // how far it got (exit status 130), instead of killing the process without a word.
    opsbook_base::catch_set_up();
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) || clients >= 50 {
        opsbook_base::say!("setting up the sandbox: a server and {clients} client hosts…");
    }
    let sandbox = Sandbox::start_fleet(config.clone(), clients, &global.faults)?;
    let members: Vec<(String, Vec<String>)> =
        sandbox.hosts.iter().map(|h| (h.sim.name.clone(), h.sim.roles.clone())).collect();
    let inventory = Arc::new(Inventory::simulated(&config, &members));
    let targets = sandbox
        .hosts
        .iter()
        .map(|h| {
            let mode =
                Mode { dry_run: global.dry_run, sandbox: Some(global.faults.clone()), host: Some(h.sim.name.clone()) };
            Target {
                name: h.sim.name.clone(),
                roles: h.sim.roles.clone(),
                session: Ok(Session::waiting(global, h.config.clone(), h.world.clone(), catalog.clone(), mode)),
            }
        })
        .collect();
    if let Some(signal) = opsbook_base::set_up_interrupted() {
        return Err(Error::Interrupted(format!(
            "{signal} while the sandbox was set up: {n} of its {n} simulated hosts were ready; nothing was run",
            n = clients + 1
        )));
    }
    Ok((targets, inventory, sandbox))
}

/// Only the targets `--host NAME` or `--hosts PATTERN` select in `inventory` (a group, a host,
/// a role, Ansible's combinations), in the inventory's order; all of them when neither is given.
pub fn select(
    targets: Vec<Target>,
    inventory: &Inventory,
    host: Option<&str>,
    hosts: Option<&str>,
) -> Result<Vec<Target>, Error> {
    let Some(selected) = inventory.targets(host, hosts)? else { return Ok(targets) };
    let names: std::collections::BTreeSet<&str> = selected.iter().map(|h| h.name.as_str()).collect();
    Ok(targets.into_iter().filter(|t| names.contains(t.name.as_str())).collect())
}

/// The targets an inventory selection names: this machine for a local host, the host's world
/// over one shared ssh connection for a remote one, connected `--forks` at a time (so a run
/// over thousands of hosts never starts thousands of ssh clients at once). One thread opens
/// them all: it starts each host's ssh master and watches every master starting at once.
pub fn inventory_targets(global: &GlobalOptions, hosts: &[&opsbook_inventory::Host]) -> Vec<Target> {
    let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
    let target = |h: &opsbook_inventory::Host, reached| make_target(global, h, catalog.clone(), reached);
    let mut targets: Vec<Option<Target>> = hosts.iter().map(|_| None).collect();
    let mut opening: Vec<Option<Opening>> = hosts.iter().map(|_| None).collect();
    // Those with no master to wait for, or whose lasting master another host of this run is
    // starting: made once every master started.
    let mut after: Vec<(usize, Opening)> = Vec::new();
    let mut masters = Children::new();
    let mut next = 0;
    loop {
        while masters.len() < global.forks.max(1)
            && let Some(h) = hosts.get(next)
        {
            match begin(h) {
                Err(absent) => targets[next] = Some(target(h, Err(absent))),
                Ok(mut o) => match o.master() {
                    Some(master) => {
                        masters.add(next, master);
                        opening[next] = Some(o);
                    }
                    None => after.push((next, o)),
                },
            }
            next += 1;
        }
        let Some((i, started)) = masters.next_done() else { break };
        let o = opening[i].take().expect("a master watched is a host opening");
        targets[i] =
            Some(target(hosts[i], o.finish(Some(started)).map_err(|why| Absent::unreachable(&hosts[i].name, why))));
    }
    for (i, o) in after {
        targets[i] = Some(target(hosts[i], o.finish(None).map_err(|why| Absent::unreachable(&hosts[i].name, why))));
    }
    targets.into_iter().map(|t| t.expect("every host's connection was tried")).collect()
}

/// The first half of reaching one host of the selection (`connect::begin`), or why it has no
/// session: a value the inventory could not resolve, an address ssh would misread.
fn begin(h: &opsbook_inventory::Host) -> Result<Opening, Absent> {
    // A value the inventory could not resolve is this host's failure, not the run's.
    if let Some(p) = h.problems.first() {
        return Err(Absent {
            check: format!("{} resolved from the inventory", h.name),
            why: format!("`{}` ({}) cannot be resolved: {}", p.var, p.from, p.reason),
        });
    }
    opsbook_engine::begin_connecting(h, Contention::Defer).map_err(|why| Absent::unreachable(&h.name, why))
}

/// One host of the selection, with its session once reached, or why it has none.
fn make_target(
    global: &GlobalOptions,
    h: &opsbook_inventory::Host,
    catalog: Arc<Catalog>,
    reached: Result<(Config, opsbook_world::World), Absent>,
) -> Target {
    let mode = Mode { dry_run: global.dry_run, sandbox: None, host: Some(h.name.clone()) };
    let roles = h.roles.iter().map(|r| r.value.name().to_string()).collect();
    let session = reached.map(|(config, world)| Session::waiting(global, config, world, catalog, mode));
    Target { name: h.name.clone(), roles, session }
}

/// The session of one inventory host (the REPL's `--host`); an unreachable host is an error.
pub fn host_session(global: &GlobalOptions, host: &opsbook_inventory::Host) -> Result<Session, Error> {
    let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
    let (config, world) = opsbook_engine::connect_host(host).map_err(Error::Usage)?;
    let mode = Mode { dry_run: global.dry_run, sandbox: None, host: Some(host.name.clone()) };
    Ok(Session::waiting(global, config, world, catalog, mode))
}
