//! A session: everything one machine's runs are made of, built once.
//!
//! The configuration, the catalog of runbooks and modules, the world the host acts on (this
//! machine, or the in-process stack of `--sandbox`), the verbs' context and the Rhai engine.
//! Every subcommand and the REPL execute against a session: `compile(name)` finds and
//! compiles a runbook, `run(compiled, params, format)` runs it into a report.
//!
//! "Which machine" is the world a session is given (`Session::new`), never a global, so a run
//! over several machines builds one session per machine from the same code.
//!
//! The session builds only what is used, when it is first used: the engine on the first
//! compile, the tokio runtime and the HTTP client on the first call that needs them (see
//! `Context`), the sandbox only for subcommands that act.

use std::sync::{Arc, OnceLock};

use rhai::{Engine, Scope};

use crate::options::GlobalOptions;
use opsbook_base::Error;
use opsbook_base::config::Config;
use opsbook_base::report::{End, Format, Mode, Recorder, Report};
use opsbook_engine::catalog::{Catalog, Kind};
use opsbook_engine::engine::{self, Class};
use opsbook_engine::runbook::{self, Compiled};
use opsbook_engine::verbs::Context;
use opsbook_engine::verbs::Place;
use opsbook_inventory::Inventory;
use opsbook_sandbox::Sandbox;
use opsbook_world::World;

/// What a subcommand needs of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Compiles and describes runbooks (`show`, `check`, `fns`): nothing runs, so the sandbox
    /// is never started and every mutating call would only be planned.
    Describe,
    /// Runs runbooks or shows the configuration they run with (`run`, `repl`, `config`):
    /// `--sandbox` starts the in-process stack, `--dry-run` plans instead of acting.
    Act,
}

/// One host's configuration, catalog, world, verbs' context and engine.
pub struct Session {
    /// The host's configuration.
    pub config: Arc<Config>,
    /// Where runbooks, modules and templates are found.
    pub catalog: Arc<Catalog>,
    /// What verbs act with on this host (its world among it).
    pub context: Arc<Context>,
    mode: Mode,
    engine: OnceLock<Engine>,
    /// Whether a run's locks are let go without waiting for the hosts' word, which the caller
    /// reads (`confirm_releases_later`).
    confirm_later: std::sync::atomic::AtomicBool,
    /// The in-process stack of `--sandbox`, alive as long as the session.
    _sandbox: Option<Sandbox>,
}

impl Session {
    /// The session the command-line options describe.
    pub fn open(global: &GlobalOptions, reach: Reach) -> Result<Session, Error> {
        let catalog = Arc::new(Catalog::new(&global.runbook_dirs));
        let config = global.load_config()?;
        if !global.sandbox
            && let Some(spec) = global.faults.first()
        {
            return Err(Error::Usage(format!(
                "`--fault {spec}` rehearses a failure of the in-process stack: add `--sandbox`"
            )));
        }
        match reach {
            Reach::Describe => {
                let world = World::real(&config);
                Ok(Session::waiting(global, config, world, catalog, Mode { dry_run: true, ..Mode::default() }))
            }
            Reach::Act if global.sandbox => {
                let (sandbox, config) = Sandbox::start(config, &global.faults)?;
                let mode = Mode { dry_run: global.dry_run, sandbox: Some(global.faults.clone()), host: None };
                let mut session = Session::waiting(global, config, sandbox.hosts[0].world.clone(), catalog, mode);
                session.stand_here(global);
                session._sandbox = Some(sandbox);
                Ok(session)
            }
            Reach::Act => {
                let world = World::real(&config);
                world.warm_up();
                let mode = Mode { dry_run: global.dry_run, ..Mode::default() };
                let session = Session::waiting(global, config, world, catalog, mode);
                session.stand_here(global);
                Ok(session)
            }
        }
    }

    /// Sets where this one-machine session stands among hosts, as `run` and `serve` both
    /// need it: under `--sandbox` the simulated host `localhost`, playing every role; on this
    /// machine the inventory, read only if a runbook asks (`inventory::hosts`: a broken
    /// inventory fails those alone).
    pub fn stand_here(&self, global: &GlobalOptions) {
        if global.sandbox {
            let roles = opsbook_inventory::Role::all().map(|r| r.name().to_string()).collect();
            let inventory = Inventory::simulated(&self.config, &[("localhost".to_string(), roles)]);
            let own = Arc::new([("localhost".to_string(), self.context.ground())].into());
            self.context.set_place(Place::simulated(Arc::new(inventory), own));
        } else {
            let (base, path) = (Config::clone(&self.config), global.inventory.clone());
            let load = move || Inventory::load(&base, path.as_deref()).map_err(|e| e.to_string());
            self.context.set_place(Place::loading(Box::new(load)));
        }
    }

    /// A session acting on `world` with `config`.
    pub fn new(config: Config, world: World, catalog: Arc<Catalog>, mode: Mode) -> Session {
        Session::shared(Arc::new(config), world, catalog, mode)
    }

    /// `new`, waiting for a change lock another run holds as `global` asks (`--lock-timeout`).
    pub fn waiting(global: &GlobalOptions, config: Config, world: World, catalog: Arc<Catalog>, mode: Mode) -> Session {
        let session = Session::new(config, world, catalog, mode);
        session.context.set_lock_wait(global.lock_timeout.unwrap_or_default());
        session
    }

    /// A session sharing a configuration with others on the same world (`opsbook serve`
    /// builds one per job, so jobs run in parallel, each with its own context and engine).
    pub fn shared(config: Arc<Config>, world: World, catalog: Arc<Catalog>, mode: Mode) -> Session {
        let context = Context::new(config.clone(), world, mode.dry_run);
        Session {
            config,
            catalog,
            context,
            mode,
            engine: OnceLock::new(),
            confirm_later: Default::default(),
            _sandbox: None,
        }
    }

    /// Names the host this session now acts on (the REPL's `:host NAME`), for prompts and
    /// report headers.
    pub fn set_host_name(&mut self, name: &str) {
        self.mode.host = Some(name.to_string());
    }

    /// How runs of this session act (dry-run, sandbox and its faults).
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The engine, built on first use.
    pub fn engine(&self) -> &Engine {
        self.engine.get_or_init(|| engine::build(&self.context, &self.catalog))
    }

    /// The engine, for the REPL, which keeps imports as static modules.
    pub fn engine_mut(&mut self) -> &mut Engine {
        self.engine();
        self.engine.get_mut().expect("built just above")
    }

    /// Forgets the engine and the modules it compiled: runbooks and stdlib are read again.
    pub fn reload(&mut self) {
        self.engine = OnceLock::new();
        self.catalog.forget_modules();
    }

    /// Finds and compiles a runbook by name.
    pub fn compile(&self, name: &str) -> Result<Compiled, Error> {
        let entry = self.catalog.find(Kind::Runbook, name)?;
        runbook::compile(self.engine(), &self.catalog, entry, None)
    }

    /// Compiles any catalog entry (a runbook or a stdlib module).
    pub fn compile_entry(&self, entry: opsbook_engine::catalog::Entry) -> Result<Compiled, Error> {
        runbook::compile(self.engine(), &self.catalog, entry, None)
    }

    /// Compiles runbook `name` for a run, or — when the run's time limit or Ctrl-C came
    /// first (`runbook::compile`'s parse is stopped by them) — the report of the run stopped
    /// there, in `format`, as a run stopped while running would end.
    pub fn compile_or_stop(&self, name: &str, format: Format) -> Result<Result<Compiled, Report>, Error> {
        let entry = self.catalog.find(Kind::Runbook, name)?;
        let stopped_at = match runbook::compile(self.engine(), &self.catalog, entry.clone(), Some(&self.context.cancel))
        {
            Err(Error::Interrupted(what)) if self.context.cancel.is_cancelled() => what,
            other => return other.map(Ok),
        };
        let recorder = Recorder::new(&entry.name, &entry.source, Default::default(), self.mode.clone(), format);
        let end = match self.context.cancel.timed_out() {
            Some(limit) => End::TimedOut(format!(
                "the run's time limit of {} passed {stopped_at}",
                humantime::format_duration(limit)
            )),
            None => End::Interrupted,
        };
        Ok(Err(recorder.finish(end)))
    }

    /// From now on, the locks a run took are let go as it ends without waiting for the hosts'
    /// word: the caller reads it (`Context::confirm_releases`) before the connection closes,
    /// for many hosts at once, when their words have come.
    pub fn confirm_releases_later(&self) {
        self.confirm_later.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Runs a compiled runbook with `--set` pairs and writes its report in `format` to stdout.
    /// A script error is printed to stderr as a diagnostic and ends the report as an error.
    pub fn run(&self, compiled: &Compiled, params: &[(String, String)], format: Format) -> Result<Report, Error> {
        self.run_recorded(compiled, params, |name, source, shown, mode| {
            Recorder::new(name, source, shown, mode, format)
        })
    }

    /// Runs a compiled runbook into the recorder `make` builds from the runbook's name, source,
    /// effective parameters and this session's mode (e.g. one writing to a buffer, for a
    /// service that keeps reports instead of printing them).
    pub fn run_recorded(
        &self,
        compiled: &Compiled,
        params: &[(String, String)],
        make: impl FnOnce(&str, &str, std::collections::BTreeMap<String, String>, Mode) -> Recorder,
    ) -> Result<Report, Error> {
        let bound = compiled.bind(params)?;
        let shown = compiled.effective_params(&bound);
        let component = shown.get("service").or_else(|| shown.get("component")).cloned().unwrap_or_default();
        self.context.set_params(bound);
        let recorder = make(&compiled.entry.name, &compiled.entry.source, shown, self.mode.clone());
        self.context.set_recorder(Some(recorder));
        // The change lock: taken now by a runbook that declares it changes the host, else at
        // its first change (`Context::plan`); the locks this run took go when it ends.
        let kept = self.context.locks_held();
        self.context.lock_for(&compiled.entry.name, &component);
        let declared = compiled.entry.changes_hosts() && !self.mode.dry_run;
        let end = match declared.then(|| self.context.hold_change_lock()).transpose() {
            Err(refused) => locked(refused),
            Ok(_) => match self.engine().run_ast_with_scope(&mut Scope::new(), &compiled.ast) {
                Ok(()) => End::Completed,
                Err(e) => self.end_of(&e, &compiled.entry.source),
            },
        };
        let end = match self.context.take_lock_refusal() {
            Some(refused) => {
                self.context.cancel.reset();
                locked(refused)
            }
            None => end,
        };
        self.context.let_go_after(kept);
        if !self.confirm_later.load(std::sync::atomic::Ordering::Relaxed) {
            self.context.confirm_releases();
        }
        self.context.set_params(Default::default());
        let recorder = self.context.take_recorder().expect("the recorder was installed above");
        Ok(recorder.finish(end))
    }

    /// What a run stopped at its time limit was doing: the runbook's line (and the module's,
    /// when it was inside one), quoted.
    fn timed_out_at(&self, limit: std::time::Duration, explained: &engine::Explained) -> String {
        let d = &explained.diagnostic;
        let quoted = self
            .catalog
            .text_of(&d.file)
            .and_then(|text| text.lines().nth(d.line.saturating_sub(1)).map(|l| l.trim().to_string()))
            .filter(|line| d.line > 0 && !line.is_empty())
            .map(|line| format!(": `{line}`"))
            .unwrap_or_default();
        let inner = format!("{}:{}:{}", d.file, d.line, d.column);
        let place = match &explained.called_at {
            Some(call) if *call != inner => format!("{call} (in {inner}{quoted})"),
            _ => format!("{inner}{quoted}"),
        };
        format!("the run's time limit of {} passed while it was at {place}", humantime::format_duration(limit))
    }

    /// How an evaluation error ends a run.
    fn end_of(&self, err: &rhai::EvalAltResult, source: &str) -> End {
        let explained = engine::explain(err, source, &self.catalog, Some(&self.context));
        match explained.class {
            Class::Interrupted => match self.context.cancel.timed_out() {
                Some(limit) => End::TimedOut(self.timed_out_at(limit, &explained)),
                None => End::Interrupted,
            },
            Class::Stopped(code) => End::Stopped { code, at: place_of(&explained) },
            Class::Aborted => {
                let d = &explained.diagnostic;
                let inner = format!("{}:{}:{}", d.file, d.line, d.column);
                // The runbook's own line first, then where a module it called threw.
                let place = match (&explained.called_at, d.line > 0) {
                    (Some(call), true) if *call != inner => format!(" (at {call}; thrown at {inner})"),
                    (Some(call), false) => format!(" (at {call})"),
                    (_, true) => format!(" (at {inner})"),
                    (None, false) => String::new(),
                };
                End::Aborted(format!("{}{place}", explained.message))
            }
            Class::Script => {
                let diagnostic = opsbook_base::secret::redact(&explained.diagnostic.to_string()).into_owned();
                opsbook_base::say_part!("{}", opsbook_base::escaped(&diagnostic));
                End::ScriptError(explained.message)
            }
        }
    }
}

/// How a run refused by another run's change lock ends (interrupted while it waited: as
/// any interruption).
fn locked(refused: opsbook_world::change_lock::LockError) -> End {
    use opsbook_world::change_lock::LockError;
    match refused {
        LockError::Interrupted => End::Interrupted,
        held @ LockError::Held { waited: None, .. } => {
            End::Locked(format!("{held}; nothing was changed\n  help: `--lock-timeout 10m` waits for it"))
        }
        other => End::Locked(format!("{other}; nothing was changed")),
    }
}

/// Where a run stopped: the runbook's own line, and the module's line when it was inside one
/// (`runbooks/r.rhai:3:4 (in stdlib/m.rhai:2:3)`).
fn place_of(explained: &engine::Explained) -> String {
    let d = &explained.diagnostic;
    let inner = format!("{}:{}:{}", d.file, d.line, d.column);
    match &explained.called_at {
        Some(call) if *call != inner => format!("{call} (in {inner})"),
        _ => inner,
    }
}
