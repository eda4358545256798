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
//! the sandbox ends; so does each host's `/` for `file::` and `unit::install` (a folder
//! `HOST/root` there, holding `etc`, `var/lib` and `root`). `--fault SPEC` (`faults`) makes
//! the sandbox misbehave on purpose.
//!
//! `Sandbox::start_fleet` builds several simulated hosts instead (`stack::SimHost`): a
//! `server` running the two servers and clients `c1`…`cN` running the agent and the shipper,
//! each with its own service manager, journal and files, the clients writing to the server's
//! twins under their own host names; a fault may name its host (`c2:log-shipper:down`).
//!
//! So that checks of "recent data" have something to find, the metrics database starts with
//! ten minutes of what the agent wrote before the run (marked `source=sandbox-history`; none
//! when the agent is `not-writing`); from then on the agent writes real samples of this
//! machine every second and the shipper ships the sandbox journal.

#![deny(missing_docs)]

pub(crate) mod commands;
pub(crate) mod components;
pub(crate) mod containers;
#[cfg(test)]
mod fault_rehearsals;
pub(crate) mod faults;
pub(crate) mod files;
pub(crate) mod journal;
pub(crate) mod stack;
pub(crate) mod units;
pub(crate) mod when;

use std::path::PathBuf;
use std::sync::Arc;

pub use faults::{Applies, FAULTS, FaultRow, help as fault_help};

use faults::Faults;
use files::{ClientFiles, Servers};
use opsbook_base::Error;
use opsbook_base::config::{Config, Origin, Value, keys};
use opsbook_base::did_you_mean;
use opsbook_base::secret::Secret;
use opsbook_world::World;
use stack::{ServerSide, SimHost};

/// A running sandbox: one simulated host, or a fleet of them. Dropping it stops the runtime
/// (and with it every server) and removes its temporary directory.
pub struct Sandbox {
    /// The simulated hosts: one, or the server first and the clients after it.
    pub hosts: Vec<Host>,
    dir: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
}

/// A simulated host as a run sees it: its world and its configuration.
pub struct Host {
    /// The host's simulated units, journal, files and servers.
    pub sim: SimHost,
    /// The world a run acts through on it.
    pub world: World,
    /// Its configuration, pointing at its servers' loopback ports.
    pub config: Config,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn io(context: &str) -> impl Fn(std::io::Error) -> Error {
    let context = context.to_string();
    move |source| Error::Io { context: context.clone(), source }
}

impl Sandbox {
    /// One host running the whole stack, with `fault_specs` applied; returns the sandbox and
    /// `config` pointed at it.
    pub fn start(config: Config, fault_specs: &[String]) -> Result<(Sandbox, Config), Error> {
        let mut sandbox = Sandbox::build(config, 0, fault_specs)?;
        let config = sandbox.hosts[0].config.clone();
        // The single host keeps this machine's name, as the real components would.
        sandbox.hosts[0].world.hostname = None;
        Ok((sandbox, config))
    }

    /// A fleet: `server` with the two servers and `clients` client hosts `c1`…`cN`.
    pub fn start_fleet(config: Config, clients: usize, fault_specs: &[String]) -> Result<Sandbox, Error> {
        if clients == 0 {
            return Err(Error::Usage("`--fleet N` needs at least one client host".into()));
        }
        Sandbox::build(config, clients, fault_specs)
    }

    /// `clients` 0: one host with all four components; otherwise a server and N clients.
    fn build(mut base: Config, clients: usize, fault_specs: &[String]) -> Result<Sandbox, Error> {
        let faults = Faults::parse(fault_specs).map_err(Error::Usage)?;
        let names: Vec<String> = if clients == 0 {
            vec!["sandbox".to_string()]
        } else {
            std::iter::once("server".to_string()).chain((1..=clients).map(|i| format!("c{i}"))).collect()
        };
        if let Some(unknown) = faults.hosts().find(|h| !names.iter().any(|n| n == h)) {
            let hint = did_you_mean(unknown, names.iter().map(String::as_str)).unwrap_or_default();
            return Err(Error::Usage(format!(
                "fault for host `{unknown}`, which the sandbox does not have (hosts: {}){hint}",
                names.join(", ")
            )));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("opsbook-sandbox")
            .enable_all()
            .build()
            .map_err(io("cannot start the sandbox's runtime"))?;
        let dir = files::private_dir().map_err(io("cannot create the sandbox's temporary directory"))?;
        let mut sandbox = Sandbox { hosts: Vec::new(), dir, runtime: None };
        let ports = files::free_ports(2 + names.len()).map_err(io("no free loopback port for the sandbox"))?;
        let servers = Servers { db: ports[0], logs: ports[1] };
        let token = Secret::new(files::random_token());
        let org = Some(base.text(keys::METRICS_DB_ORG)).filter(|o| !o.is_empty()).unwrap_or("opsbook".into());
        let bucket = base.text(keys::METRICS_DB_BUCKET);
        point_at_servers(&mut base, &servers, &token, &org)?;
        let side = ServerSide { addresses: &servers, token: &token, org: &org, bucket: &bucket };

        // A signal while a large fleet is set up stops it between two hosts (`cancel::catch_set_up`).
        let interrupted = |done: usize, what: &str| {
            opsbook_base::set_up_interrupted().map(|signal| {
                Error::Interrupted(format!(
                    "{signal} while the sandbox was set up: {done} of its {} simulated hosts {what}; nothing was run",
                    names.len()
                ))
            })
        };
        let mut client_files = Vec::new();
        for (i, name) in names.iter().enumerate() {
            if let Some(e) = interrupted(i, "were made, none started") {
                return Err(abandon(sandbox, runtime, e));
            }
            let mut sim = SimHost::new(name, runtime.handle().clone(), faults.on(name));
            let mut config = base.clone();
            let fleet = clients > 0;
            if !fleet || i == 0 {
                sim.add_servers(&config, &side);
            }
            let files = if !fleet || i > 0 {
                let folder = if fleet { sandbox.dir.join(name) } else { sandbox.dir.clone() };
                let label = if fleet { name.as_str() } else { "" };
                let files = ClientFiles::inside(sandbox.dir.join(name).join("root"), ports[2 + i]);
                write_client_files(&folder, &files, &side, label)?;
                point_at_clients(&mut config, &files)?;
                sim.add_clients(&config, &files);
                Some(files)
            } else {
                None
            };
            sim.arm_lost_host(&config);
            config.set(keys::ROLES, Value::Text(sim.roles.join(",")), Origin::Sandbox)?;
            client_files.push(files);
            let world = simulated_world(name, &sim, &sandbox.dir.join(name).join("root"), &ports)?;
            sandbox.hosts.push(Host { sim, world, config });
        }
        let booted = boot_in_order(&runtime, &sandbox.hosts);
        if let Some(e) = interrupted(booted, "had started") {
            return Err(abandon(sandbox, runtime, e));
        }
        for (host, files) in sandbox.hosts.iter().zip(&client_files) {
            if let Some(files) = files {
                host.sim.break_shipper_config(files).map_err(io("cannot write the sandbox shipper's configuration"))?;
            }
        }
        sandbox.runtime = Some(runtime);
        Ok(sandbox)
    }
}

/// Boots the hosts as the stack's units are ordered: the server host first, then the clients.
/// Returns how many booted before a signal interrupted the set-up (all of them when none did).
fn boot_in_order(runtime: &tokio::runtime::Runtime, hosts: &[Host]) -> usize {
    runtime.block_on(async {
        let store = hosts[0].sim.running_store(&hosts[0].config).cloned();
        for (i, host) in hosts.iter().enumerate() {
            // A host's boot may wait seconds for its shipper: the signal is looked for
            // meanwhile, so an interruption ends the set-up within a moment.
            let boot = host.sim.boot(&host.config, store.as_ref());
            tokio::pin!(boot);
            loop {
                tokio::select! {
                    _ = &mut boot => break,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                        if opsbook_base::set_up_interrupted().is_some() {
                            return i;
                        }
                    }
                }
            }
        }
        hosts.len()
    })
}

/// A set-up given up on (interrupted): `error` is returned at once, and the half-made
/// sandbox is taken down beside it. Removing a fleet's files takes seconds on a busy machine,
/// and the interruption is said first; whatever a process that ends meanwhile leaves behind,
/// the next sandbox sweeps away (`files::private_dir`).
fn abandon(mut sandbox: Sandbox, runtime: tokio::runtime::Runtime, error: Error) -> Error {
    sandbox.runtime = Some(runtime);
    std::thread::spawn(move || drop(sandbox));
    error
}

/// Writes a client host's agent and shipper configuration into its folder, pointed at the
/// sandbox's servers.
fn write_client_files(
    folder: &std::path::Path,
    files: &ClientFiles,
    side: &ServerSide<'_>,
    label: &str,
) -> Result<(), Error> {
    std::fs::create_dir_all(folder).map_err(io("cannot create the sandbox's host directory"))?;
    for file in [&files.agent_config, &files.shipper_config] {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(io("cannot create the sandbox's host directory"))?;
        }
    }
    let agent = files::agent_config(side.addresses.db, side.token, side.org, side.bucket, label);
    files::write_private(&files.agent_config, &agent).map_err(io("cannot write the sandbox agent's configuration"))?;
    let shipper = files::shipper_config(files.shipper, side.addresses.logs, label);
    files::write_private(&files.shipper_config, &shipper)
        .map_err(io("cannot write the sandbox shipper's configuration"))
}

/// The world of a simulated host: its units and journal, processes run for real, no
/// containers, and its `/` (with the folders a lifecycle runbook writes into) in `root`, so a
/// write to /etc stays in the sandbox's private directory; HTTP reaches only the sandbox's own
/// `servers`.
fn simulated_world(
    name: &str,
    sim: &SimHost,
    root: &std::path::Path,
    servers: &[std::net::SocketAddr],
) -> Result<World, Error> {
    for dir in ["etc/systemd/system", "var/lib", "root"] {
        std::fs::create_dir_all(root.join(dir)).map_err(io("cannot create the sandbox's host directory"))?;
    }
    Ok(World {
        hostname: Some(name.to_string()),
        units: sim.manager.clone(),
        journal: sim.journal.clone(),
        commands: Arc::new(commands::SimCommands { root: root.to_path_buf(), lost: sim.manager.lost.clone() }),
        containers: Arc::new(containers::NoContainers),
        net: Arc::new(opsbook_world::ConfinedNet { only: opsbook_world::Endpoints::only(servers.to_vec()) }),
        files: Arc::new(opsbook_world::LocalFiles { root: Some(root.to_path_buf()) }),
        endpoints: opsbook_world::Endpoints::only(servers.to_vec()),
        connection: None,
        sandbox: true,
        change_lock: Arc::new(opsbook_world::change_lock::HostLock::new(
            name,
            Box::new(opsbook_world::change_lock::Simulated { held_by: sim.faults.lock_holder().map(rehearsed_holder) }),
        )),
    })
}

/// The second operator a `lock-held` fault rehearses: `who`'s configure, begun two minutes ago.
fn rehearsed_holder(who: &str) -> opsbook_world::change_lock::Record {
    let mut record = opsbook_world::change_lock::Record::this_run("configure", "");
    record.who = who.to_string();
    record.pid = 4242;
    record.since = record.since.saturating_sub(120);
    let began = std::time::UNIX_EPOCH + std::time::Duration::from_secs(record.since);
    record.run = format!("{}-0000", humantime::format_rfc3339_seconds(began).to_string().replace(['-', ':'], ""));
    record
}

/// Points `config` at the sandbox's servers. The token is handed over as a secret, never
/// written into a setting.
fn point_at_servers(config: &mut Config, servers: &Servers, token: &Secret, org: &str) -> Result<(), Error> {
    let text = |s: &str| Value::Text(s.to_string());
    let settings = [
        (&**keys::METRICS_DB_URL, text(&format!("http://{}", servers.db))),
        (keys::METRICS_DB_ORG, text(org)),
        (&**keys::LOG_STORE_URL, text(&format!("http://{}", servers.logs))),
        (keys::UNITS_SETTLE, text("0s")),
        (keys::HTTP_CA_FILE, text("")),
    ];
    for (key, value) in settings {
        config.set(key, value, Origin::Sandbox)?;
    }
    config.hand_token(token.clone(), Origin::Sandbox);
    Ok(())
}

/// Points `config` at a host's client files and tools.
fn point_at_clients(config: &mut Config, files: &ClientFiles) -> Result<(), Error> {
    let text = |s: &str| Value::Text(s.to_string());
    let argv = |a: &[&str]| Value::Argv(a.iter().map(|s| s.to_string()).collect());
    let settings = [
        (keys::LOG_SHIPPER_URL, text(&format!("http://{}", files.shipper))),
        (keys::METRICS_AGENT_CONFIG, text(&files.agent_config.display().to_string())),
        (keys::LOG_SHIPPER_CONFIG, text(&files.shipper_config.display().to_string())),
    ];
    for (key, value) in settings {
        config.set(key, value, Origin::Sandbox)?;
    }
    // The clients' offline checks, whatever the host's configuration says: the table's own
    // commands, which `commands.rs` answers in-process.
    for key in [keys::METRICS_AGENT_TEST_COMMAND, keys::LOG_SHIPPER_VALIDATE_COMMAND] {
        config.set(key, argv(opsbook_base::components::default_check(key.name)), Origin::Sandbox)?;
    }
    Ok(())
}
