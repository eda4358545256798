//! The options every subcommand shares: where the configuration, runbooks and inventory are,
//! how a run acts (dry-run, sandbox and its faults), which hosts it acts on and how many at
//! once. Declared once with clap's derive so the command line accepts them anywhere; the
//! layers below read them as plain data.

use std::path::PathBuf;

use clap::Args;

use crate::config::{Config, Sources};
use crate::error::Error;
use crate::inventory::Inventory;
use crate::report::Format;

/// Options accepted anywhere on the command line.
#[derive(Debug, Args, Clone, Default)]
pub struct GlobalOptions {
    /// Read configuration from this TOML file (it must exist); overrides $OPSBOOK_CONFIG.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Look for runbooks in DIR first (repeatable; the first given wins). Modules are looked up
    /// in the `stdlib` folder beside DIR.
    #[arg(long = "runbooks", global = true, value_name = "DIR")]
    pub runbook_dirs: Vec<PathBuf>,

    /// Report format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    pub format: Format,

    /// Report what mutating calls would do instead of doing them; reads still run.
    #[arg(long, global = true)]
    pub dry_run: bool,

    /// Talk to the user's service manager (rootless units) instead of the system's.
    #[arg(long, global = true)]
    pub user: bool,

    /// Run against an in-process stack instead of this machine's: the four components as
    /// simulated units, their servers on loopback ports, an in-memory journal. Needs no root,
    /// no systemd and no network; changes nothing on this machine.
    #[arg(long, global = true)]
    pub sandbox: bool,

    /// With --sandbox, simulate a fleet: a server host and N client hosts (c1…cN), each with its
    /// own units and journal; a runbook then runs on every host at once.
    #[arg(long, global = true, value_name = "N")]
    pub fleet: Option<usize>,

    /// Hosts a run over several hosts may run at once.
    #[arg(long, global = true, value_name = "N", default_value_t = 10)]
    pub forks: usize,

    /// With --sandbox, make the stack misbehave (repeatable): [HOST:]COMPONENT:FAULT[=VALUE].
    #[arg(long = "fault", global = true, value_name = "SPEC", long_help = FAULT_HELP)]
    pub faults: Vec<String>,

    /// Read the fleet's hosts from this Ansible inventory (YAML or INI); overrides the
    /// `inventory` config key.
    #[arg(long, global = true, value_name = "FILE")]
    pub inventory: Option<PathBuf>,

    /// Act on the hosts this Ansible-style pattern selects: `all`, a group, a host, a role,
    /// `a,b`, `a:&b`, `a:!b`, `web*` (see `opsbook hosts PATTERN`).
    #[arg(long, global = true, value_name = "PATTERN", conflicts_with = "host")]
    pub hosts: Option<String>,

    /// Act on this one host of the inventory.
    #[arg(long, global = true, value_name = "NAME")]
    pub host: Option<String>,

    /// More diagnostics on stderr (-v debug, -vv trace). $RUST_LOG sets a level too.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

const FAULT_HELP: &str = "With --sandbox, make the stack misbehave (repeatable): [HOST:]COMPONENT:FAULT[=VALUE], \
the components being metrics-db, log-store, metrics-agent, log-shipper; with --fleet, HOST (server, c1, c2…) \
limits the fault to one host, else it applies wherever the component runs.\n\
- C:down — the unit is stopped when the run begins\n\
- C:fail-start — starting the unit fails (its process exits with status 1)\n\
- C:no-reload — the unit has no reload support (systemd refuses the job)\n\
- metrics-db:slow-ready[=15s], log-store:slow-ready[=15s] — not listening / not ready for a while after each start\n\
- metrics-db:error-500, log-store:error-500 — every answer is a 500\n\
- metrics-db:garbage, log-store:garbage — every answer is an HTML page\n\
- metrics-db:refuse-token — the API token is refused (401)\n\
- metrics-db:fresh — the database is not set up yet (no org, bucket or token until onboarding)\n\
- metrics-db:all-access-token — the API token is all-access, not operator (/api/v2/config refuses it)\n\
- metrics-agent:json-errors, log-shipper:json-errors — the component logs in JSON\n\
- metrics-agent:logfile — the agent logs to its logfile, not the journal\n\
- metrics-agent:reload-exits — a reload makes the agent exit a second later\n\
- metrics-agent:not-writing — the agent runs but writes nothing\n\
- log-shipper:bad-config — the shipper's configuration file no longer validates\n\
- log-shipper:reload-fails — the shipper's reload fails";

impl GlobalOptions {
    /// The inventory the command line asks for: `--config` and `--user` as every subcommand
    /// reads them, `--inventory` over the `inventory` key.
    pub fn inventory(&self) -> Result<Inventory, Error> {
        let sources = Sources { explicit: self.config.clone(), user_scope: self.user };
        let config = Config::load(&sources)?;
        Inventory::load(&config, self.inventory.as_deref())
    }
}
