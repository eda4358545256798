//! The metrics-agent twin: a Telegraf-like agent. Every interval it samples the real host
//! (`sampler`: cpu, mem, disk; `system`: load and uptime), and writes the metrics as line protocol to each InfluxDB 2
//! output of its config (`config`, a Telegraf TOML subset) with its token; it logs each flush
//! in Telegraf's words (`Wrote batch of N metrics in …`) and each failure
//! (`E! [outputs.influxdb_v2] When writing to …`).
//!
//! - `--test` gathers once (cpu twice, half a second apart, as Telegraf does), prints each
//!   metric as `> ` + line protocol and exits without writing.
//! - SIGHUP reloads the config; a config that no longer loads stops the agent with exit 1,
//!   as Telegraf does. In-process, `Agent::reload` returns the diagnostics instead.
//! - Metrics that could not be written stay buffered (up to 10,000) and go with the next
//!   flush; a 4xx answer other than 429 drops the batch.

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

pub mod config;
mod sampler;
mod system;

use self::config::{AgentConfig, Output};
use super::logger::{self, Level, Sink};
use super::{Stop, Twin, now_ns};
use crate::error::Error;
use crate::wire::line_protocol::Point;
use crate::world::BoxFuture;
use sampler::Sampler;

/// The version the twin calls itself in logs and its User-Agent.
pub(crate) const VERSION: &str = "1.32.0";
const BUFFER_LIMIT: usize = 10_000;

/// Fault knobs for the sandbox.
#[derive(Debug, Default)]
pub struct AgentFaults {
    /// The agent gathers but never writes (a stuck output).
    pub not_writing: AtomicBool,
}

/// A running agent's state; share it with `Arc`.
pub struct Agent {
    config: RwLock<AgentConfig>,
    path: Option<PathBuf>,
    pub faults: AgentFaults,
    log: Sink,
    client: reqwest::Client,
    sampler: Mutex<Sampler>,
    buffer: Mutex<Vec<Point>>,
    reloaded: tokio::sync::Notify,
    /// Metrics written successfully, over all outputs.
    pub written: AtomicU64,
    /// Failed write attempts.
    pub(crate) write_errors: AtomicU64,
}

impl Agent {
    /// An agent with this config; `path` is re-read by `reload`.
    pub fn new(config: AgentConfig, path: Option<PathBuf>, log: Sink) -> Arc<Agent> {
        Arc::new(Agent {
            config: RwLock::new(config),
            path,
            faults: AgentFaults::default(),
            log,
            client: super::http_client(&format!("Telegraf/{VERSION}")),
            sampler: Mutex::new(Sampler::new()),
            buffer: Mutex::new(Vec::new()),
            reloaded: tokio::sync::Notify::new(),
            written: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
        })
    }

    /// Telegraf's log line: `2026-11-22T09:00:00Z I! text`.
    fn say(&self, level: Level, text: &str) {
        let tag = match level {
            Level::Error => "E!",
            Level::Warn => "W!",
            Level::Info => "I!",
            Level::Debug => "D!",
        };
        self.say_as(level, tag, text);
    }

    fn say_as(&self, level: Level, tag: &str, text: &str) {
        (self.log)(level, &format!("{} {tag} {text}", logger::now_rfc3339(0)));
    }

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
                "[agent] Config: Interval:{}, Quiet:false, Hostname:{:?}, Flush Interval:{}",
                humantime::format_duration(c.interval),
                c.hostname,
                humantime::format_duration(c.flush_interval)
            ),
        );
    }

    /// Re-reads the config file; on success the next interval uses it.
    pub fn reload(&self) -> Result<(), String> {
        let Some(path) = &self.path else { return Err("the agent was started without a config file".into()) };
        self.say(Level::Info, "Reloading Telegraf config");
        match config::load(path) {
            Ok(c) => {
                self.announce(&c);
                if let Ok(mut current) = self.config.write() {
                    *current = c;
                }
                self.reloaded.notify_waiters();
                Ok(())
            }
            Err(diagnostics) => {
                let text: Vec<String> = diagnostics.iter().map(|d| d.to_string().trim_end().to_string()).collect();
                let joined = text.join("\n");
                self.say(
                    Level::Error,
                    &format!(
                        "[telegraf] Error running agent: error loading config file {}: {}",
                        path.display(),
                        joined
                    ),
                );
                Err(joined)
            }
        }
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

    /// Writes everything buffered to every output; keeps what could not be written.
    pub async fn flush(&self) {
        if self.faults.not_writing.load(Ordering::Relaxed) {
            return;
        }
        let batch: Vec<Point> = std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|e| e.into_inner()));
        if batch.is_empty() {
            return;
        }
        let body: String = batch.iter().map(|p| p.to_line() + "\n").collect();
        let outputs = self.config().outputs;
        let mut keep = false;
        for output in &outputs {
            let started = Instant::now();
            match self.write(output, &body).await {
                Ok(()) => {
                    self.written.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    // Telegraf prints this at debug level; the twin always prints it (at info
                    // priority) so the journal shows every flush.
                    self.say_as(
                        Level::Info,
                        "D!",
                        &format!(
                            "[outputs.influxdb_v2] Wrote batch of {} metrics in {:.3?}",
                            batch.len(),
                            started.elapsed()
                        ),
                    );
                }
                Err((message, retry)) => {
                    self.write_errors.fetch_add(1, Ordering::Relaxed);
                    self.say(Level::Error, &format!("[outputs.influxdb_v2] {message}"));
                    keep |= retry;
                }
            }
        }
        if keep {
            self.say(
                Level::Error,
                "[agent] Error writing to outputs.influxdb_v2: failed to send metrics to any configured outputs",
            );
            let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
            let mut kept = batch;
            kept.append(&mut buffer);
            let excess = kept.len().saturating_sub(BUFFER_LIMIT);
            kept.drain(..excess);
            *buffer = kept;
        }
    }

    /// One write to one output: `Err((message, retry))`.
    async fn write(&self, output: &Output, body: &str) -> Result<(), (String, bool)> {
        let mut last = (String::from("no urls configured"), false);
        for url in &output.urls {
            let target = format!("{}/api/v2/write", url.trim_end_matches('/'));
            let mut request = self
                .client
                .post(&target)
                .query(&[("bucket", output.bucket.as_str()), ("org", output.organization.as_str())])
                .timeout(output.timeout)
                .header("content-type", "text/plain; charset=utf-8");
            if !output.token.is_empty() {
                let mut value = reqwest::header::HeaderValue::from_str(&format!("Token {}", output.token.expose()))
                    .map_err(|_| ("the token has characters a header cannot carry".to_string(), false))?;
                value.set_sensitive(true);
                request = request.header(reqwest::header::AUTHORIZATION, value);
            }
            request = if output.gzip {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                let _ = gz.write_all(body.as_bytes());
                request.header("content-encoding", "gzip").body(gz.finish().unwrap_or_default())
            } else {
                request.body(body.to_string())
            };
            match request.send().await {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => {
                    let status = r.status();
                    let text = r.text().await.unwrap_or_default();
                    let json: Option<serde_json::Value> = serde_json::from_str(&text).ok();
                    let detail = json
                        .as_ref()
                        .map(|j| {
                            format!("{}: {}", j["code"].as_str().unwrap_or(""), j["message"].as_str().unwrap_or(""))
                        })
                        .unwrap_or_else(|| crate::wire::excerpt(&text, 200));
                    let retry = status.is_server_error() || status.as_u16() == 429;
                    let drop = if retry { "" } else { "will be dropped: " };
                    last = (
                        format!(
                            "When writing to [{target}]: failed to write metric to {} ({drop}{status}): {detail}",
                            output.bucket
                        ),
                        retry,
                    );
                }
                Err(e) => {
                    let mut reason = e.to_string();
                    let mut source = std::error::Error::source(&e);
                    while let Some(s) = source {
                        reason = format!("{reason}: {s}");
                        source = s.source();
                    }
                    let full = e.url().map_or_else(|| target.clone(), |u| u.to_string());
                    last = (format!("When writing to [{target}]: Post {full:?}: {reason}"), true);
                }
            }
        }
        Err(last)
    }

    /// One interval: gather, buffer, flush.
    pub async fn tick(&self) {
        let points = self.gather();
        {
            let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
            buffer.extend(points);
            let excess = buffer.len().saturating_sub(BUFFER_LIMIT);
            buffer.drain(..excess);
        }
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
/// Telegraf's round_interval does) and flushes every flush interval.
async fn run(agent: Arc<Agent>, shutdown: Stop) {
    let c = agent.config();
    agent.say(Level::Info, &format!("Starting Telegraf {VERSION} brought to you by InfluxData the makers of InfluxDB"));
    agent.announce(&c);
    // The first gather primes the CPU counters (Telegraf reports no cpu usage until the
    // second), so sample at once and write from the next interval on.
    agent.gather();
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
        {
            let mut buffer = agent.buffer.lock().unwrap_or_else(|e| e.into_inner());
            buffer.extend(points);
            let excess = buffer.len().saturating_sub(BUFFER_LIMIT);
            buffer.drain(..excess);
        }
        since_flush += interval;
        if since_flush >= c.flush_interval {
            since_flush = Duration::ZERO;
            agent.flush().await;
        }
    }
    // Telegraf flushes what it holds before it stops.
    agent.flush().await;
    agent.say(Level::Info, "[agent] Hang on, flushing any cached metrics before shutdown");
    agent.say(Level::Info, "[agent] Stopping running outputs");
}

fn diagnostics_text(path: &Path, diagnostics: &[crate::diagnostic::Diagnostic]) -> String {
    let mut text = format!("{} E! error loading config file {}:\n", logger::now_rfc3339(0), path.display());
    for d in diagnostics {
        text.push_str(&d.to_string());
    }
    text
}

fn print_diagnostics(path: &Path, diagnostics: &[crate::diagnostic::Diagnostic]) {
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
pub async fn run_command(
    path: &Path,
    once: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<u8, Error> {
    let config = match config::load(path) {
        Ok(c) => c,
        Err(d) => {
            print_diagnostics(path, &d);
            return Ok(1);
        }
    };
    let agent = Agent::new(config, Some(path.to_path_buf()), logger::stdout());
    agent.say(Level::Info, &format!("Loading config: {}", path.display()));
    if once {
        agent.gather();
        tokio::time::sleep(Duration::from_millis(500)).await;
        agent.tick().await;
        let failed = agent.write_errors.load(Ordering::Relaxed) > 0;
        return Ok(u8::from(failed));
    }
    let (failed_tx, mut failed_rx) = tokio::sync::mpsc::channel::<()>(1);
    let reloader = agent.clone();
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        while hup.recv().await.is_some() {
            if reloader.reload().is_err() {
                let _ = failed_tx.send(()).await;
                return;
            }
        }
    });
    let reload_failed = Arc::new(AtomicBool::new(false));
    let failed = reload_failed.clone();
    let stop = async move {
        tokio::select! {
            _ = shutdown => {},
            _ = failed_rx.recv() => failed.store(true, Ordering::Relaxed),
        }
    };
    let _ = super::serve(agent, None, stop).await;
    Ok(u8::from(reload_failed.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffered_metrics_survive_a_refused_write_and_are_bounded() {
        let config = config::parse(
            "t.conf",
            "[[outputs.influxdb_v2]]\nurls = [\"http://127.0.0.1:9\"]\nbucket = \"b\"\ntimeout = \"1s\"\n[[inputs.mem]]\n",
        )
        .unwrap();
        let (sink, lines) = logger::memory();
        let agent = Agent::new(config, None, sink);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(agent.tick());
        assert_eq!(agent.buffer.lock().unwrap().len(), 1, "the mem point waits for the next flush");
        assert_eq!(agent.write_errors.load(Ordering::Relaxed), 1);
        let logged = lines.lock().unwrap().clone();
        assert!(
            logged.iter().any(|(l, t)| *l == Level::Error
                && t.contains("E! [outputs.influxdb_v2] When writing to [http://127.0.0.1:9/api/v2/write]")),
            "{logged:?}"
        );
        assert_eq!(agent.reload().unwrap_err(), "the agent was started without a config file");
    }
}
