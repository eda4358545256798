//! The four twin components as the simulated units run them: starting a unit binds its
//! loopback port and serves (through `opsbook_twin::serve`, as `opsbook twin` does) (so a stopped server's port refuses connections, as a real one
//! does), stopping it closes the port. Each component re-reads its configuration file at
//! start, as the real process would; its log lines go to the sandbox journal under its unit.
//! Faults that belong to a process (fail at start, slow to listen, not writing, reload
//! failing) are applied here on every start.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use super::journal::MemJournal;
use super::units::Component;
use opsbook_twin::agent::{self, Agent};
use opsbook_twin::log_store::LogStore;
use opsbook_twin::logger::{Level, Sink};
use opsbook_twin::metrics_db::MetricsDb;
use opsbook_twin::shipper::{self, Shipper};
use opsbook_twin::{Shutdown, logger};
use opsbook_world::BoxFuture;
use opsbook_world::journal::Journal;

/// A component's log sink: its lines in the sandbox journal, under its unit and current PID.
pub(crate) struct Voice {
    journal: Arc<MemJournal>,
    unit: String,
    identifier: String,
    pid: Arc<AtomicU32>,
}

impl Voice {
    pub(crate) fn new(journal: &Arc<MemJournal>, unit: &str, identifier: &str) -> Voice {
        Voice {
            journal: journal.clone(),
            unit: unit.to_string(),
            identifier: identifier.to_string(),
            pid: Arc::default(),
        }
    }

    /// The sink a twin logs through. Every line is filed at priority info, whatever its
    /// level: the real components write plain lines to stdout, which journald files at info
    /// (the level is only in the text), and the sandbox's journal holds what the real one would.
    pub(crate) fn sink(&self) -> Sink {
        let (journal, unit, identifier, pid) =
            (self.journal.clone(), self.unit.clone(), self.identifier.clone(), self.pid.clone());
        Arc::new(move |_level: Level, line: &str| {
            journal.append(&unit, &identifier, pid.load(Ordering::Relaxed), Level::Info.priority(), line)
        })
    }
}

/// The running task of a component, stopped through its shutdown signal.
#[derive(Default)]
struct Running(Mutex<Option<(Shutdown, JoinHandle<()>)>>);

impl Running {
    fn spawn<F, Fut>(&self, runtime: &Handle, run: F)
    where
        F: FnOnce(Shutdown) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shutdown = Shutdown::new();
        let task = runtime.spawn(run(shutdown.clone()));
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((shutdown, task));
    }

    /// Signals the task and waits for it (a graceful stop), at most 5 s, then aborts it.
    async fn stop(&self) {
        let Some((shutdown, mut task)) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
        shutdown.trigger();
        if tokio::time::timeout(Duration::from_secs(5), &mut task).await.is_err() {
            task.abort();
        }
    }
}

/// A non-blocking listener on `addr` for the sandbox runtime to adopt.
fn listen(addr: SocketAddr, what: &str) -> Result<std::net::TcpListener, String> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| format!("{what}: listen tcp {addr}: bind: {e}"))?;
    l.set_nonblocking(true).map_err(|e| format!("{what}: {e}"))?;
    Ok(l)
}

/// What every component shares: where it runs, what it says, and its process-level faults.
pub(crate) struct Common {
    pub runtime: Handle,
    pub voice: Voice,
    running: Arc<Running>,
    /// Starting fails with this line (the process exits with status 1 after printing it);
    /// `{ts}` in it becomes the time of the attempt.
    pub(crate) fail_start: Option<String>,
}

impl Common {
    pub(crate) fn new(runtime: Handle, voice: Voice, fail_start: Option<String>) -> Common {
        Common { runtime, voice, running: Arc::default(), fail_start }
    }

    fn begin(&self, pid: u32) -> Result<(), String> {
        self.voice.pid.store(pid, Ordering::Relaxed);
        match &self.fail_start {
            Some(line) => Err(line.replace("{ts}", &logger::now_rfc3339(6))),
            None => Ok(()),
        }
    }
}

/// The metrics database. A `slow_listen` delay opens the port only that long after the start,
/// as InfluxDB opens its HTTP listener after loading its engine.
pub(crate) struct MetricsDbComponent {
    pub common: Common,
    pub db: Arc<MetricsDb>,
    pub addr: SocketAddr,
    pub(crate) slow_listen: Option<Duration>,
}

impl Component for MetricsDbComponent {
    fn start(&self, pid: u32) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.common.begin(pid)?;
            let (db, addr, delay) = (self.db.clone(), self.addr, self.slow_listen);
            let early = if delay.is_none() { Some(listen(addr, "influxd")?) } else { None };
            let voice = self.common.voice.sink();
            self.common.running.spawn(&self.common.runtime, move |shutdown| async move {
                let listener = match early {
                    Some(l) => l,
                    None => {
                        let signal = shutdown.signal();
                        tokio::select! {
                            _ = tokio::time::sleep(delay.unwrap_or_default()) => {}
                            _ = signal => return,
                        }
                        match listen(addr, "influxd") {
                            Ok(l) => l,
                            Err(e) => return voice(Level::Error, &e),
                        }
                    }
                };
                if let Ok(l) = tokio::net::TcpListener::from_std(listener) {
                    let _ = opsbook_twin::serve(db, Some(l), shutdown.signal()).await;
                }
            });
            Ok(())
        })
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.common.running.stop())
    }

    fn reload(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Err("influxd has no reload".to_string()) })
    }
}

/// The log store: not ready for `ready_delay` after each start, as Loki's ingester.
pub(crate) struct LogStoreComponent {
    pub common: Common,
    pub store: Arc<LogStore>,
    pub addr: SocketAddr,
    pub ready_delay: Duration,
}

impl Component for LogStoreComponent {
    fn start(&self, pid: u32) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.common.begin(pid)?;
            let listener = listen(self.addr, "loki")?;
            self.store.delay_ready(self.ready_delay);
            let store = self.store.clone();
            self.common.running.spawn(&self.common.runtime, move |shutdown| async move {
                if let Ok(l) = tokio::net::TcpListener::from_std(listener) {
                    let _ = opsbook_twin::serve(store, Some(l), shutdown.signal()).await;
                }
            });
            Ok(())
        })
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.common.running.stop())
    }

    fn reload(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Err("loki has no reload".to_string()) })
    }
}

/// The metrics agent: a new agent from its config file at each start; SIGHUP-style reload.
pub(crate) struct AgentComponent {
    pub common: Common,
    pub config: PathBuf,
    pub not_writing: bool,
    /// The `missing-bucket` and `wrong-token` faults: what its writes carry instead.
    pub write_bucket: Option<String>,
    pub write_token: Option<String>,
    pub agent: Mutex<Option<Arc<Agent>>>,
    /// The host's `/`, under which the agent's `logfile` lands.
    pub(crate) root: PathBuf,
    /// The `reload-exits` fault: the manager told when the agent dies a second after a
    /// reload, and the unit's name.
    pub(crate) reload_exits: Option<(std::sync::Weak<super::units::SimManager>, String)>,
}

impl Component for AgentComponent {
    fn start(&self, pid: u32) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.common.begin(pid)?;
            let config = agent::config::load(&self.config).map_err(|d| {
                let first = d.first().map(|d| d.to_string()).unwrap_or_default();
                format!("E! error loading config file {}: {}", self.config.display(), first.trim_end())
            })?;
            let agent = Agent::new(config, Some(self.config.clone()), self.common.voice.sink());
            agent.faults.not_writing.store(self.not_writing, Ordering::Relaxed);
            set(&agent.faults.bucket, self.write_bucket.clone());
            set(&agent.faults.token, self.write_token.clone());
            agent.set_file_root(self.root.clone());
            *self.agent.lock().unwrap_or_else(|e| e.into_inner()) = Some(agent.clone());
            // Logged before logging is set up: in the journal even with a logfile.
            agent.say_early(Level::Info, &format!("Loading config: {}", self.config.display()));
            self.common.running.spawn(&self.common.runtime, move |shutdown| async move {
                let _ = opsbook_twin::serve(agent, None, shutdown.signal()).await;
            });
            Ok(())
        })
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.common.running.stop())
    }

    fn reload(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let agent = self.agent.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let agent = agent.ok_or_else(|| "not running".to_string())?;
            let Some((manager, unit)) = self.reload_exits.clone() else { return agent.reload_flushing().await };
            // Telegraf's unit is Type=notify without RELOADING=1: the reload "succeeds" at
            // once; the agent flushes, stops and dies a moment later (Telegraf v1.32.0).
            let error = agent.reload_broken(&self.config);
            let (running, pid) = (self.common.running.clone(), self.common.voice.pid.load(Ordering::Relaxed));
            self.common.runtime.spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                running.stop().await;
                agent.say_fatal(&error);
                if let Some(m) = manager.upgrade() {
                    m.main_process_failed(&unit, pid).await;
                }
            });
            Ok(())
        })
    }
}

/// The log shipper: follows the sandbox journal and pushes to the log store.
pub(crate) struct ShipperComponent {
    pub common: Common,
    pub config: PathBuf,
    pub journal: Arc<MemJournal>,
    pub addr: SocketAddr,
    pub reload_fails: bool,
    /// The `push-dead` and `push-refused` faults: where its pushes go instead.
    pub push_to: Option<String>,
    pub shipper: Mutex<Option<Arc<Shipper>>>,
    /// The host's `/`: positions are kept under its `var/lib/alloy/data`, as the package's
    /// `--storage.path` puts them, so a restart resumes where the last run stopped.
    pub(crate) root: PathBuf,
}

impl ShipperComponent {
    /// The running shipper, if any.
    pub(crate) fn current(&self) -> Option<Arc<Shipper>> {
        self.shipper.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Component for ShipperComponent {
    fn start(&self, pid: u32) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.common.begin(pid)?;
            let config = shipper::config::load(&self.config).map_err(|d| {
                let first = d.first().map(|d| d.to_string()).unwrap_or_default();
                format!("Error: {}: {}", self.config.display(), first.trim_end())
            })?;
            let mut config = config;
            config.storage_path = Some(self.root.join("var/lib/alloy/data"));
            let listener = listen(self.addr, "alloy")?;
            let journal: Arc<dyn Journal> = self.journal.clone();
            let shipper = Shipper::new(config, Some(self.config.clone()), journal, self.common.voice.sink());
            shipper.faults.reload_fails.store(self.reload_fails, Ordering::Relaxed);
            set(&shipper.faults.push_to, self.push_to.clone());
            *self.shipper.lock().unwrap_or_else(|e| e.into_inner()) = Some(shipper.clone());
            let following = self.journal.followers();
            self.common.running.spawn(&self.common.runtime, move |shutdown| async move {
                if let Ok(l) = tokio::net::TcpListener::from_std(listener) {
                    let _ = opsbook_twin::serve(shipper, Some(l), shutdown.signal()).await;
                }
            });
            // Started once its pipeline follows the journal, so no line logged after the
            // start is missed (a real shipper catches up from its saved position).
            let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
            while self.journal.followers() <= following && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(())
        })
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.common.running.stop())
    }

    /// Alloy's unit reloads with SIGHUP, which always "succeeds": a failed reload only shows
    /// in the shipper's log and metrics, as with the real one.
    fn reload(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            if let Some(s) = self.current() {
                let _ = s.reload();
            }
            Ok(())
        })
    }
}

/// Sets a fault knob the twin reads on every delivery.
fn set(knob: &std::sync::RwLock<Option<String>>, value: Option<String>) {
    *knob.write().unwrap_or_else(|e| e.into_inner()) = value;
}
