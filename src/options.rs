//! The options every subcommand shares, declared for clap: where the configuration, runbooks
//! and inventory are, how a run acts (dry-run, sandbox and its faults), which hosts it acts on
//! and how many at once (`GlobalArgs`); and how `run` rolls a change out over several hosts
//! (`RolloutArgs`: batches, a failure budget, rollback). Declared once so the command line
//! accepts them anywhere; the layers below get them as plain data (`opsbook_fleet`'s
//! `GlobalOptions` and `RolloutOptions`), with the values refused here in words.

use std::path::PathBuf;

use clap::Args;

use opsbook_base::report::Format;
use opsbook_fleet::{GlobalOptions, RolloutOptions, Share};

/// Options accepted anywhere on the command line.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
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
    #[arg(long, global = true, value_name = "N", value_parser = fleet_size)]
    pub fleet: Option<usize>,

    /// Hosts a run over several hosts may run at once.
    #[arg(long, global = true, value_name = "N", default_value_t = 10, value_parser = forks)]
    pub forks: usize,

    /// With --sandbox, make the stack misbehave (repeatable): [HOST:]COMPONENT:FAULT[=VALUE].
    // The brackets are the spec's syntax as `--help` prints it, not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long = "fault", global = true, value_name = "SPEC", long_help = opsbook_sandbox::fault_help())]
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

    /// A run that changes a host holds the host's change lock; when another run holds it, wait
    /// up to DURATION (`30s`, `10m`) for it, saying on stderr whom it waits for, instead of
    /// refusing at once (exit status 75, naming the holder).
    #[arg(long, global = true, value_name = "DURATION", value_parser = lock_timeout)]
    pub lock_timeout: Option<std::time::Duration>,

    /// More diagnostics on stderr (-v debug, -vv trace). $RUST_LOG sets a level too.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

// How `opsbook run` rolls a change out over several hosts (`opsbook_fleet::rollout`)
// (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
#[derive(Debug, Args, Clone)]
pub struct RolloutArgs {
    /// Roll the change out in batches of N hosts, or P% of them (`25%`): the next batch starts
    /// only when every host of this one passed its gate (the run's own checks on that host).
    #[arg(long, value_name = "N|P%", value_parser = Share::batch)]
    pub serial: Option<Share>,

    /// Roll the change out to one host first (a batch of one), then the rest (in batches of
    /// --serial when given).
    #[arg(long)]
    pub canary: bool,

    /// With --serial or --canary: how many hosts, N or P% of them, may fail before no further
    /// batch starts (default 0: the first failure stops the rollout).
    #[arg(long, value_name = "N|P%", value_parser = Share::parse)]
    pub max_fail: Option<Share>,

    /// With --serial or --canary: keep the new state of a host whose gate failed, for
    /// inspection, instead of rolling it back (`opsbook run rollback` restores it later).
    #[arg(long)]
    pub no_rollback: bool,
}

impl GlobalArgs {
    /// The options as the layers below read them.
    pub fn options(&self) -> GlobalOptions {
        GlobalOptions {
            config: self.config.clone(),
            runbook_dirs: self.runbook_dirs.clone(),
            format: self.format,
            dry_run: self.dry_run,
            user: self.user,
            sandbox: self.sandbox,
            fleet: self.fleet,
            forks: self.forks,
            faults: self.faults.clone(),
            inventory: self.inventory.clone(),
            hosts: self.hosts.clone(),
            host: self.host.clone(),
            lock_timeout: self.lock_timeout,
            verbose: self.verbose,
        }
    }
}

impl RolloutArgs {
    /// The rollout as the fleet runs it.
    pub fn options(&self) -> RolloutOptions {
        RolloutOptions {
            serial: self.serial,
            canary: self.canary,
            max_fail: self.max_fail,
            no_rollback: self.no_rollback,
        }
    }

    /// Whether the run is a rollout: batches were asked for.
    pub fn wanted(&self) -> bool {
        self.options().wanted()
    }

    /// The options that only mean something in a rollout, when given without one.
    pub fn stray(&self) -> Option<&'static str> {
        match () {
            _ if self.wanted() => None,
            _ if self.max_fail.is_some() => Some("--max-fail"),
            _ if self.no_rollback => Some("--no-rollback"),
            _ => None,
        }
    }
}

/// The most simulated client hosts `--fleet` starts: each is a set of in-process components
/// with ports, files and threads of its own, and a sandbox is for rehearsing, not load.
const MAX_FLEET: usize = 200;
/// The most hosts a run acts on at once.
const MAX_FORKS: usize = 1000;

/// `--lock-timeout`: a duration (zero: refuse at once, as without it).
fn lock_timeout(text: &str) -> Result<std::time::Duration, String> {
    opsbook_base::config::parse_duration(text).ok_or_else(|| format!("`{text}` is not a duration like `30s` or `10m`"))
}

/// `--fleet N`: 1 to `MAX_FLEET`, refused in words otherwise (not obeyed until memory runs out).
fn fleet_size(text: &str) -> Result<usize, String> {
    bounded(text, MAX_FLEET, "simulated client hosts")
}

/// `--forks N`: 1 to `MAX_FORKS` (0 would run nothing, for ever).
fn forks(text: &str) -> Result<usize, String> {
    bounded(text, MAX_FORKS, "hosts at once")
}

fn bounded(text: &str, max: usize, what: &str) -> Result<usize, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n >= 1 && n <= max as u64 => Ok(n as usize),
        Ok(_) => Err(format!("give between 1 and {max} {what}")),
        Err(_) => Err(format!("`{text}` is not a number of {what} (1 to {max})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_and_forks_are_bounded_in_words() {
        assert_eq!(fleet_size("3"), Ok(3));
        assert_eq!(fleet_size("4294967296"), Err("give between 1 and 200 simulated client hosts".to_string()));
        assert_eq!(forks("0"), Err("give between 1 and 1000 hosts at once".to_string()));
        assert_eq!(forks("many"), Err("`many` is not a number of hosts at once (1 to 1000)".to_string()));
    }
}
