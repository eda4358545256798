//! The log shipper's state and its pipeline: follow the journal, batch its entries into
//! streams, send them to the log store with retries, keep the positions, logging as Alloy
//! does.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::config::{Format, ShipperConfig};
use super::counters::Metrics;
use super::loading::load;
use super::positions;
use crate::clock::now_ns;
use crate::logger::{self, Level, Sink};
use opsbook_wire::loki::{self, PushEntry, PushStream};
use opsbook_world::journal::{Entry, Feed, Journal, Query};

/// The Alloy version the twin reports.
pub(crate) const VERSION: &str = "v1.9.0";

/// Fault knobs for the sandbox.
#[derive(Debug, Default)]
pub struct ShipperFaults {
    /// Every reload fails (as when the file on disk is broken and cannot be read).
    pub reload_fails: AtomicBool,
    /// `/-/ready` answers 503.
    pub(crate) not_ready: AtomicBool,
    /// Pushes go here instead of the configured URL (a dead port, a path the store refuses):
    /// delivery broken while the unit runs and its configuration validates.
    pub push_to: RwLock<Option<String>>,
}

/// A running shipper's state; share it with `Arc`.
pub struct Shipper {
    config: RwLock<ShipperConfig>,
    path: Option<PathBuf>,
    journal: Arc<dyn Journal>,
    /// The faults the sandbox sets on it.
    pub faults: ShipperFaults,
    log: Sink,
    client: reqwest::Client,
    pub(super) metrics: Metrics,
    /// Where the journal source resumes (`positions.yml` under the storage path).
    positions: positions::Positions,
    /// Bumped on every successful reload: the pipeline restarts with the new config.
    generation: tokio::sync::watch::Sender<u64>,
}

impl Shipper {
    /// A shipper running `config` (read from `path`, for reloads), following `journal`, logging to `log`.
    pub fn new(config: ShipperConfig, path: Option<PathBuf>, journal: Arc<dyn Journal>, log: Sink) -> Arc<Shipper> {
        let metrics = Metrics::default();
        metrics.config_ok.store(true, Ordering::Relaxed);
        let positions = positions::Positions::open(config.storage_path.as_deref(), &config.source_id);
        Arc::new(Shipper {
            positions,
            config: RwLock::new(config),
            path,
            journal,
            faults: ShipperFaults::default(),
            log,
            client: crate::http_client::http_client(&format!("Alloy/{VERSION}")),
            metrics,
            generation: tokio::sync::watch::channel(0).0,
        })
    }

    /// The configuration it runs with now (a reload replaces it).
    pub fn config(&self) -> ShipperConfig {
        self.config.read().map(|c| c.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Alloy's logfmt: `ts=… level=… msg=… k=v…` (or the same as a JSON object), when
    /// `level` is as severe as the configured level.
    pub(super) fn say(&self, level: Level, msg: &str, fields: &[(&str, &str)]) {
        let (least, json) = self.config.read().map(|c| (c.log_level, c.log_json)).unwrap_or((Level::Debug, false));
        if level > least {
            return;
        }
        // Alloy v1.9.0 (internal/runtime/logging/handler.go): `ts` in UTC RFC3339Nano.
        let ts = crate::go_time::rfc3339_nano(std::time::SystemTime::now());
        let all = [("ts", ts.as_str()), ("level", level.word()), ("msg", msg)];
        let line = if json {
            // go-kit's integer values (`status`) stay numbers in JSON.
            let value = |k: &str, v: &str| match v.parse::<i64>() {
                Ok(n) if k == "status" => serde_json::Value::from(n),
                _ => serde_json::Value::from(v),
            };
            let pairs: Vec<String> = all
                .iter()
                .chain(fields)
                .map(|(k, v)| format!("{}:{}", serde_json::Value::from(*k), value(k, v)))
                .collect();
            format!("{{{}}}", pairs.join(","))
        } else {
            let pairs: Vec<String> =
                all.iter().chain(fields).map(|(k, v)| format!("{k}={}", logger::logfmt_value(v))).collect();
            pairs.join(" ")
        };
        (self.log)(level, &line);
    }

    /// Entries sent successfully so far.
    pub fn sent_entries(&self) -> u64 {
        self.metrics.sent_entries.load(Ordering::Relaxed)
    }

    /// Re-reads the config file; the pipeline restarts with it. On failure the old config
    /// stays in force and the error is returned (Alloy's behaviour).
    pub fn reload(&self) -> Result<(), String> {
        let result = if self.faults.reload_fails.load(Ordering::Relaxed) {
            Err("reading config path: the configuration could not be loaded".to_string())
        } else if let Some(path) = &self.path {
            load(path, &self.config().listen)
        } else {
            Err("the shipper was started without a config file".to_string())
        };
        match result {
            Ok(c) => {
                if let Ok(mut current) = self.config.write() {
                    *current = c;
                }
                self.metrics.config_ok.store(true, Ordering::Relaxed);
                self.generation.send_modify(|g| *g += 1);
                self.say(Level::Info, "config reloaded", &[("service", "http")]);
                Ok(())
            }
            Err(e) => {
                self.metrics.config_ok.store(false, Ordering::Relaxed);
                self.metrics.config_failures.fetch_add(1, Ordering::Relaxed);
                self.say(Level::Error, "failed to reload config", &[("err", &e)]);
                Err(e)
            }
        }
    }

    /// Where pushes go: the configured URL, unless a fault sends them elsewhere.
    fn push_url(&self, cfg: &ShipperConfig) -> String {
        let redirected = self.faults.push_to.read().map(|u| u.clone()).unwrap_or_else(|e| e.into_inner().clone());
        redirected.unwrap_or_else(|| cfg.url.clone())
    }

    pub(super) fn host_label(&self) -> String {
        let url = self.push_url(&self.config());
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        rest.split('/').next().unwrap_or(rest).to_string()
    }

    /// The `/metrics` exposition text.
    /// Sends one batch with retries; `stop` aborts the waiting between attempts.
    async fn send(&self, batch: Vec<PushStream>, stop: &tokio::sync::watch::Receiver<bool>) {
        let cfg = self.config();
        let entries: u64 = batch.iter().map(|s| s.entries.len() as u64).sum();
        let bytes: u64 = batch.iter().flat_map(|s| &s.entries).map(|e| e.line.len() as u64).sum();
        let (body, content_type) = match cfg.format {
            Format::Protobuf => (loki::encode_protobuf(&batch), "application/x-protobuf"),
            Format::Json => (loki::encode_json(&batch), "application/json"),
        };
        self.metrics.encoded_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        let host = self.host_label();
        let mut backoff = cfg.min_backoff;
        for attempt in 0..=cfg.max_retries {
            let Err((status, error, retry)) = self.attempt(&cfg, &body, content_type).await else {
                self.metrics.sent_entries.fetch_add(entries, Ordering::Relaxed);
                self.metrics.sent_bytes.fetch_add(bytes, Ordering::Relaxed);
                let count = entries.to_string();
                let fields = [("component_id", cfg.writer_id.as_str()), ("host", &host), ("entries", &count)];
                self.say(Level::Debug, "batch sent", &fields);
                return;
            };
            // Alloy v1.9.0 (common/loki/client/client.go): these fields, `component=client`.
            let fields = [
                ("component_path", "/"),
                ("component_id", cfg.writer_id.as_str()),
                ("component", "client"),
                ("host", host.as_str()),
                ("status", status.as_str()),
                ("tenant", ""),
                ("error", error.as_str()),
            ];
            if !retry || attempt == cfg.max_retries {
                self.say(Level::Error, "final error sending batch", &fields);
                let reason = if status == "429" { "rate_limited" } else { "ingester_error" };
                self.metrics.drop_batch(reason, entries, bytes);
                return;
            }
            self.say(Level::Warn, "error sending batch, will retry", &fields);
            self.metrics.retries.fetch_add(1, Ordering::Relaxed);
            let mut stop = stop.clone();
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {},
                _ = stopped(&mut stop) => {
                    self.metrics.drop_batch("ingester_error", entries, bytes);
                    return;
                }
            }
            backoff = (backoff * 2).min(cfg.max_backoff);
        }
    }

    /// One push: `Err((status, error, retry))` when refused, the status `-1` when no answer
    /// came; only 429, 5xx and connection errors are retried.
    async fn attempt(
        &self,
        cfg: &ShipperConfig,
        body: &[u8],
        content_type: &str,
    ) -> Result<(), (String, String, bool)> {
        let started = Instant::now();
        let url = self.push_url(cfg);
        let result = self
            .client
            .post(&url)
            .timeout(cfg.timeout)
            .header("content-type", content_type)
            .body(body.to_vec())
            .send()
            .await;
        match result {
            Ok(r) if r.status().is_success() => {
                self.metrics.observe(r.status().as_str(), started.elapsed());
                Ok(())
            }
            Ok(r) => {
                let status = r.status();
                self.metrics.observe(status.as_str(), started.elapsed());
                let text = r.text().await.unwrap_or_default();
                let error = format!(
                    "server returned HTTP status {} ({}): {}",
                    status,
                    status.as_u16(),
                    opsbook_wire::excerpt(&text, 300)
                );
                Err((status.as_u16().to_string(), error, status.is_server_error() || status.as_u16() == 429))
            }
            Err(e) => {
                // Alloy's status_code for a request that got no answer.
                self.metrics.observe("-1", started.elapsed());
                let mut reason = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    reason = format!("{reason}: {s}");
                    source = s.source();
                }
                Err(("-1".to_string(), format!("Post {url:?}: {reason}"), true))
            }
        }
    }

    /// One entry as a stream's line: static labels plus `unit`.
    fn labels_for(cfg: &ShipperConfig, e: &Entry) -> Vec<(String, String)> {
        let mut labels = cfg.labels.clone();
        if cfg.unit_label && !e.unit.is_empty() {
            labels.push(("unit".into(), e.unit.clone()));
        }
        labels.sort();
        labels
    }

    /// What the journal source follows: its unit, from the saved position or `max_age` back
    /// (see `positions`).
    fn follow_query(&self, cfg: &ShipperConfig) -> Query {
        let since = self.positions.since(cfg.max_age, now_ns() as u64 / 1000);
        Query {
            unit: (cfg.units.len() == 1).then(|| cfg.units[0].clone()),
            since: Some(format!("@{}.{:06}", since / 1_000_000, since % 1_000_000)),
            lines: Some(1_000_000),
            ..Query::default()
        }
    }

    /// Follows the journal and ships batches until the config changes or `stop` is set.
    pub(super) async fn pipeline(self: &Arc<Self>, stop: tokio::sync::watch::Receiver<bool>) {
        let mut generation = self.generation.subscribe();
        loop {
            generation.mark_unchanged();
            let cfg = self.config();
            if !cfg.follow {
                // A pipeline with no journal source reads nothing until a reload brings one.
                let mut s = stop.clone();
                tokio::select! {
                    _ = generation.changed() => continue,
                    _ = stopped(&mut s) => return,
                }
            }
            let query = self.follow_query(&cfg);
            let mut feed = match self.journal.follow(&query).await {
                Ok(f) => f,
                Err(e) => {
                    self.say(
                        Level::Error,
                        "failed to follow the journal",
                        &[("component_id", cfg.source_id.as_str()), ("err", &e)],
                    );
                    let mut s = stop.clone();
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                        _ = stopped(&mut s) => return,
                        _ = generation.changed() => continue,
                    }
                }
            };
            self.say(
                Level::Info,
                "journal target started",
                &[("component_id", cfg.source_id.as_str()), ("units", &cfg.units.join(","))],
            );
            let restart = self.ship_feed(&cfg, &mut feed, &stop, &mut generation).await;
            drop(feed);
            if !restart {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Ships what `feed` gives, in batches (by size, or `batch_wait` after a batch's first
    /// entry), until the feed ends or the config changes (`true`: follow again) or the shipper
    /// stops (`false`); what was read goes out first either way.
    async fn ship_feed(
        &self,
        cfg: &ShipperConfig,
        feed: &mut Feed,
        stop: &tokio::sync::watch::Receiver<bool>,
        generation: &mut tokio::sync::watch::Receiver<u64>,
    ) -> bool {
        let mut streams: BTreeMap<Vec<(String, String)>, Vec<PushEntry>> = BTreeMap::new();
        let mut size = 0usize;
        let mut first_at: Option<Instant> = None;
        let mut s = stop.clone();
        let restart = loop {
            let deadline = first_at.map(|t| t + cfg.batch_wait);
            tokio::select! {
                entry = feed.recv() => match entry {
                    Some(Ok(e)) => {
                        if !cfg.units.is_empty() && !cfg.units.contains(&e.unit) {
                            continue;
                        }
                        self.metrics.lines_read.fetch_add(1, Ordering::Relaxed);
                        self.metrics.seen_entry.store(true, Ordering::Relaxed);
                        self.positions.put(e.realtime_us);
                        let ts = if e.realtime_us > 0 { e.realtime_us as i64 * 1000 } else { now_ns() };
                        size += e.message.len();
                        streams.entry(Self::labels_for(cfg, &e)).or_default().push(PushEntry { ts, line: e.message, metadata: Vec::new() });
                        first_at.get_or_insert_with(Instant::now);
                        if size >= cfg.batch_size {
                            self.ship(&mut streams, &mut size, &mut first_at, stop).await;
                        }
                    }
                    Some(Err(e)) => {
                        self.metrics.parse_errors.fetch_add(1, Ordering::Relaxed);
                        self.say(Level::Warn, "could not read a journal entry", &[("err", &e)]);
                    }
                    None => {
                        self.say(Level::Warn, "journal follow ended; restarting", &[("component_id", cfg.source_id.as_str())]);
                        break true;
                    }
                },
                _ = sleep_until(deadline) => self.ship(&mut streams, &mut size, &mut first_at, stop).await,
                _ = generation.changed() => break true,
                _ = stopped(&mut s) => break false,
            }
        };
        self.ship(&mut streams, &mut size, &mut first_at, stop).await;
        restart
    }

    async fn ship(
        &self,
        streams: &mut BTreeMap<Vec<(String, String)>, Vec<PushEntry>>,
        size: &mut usize,
        first_at: &mut Option<Instant>,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) {
        if streams.is_empty() {
            return;
        }
        let batch: Vec<PushStream> =
            std::mem::take(streams).into_iter().map(|(labels, entries)| PushStream { labels, entries }).collect();
        *size = 0;
        *first_at = None;
        self.send(batch, stop).await;
        if let Err(e) = self.positions.save() {
            let file = self.positions.file().map(|f| f.display().to_string()).unwrap_or_default();
            self.say(Level::Error, "error writing positions file", &[("file", &file), ("error", &e.to_string())]);
        }
    }
}

/// Completes once the stop flag is set (or its sender is gone).
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsbook_world::journal::Journalctl;

    #[test]
    fn own_lines_follow_the_logging_block() {
        let (sink, kept) = logger::memory();
        let config = ShipperConfig { log_level: Level::Info, log_json: true, ..ShipperConfig::default() };
        let journal: Arc<dyn Journal> =
            Arc::new(Journalctl { user: false, timeout: Duration::from_secs(1), via: None });
        let s = Shipper::new(config, None, journal, sink);
        s.say(Level::Debug, "batch sent", &[]);
        s.say(Level::Info, "config reloaded", &[("service", "http")]);
        let lines = kept.lock().unwrap().clone();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let ts = lines[0].1.split('"').nth(3).unwrap().to_string();
        assert_eq!(
            lines[0].1,
            format!("{{\"ts\":\"{ts}\",\"level\":\"info\",\"msg\":\"config reloaded\",\"service\":\"http\"}}")
        );
    }
}
