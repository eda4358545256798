//! `Context`: what verbs act with — the configuration and world of the ground they act on,
//! the dry-run and watch-only policies, the cancellation flag, the tokio runtime async work runs
//! on, and the recorder of the current run — and how a verb finds it: the engine running the
//! call carries it as its tag (`context(&call)`), so the verbs' modules, built once for the
//! process, capture no host.
//!
//! Rhai is synchronous and the host is tokio: a host function calls `Context::block_on` from the
//! script thread (never from inside the runtime), which races the work against cancellation.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rhai::{Dynamic, NativeCallContext};

use super::ground::Ground;
use super::place::{self, Place};
use super::result::{VerbResult, fail, interrupted};
use crate::catalog::Catalog;
use opsbook_base::Cancel;
use opsbook_base::config::Config;
use opsbook_base::report::{Level, Outcome, Recorder};
use opsbook_world::World;

/// What verbs act with: the context of a run (see ARCHITECTURE.md, "context").
pub struct Context {
    /// What unit, journal, command, file and endpoint calls act on now.
    ground: Mutex<Ground>,
    /// Changing verbs say what they would do instead (`--dry-run`).
    pub dry_run: bool,
    /// The run's cancellation (Ctrl-C, a timeout).
    pub cancel: Cancel,
    http: OnceLock<Result<Arc<opsbook_world::Http>, String>>,
    recorder: Mutex<Option<Recorder>>,
    /// `--set` overrides, already checked against the runbook's declared parameters.
    params: Mutex<BTreeMap<String, Dynamic>>,
    /// Set by `opsbook serve` for jobs that only watch: a mutating call is refused.
    watch_only: AtomicBool,
    /// What a watch-only run tried to change, if anything.
    refused: Mutex<Option<String>>,
    /// The inventory runbooks see and the fleet run this host is part of (`fleet.rs`).
    pub(super) place: Mutex<Place>,
    /// What this context's runs lock hosts for, the locks they hold (`crate::locking`).
    pub(crate) locking: Mutex<Locking>,
    /// The runbook said its change is in place (`fleet::change_in_place()`): what follows only
    /// verifies it. A rollout reads it when the host is lost during the change.
    in_place: AtomicBool,
    /// Invocation IDs of units' runs the journal was seen holding lines of: a run that logged
    /// keeps them, so a later read of the same run needs no look first (`journal::by_level`).
    logged_runs: Mutex<std::collections::HashSet<String>>,
}

impl Context {
    /// A context acting on `world` with `config`.
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
            place: place::nowhere(),
            locking: Mutex::default(),
            in_place: AtomicBool::new(false),
            logged_runs: Mutex::default(),
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

    /// Whether the journal was seen holding lines of the unit run `invocation` (`saw_logged`).
    pub(crate) fn seen_logged(&self, invocation: &str) -> bool {
        self.logged_runs.lock().unwrap_or_else(|e| e.into_inner()).contains(invocation)
    }

    /// Notes that the journal holds lines of the unit run `invocation`: a fact that stays true.
    pub(crate) fn saw_logged(&self, invocation: &str) {
        self.logged_runs.lock().unwrap_or_else(|e| e.into_inner()).insert(invocation.to_string());
    }

    /// `config` as scripts see it, for the ground acted on now.
    pub(crate) fn config_view(&self) -> Dynamic {
        let ground = self.ground();
        ground.view.get_or_init(|| super::config_view::of(&ground.config)).clone()
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

    /// The process's runtime (`opsbook_base::shared_runtime`): every host of a fleet run drives its
    /// I/O through the same two workers, rather than threads of its own.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        opsbook_base::shared_runtime()
    }

    /// The run's HTTP client, built on first use.
    pub fn http(&self) -> VerbResult<Arc<opsbook_world::Http>> {
        self.http.get_or_init(|| opsbook_world::Http::new(&self.config()).map(Arc::new)).clone().map_err(fail)
    }

    /// Sends one request from the script thread: the response, or the reason there is none
    /// (an answer larger than `http.max_body` is one: it was not read). An endpoint forwarded
    /// to the ground's host is reached through its socket.
    pub fn send(&self, request: opsbook_world::Request<'_>) -> VerbResult<Result<opsbook_world::Response, String>> {
        Ok(self.send_answer(request)?.and_then(|r| match r.too_large {
            Some(why) => Err(why),
            None => Ok(r),
        }))
    }

    /// As `send`, but an answer larger than `http.max_body` comes back as a response (its
    /// status and headers, `too_large` saying why its body is empty).
    pub fn send_answer(
        &self,
        request: opsbook_world::Request<'_>,
    ) -> VerbResult<Result<opsbook_world::Response, String>> {
        let http = self.http()?;
        let world = self.world();
        if let Some(refused) = world.endpoints.refusal(&request.url) {
            return Ok(Err(refused));
        }
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
        // Work that blocks this thread (a remote command's session) looks at the same cancel.
        self.cancel.watch_here(|| {
            self.runtime().block_on(async move {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => Err(interrupted()),
                    value = make() => Ok(value),
                }
            })
        })
    }

    /// Sets the recorder of the run's checks, giving back the one before.
    pub fn set_recorder(&self, recorder: Option<Recorder>) -> Option<Recorder> {
        std::mem::replace(&mut *self.recorder.lock().unwrap_or_else(|e| e.into_inner()), recorder)
    }

    /// Takes the run's recorder (with its checks) out.
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
            opsbook_base::say!("{} {name}{detail}", outcome.as_str());
        }
    }

    /// Failed checks recorded so far in this run.
    pub fn failed_checks(&self) -> usize {
        self.with_recorder(|r| r.summary().failed).unwrap_or(0)
    }

    /// Starts a section of the report (printed when no run is recorded).
    pub fn section(&self, name: &str) {
        if self.with_recorder(|r| r.section(name)).is_none() {
            opsbook_base::say!("== {}", opsbook_base::escaped(name));
        }
    }

    /// Adds a log line to the report (printed when no run is recorded).
    pub fn log(&self, level: Level, message: &str) {
        // Without a report (the REPL), the line goes to the terminal as the report would show it.
        if self.with_recorder(|r| r.log(level, message)).is_none() {
            opsbook_base::say!("{}", opsbook_base::escaped(message));
        }
    }

    /// Runs an invocation through the world's commands (this machine, or the host over ssh);
    /// `Err` inside when it could not start. Raced against cancellation like all host work.
    pub fn run_command(
        &self,
        invocation: opsbook_world::Invocation,
    ) -> VerbResult<Result<opsbook_world::Completed, String>> {
        let commands = self.world().commands.clone();
        self.block_on(|| async move { commands.run(&invocation).await })
    }

    /// The host name of the machine this run acts on: the world's, else this machine's.
    pub fn hostname(&self) -> String {
        self.world().hostname.unwrap_or_else(opsbook_world::this_machine)
    }

    /// Under `--dry-run`, records `would …` and returns true: the caller must not act.
    ///
    /// Every mutating host call passes here, so this is also where a watch-only run (a serve
    /// job without `mutating = true`) is stopped: the action is not carried out, the refusal
    /// is logged and kept (`take_refusal`), and the run is interrupted at its next step.
    ///
    /// And a change about to happen holds the host's change lock (`crate::locking`): taken here
    /// when the run did not take it before it began (the REPL, a runbook that does not declare
    /// it changes); a lock another run holds stops the run the same way, before the change.
    pub fn plan(&self, action: &str) -> bool {
        if !self.dry_run && !self.watch_only.load(Ordering::SeqCst) && !self.hold_change_lock_before(action) {
            return true;
        }
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

    /// Marks the run's change as in place (`fleet::change_in_place()`).
    pub fn mark_in_place(&self) {
        self.in_place.store(true, Ordering::SeqCst);
    }

    /// Whether a run said its change was in place since the last asking, cleared by asking.
    pub fn take_in_place(&self) -> bool {
        self.in_place.swap(false, Ordering::SeqCst)
    }

    /// The refusal of the last watch-only run, cleared by reading it.
    pub fn take_refusal(&self) -> Option<String> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Sets the runbook's parameters, already checked against its declarations.
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
pub(crate) struct EngineTag {
    pub(crate) context: Arc<Context>,
    pub(crate) catalog: Arc<Catalog>,
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

/// Where this host stands among others (`place.rs`), as the runner sets it.
impl Context {
    pub(super) fn place(&self) -> std::sync::MutexGuard<'_, Place> {
        self.place.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The inventory `inventory::` and `fleet::` see, read on the first call (once, whoever
    /// asks first: a runbook or the command around it), or why there is none.
    pub fn inventory(&self) -> Result<Arc<opsbook_inventory::Inventory>, String> {
        self.place().inventory()
    }

    /// Sets what `inventory::` and `fleet::` see for the runs that follow.
    pub fn set_place(&self, place: Place) {
        *self.place() = place;
    }
}

/// What a context's runs lock hosts for, and the locks they hold (taken and let go by
/// `crate::locking`).
#[derive(Default)]
pub(crate) struct Locking {
    /// The runbook and component the records name.
    pub(crate) runbook: String,
    pub(crate) component: String,
    /// How long a run waits for a lock another run holds (`--lock-timeout`; zero: it refuses).
    pub(crate) wait: std::time::Duration,
    /// The locks this context took, in order.
    pub(crate) held: Vec<std::sync::Arc<opsbook_world::change_lock::HostLock>>,
    /// The locks it let go of, the hosts' word not read yet (`Context::confirm_releases`).
    pub(crate) letting_go: Vec<std::sync::Arc<opsbook_world::change_lock::HostLock>>,
    /// The lock that stopped the run, if one did.
    pub(crate) refused: Option<opsbook_world::change_lock::LockError>,
}
