//! The metrics-agent twin: a Telegraf-like agent (its version: Telegraf v1.32.0). Every
//! interval it samples the real host (`sampler`: cpu, mem, disk; `system`: load and uptime),
//! buffers the metrics and writes them as line protocol to each InfluxDB 2 output of its
//! config (`config`, a Telegraf TOML subset; `output`, the write and its refusals), logging
//! as Telegraf does (`log`: text or structured, debug and quiet, a logfile).
//!
//! - `--test` gathers once (cpu twice, half a second apart, as Telegraf does), prints each
//!   metric as `> ` + line protocol and exits without writing.
//! - A refused or failed write keeps the batch (`When writing to [URL/api/v2/write]: …`, then
//!   `[agent] Error writing to outputs.influxdb_v2: failed to send metrics to any configured
//!   server(s)`); metrics are dropped only when the buffer (`metric_buffer_limit`, 10000)
//!   overflows (`W! … Metric buffer overflow; N metrics have been dropped`), or when the
//!   database answers 400/422 (dropped with an error line). `Wrote batch of N metrics in …`
//!   is a debug line (`debug = true`).
//! - SIGHUP reloads the config; a config that no longer loads stops the agent (after its
//!   flush) with exit 1, as Telegraf does. In-process, `Agent::reload` returns the error.

use std::collections::VecDeque;
use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

pub mod config;
pub mod log;
mod output;
mod sampler;
mod system;

use self::config::AgentConfig;
use self::log::TelegrafLog;
use self::output::PLUGIN;
use crate::clock::now_ns;
use crate::logger::{self, Level, Sink};
use crate::running::{Stop, Twin};
use opsbook_base::Error;
use opsbook_wire::line_protocol::Point;
use opsbook_world::BoxFuture;
use sampler::Sampler;

/// The version the twin calls itself in logs and its User-Agent.
pub(crate) const VERSION: &str = "1.32.0";

/// Fault knobs for the sandbox.
#[derive(Debug, Default)]
pub struct AgentFaults {
    /// The agent gathers but never writes (a stuck output).
    pub not_writing: AtomicBool,
    /// Writes name this bucket instead of the configured one (one the database lacks).
    pub bucket: RwLock<Option<String>>,
    /// Writes carry this token instead of the configured one (one the database refuses).
    pub token: RwLock<Option<String>>,
}

/// A running agent's state; share it with `Arc`.
pub struct Agent {
    config: RwLock<AgentConfig>,
    path: Option<PathBuf>,
    /// The faults the sandbox sets on it.
    pub faults: AgentFaults,
    log: TelegrafLog,
    client: reqwest::Client,
    sampler: Mutex<Sampler>,
    /// Metrics waiting for the output, oldest first (Telegraf's ring buffer).
    buffer: Mutex<VecDeque<Point>>,
    /// Metrics the full buffer dropped since the last write reported them.
    dropped: AtomicU64,
    /// Writes refused in a row with 429/5xx (the back-off grows with it).
    retries: AtomicU32,
    reloaded: tokio::sync::Notify,
    /// Metrics written successfully, over all outputs.
    pub written: AtomicU64,
    /// Failed write attempts.
    pub(crate) write_errors: AtomicU64,
}

impl Agent {
    /// An agent with this config; `path` is re-read by `reload`.
    pub fn new(config: AgentConfig, path: Option<PathBuf>, log: Sink) -> Arc<Agent> {
        let settings = config.log.clone();
        Arc::new(Agent {
            config: RwLock::new(config),
            path,
            faults: AgentFaults::default(),
            log: TelegrafLog::new(log, settings),
            client: crate::http_client::http_client(&format!("Telegraf/{VERSION}")),
            sampler: Mutex::new(Sampler::new()),
            buffer: Mutex::new(VecDeque::new()),
            dropped: AtomicU64::new(0),
            retries: AtomicU32::new(0),
            reloaded: tokio::sync::Notify::new(),
            written: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
        })
    }

    /// An agent-level line (`I! Loaded inputs: …`, `E! [agent] …`), once logging is set up.
    fn say(&self, level: Level, text: &str) {
        self.log.log(level, None, text);
    }

    /// A line logged before logging is set up (`I! Loading config: …`): to stdout (the
    /// journal) even with a `logfile`.
    pub fn say_early(&self, level: Level, text: &str) {
        self.log.early(level, text);
    }

    /// The configuration it runs with now (a reload replaces it).
    pub fn config(&self) -> AgentConfig {
        self.config.read().map(|c| c.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    fn announce(&self, c: &AgentConfig) {
        self.say(Level::Info, &format!("Loaded inputs: {}", c.input_names().join(" ")));
        self.say(Level::Info, "Loaded aggregators: ");
        self.say(Level::Info, "Loaded processors: ");
        self.say(Level::Info, "Loaded outputs: influxdb_v2");
        let tags: Vec<String> = c.tags().iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.say(Level::Info, &format!("Tags enabled: {}", tags.join(" ")));
        self.say(
            Level::Info,
            &format!(
                "[agent] Config: Interval:{}, Quiet:{}, Hostname:{:?}, Flush Interval:{}",
                humantime::format_duration(c.interval),
                c.log.quiet,
                c.hostname,
                humantime::format_duration(c.flush_interval)
            ),
        );
    }

    /// Re-reads the config file; on success the next interval uses it (logging set up anew).
    /// On failure the error as Telegraf v1.32.0 words it (`loading config file … failed:
    /// …`); the caller stops the agent and logs it (`E! [telegraf] Error running agent: …`).
    pub fn reload(&self) -> Result<(), String> {
        self.say(Level::Info, "Reloading Telegraf config");
        self.load_again()
    }

    /// A reload as SIGHUP makes it (`reloadLoop`): logged, then the running agent stops,
    /// flushing what it gathered with the old configuration to the old outputs, then the file
    /// is read again. A point gathered before the signal never goes out with the new one.
    pub async fn reload_flushing(&self) -> Result<(), String> {
        self.say(Level::Info, "Reloading Telegraf config");
        self.flush().await;
        self.load_again()
    }

    fn load_again(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Err("the agent was started without a config file".into()) };
        match config::load(path) {
            Ok(c) => {
                self.log.reconfigure(c.log.clone());
                self.announce(&c);
                if let Ok(mut current) = self.config.write() {
                    *current = c;
                }
                // Telegraf makes its inputs anew on a reload: cpu usage waits for two gathers again.
                *self.sampler.lock().unwrap_or_else(|e| e.into_inner()) = Sampler::new();
                self.reloaded.notify_waiters();
                Ok(())
            }
            Err(diagnostics) => {
                let first = diagnostics.first().map(|d| d.message.clone()).unwrap_or_default();
                Err(format!("loading config file {} failed: {first}", path.display()))
            }
        }
    }

    /// Writes the `logfile` under `root` (a sandbox host's `/`).
    pub fn set_file_root(&self, root: PathBuf) {
        self.log.set_root(root);
    }

    /// A reload that finds a broken file beside `config` (the `reload-exits` fault): logs
    /// `I! Reloading Telegraf config` and returns the error the agent will die of, a
    /// misspelt option in `telegraf.d/broken.conf` as Telegraf v1.32.0 words it.
    pub fn reload_broken(&self, config: &Path) -> String {
        self.say(Level::Info, "Reloading Telegraf config");
        let broken = config.parent().unwrap_or(Path::new("/")).join("telegraf.d/broken.conf");
        format!(
            "loading config file {} failed: plugin inputs.cpu: line 2: configuration specified the fields [\"percpu_typo\"], but they were not used. This is either a typo or this config option does not exist in this version.",
            broken.display()
        )
    }

    /// The agent's last words after a failed reload, once it has stopped:
    /// `E! [telegraf] Error running agent: …` (Telegraf v1.32.0 `cmd/telegraf/telegraf.go`).
    pub fn say_fatal(&self, error: &str) {
        self.say(Level::Error, &format!("[telegraf] Error running agent: {error}"));
    }

    /// Samples the host once.
    pub(crate) fn gather(&self) -> Vec<Point> {
        let c = self.config();
        let now = now_ns();
        // Telegraf stamps metrics at the interval's precision: whole seconds here.
        let ts = if c.interval >= Duration::from_secs(1) { now / 1_000_000_000 * 1_000_000_000 } else { now };
        let mut sampler = self.sampler.lock().unwrap_or_else(|e| e.into_inner());
        match sampler.gather(&c.inputs, &c.tags(), ts) {
            Ok(points) => points,
            Err(e) => {
                self.say(Level::Error, &format!("Error in plugin: {e}"));
                Vec::new()
            }
        }
    }

    /// Adds metrics to the buffer; beyond `metric_buffer_limit` the oldest are dropped and
    /// counted (reported at the next write).
    fn buffer_add(&self, points: impl IntoIterator<Item = Point>, front: bool) {
        let limit = self.config().buffer_limit.max(1);
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        if front {
            let mut kept: VecDeque<Point> = points.into_iter().collect();
            kept.append(&mut buffer);
            *buffer = kept;
        } else {
            buffer.extend(points);
        }
        let excess = buffer.len().saturating_sub(limit);
        buffer.drain(..excess);
        self.dropped.fetch_add(excess as u64, Ordering::Relaxed);
    }

    /// Metrics waiting for the output.
    pub fn buffered(&self) -> usize {
        self.buffer.lock().map(|b| b.len()).unwrap_or(0)
    }

    /// Writes the buffer in batches of `metric_batch_size`, as Telegraf v1.32.0's
    /// `RunningOutput.Write`: a batch that fails goes back to the buffer and the flush stops.
    pub async fn flush(&self) {
        if self.faults.not_writing.load(Ordering::Relaxed) {
            return;
        }
        let c = self.config();
        loop {
            let batch: Vec<Point> = {
                let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
                let n = buffer.len().min(c.batch_size.max(1));
                buffer.drain(..n).collect()
            };
            if batch.is_empty() {
                break;
            }
            if let Err(e) = self.write_batch(&c, &batch).await {
                self.write_errors.fetch_add(1, Ordering::Relaxed);
                self.buffer_add(batch, true);
                self.say(Level::Error, &format!("[agent] Error writing to {PLUGIN}: {e}"));
                break;
            }
        }
        let fullness = format!("Buffer fullness: {} / {} metrics", self.buffered(), c.buffer_limit);
        self.log.log(Level::Debug, Some(PLUGIN), &fullness);
    }

    /// The output as the faults change it: another bucket, another token.
    fn faulted(&self, out: &config::Output) -> config::Output {
        let read = |f: &RwLock<Option<String>>| f.read().map(|v| v.clone()).unwrap_or_else(|e| e.into_inner().clone());
        let mut out = out.clone();
        if let Some(bucket) = read(&self.faults.bucket) {
            out.bucket = bucket;
        }
        if let Some(token) = read(&self.faults.token) {
            out.token = opsbook_base::secret::Secret::new(token);
        }
        out
    }

    /// One batch to every output (`writeMetrics`): the overflow warning first, then the
    /// write, then `D! Wrote batch of N metrics in …`.
    async fn write_batch(&self, c: &AgentConfig, batch: &[Point]) -> Result<(), String> {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            self.log.log(
                Level::Warn,
                Some(PLUGIN),
                &format!("Metric buffer overflow; {dropped} metrics have been dropped"),
            );
        }
        let body: String = batch.iter().map(|p| p.to_line() + "\n").collect();
        let started = Instant::now();
        for out in &c.outputs {
            let retries = self.retries.load(Ordering::Relaxed);
            let out = &self.faulted(out);
            if let Err(e) = output::write(&self.client, out, &body, retries, &self.log).await {
                self.retries.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        }
        self.retries.store(0, Ordering::Relaxed);
        self.written.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let took = crate::go_time::duration(started.elapsed());
        self.log.log(Level::Debug, Some(PLUGIN), &format!("Wrote batch of {} metrics in {took}", batch.len()));
        Ok(())
    }

    /// One interval: gather, buffer, flush.
    pub async fn tick(&self) {
        let points = self.gather();
        self.buffer_add(points, false);
        self.flush().await;
    }
}

impl Twin for Agent {
    /// The agent serves nothing: `listener` is not used.
    fn run(self: Arc<Self>, _listener: Option<TcpListener>, stop: Stop) -> BoxFuture<'static, std::io::Result<()>> {
        Box::pin(async move {
            run(self, stop).await;
            Ok(())
        })
    }
}

/// Runs the agent until `shutdown`: gathers every interval (aligned to the interval, as
/// Telegraf's round_interval does) and flushes every flush interval. As in Telegraf
/// (`agent/agent.go` gatherLoop, read at b272631) the first gather waits for the first tick,
/// and the first cpu usage comes with the second (`Sampler`).
async fn run(agent: Arc<Agent>, shutdown: Stop) {
    let c = agent.config();
    agent.say(Level::Info, &format!("Starting Telegraf {VERSION} brought to you by InfluxData the makers of InfluxDB"));
    agent.announce(&c);
    tokio::pin!(shutdown);
    let mut since_flush = Duration::ZERO;
    loop {
        let c = agent.config();
        let interval = c.interval;
        let now = now_ns() as u128;
        let step = interval.as_nanos().max(1);
        let wait = Duration::from_nanos((step - now % step) as u64);
        tokio::select! {
            _ = &mut shutdown => break,
            _ = agent.reloaded.notified() => continue,
            _ = tokio::time::sleep(wait) => {}
        }
        let points = agent.gather();
        agent.buffer_add(points, false);
        since_flush += interval;
        if since_flush >= c.flush_interval {
            since_flush = Duration::ZERO;
            agent.flush().await;
        }
    }
    // Telegraf flushes what it holds before it stops.
    agent.say(Level::Info, "[agent] Hang on, flushing any cached metrics before shutdown");
    agent.flush().await;
    agent.say(Level::Info, "[agent] Stopping running outputs");
}

fn diagnostics_text(path: &Path, diagnostics: &[opsbook_base::Diagnostic]) -> String {
    let mut text = format!("{} E! error loading config file {}:\n", logger::now_rfc3339(0), path.display());
    for d in diagnostics {
        text.push_str(&d.to_string());
    }
    text
}

fn print_diagnostics(path: &Path, diagnostics: &[opsbook_base::Diagnostic]) {
    eprint!("{}", diagnostics_text(path, diagnostics));
}

/// What `--test` prints: the exit status, stdout (`> ` + line protocol per metric) and stderr.
/// Blocks for half a second (cpu usage needs two readings).
pub fn test_output(path: &Path) -> (u8, String, String) {
    let config = match config::load(path) {
        Ok(c) => c,
        Err(d) => return (1, String::new(), diagnostics_text(path, &d)),
    };
    let mut sampler = Sampler::new();
    let tags = config.tags();
    if config.inputs.cpu.is_some() {
        // Telegraf's test mode: cpu needs two readings for usage percentages.
        let _ = sampler.gather(&config.inputs, &tags, 0);
        std::thread::sleep(Duration::from_millis(500));
    }
    let now = now_ns() / 1_000_000_000 * 1_000_000_000;
    match sampler.gather(&config.inputs, &tags, now) {
        Ok(points) => (0, points.iter().map(|p| format!("> {}\n", p.to_line())).collect(), String::new()),
        Err(e) => (1, String::new(), format!("{} E! [telegraf] Error running agent: {e}\n", logger::now_rfc3339(0))),
    }
}

/// `opsbook twin metrics-agent CONFIG --test`.
pub fn test_command(path: &Path) -> Result<u8, Error> {
    let (code, stdout, stderr) = test_output(path);
    print!("{stdout}");
    eprint!("{stderr}");
    let _ = std::io::stdout().flush();
    Ok(code)
}

/// `opsbook twin metrics-agent CONFIG [--once]`: runs until SIGINT/SIGTERM; SIGHUP reloads.
/// A reload whose file no longer loads stops the agent (it flushes first) and exits 1 with
/// `E! [telegraf] Error running agent: loading config file … failed: …`, as Telegraf v1.32.0.
pub async fn run_command(
    path: &Path,
    once: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<u8, Error> {
    // SIGHUP is a reload from the first instant on, never its default (the end of the
    // process): a reload sent while the config loads is taken once the agent runs.
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    let config = match config::load(path) {
        Ok(c) => c,
        Err(d) => {
            print_diagnostics(path, &d);
            return Ok(1);
        }
    };
    let agent = Agent::new(config, Some(path.to_path_buf()), logger::stdout());
    agent.say_early(Level::Info, &format!("Loading config: {}", path.display()));
    if once {
        crate::notify::ready();
        agent.gather();
        tokio::time::sleep(Duration::from_millis(500)).await;
        agent.tick().await;
        let failed = agent.write_errors.load(Ordering::Relaxed) > 0;
        return Ok(u8::from(failed));
    }
    let (failed_tx, mut failed_rx) = tokio::sync::mpsc::channel::<String>(1);
    let reloader = agent.clone();
    tokio::spawn(async move {
        let Ok(mut hup) = hangups else { return };
        while hup.recv().await.is_some() {
            if let Err(e) = reloader.reload_flushing().await {
                let _ = failed_tx.send(e).await;
                return;
            }
        }
    });
    // Ready once its config is read and a reload would be taken, as Telegraf tells systemd.
    crate::notify::ready();
    let reload_failed = Arc::new(Mutex::new(None::<String>));
    let failed = reload_failed.clone();
    let stop = async move {
        tokio::select! {
            _ = shutdown => {},
            e = failed_rx.recv() => *failed.lock().unwrap_or_else(|p| p.into_inner()) = e,
        }
    };
    let _ = crate::running::serve(agent.clone(), None, stop).await;
    let error = reload_failed.lock().unwrap_or_else(|p| p.into_inner()).take();
    match error {
        Some(e) => {
            agent.say_fatal(&e);
            Ok(1)
        }
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffered_metrics_survive_a_refused_write_and_are_bounded() {
        let config = config::parse(
            "t.conf",
            "[agent]\nmetric_buffer_limit = 2\n[[outputs.influxdb_v2]]\nurls = [\"http://127.0.0.1:9\"]\nbucket = \"b\"\ntimeout = \"1s\"\n[[inputs.mem]]\n",
        )
        .unwrap();
        let (sink, lines) = logger::memory();
        let agent = Agent::new(config, None, sink);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(agent.tick());
        assert_eq!(agent.buffered(), 1, "the mem point waits for the next flush");
        assert_eq!(agent.write_errors.load(Ordering::Relaxed), 1);
        rt.block_on(agent.tick());
        rt.block_on(agent.tick());
        assert_eq!(agent.buffered(), 2, "the buffer holds metric_buffer_limit at most");
        let logged: Vec<String> = lines.lock().unwrap().iter().map(|(_, t)| t.clone()).collect();
        assert!(
            logged.iter().any(|t| t.contains("E! [outputs.influxdb_v2] When writing to [http://127.0.0.1:9/api/v2/write]: Post")),
            "{logged:?}"
        );
        assert!(logged.iter().any(|t| t.ends_with(
            "E! [agent] Error writing to outputs.influxdb_v2: failed to send metrics to any configured server(s)"
        )));
        assert!(
            logged
                .iter()
                .any(|t| t.ends_with("W! [outputs.influxdb_v2] Metric buffer overflow; 1 metrics have been dropped")),
            "{logged:?}"
        );
        assert_eq!(agent.reload().unwrap_err(), "the agent was started without a config file");
    }
}
