//! One simulated host of the sandbox: its service manager and journal, and the components it
//! runs — the two servers, the two clients, or all four — each under its configured unit
//! name, with the faults meant for it. `boot` starts them as the host's units would start.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::components::{AgentComponent, Common, LogStoreComponent, MetricsDbComponent, ShipperComponent, Voice};
use super::faults::{Fault, Faults};
use super::files::{ClientFiles, Servers};
use super::journal::MemJournal;
use super::units::SimManager;
use opsbook_base::config::{Config, Key, keys};
use opsbook_base::secret::Secret;
use opsbook_twin::{log_store, metrics_db};

/// A simulated host.
pub struct SimHost {
    pub name: String,
    pub roles: Vec<String>,
    pub manager: Arc<SimManager>,
    pub journal: Arc<MemJournal>,
    /// The faults meant for this host.
    pub faults: Faults,
    runtime: tokio::runtime::Handle,
    store: Option<Arc<log_store::LogStore>>,
    shipper: Option<Arc<ShipperComponent>>,
    /// Ports held bound and never listening (the `push-dead` fault's), released with the host.
    held_ports: Vec<tokio::net::TcpSocket>,
}

/// The servers' side of the sandbox, shared by every host that talks to it.
pub(crate) struct ServerSide<'a> {
    pub addresses: &'a Servers,
    pub token: &'a Secret,
    pub org: &'a str,
    pub bucket: &'a str,
}

impl SimHost {
    pub fn new(name: &str, runtime: tokio::runtime::Handle, faults: Faults) -> SimHost {
        let journal = Arc::new(MemJournal::default());
        SimHost {
            name: name.to_string(),
            roles: Vec::new(),
            manager: Arc::new(SimManager::new(journal.clone())),
            journal,
            faults,
            runtime,
            store: None,
            shipper: None,
            held_ports: Vec::new(),
        }
    }

    /// The fault `lost-mid-change`: the host stops answering once the component's unit
    /// started, restarted or reloaded (the change in place, nothing verified).
    pub(crate) fn arm_lost_host(&self, config: &Config) {
        let units = [
            ("metrics-db", keys::METRICS_DB_UNIT),
            ("log-store", keys::LOG_STORE_UNIT),
            ("metrics-agent", keys::METRICS_AGENT_UNIT),
            ("log-shipper", keys::LOG_SHIPPER_UNIT),
        ];
        for (component, key) in units {
            if self.faults.has(component, |f| *f == Fault::LostMidChange) {
                let why = format!("host {} does not answer: lost after {component} changed (sandbox fault)", self.name);
                self.manager.lose_host_after(&Self::unit(config, key), &why);
            }
        }
    }

    fn unit(config: &Config, key: &Key) -> String {
        opsbook_world::units::full_name(&config.text(key))
    }

    fn common(&self, component: &str, unit: &str, identifier: &str, failure: &str) -> Common {
        let fail = self.faults.has(component, |f| *f == Fault::FailStart).then(|| failure.to_string());
        Common::new(self.runtime.clone(), Voice::new(&self.journal, unit, identifier), fail)
    }

    fn reloadable(&self, component: &str) -> bool {
        !self.faults.has(component, |f| *f == Fault::NoReload)
    }

    /// The metrics database and the log store, listening where `servers` says.
    pub(crate) fn add_servers(&mut self, config: &Config, servers: &ServerSide<'_>) {
        let db_unit = Self::unit(config, keys::METRICS_DB_UNIT);
        let db_common = self.common(
            "metrics-db",
            &db_unit,
            "influxd",
            "ts={ts} lvl=error msg=\"Failed to open engine\" error=\"open /var/lib/influxdb2/engine: permission denied\"",
        );
        let options = metrics_db::Options {
            org: servers.org.to_string(),
            buckets: vec![servers.bucket.to_string()],
            listen: servers.addresses.db.to_string(),
            ..metrics_db::Options::default()
        };
        let fresh = self.faults.has("metrics-db", |f| *f == Fault::Fresh);
        let db = if fresh {
            metrics_db::MetricsDb::fresh(options, db_common.voice.sink())
        } else {
            metrics_db::MetricsDb::new(options, servers.token.clone(), db_common.voice.sink())
        };
        let logs_unit = Self::unit(config, keys::LOG_STORE_UNIT);
        let logs_common = self.common(
            "log-store",
            &logs_unit,
            "loki",
            "level=error ts={ts} caller=main.go:74 msg=\"validating config\" err=\"invalid schema config: the table period must be a multiple of 24h\"",
        );
        let store = log_store::LogStore::new(
            log_store::Options {
                ready_delay: Duration::ZERO,
                listen: servers.addresses.logs.to_string(),
                ..Default::default()
            },
            logs_common.voice.sink(),
        );
        apply_server_faults(&self.faults, &db, &store);
        // A fresh database has no bucket to hold a history.
        if !fresh && !self.faults.has("metrics-agent", |f| *f == Fault::NotWriting) {
            // An agent whose writes are refused stopped delivering before the run, longer ago
            // than the recent window (5 minutes): its history ends there.
            let broken = self.faults.has("metrics-agent", |f| matches!(f, Fault::MissingBucket | Fault::WrongToken));
            seed_history(&db, servers.bucket, if broken { 360 } else { 0 });
        }
        self.manager.add(
            &db_unit,
            "InfluxDB is an open-source, distributed, time series database",
            "influxd",
            false,
            Arc::new(MetricsDbComponent {
                common: db_common,
                db,
                addr: servers.addresses.db,
                slow_listen: self.faults.slow_ready("metrics-db"),
            }),
        );
        self.manager.add(
            &logs_unit,
            "Loki service",
            "loki",
            false,
            Arc::new(LogStoreComponent {
                common: logs_common,
                store: store.clone(),
                addr: servers.addresses.logs,
                ready_delay: self.faults.slow_ready("log-store").unwrap_or_default(),
            }),
        );
        self.store = Some(store);
        self.roles.extend(["metrics-db".to_string(), "log-store".to_string()]);
    }

    /// The client faults that live in the configuration files: the agent's structured log
    /// or logfile, the shipper's JSON log.
    fn write_client_faults(&self, files: &ClientFiles) -> std::io::Result<()> {
        let mut agent_lines = String::new();
        if self.faults.has("metrics-agent", |f| *f == Fault::JsonErrors) {
            agent_lines.push_str("  logformat = \"structured\"\n");
        }
        if self.faults.has("metrics-agent", |f| *f == Fault::Logfile) {
            agent_lines.push_str(&format!("  logfile = \"{}\"\n", super::files::AGENT_LOGFILE));
        }
        if !agent_lines.is_empty() {
            let text = std::fs::read_to_string(&files.agent_config)?;
            super::files::write_private(
                &files.agent_config,
                &super::files::with_lines_in(&text, "agent", &agent_lines),
            )?;
        }
        if self.faults.has("log-shipper", |f| *f == Fault::JsonErrors) {
            let text = std::fs::read_to_string(&files.shipper_config)?;
            let logging = super::files::with_lines_in(&text, "logging", "format = \"json\"\n");
            super::files::write_private(&files.shipper_config, &logging)?;
        }
        Ok(())
    }

    /// The metrics agent and the log shipper, configured by `files`.
    pub(crate) fn add_clients(&mut self, config: &Config, files: &ClientFiles) {
        if let Err(e) = self.write_client_faults(files) {
            tracing::warn!("the sandbox could not write its client faults into the config files: {e}");
        }
        let agent_unit = Self::unit(config, keys::METRICS_AGENT_UNIT);
        let agent_common = self.common(
            "metrics-agent",
            &agent_unit,
            "telegraf",
            "{ts} E! [telegraf] Error running agent: could not initialize output influxdb_v2: no such host",
        );
        self.manager.add(
            &agent_unit,
            "Telegraf",
            "telegraf",
            self.reloadable("metrics-agent"),
            Arc::new(AgentComponent {
                common: agent_common,
                config: files.agent_config.clone(),
                not_writing: self.faults.has("metrics-agent", |f| *f == Fault::NotWriting),
                write_bucket: self
                    .faults
                    .has("metrics-agent", |f| *f == Fault::MissingBucket)
                    .then(|| format!("{}-missing", config.text(keys::METRICS_DB_BUCKET))),
                write_token: self
                    .faults
                    .has("metrics-agent", |f| *f == Fault::WrongToken)
                    .then(|| "a-token-the-database-never-made".to_string()),
                agent: Mutex::default(),
                root: files.root.clone(),
                reload_exits: self
                    .faults
                    .has("metrics-agent", |f| *f == Fault::ReloadExits)
                    .then(|| (Arc::downgrade(&self.manager), agent_unit.clone())),
            }),
        );
        let shipper_unit = Self::unit(config, keys::LOG_SHIPPER_UNIT);
        let shipper = Arc::new(ShipperComponent {
            common: self.common(
                "log-shipper",
                &shipper_unit,
                "alloy",
                "ts={ts} level=error msg=\"could not perform the initial load successfully\" err=\"open /var/lib/alloy/data: permission denied\"",
            ),
            config: files.shipper_config.clone(),
            journal: self.journal.clone(),
            addr: files.shipper,
            reload_fails: self.faults.has("log-shipper", |f| *f == Fault::ReloadFails),
            push_to: self.push_to(config),
            shipper: Mutex::default(),
            root: files.root.clone(),
        });
        self.manager.add(
            &shipper_unit,
            "Vendor-agnostic OpenTelemetry Collector distribution with programmable pipelines",
            "alloy",
            self.reloadable("log-shipper"),
            shipper.clone(),
        );
        self.shipper = Some(shipper);
        self.roles.extend(["metrics-agent".to_string(), "log-shipper".to_string()]);
    }

    /// Where the `push-dead` and `push-refused` faults send the shipper's pushes: a loopback
    /// port nothing listens on (held bound, never listening, for the sandbox's life: no other
    /// program can take it and answer), or the log store's address without Loki's API path
    /// (the commonest wrong push URL: the store answers 404).
    fn push_to(&mut self, config: &Config) -> Option<String> {
        if self.faults.has("log-shipper", |f| *f == Fault::PushDead) {
            let held = tokio::net::TcpSocket::new_v4()
                .and_then(|s| s.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0))).map(|()| s));
            let port = held.as_ref().ok().and_then(|s| s.local_addr().ok()).map_or(9, |a| a.port());
            self.held_ports.extend(held.ok());
            return Some(format!("http://127.0.0.1:{port}/loki/api/v1/push"));
        }
        self.faults
            .has("log-shipper", |f| *f == Fault::PushRefused)
            .then(|| format!("{}/push", config.text(keys::LOG_STORE_URL).trim_end_matches('/')))
    }

    /// Starts the host's units in the stack's order (servers, then clients); a `down` unit
    /// stays stopped, a `fail-start` one fails its start as it would at boot. `store` is the
    /// sandbox's log store: the shipper's first push (its units' start lines) lands before any
    /// runbook runs, when the store is up (`store` is `None` when its unit is not active).
    pub async fn boot(&self, config: &Config, store: Option<&Arc<log_store::LogStore>>) {
        // The table's order: servers first.
        for c in opsbook_base::components::all() {
            if self.roles.iter().any(|r| r == c.name) && !self.faults.has(c.name, |f| *f == Fault::Down) {
                let _ = self.manager.start(&Self::unit(config, keys::of(c, "unit"))).await;
            }
        }
        let Some(store) = store.filter(|s| !s.faults.any()) else { return };
        if let Some(s) = self.shipper.as_ref().and_then(|s| s.current()) {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
            while s.sent_entries() == 0 && store.is_ready() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// The log store this host runs, when its unit is active.
    pub(crate) fn running_store(&self, config: &Config) -> Option<&Arc<log_store::LogStore>> {
        let unit = Self::unit(config, keys::LOG_STORE_UNIT);
        self.store.as_ref().filter(|_| self.manager.status(&unit).active_state == "active")
    }

    /// Breaks the shipper's file after it started (the `bad-config` fault): it still runs the
    /// old configuration, as a real shipper would until a reload.
    pub(crate) fn break_shipper_config(&self, files: &super::files::ClientFiles) -> std::io::Result<()> {
        if self.shipper.is_some() && self.faults.has("log-shipper", |f| *f == Fault::BadConfig) {
            super::files::write_private(&files.shipper_config, super::files::BROKEN_SHIPPER_CONFIG)?;
        }
        Ok(())
    }
}

fn apply_server_faults(faults: &Faults, db: &metrics_db::MetricsDb, store: &log_store::LogStore) {
    for (component, knobs) in [("metrics-db", &db.faults), ("log-store", &store.faults)] {
        if faults.has(component, |f| *f == Fault::Error500) {
            knobs.set_fail_status(500);
        }
        if faults.has(component, |f| *f == Fault::Garbage) {
            knobs.set_garbage(true);
        }
        if faults.has(component, |f| *f == Fault::RefuseToken) {
            knobs.set_refuse_token(true);
        }
        if faults.has(component, |f| *f == Fault::AllAccessToken) {
            knobs.set_all_access_token(true);
        }
    }
}

/// Ten minutes of plausible samples every 10 s, so "recent data" checks find some at once,
/// ending `ended_ago` seconds before now.
fn seed_history(db: &metrics_db::MetricsDb, bucket: &str, ended_ago: i64) {
    let host = opsbook_world::this_machine();
    let now_s = opsbook_twin::now_ns() / 1_000_000_000 - ended_ago;
    let mut lines = String::new();
    for i in (1..=60).rev() {
        let t = now_s - i * 10;
        let wobble = (i % 7) as f64 * 0.1;
        lines.push_str(&format!(
            "cpu,cpu=cpu-total,host={host},source=sandbox-history usage_system={:.2},usage_user={:.2},usage_idle={:.2} {t}\n",
            0.8 + wobble,
            3.0 + wobble,
            96.0 - 2.0 * wobble
        ));
        lines.push_str(&format!(
            "mem,host={host},source=sandbox-history used_percent={:.2},available_percent={:.2} {t}\n",
            41.0 + wobble,
            59.0 - wobble
        ));
        lines.push_str(&format!(
            "disk,device=vda1,fstype=ext4,host={host},mode=rw,path=/,source=sandbox-history used_percent=37.5 {t}\n"
        ));
    }
    if let Err((status, body)) = db.write_lines(bucket, "s", &lines) {
        tracing::warn!("the sandbox could not seed its history ({status}): {body}");
    }
}
