//! `--sandbox`: the whole stack in-process, so every runbook runs anywhere — no root, no
//! systemd, nothing but loopback.
//!
//! `Sandbox::start` builds a `World` whose four seams are in-process: a simulated service
//! manager (`units`) running the four twin components (`components`) under the configured
//! unit names, an in-memory journal (`journal`, with journalctl's time texts in `when`), the
//! agent's and shipper's offline tools answered in-process (`commands`), and no containers
//! (`containers`). The servers listen on ephemeral loopback ports that open and close with
//! their units; the configuration is pointed at them (origin "sandbox" in `opsbook config`).
//! The agent and shipper config files live in a private temporary directory, removed when
//! the sandbox ends. `--fault SPEC` (`faults`) makes the sandbox misbehave on purpose.
//!
//! So that checks of "recent data" have something to find, the metrics database starts with
//! ten minutes of what the agent wrote before the run (marked `source=sandbox-history`; none
//! when the agent is `not-writing`); from then on the agent writes real samples of this
//! machine every second and the shipper ships the sandbox journal.

pub mod commands;
pub mod components;
pub mod containers;
pub mod faults;
pub mod journal;
pub mod units;
pub mod when;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::keys;
use crate::config::{Config, Key, Origin, Value};
use crate::error::Error;
use crate::secret::Secret;
use crate::twin::{log_store, metrics_db};
use crate::world::World;
use components::{AgentComponent, Common, LogStoreComponent, MetricsDbComponent, ShipperComponent, Voice};
use faults::{Fault, Faults};
use journal::MemJournal;
use units::SimManager;

/// A running sandbox. Dropping it stops the runtime (and with it every server) and removes
/// its temporary directory.
pub struct Sandbox {
    pub world: World,
    pub manager: Arc<SimManager>,
    pub journal: Arc<MemJournal>,
    pub faults: Faults,
    dir: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The sandbox's addresses and files, from which configuration and components are built.
struct Layout {
    db: SocketAddr,
    logs: SocketAddr,
    shipper: SocketAddr,
    agent_config: PathBuf,
    shipper_config: PathBuf,
}

impl Sandbox {
    /// Starts the stack with `fault_specs` applied and returns it with `config` pointed at it.
    pub fn start(mut config: Config, fault_specs: &[String]) -> Result<(Sandbox, Config), Error> {
        let faults = Faults::parse(fault_specs).map_err(Error::Usage)?;
        let io = |context: &str| {
            let context = context.to_string();
            move |source| Error::Io { context: context.clone(), source }
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("opsbook-sandbox")
            .enable_all()
            .build()
            .map_err(io("cannot start the sandbox's runtime"))?;
        let dir = private_dir().map_err(io("cannot create the sandbox's temporary directory"))?;
        let [db, logs, shipper] = free_ports().map_err(io("no free loopback port for the sandbox"))?;
        let layout = Layout {
            db,
            logs,
            shipper,
            agent_config: dir.join("telegraf.conf"),
            shipper_config: dir.join("alloy.toml"),
        };
        let token = Secret::new(random_token());
        let org = Some(config.text(keys::METRICS_DB_ORG)).filter(|o| !o.is_empty()).unwrap_or("opsbook".into());
        let bucket = config.text(keys::METRICS_DB_BUCKET);
        write_private(&layout.agent_config, &agent_config(&layout, &token, &org, &bucket))
            .map_err(io("cannot write the sandbox agent's configuration"))?;
        write_private(&layout.shipper_config, &shipper_config(&layout))
            .map_err(io("cannot write the sandbox shipper's configuration"))?;
        point_config(&mut config, &layout, &token, &org)?;

        let journal = Arc::new(MemJournal::default());
        let manager = Arc::new(SimManager::new(journal.clone()));
        let handle = runtime.handle().clone();
        let unit = |key: &Key| crate::world::units::full_name(&config.text(key));
        let common = |component: &str, unit: &str, identifier: &str, failure: String| {
            let fail = faults.has(component, |f| *f == Fault::FailStart).then_some(failure);
            Common::new(handle.clone(), Voice::new(&journal, unit, identifier), fail)
        };
        let reloadable = |component: &str| !faults.has(component, |f| *f == Fault::NoReload);

        let db_unit = unit(keys::METRICS_DB_UNIT);
        let db_common = common(
            "metrics-db",
            &db_unit,
            "influxd",
            "ts={ts} lvl=error msg=\"Failed to open engine\" error=\"open /var/lib/influxdb2/engine: permission denied\"".into(),
        );
        let db = metrics_db::MetricsDb::new(
            metrics_db::Options {
                org: org.clone(),
                buckets: vec![bucket.clone()],
                listen: layout.db.to_string(),
                ..metrics_db::Options::default()
            },
            token.clone(),
            db_common.voice.sink(),
        );
        let logs_unit = unit(keys::LOG_STORE_UNIT);
        let logs_common = common(
            "log-store",
            &logs_unit,
            "loki",
            "level=error ts={ts} caller=main.go:74 msg=\"validating config\" err=\"invalid schema config: the table period must be a multiple of 24h\"".into(),
        );
        let store = log_store::LogStore::new(
            log_store::Options { ready_delay: Duration::ZERO, listen: layout.logs.to_string(), ..Default::default() },
            logs_common.voice.sink(),
        );
        apply_server_faults(&faults, &db, &store);
        if !faults.has("metrics-agent", |f| *f == Fault::NotWriting) {
            seed_history(&db, &bucket);
        }
        manager.add(
            &db_unit,
            "InfluxDB is an open-source, distributed, time series database",
            "influxd",
            false,
            Arc::new(MetricsDbComponent {
                common: db_common,
                db: db.clone(),
                addr: layout.db,
                slow_listen: faults.slow_ready("metrics-db"),
            }),
        );
        manager.add(
            &logs_unit,
            "Loki service",
            "loki",
            false,
            Arc::new(LogStoreComponent {
                common: logs_common,
                store: store.clone(),
                addr: layout.logs,
                ready_delay: faults.slow_ready("log-store").unwrap_or_default(),
            }),
        );
        let agent_unit = unit(keys::METRICS_AGENT_UNIT);
        manager.add(
            &agent_unit,
            "Telegraf",
            "telegraf",
            reloadable("metrics-agent"),
            Arc::new(AgentComponent {
                common: common(
                    "metrics-agent",
                    &agent_unit,
                    "telegraf",
                    "{ts} E! [telegraf] Error running agent: could not initialize output influxdb_v2: no such host"
                        .into(),
                ),
                config: layout.agent_config.clone(),
                not_writing: faults.has("metrics-agent", |f| *f == Fault::NotWriting),
                agent: Mutex::default(),
            }),
        );
        let shipper_unit = unit(keys::LOG_SHIPPER_UNIT);
        let shipper = Arc::new(ShipperComponent {
            common: common(
                "log-shipper",
                &shipper_unit,
                "alloy",
                "ts={ts} level=error msg=\"could not perform the initial load successfully\" err=\"open /var/lib/alloy/data: permission denied\"".into(),
            ),
            config: layout.shipper_config.clone(),
            journal: journal.clone(),
            addr: layout.shipper,
            reload_fails: faults.has("log-shipper", |f| *f == Fault::ReloadFails),
            shipper: Mutex::default(),
        });
        manager.add(
            &shipper_unit,
            "Vendor-agnostic OpenTelemetry Collector distribution with programmable pipelines",
            "alloy",
            reloadable("log-shipper"),
            shipper.clone(),
        );

        // Boot: servers, then clients, as the stack's units are ordered; a `down` unit stays
        // stopped, a `fail-start` one fails its start as it would at boot.
        let order = [
            ("metrics-db", &db_unit),
            ("log-store", &logs_unit),
            ("metrics-agent", &agent_unit),
            ("log-shipper", &shipper_unit),
        ];
        runtime.block_on(async {
            for (component, unit) in order {
                if !faults.has(component, |f| *f == Fault::Down) {
                    let _ = manager.start(unit).await;
                }
            }
            // The shipper's first push (the units' start lines) lands before any runbook runs.
            let store_up = manager.status(&logs_unit).active_state == "active" && !store.faults.any();
            if let Some(s) = shipper.current().filter(|_| store_up) {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
                while s.sent_entries() == 0 && store.is_ready() && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
        if faults.has("log-shipper", |f| *f == Fault::BadConfig) {
            // Someone broke the file after the shipper started: it still runs the old one.
            write_private(&layout.shipper_config, BROKEN_SHIPPER_CONFIG)
                .map_err(io("cannot write the sandbox shipper's configuration"))?;
        }

        let world = World {
            units: manager.clone(),
            journal: journal.clone(),
            commands: Arc::new(commands::SimCommands { processes: crate::world::commands::Processes }),
            containers: Arc::new(containers::NoContainers),
        };
        let sandbox = Sandbox { world, manager, journal, faults, dir, runtime: Some(runtime) };
        Ok((sandbox, config))
    }
}

/// What the `bad-config` fault leaves in the shipper's file: a typo and a bad address.
const BROKEN_SHIPPER_CONFIG: &str = "[write]\nurl = \"127.0.0.1:3100/loki/api/v1/push\"\nbatchwait = \"1s\"\n";

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
    }
}

/// Ten minutes of plausible samples every 10 s, so "recent data" checks find some at once.
fn seed_history(db: &metrics_db::MetricsDb, bucket: &str) {
    let host = crate::twin::hostname();
    let now_s = crate::twin::now_ns() / 1_000_000_000;
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

/// Points `config` at the sandbox: its addresses, token, files and tools. The token is
/// handed over as a secret, never written into a setting.
fn point_config(config: &mut Config, l: &Layout, token: &Secret, org: &str) -> Result<(), Error> {
    let text = |s: &str| Value::Text(s.to_string());
    let argv = |a: &[&str]| Value::Argv(a.iter().map(|s| s.to_string()).collect());
    let settings = [
        (keys::METRICS_DB_URL, text(&format!("http://{}", l.db))),
        (keys::METRICS_DB_ORG, text(org)),
        (keys::LOG_STORE_URL, text(&format!("http://{}", l.logs))),
        (keys::LOG_SHIPPER_URL, text(&format!("http://{}", l.shipper))),
        (keys::METRICS_AGENT_CONFIG, text(&l.agent_config.display().to_string())),
        (keys::LOG_SHIPPER_CONFIG, text(&l.shipper_config.display().to_string())),
        (keys::METRICS_AGENT_TEST_COMMAND, argv(&["telegraf", "--config", "{config}", "--test"])),
        (keys::LOG_SHIPPER_VALIDATE_COMMAND, argv(&["alloy", "validate", "{config}"])),
        (keys::UNITS_SETTLE, text("0s")),
        (keys::HTTP_CA_FILE, text("")),
    ];
    for (key, value) in settings {
        config.set(key, value, Origin::Sandbox)?;
    }
    config.hand_token(token.clone(), Origin::Sandbox);
    Ok(())
}

fn agent_config(l: &Layout, token: &Secret, org: &str, bucket: &str) -> String {
    format!(
        "# The sandbox's metrics agent (Telegraf TOML subset).\n[agent]\n  interval = \"1s\"\n  flush_interval = \"1s\"\n  hostname = \"\"\n\
[[outputs.influxdb_v2]]\n  urls = [\"http://{}\"]\n  token = \"{}\"\n  organization = \"{org}\"\n  bucket = \"{bucket}\"\n  timeout = \"2s\"\n\
[[inputs.cpu]]\n  percpu = false\n  totalcpu = true\n[[inputs.mem]]\n[[inputs.disk]]\n  ignore_fs = [\"tmpfs\", \"devtmpfs\", \"overlay\", \"squashfs\"]\n",
        l.db,
        token.expose()
    )
}

fn shipper_config(l: &Layout) -> String {
    format!(
        "# The sandbox's log shipper: the whole sandbox journal to the log store.\n[server]\nlisten = \"{}\"\n\
[journal]\nunits = []\n[labels]\nservice_type = \"journal\"\nhostname = \"\"\n\
[write]\nurl = \"http://{}/loki/api/v1/push\"\nbatch_wait = \"5ms\"\ntimeout = \"2s\"\nmax_retries = 2\nmin_backoff = \"100ms\"\nmax_backoff = \"1s\"\n",
        l.shipper, l.logs
    )
}

/// Three distinct free loopback ports (the components bind them again when their units
/// start). All three are held until all are chosen, or the kernel may hand out one twice.
fn free_ports() -> std::io::Result<[SocketAddr; 3]> {
    let held = [
        std::net::TcpListener::bind("127.0.0.1:0")?,
        std::net::TcpListener::bind("127.0.0.1:0")?,
        std::net::TcpListener::bind("127.0.0.1:0")?,
    ];
    Ok([held[0].local_addr()?, held[1].local_addr()?, held[2].local_addr()?])
}

/// A random API token from the kernel's generator.
fn random_token() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 24];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_err() {
        let seed = crate::twin::now_ns() as u64 ^ u64::from(std::process::id());
        bytes.iter_mut().enumerate().for_each(|(i, b)| *b = (seed >> ((i % 8) * 8)) as u8 ^ i as u8);
    }
    format!("sandbox-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// `$TMPDIR/opsbook-sandbox-PID`, mode 0700; leftovers of sandboxes whose process is gone
/// (killed with SIGKILL) are removed on the way.
fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("opsbook-sandbox-")
                && pid.parse::<u32>().is_ok()
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(format!("opsbook-sandbox-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(text.as_bytes())
}
