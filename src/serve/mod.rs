//! `opsbook serve`: watch the stack all the time and serve the results.
//!
//! Runs chosen runbooks on a schedule (`scheduler`), on this machine or, for a job with
//! `hosts`, on the inventory hosts it selects, reached over ssh for each run (`remote`);
//! keeps every run in the history (`crate::history`) and in memory (`state`), and answers
//! over HTTP (`http`): health and readiness, Prometheus metrics (`metrics`), the runs as
//! JSON reports, and a status page (`page`). Jobs only watch: a runbook that would change
//! the stack is refused when the jobs are loaded (`scan`) and, should one slip through, at
//! its first mutating call (the host's watch-only flag, on every host), unless the job says
//! `mutating = true`.
//!
//! SIGHUP re-reads the configuration, the inventory and the runbooks (running jobs finish
//! first); SIGTERM or Ctrl-C lets running jobs finish within `serve.stop_timeout`, then
//! interrupts them and exits.

mod capture;
mod http;
mod idle;
mod job_run;
mod metrics;
pub(crate) mod page;
mod remote;
pub(crate) mod scan;
mod scheduler;
mod state;

use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::{GlobalOptions, ServeArgs};
use crate::history::{History, Retention, database_path, default_state_dir, rehearsals_path};
use opsbook_base::Error;
use opsbook_base::config::serve::{Job, Serve, job_from_arg};
use opsbook_base::config::{Config, Sources};
use opsbook_base::report::Mode;
use opsbook_engine::catalog::Catalog;
use opsbook_fleet::Session;
use opsbook_inventory::Inventory;
use opsbook_sandbox::Sandbox;
use opsbook_world::World;
use scheduler::{Place, Ready, Running};
use state::State;

/// The state directory: the flag, else the configuration, else the default (refused when
/// there is none to be had).
pub(crate) fn state_dir(flag: Option<PathBuf>, settings: &Serve) -> Result<PathBuf, Error> {
    match flag.or_else(|| settings.state_dir.clone()) {
        Some(dir) => Ok(dir),
        None => default_state_dir(),
    }
}

/// The stage the jobs run on: one configuration and world for all their sessions (this
/// machine, or the sandbox's stack), and the inventory for jobs over other hosts.
struct Stage {
    config: Arc<Config>,
    world: World,
    mode: Mode,
    /// The inventory, read when a job has `hosts` (or why it cannot be read).
    inventory: Option<Result<Arc<Inventory>, String>>,
    /// The command line's options, for the sessions of jobs on other hosts.
    global: GlobalOptions,
    /// Kept alive while serving under `--sandbox`.
    _sandbox: Option<Sandbox>,
}

impl Stage {
    /// The stage `global` asks for: the sandbox's in-process stack, or this machine.
    fn open(global: &GlobalOptions, config: Config) -> Result<Stage, Error> {
        if !global.sandbox
            && let Some(spec) = global.faults.first()
        {
            return Err(Error::Usage(format!(
                "`--fault {spec}` rehearses a failure of the in-process stack: add `--sandbox`"
            )));
        }
        let (config, world, mode, sandbox) = if global.sandbox {
            let (sandbox, config) = Sandbox::start(config, &global.faults)?;
            let mode = Mode { dry_run: global.dry_run, sandbox: Some(global.faults.clone()), host: None };
            let world = sandbox.hosts[0].world.clone();
            (config, world, mode, Some(sandbox))
        } else {
            let world = World::real(&config);
            (config, world, Mode { dry_run: global.dry_run, ..Mode::default() }, None)
        };
        let config = Arc::new(config);
        Ok(Stage { config, world, mode, inventory: None, global: global.clone(), _sandbox: sandbox })
    }

    /// Reads the inventory when a job needs it (a service watching only this machine needs
    /// none, and must not fail for want of one).
    fn read_inventory(&mut self, jobs: &[Job]) {
        self.inventory = jobs.iter().any(|j| j.hosts.is_some()).then(|| {
            Inventory::load(&self.config, self.global.inventory.as_deref())
                .map(Arc::new)
                .map_err(|e| opsbook_base::secret::redact(&e.to_string()).into_owned())
        });
    }

    /// Where a job runs and on which hosts, or why it cannot.
    fn place(&self, spec: &Job) -> Result<Option<remote::Hosts>, Error> {
        let Some(pattern) = &spec.hosts else { return Ok(None) };
        if self._sandbox.is_some() {
            return Err(Error::Usage(format!(
                "`hosts = \"{pattern}\"` watches inventory hosts over ssh, and the sandbox has none\n  help: \
                 serve without `--sandbox`, or remove `hosts` to watch the sandbox's stack"
            )));
        }
        let inventory = match &self.inventory {
            Some(Ok(inventory)) => inventory,
            Some(Err(e)) => return Err(Error::Usage(format!("cannot read the inventory: {e}"))),
            None => return Err(Error::Usage("the inventory was not read".into())),
        };
        let selected = inventory.targets(None, Some(pattern))?.unwrap_or_default();
        let hosts = selected.into_iter().cloned().collect();
        Ok(Some(remote::Hosts { hosts, inventory: inventory.clone(), global: self.global.clone() }))
    }
}

fn jobs_of(args: &ServeArgs, settings: &Serve) -> Result<Vec<Job>, Error> {
    let jobs = if args.jobs.is_empty() {
        settings.jobs.clone()
    } else {
        args.jobs.iter().map(|a| job_from_arg(a)).collect::<Result<Vec<_>, _>>()?
    };
    let mut names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Usage(format!(
            "two jobs are named `{}`: give one a `name = \"…\"` in its `[[serve.job]]`",
            w[0]
        )));
    }
    Ok(jobs)
}

/// Refuses a watching job whose runbook (or a module it imports) changes the stack.
fn refuse_mutating(session: &Session, spec: &Job, compiled: &opsbook_engine::runbook::Compiled) -> Result<(), Error> {
    let found = scan::mutating_calls(session, compiled)?;
    if found.is_empty() {
        return Ok(());
    }
    let calls: Vec<String> = found.iter().map(|f| format!("`{}` at {}", f.function, f.place)).collect();
    Err(Error::Usage(format!(
        "refused: runbook `{}` changes the stack ({}), and watching must not\n  help: add `mutating = true` to \
         the job if it is meant to",
        spec.runbook,
        calls.join(", ")
    )))
}

/// A job as the endpoints see it: the job, the host, and why it cannot run.
type View = (Job, String, Option<String>);

/// Compiles and checks each job: ready to run, or the reason it cannot. A job on other
/// hosts is checked here once (the runbook is the same everywhere), and is one view per host.
fn prepare(jobs: Vec<Job>, stage: &Stage, catalog: &Arc<Catalog>, here: &str) -> (Vec<Ready>, Vec<View>) {
    let mut ready = Vec::new();
    let mut views = Vec::new();
    for spec in jobs {
        let session = Session::shared(stage.config.clone(), stage.world.clone(), catalog.clone(), stage.mode.clone());
        // A job on this machine stands where `opsbook run` would: its runbooks see the same
        // inventory (the sandbox's one host, or the configured one).
        session.stand_here(&stage.global);
        let checked = stage.place(&spec).and_then(|hosts| {
            let compiled = session.compile(&spec.runbook)?;
            if !spec.mutating {
                refuse_mutating(&session, &spec, &compiled)?;
            }
            compiled.bind(&spec.params)?;
            Ok((hosts, compiled))
        });
        match checked {
            Ok((None, compiled)) => {
                views.push((spec.clone(), here.to_string(), None));
                ready.push(Ready { spec, place: Place::Here { session: Box::new(session), compiled } });
            }
            Ok((Some(hosts), _)) => {
                views.extend(hosts.hosts.iter().map(|h| (spec.clone(), h.name.clone(), None)));
                ready.push(Ready { spec, place: Place::Hosts(hosts) });
            }
            Err(e) => {
                let text = opsbook_base::secret::redact(&e.to_string()).into_owned();
                let problem = text.strip_prefix("error: ").unwrap_or(&text).to_string();
                let host = spec.hosts.clone().unwrap_or_else(|| here.to_string());
                views.push((spec, host, Some(problem)));
            }
        }
    }
    (ready, views)
}

fn problems(views: &[View]) -> Vec<String> {
    views.iter().filter_map(|(j, _, p)| p.as_ref().map(|p| format!("job `{}` ({}): {p}", j.name, j.origin))).collect()
}

/// Runs `opsbook serve` until SIGTERM.
pub(crate) fn run(global: &GlobalOptions, args: &ServeArgs) -> Result<u8, Error> {
    let sources = global.sources();
    let config = Config::load(&sources)?;
    let mut settings = config.serve.clone();
    // Where the record goes is settled (or refused) before anything starts.
    let dir = state_dir(args.state_dir.clone(), &settings)?;
    let mut stage = Stage::open(global, config)?;
    let jobs = jobs_of(args, &settings)?;
    stage.read_inventory(&jobs);
    if jobs.is_empty() {
        return Err(Error::Usage(
            "nothing to watch: give jobs as RUNBOOK@INTERVAL (`opsbook serve quick-check@1m`) or as \
             `[[serve.job]]` tables in the configuration"
                .into(),
        ));
    }
    let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
    // A rehearsal is recorded under a name that says so, in a database of its own.
    let here = match global.sandbox {
        true => format!("{} (sandbox)", opsbook_world::this_machine()),
        false => opsbook_world::this_machine(),
    };
    let (ready, views) = prepare(jobs, &stage, &catalog, &here);
    let refused = problems(&views);
    if !refused.is_empty() {
        return Err(Error::Usage(refused.join("\n")));
    }

    let path = if global.sandbox { rehearsals_path(&dir) } else { database_path(&dir) };
    let (history, opened) = History::open(path.clone());
    let retention = Retention { age: settings.retention, runs_per_job: settings.retention_runs };
    let state = Arc::new(State::new(history, opened, retention, here.clone()));
    state.set_jobs(views);

    let listen = args.listen.clone().unwrap_or_else(|| settings.listen.clone());
    let (runtime, server, address) = listen_and_serve(&listen, &state)?;
    let n = ready.len();
    opsbook_base::say!(
        "opsbook serve: listening on http://{address}/ ({n} job{}, history in {})",
        if n == 1 { "" } else { "s" },
        path.display()
    );
    let mut running = Running::start(ready, state.clone(), settings.parallel, settings.jitter);

    let signals = Signals::new(&runtime)?;
    loop {
        match runtime.block_on(signals.next()) {
            Signal::Reload => {
                opsbook_base::say!("opsbook serve: SIGHUP: reloading the configuration and the runbooks");
                let Some((reloaded, jobs)) = reread(&sources, args) else { continue };
                // The sandbox's configuration points at its own stack: only the jobs change.
                if stage._sandbox.is_none() {
                    stage.world = World::real(&reloaded);
                }
                settings = reloaded.serve.clone();
                if stage._sandbox.is_none() {
                    stage.config = Arc::new(reloaded);
                }
                stage.read_inventory(&jobs);
                running.finish(settings.stop_timeout);
                let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
                let (ready, views) = prepare(jobs, &stage, &catalog, &here);
                for p in problems(&views) {
                    opsbook_base::say!("opsbook serve: {p}");
                }
                state.set_jobs(views);
                running = Running::start(ready, state.clone(), settings.parallel, settings.jitter);
            }
            Signal::Stop => {
                stop(running, settings.stop_timeout, server, runtime);
                return Ok(0);
            }
        }
    }
}

/// The end of `opsbook serve` on SIGTERM or SIGINT: the running jobs get `stop_timeout` to
/// finish (those still running then are interrupted), then the HTTP server and the runtime stop.
fn stop(
    running: Running,
    stop_timeout: std::time::Duration,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    runtime: tokio::runtime::Runtime,
) {
    opsbook_base::say!(
        "opsbook serve: stopping: running jobs get {} to finish",
        humantime::format_duration(stop_timeout)
    );
    let interrupted = running.finish(stop_timeout);
    if interrupted > 0 {
        opsbook_base::say!("opsbook serve: interrupted {interrupted} job(s) still running at the deadline");
    }
    server.abort();
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
}

/// The configuration and jobs read again on SIGHUP, or `None` (said on stderr) when they
/// cannot be: the service then goes on as it was.
fn reread(sources: &Sources, args: &ServeArgs) -> Option<(Config, Vec<Job>)> {
    let reloaded = match Config::load(sources) {
        Ok(config) => config,
        Err(e) => {
            opsbook_base::say!(
                "{}\nopsbook serve: the configuration is unchanged",
                opsbook_base::secret::redact(&e.to_string())
            );
            return None;
        }
    };
    match jobs_of(args, &reloaded.serve) {
        Ok(jobs) => Some((reloaded, jobs)),
        Err(e) => {
            opsbook_base::say!("{e}\nopsbook serve: the configuration is unchanged");
            None
        }
    }
}

/// Binds `listen` and serves the pages and `/metrics` of `state` on a runtime of its own.
fn listen_and_serve(
    listen: &str,
    state: &Arc<State>,
) -> Result<(tokio::runtime::Runtime, tokio::task::JoinHandle<std::io::Result<()>>, String), Error> {
    let listener =
        std::net::TcpListener::bind(listen).and_then(|l| l.set_nonblocking(true).map(|_| l)).map_err(|e| {
            Error::Usage(format!("cannot listen on `{listen}`: {e}\n  help: pick another address with `--listen ADDR`"))
        })?;
    let address = listener.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| listen.to_string());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("opsbook-serve")
        .enable_all()
        .build()
        .map_err(|source| Error::Io { context: "cannot start the service's runtime".into(), source })?;
    let server = {
        let _context = runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|source| Error::Io { context: format!("cannot listen on `{address}`"), source })?;
        let app = http::router(state.clone());
        runtime.spawn(async move { axum::serve(idle::ClosingIdle(listener), app).await })
    };
    Ok((runtime, server, address))
}

enum Signal {
    Reload,
    Stop,
}

struct Signals {
    hup: tokio::sync::Mutex<tokio::signal::unix::Signal>,
    term: tokio::sync::Mutex<tokio::signal::unix::Signal>,
    int: tokio::sync::Mutex<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new(runtime: &tokio::runtime::Runtime) -> Result<Signals, Error> {
        use tokio::signal::unix::{SignalKind, signal};
        let _context = runtime.enter();
        let install = |kind| {
            signal(kind)
                .map(tokio::sync::Mutex::new)
                .map_err(|source| Error::Io { context: "cannot install the signal handlers".into(), source })
        };
        Ok(Signals {
            hup: install(SignalKind::hangup())?,
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
        })
    }

    async fn next(&self) -> Signal {
        let (mut hup, mut term, mut int) = (self.hup.lock().await, self.term.lock().await, self.int.lock().await);
        tokio::select! {
            _ = hup.recv() => Signal::Reload,
            _ = term.recv() => Signal::Stop,
            _ = int.recv() => Signal::Stop,
        }
    }
}
