//! One runbook on several hosts at once: a session per host, run in parallel.
//!
//! Each host is a `Session` of its own (its configuration, its world: this machine, another
//! over SSH, or a simulated host of the sandbox), so a host's failure stays that host's: it is
//! reported for it and never stops the others. At most `forks` hosts run at a time (10 by
//! default, as Ansible's). Each host's report is kept until it is done and then written whole,
//! followed by the fleet's summary (`report::fleet`); a line on stderr says when each host is
//! done, when stderr is a terminal.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Instant;

use std::sync::Arc;

use crate::cancel::Cancel;
use crate::catalog::Catalog;
use crate::config::{Config, Sources};
use crate::error::Error;
use crate::gathering::Gathering;
use crate::host::Ground;
use crate::host::fleet::Place;
use crate::inventory::Inventory;
use crate::options::GlobalOptions;
use crate::report::Mode;
use crate::report::fleet::{self, HostRun};
use crate::report::{Format, Formatter, Outcome, Recorder, Report};
use crate::sandbox::Sandbox;
use crate::session::Session;

/// A host of the run: its name, the roles it plays, and its session — or why there is none
/// (an unreachable host is a failed check naming it, never a stop for the others).
pub struct Target {
    pub name: String,
    pub roles: Vec<String>,
    pub session: Result<Session, Absent>,
}

/// Why a host of the run has no session: the failed check its report holds instead.
pub struct Absent {
    /// `monitor3 reachable over ssh`, `monitor3 resolved from the inventory`.
    pub check: String,
    pub why: String,
}

impl Absent {
    pub fn unreachable(host: &str, why: String) -> Absent {
        Absent { check: format!("{host} reachable over ssh"), why }
    }
}

/// Runs `runbook` with `params` on every target, `forks` acting at a time, writes the fleet's
/// report to stdout (and its JSON document to `save_json` when given, `--save-json`) and
/// returns the exit status (the worst of the hosts'). Runbooks see `inventory` through
/// `inventory::` and meet at `fleet::barrier`s.
pub fn run(
    targets: Vec<Target>,
    inventory: Arc<Inventory>,
    runbook: &str,
    params: &[(String, String)],
    forks: usize,
    format: Format,
    save_json: Option<&std::path::Path>,
) -> Result<u8, Error> {
    if targets.is_empty() {
        return Err(Error::Usage("no host matches: nothing to run".into()));
    }
    let sessions: Vec<&Session> = targets.iter().filter_map(|t| t.session.as_ref().ok()).collect();
    if let Some(first) = sessions.first() {
        // A script or parameter error is the same on every host: say it once, before any acts.
        first.compile(runbook)?.bind(params)?;
        let cancels: Vec<Cancel> = sessions.iter().map(|s| s.host.cancel.clone()).collect();
        crate::cancel::on_signals(first.host.runtime(), cancels, "the runbook on every host");
    }

    let started = Instant::now();
    let total = targets.len();
    let names = targets.iter().map(|t| t.name.clone()).collect();
    let gathering = Arc::new(Gathering::new(names, forks));
    // `fleet::on` reaches the run's hosts through their own sessions' connections.
    let grounds: BTreeMap<String, Ground> =
        targets.iter().filter_map(|t| t.session.as_ref().ok().map(|s| (t.name.clone(), s.host.ground()))).collect();
    for target in &targets {
        match &target.session {
            Ok(session) => {
                let place = match session.mode().sandbox {
                    Some(_) => Place::simulated(inventory.clone(), grounds.clone()),
                    None => Place::with_inventory(inventory.clone()).sharing(&grounds),
                };
                session.host.set_place(place.in_run(gathering.clone(), target.name.clone()))
            }
            // Nobody waits at a barrier for a host that cannot run.
            Err(_) => gathering.end(&target.name),
        }
    }
    let done: Mutex<Vec<(usize, HostRun)>> = Mutex::new(Vec::with_capacity(total));
    let tell = std::io::stderr().is_terminal();
    // A thread per host; the gathering's permits keep `forks` of them acting at a time.
    std::thread::scope(|scope| {
        for (index, target) in targets.iter().enumerate() {
            let (gathering, done) = (&gathering, &done);
            scope.spawn(move || {
                gathering.acquire();
                let report = run_one(target, runbook, params);
                gathering.release();
                gathering.end(&target.name);
                let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
                if tell {
                    eprintln!("  {} done: {} ({}/{total})", target.name, report.outcome(), done.len() + 1);
                }
                done.push((index, HostRun { roles: target.roles.clone(), report }));
            });
        }
    });
    let mut runs = done.into_inner().unwrap_or_else(|e| e.into_inner());
    runs.sort_by_key(|(index, _)| *index);
    let runs: Vec<HostRun> = runs.into_iter().map(|(_, run)| run).collect();
    let mut out = crate::secret::RedactingWriter::new(std::io::stdout().lock());
    fleet::write(&mut out, format, &runs, started.elapsed())
        .map_err(|source| Error::Io { context: "cannot write the report".into(), source })?;
    if let Some(path) = save_json {
        crate::report::json::save(path, &fleet::document(&runs, started.elapsed()))?;
    }
    Ok(fleet::exit_code(&runs))
}

/// One host's run, its report kept in memory (the fleet writes it when the host is done).
fn run_one(target: &Target, runbook: &str, params: &[(String, String)]) -> Report {
    let quiet = |name: &str, source: &str, shown, mode| {
        Recorder::with_output(name, source, shown, mode, Box::new(Kept), Box::new(std::io::sink()))
    };
    let session = match &target.session {
        Ok(session) => session,
        Err(absent) => {
            let mode = Mode { host: Some(target.name.clone()), ..Mode::default() };
            let mut recorder = quiet(runbook, runbook, Default::default(), mode);
            recorder.record(&absent.check, Outcome::Fail, &absent.why, None, None);
            return recorder.finish(crate::report::End::Completed);
        }
    };
    let result = session.compile(runbook).and_then(|c| session.run_recorded(&c, params, quiet));
    match result {
        Ok(report) => report,
        // Compiled and bound once already: what fails here is this host's own (its catalog).
        Err(e) => {
            let recorder = quiet(runbook, runbook, Default::default(), session.mode().clone());
            recorder.finish(crate::report::End::ScriptError(e.to_string()))
        }
    }
}

/// Writes nothing while the run goes on: the fleet prints each host's report when it is done.
struct Kept;

impl Formatter for Kept {
    fn finish(&mut self, _out: &mut dyn std::io::Write, _report: &Report) -> std::io::Result<()> {
        Ok(())
    }

    fn shows_logs(&self) -> bool {
        // Kept in the report, shown with the host's section: not interleaved on stderr.
        true
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
    let config = Config::load(&Sources { explicit: global.config.clone(), user_scope: global.user })?;
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
                session: Ok(Session::new(h.config.clone(), h.world.clone(), catalog.clone(), mode)),
            }
        })
        .collect();
    Ok((targets, inventory, sandbox))
}

/// Only the targets `--host NAME` or `--hosts PATTERN` select, by name or role (the sandbox's
/// simulated fleet: `server`, `c1`…); all of them when neither is given.
pub fn select(targets: Vec<Target>, host: Option<&str>, hosts: Option<&str>) -> Result<Vec<Target>, Error> {
    use crate::inventory::pattern::{Matcher, Pattern};
    let Some(text) = host.or(hosts) else { return Ok(targets) };
    let pattern = Pattern::parse(text).map_err(|m| Error::Usage(format!("host pattern: {m}")))?;
    let chosen = pattern.evaluate(|m| -> Result<std::collections::BTreeSet<usize>, Error> {
        let hit = |t: &Target| match m {
            Matcher::All => true,
            Matcher::Name(n) => {
                &t.name == n || t.roles.iter().any(|r| crate::inventory::Role::parse(n).is_some_and(|p| p.name() == r))
            }
            other => other.matches(&t.name),
        };
        Ok(targets.iter().enumerate().filter(|(_, t)| hit(t)).map(|(i, _)| i).collect())
    })?;
    if chosen.is_empty() {
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        return Err(Error::Usage(format!("`{text}` selects no host of the fleet ({})", names.join(", "))));
    }
    Ok(targets.into_iter().enumerate().filter(|(i, _)| chosen.contains(i)).map(|(_, t)| t).collect())
}

/// The targets an inventory selection names: this machine for a local host, the host's world
/// over one shared ssh connection (connected in parallel) for a remote one.
pub fn inventory_targets(global: &GlobalOptions, hosts: &[&crate::inventory::Host]) -> Vec<Target> {
    let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
    std::thread::scope(|scope| {
        let tasks: Vec<_> = hosts
            .iter()
            .map(|h| {
                let catalog = catalog.clone();
                scope.spawn(move || {
                    let mode = Mode { dry_run: global.dry_run, sandbox: None, host: Some(h.name.clone()) };
                    let roles = h.roles.iter().map(|r| r.value.name().to_string()).collect();
                    // A value the inventory could not resolve is this host's failure, not the run's.
                    let session = match h.problems.first() {
                        Some(p) => Err(Absent {
                            check: format!("{} resolved from the inventory", h.name),
                            why: format!("`{}` ({}) cannot be resolved: {}", p.var, p.from, p.reason),
                        }),
                        None => crate::connect::open(h)
                            .map(|(config, world)| Session::new(config, world, catalog, mode))
                            .map_err(|why| Absent::unreachable(&h.name, why)),
                    };
                    Target { name: h.name.clone(), roles, session }
                })
            })
            .collect();
        tasks.into_iter().map(|t| t.join().expect("a host's connection thread panicked")).collect()
    })
}

/// The session of one inventory host (the REPL's `--host`); an unreachable host is an error.
pub fn host_session(global: &GlobalOptions, host: &crate::inventory::Host) -> Result<Session, Error> {
    let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
    let (config, world) = crate::connect::open(host).map_err(Error::Usage)?;
    let mode = Mode { dry_run: global.dry_run, sandbox: None, host: Some(host.name.clone()) };
    Ok(Session::new(config, world, catalog, mode))
}
