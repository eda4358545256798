//! The options every subcommand shares, as the layers below read them: where the
//! configuration, runbooks and inventory are, how a run acts (dry-run, sandbox and its
//! faults), which hosts it acts on and how many at once; and how `run` rolls a change out over
//! several hosts (`RolloutOptions`: batches, a failure budget, rollback). Plain data: the
//! command line declares them (clap, in the CLI crate) and hands them down.

use std::path::PathBuf;

use opsbook_base::Error;
use opsbook_base::config::{Config, Sources};
use opsbook_base::report::Format;
use opsbook_inventory::Inventory;

/// The options every subcommand shares, as data; each field is the flag of its name (`--config`,
/// `--runbooks`, `--fault`, …), whose help says what it does.
#[derive(Debug, Clone, Default)]
pub struct GlobalOptions {
    /// `--config`: the configuration file, over `$OPSBOOK_CONFIG` and the search path.
    pub config: Option<PathBuf>,
    /// `--runbooks`: folders searched for runbooks first, in order.
    pub runbook_dirs: Vec<PathBuf>,
    /// `--format`: the report's format.
    pub format: Format,
    /// `--dry-run`: changing verbs say what they would do instead.
    pub dry_run: bool,
    /// `--user`: the user's service manager instead of the system's.
    pub user: bool,
    /// `--sandbox`: the in-process stack instead of this machine's.
    pub sandbox: bool,
    /// `--fleet N`: with `--sandbox`, a server and N simulated client hosts.
    pub fleet: Option<usize>,
    /// `--forks N`: hosts a run over several hosts runs at once.
    pub forks: usize,
    /// `--fault`: with `--sandbox`, the faults to simulate (`[HOST:]COMPONENT:FAULT[=VALUE]`).
    pub faults: Vec<String>,
    /// `--inventory`: the Ansible inventory, over the `inventory` key.
    pub inventory: Option<PathBuf>,
    /// `--hosts`: the pattern selecting the hosts a run acts on.
    pub hosts: Option<String>,
    /// `--host`: the one inventory host a run acts on.
    pub host: Option<String>,
    /// `--lock-timeout`: how long to wait for a host's change lock held by another run.
    pub lock_timeout: Option<std::time::Duration>,
    /// `-v`: the diagnostics' verbosity (1 debug, 2 trace).
    pub verbose: u8,
}

/// How `opsbook run` rolls a change out over several hosts (`rollout.rs`); each field is the
/// flag of its name.
#[derive(Debug, Clone, Default)]
pub struct RolloutOptions {
    /// `--serial`: the size of a batch; the next starts when each host of this one passed.
    pub serial: Option<Share>,
    /// `--canary`: one host first, then the rest.
    pub canary: bool,
    /// `--max-fail`: how many hosts may fail before no further batch starts.
    pub max_fail: Option<Share>,
    /// `--no-rollback`: a host whose gate failed keeps its new state.
    pub no_rollback: bool,
}

impl RolloutOptions {
    /// Whether the run is a rollout: batches were asked for.
    pub fn wanted(&self) -> bool {
        self.serial.is_some() || self.canary
    }
}

/// A number of hosts, or a share of them (`--serial 25%`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// A number of hosts.
    Hosts(usize),
    /// A share of the hosts, in percent (0 to 100).
    Percent(u32),
}

impl Share {
    /// `N` hosts or `P%` of them, refused in words otherwise.
    pub fn parse(text: &str) -> Result<Share, String> {
        let wrong = || format!("`{text}` is neither a number of hosts (2) nor a share of them (25%)");
        match text.trim().strip_suffix('%') {
            Some(p) => match p.trim().parse::<u32>() {
                Ok(p) if p <= 100 => Ok(Share::Percent(p)),
                _ => Err(wrong()),
            },
            None => text.trim().parse().map(Share::Hosts).map_err(|_| wrong()),
        }
    }

    /// A batch's size: zero hosts (or 0%) would change nothing, and is refused, not obeyed.
    pub fn batch(text: &str) -> Result<Share, String> {
        match Share::parse(text)? {
            Share::Hosts(0) | Share::Percent(0) => {
                Err(format!("`{text}`: a batch of no hosts changes nothing; give 1 or more hosts, or a share above 0%"))
            }
            share => Ok(share),
        }
    }

    /// How many hosts of `total` this is (a share rounds down).
    pub fn of(self, total: usize) -> usize {
        match self {
            Share::Hosts(n) => n,
            Share::Percent(p) => total * p as usize / 100,
        }
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Share::Hosts(n) => write!(f, "{n}"),
            Share::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl GlobalOptions {
    /// Where the configuration comes from, as every subcommand reads it: `--config` over the
    /// search path, `--user`'s scope.
    pub fn sources(&self) -> Sources {
        Sources { explicit: self.config.clone(), user_scope: self.user }
    }

    /// The configuration the command line asks for (`sources`), loaded.
    pub fn load_config(&self) -> Result<Config, Error> {
        Config::load(&self.sources())
    }

    /// The inventory the command line asks for: the configuration as every subcommand reads
    /// it, `--inventory` over the `inventory` key.
    pub fn inventory(&self) -> Result<Inventory, Error> {
        Inventory::load(&self.load_config()?, self.inventory.as_deref())
    }
}
