//! The verbs: the host side of the scripting boundary, and what every verbs module is built from.
//!
//! `Context` is what verbs act with: the configuration, dry-run policy, the cancellation flag,
//! the tokio runtime that async work runs on, and the recorder of the current run. One file per
//! API area builds its functions into a module (its `module()`; `core` and `time` are global,
//! the rest namespaced: `unit::…`, `journal::…`), once for the process (`modules`): a function
//! captures no host, it finds the context of the engine running it per call (`context(&call)`,
//! kept as the engine's tag), so each host's engine gets every verb by sharing the modules.
//! `register_all` registers them and the types, so a new namespace is one new file and one line
//! in `modules`.
//!
//! Rhai is synchronous and the host is tokio: a host function calls `Context::block_on` from the
//! script thread (never from inside the runtime), which races the work against cancellation.

pub mod account;
pub mod agent;
pub mod agent_log;
pub mod agent_unit;
pub mod container;
pub mod core;
pub mod diff;
pub mod file;
pub mod firewall;
pub mod firewall_command;
pub mod firewall_ipt;
pub mod firewall_nft;
pub mod firewall_packet;
pub mod firewall_table;
pub mod fleet;
pub mod http;
pub mod influx;
pub mod influx_api;
mod influx_setup;
mod influx_write;
pub mod journal;
pub mod loki;
pub mod package;
pub mod package_install;
pub mod package_key;
pub mod package_manager;
pub mod package_repo;
pub mod prom;
pub mod shipper;
pub mod system;
pub mod template;
pub mod time;
pub mod tools;
pub mod unit;
pub mod unit_files;
pub mod values;
pub mod verb;
pub mod wait;
pub mod wireguard;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rhai::{Dynamic, Engine, EvalAltResult, Module, NativeCallContext, Position, Shared};

use crate::catalog::Catalog;
use opsbook_base::cancel::Cancel;
use opsbook_base::config::Config;
use opsbook_base::report::{Level, Outcome, Recorder};
use opsbook_world::World;

type SharedModule = Shared<Module>;

/// The result type of host functions.
pub(crate) type VerbResult<T> = Result<T, Box<EvalAltResult>>;

/// Where host calls act: a configuration and the world it describes (this machine, another
/// over ssh, a simulated one). A runbook's own host, or another for a block (`fleet::on`).
#[derive(Clone)]
pub struct Ground {
    pub config: Arc<Config>,
    pub world: World,
    /// The configuration as scripts read it (`config.…`), made on first read.
    view: Arc<OnceLock<Dynamic>>,
    /// Inside `fleet::on(NAME, …)`: NAME, which prefixes the checks recorded there.
    elsewhere: Option<String>,
}

impl Ground {
    pub fn new(config: Arc<Config>, world: World) -> Ground {
        Ground { config, world, view: Arc::default(), elsewhere: None }
    }

    /// This ground, as another host's for a block: its checks are recorded as `NAME: check`.
    pub fn elsewhere(mut self, name: &str) -> Ground {
        self.elsewhere = Some(name.to_string());
        self
    }
}

/// What verbs act with: the context of a run (see ARCHITECTURE.md, "context").
pub struct Context {
    /// What unit, journal, command, file and endpoint calls act on now.
    ground: Mutex<Ground>,
    pub dry_run: bool,
    pub cancel: Cancel,
    http: OnceLock<Result<Arc<opsbook_world::http_client::Http>, String>>,
    recorder: Mutex<Option<Recorder>>,
    /// `--set` overrides, already checked against the runbook's declared parameters.
    params: Mutex<BTreeMap<String, Dynamic>>,
    /// Set by `opsbook serve` for jobs that only watch: a mutating call is refused.
    watch_only: AtomicBool,
    /// What a watch-only run tried to change, if anything.
    refused: Mutex<Option<String>>,
    /// The inventory runbooks see and the fleet run this host is part of (`fleet.rs`).
    place: Mutex<fleet::Place>,
}

impl Context {
    pub fn new(config: Arc<Config>, world: World, dry_run: bool) -> Arc<Context> {
        Arc::new(Context {
            ground: Mutex::new(Ground::new(config, world)),
            dry_run,
            cancel: Cancel::default(),
            http: OnceLock::new(),
            recorder: Mutex::new(None),
            params: Mutex::new(BTreeMap::new()),
            watch_only: AtomicBool::new(false),
            refused: Mutex::new(None),
            place: fleet::nowhere(),
        })
    }

    /// The configuration calls act with now (the host's, or another's inside `fleet::on`).
    pub fn config(&self) -> Arc<Config> {
        self.ground().config.clone()
    }

    /// The world calls act on now (the host's, or another's inside `fleet::on`).
    pub fn world(&self) -> World {
        self.ground().world.clone()
    }

    /// `config` as scripts see it, for the ground acted on now.
    pub(crate) fn config_view(&self) -> Dynamic {
        let ground = self.ground();
        let view = ground.view.get_or_init(|| {
            let view: Dynamic = rhai::serde::to_dynamic(ground.config.script_view()).unwrap_or_default();
            view.into_read_only()
        });
        view.clone()
    }

    /// Where calls act now.
    pub fn ground(&self) -> Ground {
        self.ground.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes host calls act on `ground` from now on (the REPL's `:host NAME`).
    pub fn move_to(&self, ground: Ground) {
        *self.ground.lock().unwrap_or_else(|e| e.into_inner()) = ground;
    }

    /// Runs `f` with host calls acting on `ground`, then on this host's own again (also when
    /// `f` fails).
    pub(crate) fn acting_on<R>(&self, ground: Ground, f: impl FnOnce() -> R) -> R {
        let previous = std::mem::replace(&mut *self.ground.lock().unwrap_or_else(|e| e.into_inner()), ground);
        struct Restore<'a>(&'a Context, Option<Ground>);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                if let Some(ground) = self.1.take() {
                    *self.0.ground.lock().unwrap_or_else(|e| e.into_inner()) = ground;
                }
            }
        }
        let _restore = Restore(self, Some(previous));
        f()
    }

    /// The process's runtime (`opsbook_base::runtime`): every host of a fleet run drives its
    /// I/O through the same two workers, rather than threads of its own.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        opsbook_base::runtime::shared()
    }

    /// The run's HTTP client, built on first use.
    pub fn http(&self) -> VerbResult<Arc<opsbook_world::http_client::Http>> {
        self.http
            .get_or_init(|| opsbook_world::http_client::Http::new(&self.config()).map(Arc::new))
            .clone()
            .map_err(fail)
    }

    /// Sends one request from the script thread: the response, or the reason there is none
    /// (an answer larger than `http.max_body` is one: it was not read). An endpoint forwarded
    /// to the ground's host is reached through its socket.
    pub fn send(
        &self,
        request: opsbook_world::http_client::Request<'_>,
    ) -> VerbResult<Result<opsbook_world::http_client::Response, String>> {
        Ok(self.send_answer(request)?.and_then(|r| match r.too_large {
            Some(why) => Err(why),
            None => Ok(r),
        }))
    }

    /// As `send`, but an answer larger than `http.max_body` comes back as a response (its
    /// status and headers, `too_large` saying why its body is empty).
    pub fn send_answer(
        &self,
        request: opsbook_world::http_client::Request<'_>,
    ) -> VerbResult<Result<opsbook_world::http_client::Response, String>> {
        let http = self.http()?;
        let world = self.world();
        let through = world.endpoints.socket_for(&request.url);
        let request = request.through(through);
        self.block_on(|| async move { http.send(request).await })
    }

    /// Runs async work from the script thread, racing it against cancellation.
    /// The future is made inside the runtime, so timers and sockets find their reactor.
    pub fn block_on<F, Fut, T>(&self, make: F) -> VerbResult<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let cancel = self.cancel.clone();
        self.runtime().block_on(async move {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(interrupted()),
                value = make() => Ok(value),
            }
        })
    }

    pub fn set_recorder(&self, recorder: Option<Recorder>) -> Option<Recorder> {
        std::mem::replace(&mut *self.recorder.lock().unwrap_or_else(|e| e.into_inner()), recorder)
    }

    pub fn take_recorder(&self) -> Option<Recorder> {
        self.set_recorder(None)
    }

    fn with_recorder<R>(&self, f: impl FnOnce(&mut Recorder) -> R) -> Option<R> {
        self.recorder.lock().unwrap_or_else(|e| e.into_inner()).as_mut().map(f)
    }

    /// Adds a check record (or prints it when no run is being recorded, as in the REPL).
    pub fn record(&self, name: &str, outcome: Outcome, detail: &str, expected: Option<String>, actual: Option<String>) {
        let elsewhere = self.ground.lock().unwrap_or_else(|e| e.into_inner()).elsewhere.clone();
        let named;
        let name = match elsewhere {
            Some(host) => {
                named = format!("{host}: {name}");
                named.as_str()
            }
            None => name,
        };
        let done = self.with_recorder(|r| r.record(name, outcome, detail, expected.clone(), actual.clone()));
        if done.is_none() {
            let detail = if detail.is_empty() { String::new() } else { format!(" — {detail}") };
            eprintln!("{} {name}{detail}", outcome.as_str());
        }
    }

    /// Failed checks recorded so far in this run.
    pub fn failed_checks(&self) -> usize {
        self.with_recorder(|r| r.summary().failed).unwrap_or(0)
    }

    pub fn section(&self, name: &str) {
        if self.with_recorder(|r| r.section(name)).is_none() {
            eprintln!("== {name}");
        }
    }

    pub fn log(&self, level: Level, message: &str) {
        if self.with_recorder(|r| r.log(level, message)).is_none() {
            let message = opsbook_base::secret::redact(message);
            eprintln!("{message}");
        }
    }

    /// Runs an invocation through the world's commands (this machine, or the host over ssh);
    /// `Err` inside when it could not start. Raced against cancellation like all host work.
    pub fn run_command(
        &self,
        invocation: opsbook_world::commands::Invocation,
    ) -> VerbResult<Result<opsbook_world::commands::Completed, String>> {
        let commands = self.world().commands.clone();
        self.block_on(|| async move { commands.run(&invocation).await })
    }

    /// The host name of the machine this run acts on: the world's, else this machine's.
    pub fn hostname(&self) -> String {
        self.world().hostname.unwrap_or_else(core::hostname)
    }

    /// Under `--dry-run`, records `would …` and returns true: the caller must not act.
    ///
    /// Every mutating host call passes here, so this is also where a watch-only run (a serve
    /// job without `mutating = true`) is stopped: the action is not carried out, the refusal
    /// is logged and kept (`take_refusal`), and the run is interrupted at its next step.
    pub fn plan(&self, action: &str) -> bool {
        if self.watch_only.load(Ordering::SeqCst) {
            let message = format!(
                "refused to {action}: this job only watches the stack (add `mutating = true` to the job to allow changes)"
            );
            self.log(Level::Warn, &message);
            self.refused.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(message);
            self.cancel.cancel();
            return true;
        }
        if self.dry_run {
            self.log(Level::Plan, &format!("would {action}"));
        }
        self.dry_run
    }

    /// Makes every mutating call of later runs a refusal (`plan`), or allows them again.
    pub fn set_watch_only(&self, on: bool) {
        self.watch_only.store(on, Ordering::SeqCst);
    }

    /// The refusal of the last watch-only run, cleared by reading it.
    pub fn take_refusal(&self) -> Option<String> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub fn set_params(&self, params: BTreeMap<String, Dynamic>) {
        *self.params.lock().unwrap_or_else(|e| e.into_inner()) = params;
    }

    pub(crate) fn param_override(&self, name: &str) -> Option<Dynamic> {
        self.params.lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }
}

/// What an engine's verbs act with, kept as the engine's tag (`Engine::set_default_tag`): its
/// host's context and the catalog templates are found on. The verbs' modules are built once
/// for the process and capture neither; each call finds them here (`context`, `catalog`).
#[derive(Clone)]
struct EngineTag {
    context: Arc<Context>,
    catalog: Arc<Catalog>,
}

/// The context the engine running this call acts with.
pub(crate) fn context(call: &NativeCallContext) -> Arc<Context> {
    engine_tag(call).context.clone()
}

/// The catalog of the engine running this call.
pub(crate) fn catalog(call: &NativeCallContext) -> Arc<Catalog> {
    engine_tag(call).catalog.clone()
}

fn engine_tag<'a>(call: &'a NativeCallContext) -> rhai::DynamicReadLock<'a, EngineTag> {
    call.tag()
        .and_then(|tag| tag.read_lock::<EngineTag>())
        .expect("the verbs are registered only by `register_all`, which tags the engine")
}

/// The global functions and the namespaces of the verbs, built once for the process (their
/// functions find the context per call), in the order they are registered.
struct Modules {
    global: Vec<SharedModule>,
    namespaces: Vec<(&'static str, SharedModule)>,
}

/// Builds the verbs' modules now (`engine::prepare_in_background`).
pub(crate) fn prepare() {
    modules();
}

fn modules() -> &'static Modules {
    static MODULES: OnceLock<Modules> = OnceLock::new();
    MODULES.get_or_init(|| {
        // One `unit::` namespace from two files: jobs and states, and unit file installation.
        let mut units = unit::module();
        unit_files::add(&mut units);
        // One `influx::` namespace: reading (influx.rs, influx_setup.rs) and the round trip's
        // writes (influx_write.rs, built on influx.rs's requests).
        let mut influx = influx::module();
        influx_write::add(&mut influx);
        let namespaces = vec![
            ("wait", wait::module()),
            ("unit", units),
            ("journal", journal::module()),
            ("host", system::module()),
            ("agent", agent::module()),
            ("shipper", shipper::module()),
            ("container", container::module()),
            ("http", http::module()),
            ("influx", influx),
            ("loki", loki::module()),
            ("prom", prom::module()),
            ("firewall", firewall::module()),
            ("inventory", fleet::inventory_module()),
            ("fleet", fleet::fleet_module()),
            ("file", file::module()),
            ("template", template::module()),
            ("account", account::module()),
            ("pkg", package::module()),
        ];
        Modules {
            global: vec![shared(core::module(), None), shared(time::module(), None)],
            namespaces: namespaces.into_iter().map(|(name, m)| (name, shared(m, Some(name)))).collect(),
        }
    })
}

/// A module ready to be registered into any number of engines without being copied: indexed,
/// and named when it is a namespace.
fn shared(mut module: Module, name: Option<&str>) -> SharedModule {
    if let Some(name) = name {
        module.set_id(name);
    }
    module.build_index();
    module.into()
}

/// Registers every verbs module's functions and types into `engine`, acting with `cx`;
/// templates are found on `catalog`'s search path.
pub(crate) fn register_all(engine: &mut Engine, cx: &Arc<Context>, catalog: &Arc<Catalog>) {
    engine.set_default_tag(Dynamic::from(EngineTag { context: cx.clone(), catalog: catalog.clone() }));
    let modules = modules();
    for module in &modules.global {
        engine.register_global_module(module.clone());
    }
    for (name, module) in &modules.namespaces {
        engine.register_static_module(name, module.clone());
    }
    unit::register_types(engine);
    prom::register_types(engine);
}

/// A runtime error raised by a host function: the run aborts with this message.
pub fn fail(message: impl Into<String>) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(message.into()), Position::NONE))
}

/// What `exit(code)` unwinds a script with: not an error, a stop with the run's exit status.
#[derive(Debug, Clone, Copy)]
pub struct Stop(pub u8);

/// The unwinding `exit(code)` starts: like an interruption, no `catch` stops it.
pub fn stop(code: u8) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorTerminated(Dynamic::from(Stop(code)), Position::NONE))
}

/// The error that unwinds a script when the operator interrupts it.
pub fn interrupted() -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorTerminated(Dynamic::from("interrupted"), Position::NONE))
}

/// Registers one verb into a module, with everything it says of itself: its name, its effect
/// (`Reads` or `Changes`, see `verb::Effect`), its parameters with their types ending with the
/// return type (as `opsbook fns` and editor definitions show them), its doc, an example call
/// (run by the tests), and the function.
#[macro_export]
macro_rules! register {
    ($module:expr, $name:expr, $effect:ident, [$($param:expr),* $(,)?], $doc:expr, $example:expr, $func:expr) => {
        rhai::FuncRegistration::new($name)
            .with_params_info([$($param),*])
            .with_comments([
                $doc.to_string(),
                $crate::verbs::verb::Effect::$effect.doc_line(),
                $crate::verbs::verb::example_line(&$example),
            ])
            .set_into_module($module, $func)
    };
}
