//! Command-line arguments (clap derive).
//!
//! Everything the operator types is declared here and nowhere else. Options that shape the
//! environment a runbook runs in (config, search path, output format, dry-run, verbosity) are
//! `global`, so they are accepted before or after the subcommand. `subcommand.rs` turns the
//! parsed arguments into work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::report::Format;

/// Operate and verify a self-hosted monitoring stack through editable Rhai runbooks.
///
/// Every procedure (start order, restart-all, verifications, end-to-end flows, the checklist)
/// is a `.rhai` runbook you can read and edit; opsbook provides the verbs (units, journal,
/// HTTP probes, queries) and the report.
#[derive(Debug, Parser)]
#[command(name = "opsbook", version, propagate_version = true, max_term_width = 100)]
#[command(after_help = "Examples:\n  opsbook list\n  opsbook run quick-check\n  \
                        opsbook run quick-check --sandbox --fault log-store:down\n  \
                        opsbook run restart-all --dry-run\n  opsbook run logs --set unit=loki --format json")]
pub struct Arguments {
    #[command(flatten)]
    pub global: GlobalOptions,

    #[command(subcommand)]
    pub command: Command,
}

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
- metrics-agent:not-writing — the agent runs but writes nothing\n\
- log-shipper:bad-config — the shipper's configuration file no longer validates\n\
- log-shipper:reload-fails — the shipper's reload fails";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a runbook by name and report its checks.
    ///
    /// Exit status: 0 all checks passed, 1 a check failed or the runbook aborted,
    /// 2 usage, configuration or script error, 130 interrupted.
    Run(RunArgs),

    /// List every runbook found, with its summary and where it comes from.
    List,

    /// Show a runbook's documentation, parameters and source path.
    Show {
        /// Runbook name (file name without `.rhai`).
        name: String,
    },

    /// Compile runbooks and stdlib modules without running them (all when no name is given).
    Check {
        /// Runbook names; none means every runbook and module found.
        names: Vec<String>,
    },

    /// List the host functions runbooks can call.
    Fns {
        /// Only functions whose namespace, name or doc contains this text.
        filter: Option<String>,

        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,

        /// Write Rhai definition files for editors into DIR instead of listing.
        #[arg(long, value_name = "DIR", conflicts_with = "json")]
        definitions: Option<PathBuf>,
    },

    /// Print the effective configuration and where each value came from (secrets redacted).
    Config,

    /// List the fleet's hosts: address, roles, ssh details, and where each value came from.
    ///
    /// Sources: `[hosts.NAME]`/`[groups.NAME]` of the config files and the Ansible inventory
    /// (`--inventory` or the `inventory` key); with neither, the one host is this machine.
    /// Exit status 1 when a value could not be resolved (listed last; nothing is guessed).
    Hosts {
        /// Only the hosts this pattern selects (as `--hosts`); all when omitted.
        pattern: Option<String>,
    },

    /// Explore interactively: host functions, stdlib modules and runbooks at a prompt.
    ///
    /// Variables, functions and imports persist across lines; `:help` lists the commands.
    Repl,

    /// Watch the stack: run runbooks on a schedule and serve /healthz, /metrics, the runs as
    /// JSON and a status page; every run is kept in the history.
    ///
    /// Jobs come from `[[serve.job]]` tables, or as RUNBOOK@INTERVAL arguments. Runbooks that
    /// change the stack are refused unless the job says `mutating = true`.
    Serve(ServeArgs),

    /// Show the runs `opsbook serve` kept: outcomes, failed checks, and checks that flap.
    History(crate::history::command::HistoryArgs),

    /// Run one stand-in of the stack in the foreground (metrics-db, log-store, metrics-agent,
    /// log-shipper), logging to stdout, on the stack's usual ports (8086, 3100, 12345).
    Twin(crate::twin::TwinArgs),

    /// The orchestrator scripts (manage-svc.sh, svc-exec.sh): what they are, and where they
    /// are installed; `--install DIR` writes them.
    Scripts(crate::scripts::ScriptsArgs),

    /// Print a shell completion script.
    Completions {
        /// Target shell.
        shell: clap_complete::Shell,
    },
}

/// Arguments of `opsbook run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Runbook name (see `opsbook list`).
    pub name: String,

    /// Override a runbook parameter (repeatable); see `opsbook show NAME` for the parameters.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub params: Vec<(String, String)>,

    /// Also write the report to FILE as the `--format json` document, whatever `--format`
    /// prints (the orchestrator scripts keep it when a run fails).
    #[arg(long, value_name = "FILE")]
    pub save_json: Option<PathBuf>,
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got `{text}`")),
    }
}

/// Arguments of `opsbook serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Jobs as RUNBOOK@INTERVAL (e.g. `quick-check@1m verify@10m`); when given, they replace
    /// the `[[serve.job]]` tables of the configuration.
    pub jobs: Vec<String>,

    /// Listen on this address (default: `serve.listen`, else 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,

    /// Keep the history in DIR (default: `serve.state_dir`, else /var/lib/opsbook for root,
    /// else $XDG_STATE_HOME/opsbook or ~/.local/state/opsbook).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}
