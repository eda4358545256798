//! Command-line arguments (clap derive).
//!
//! The subcommands and their own arguments are declared here; the options every subcommand
//! shares (config, search path, output format, dry-run, sandbox, hosts, verbosity) are
//! `GlobalArgs` in `options.rs`, flattened in here and `global`, so they are accepted before
//! or after the subcommand. `subcommand.rs` turns the parsed arguments into
//! work.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub(crate) use crate::options::{GlobalArgs, RolloutArgs};
pub(crate) use opsbook_fleet::GlobalOptions;

/// The command line parsed. Only a twin's reads its real program's flags (`twin log-store
/// -config.file=…`, `twin metrics-agent --config PATH`): those are translated by the twin
/// (`opsbook_twin::translate_argv`) when clap finds the `twin` subcommand or cannot read the
/// line as it is, and every other command line is parsed as it was given.
pub fn parse(raw: Vec<OsString>) -> Result<Arguments, clap::Error> {
    match Arguments::try_parse_from(&raw) {
        Ok(args) if !matches!(args.command, Command::Twin(_)) => Ok(args),
        _ => Arguments::try_parse_from(opsbook_twin::translate_argv(raw)),
    }
}

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
    /// The options every subcommand shares, before or after it.
    #[command(flatten)]
    pub global: GlobalArgs,

    /// The subcommand and its own arguments.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands, each with its own arguments. A subcommand's arguments are declared to
/// clap only once the command line names it (`defer`): a run does not build every other
/// subcommand's. Their argument structs carry no doc comment for that reason: clap applies a
/// deferred struct's doc after the variant's, so it would replace the subcommand's help.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Run a runbook by name and report its checks.
    ///
    /// Exit status: 0 all checks passed, 1 a check failed or the runbook aborted,
    /// 2 usage, configuration or script error, 75 another run holds a host's change lock
    /// (nothing was changed; --lock-timeout waits for it), 124 timed out, 130 interrupted.
    Run(RunArgs),

    /// List every runbook found, with its summary and where it comes from.
    List,

    /// Show a runbook's documentation, parameters and source path.
    Show {
        /// Runbook name (file name without `.rhai`).
        name: String,
    },

    /// List the templates `template::render` finds and where each comes from, or print one.
    Templates {
        /// A template's name (`log-shipper/config.alloy.j2`): print its text instead.
        name: Option<String>,
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
    ///
    /// `--format prometheus` prints the hosts as Prometheus file_sd targets instead, one per
    /// host: its `opsbook serve` (the address, or 127.0.0.1 for this machine, and the port of
    /// `serve.listen`), labelled with `host` and `roles`. A host whose address could not be
    /// resolved is left out and named on stderr (exit status 1).
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
    Twin(opsbook_twin::TwinArgs),

    /// The orchestrator scripts (manage-svc.sh, svc-exec.sh): what they are, and where they
    /// are installed; `--install DIR` writes them.
    Scripts(crate::scripts::ScriptsArgs),

    /// Print a shell completion script.
    Completions {
        /// Target shell.
        shell: clap_complete::Shell,
    },

    /// Write the man pages or the shell completions into a directory (for packaging).
    #[command(hide = true)]
    Generate(GenerateArgs),
}

// Arguments of `opsbook run` (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
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

    /// Stop the run after DURATION (`30s`, `10m`) with its partial report, saying where it
    /// was; exit 124. Over several hosts every host's run stops then; a rollout takes none.
    /// Default: `limits.run_timeout` (none).
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,

    /// Over several hosts: in batches, each gated, a failed host rolled back.
    #[command(flatten, next_help_heading = "Rollout (a change over several hosts)")]
    pub rollout: RolloutArgs,
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got `{text}`")),
    }
}

/// `--timeout`: a duration more than zero.
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    match opsbook_base::config::parse_duration(text) {
        Some(d) if d.is_zero() => Err("the time limit must be more than zero".to_string()),
        Some(d) => Ok(d),
        None => Err(format!("`{text}` is not a duration like `30s` or `10m`")),
    }
}

// Arguments of `opsbook serve` (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
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

// Arguments of `opsbook generate` (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// What to write.
    pub what: What,

    /// The directory to write into (created if missing); files of the same name are replaced.
    pub dir: PathBuf,
}

/// The kinds of files `generate` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum What {
    /// Man pages, section 1.
    Man,
    /// Completion scripts for bash, zsh and fish.
    Completions,
}
