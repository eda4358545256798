//! opsbook: operate and verify a monitoring stack through editable Rhai runbooks.
//!
//! The command line over the layers in `crates/`: parsing arguments, the subcommands, the
//! REPL, `serve` and its history. Every procedure lives in `runbooks/*.rhai` and
//! `stdlib/*.rhai`; the verbs they call live in `opsbook-engine` (see ARCHITECTURE.md).

pub mod cli;
pub mod generate;
pub mod history;
mod inventory_show;
pub mod repl;
pub mod scripts;
pub mod serve;
pub mod subcommand;

// The layers, under the names the code here uses for them (see ARCHITECTURE.md); those the
// integration tests and benchmarks reach are public.
use opsbook_base::{cancel, error, input, progress, suggest};
pub use opsbook_base::{config, report, secret};
pub use opsbook_engine::catalog;
use opsbook_engine::{engine, functions, prefetch, runbook, syntax, verbs};
pub use opsbook_fleet::session;
use opsbook_fleet::{rollout, run as fleet_run, runner, targets};
pub use opsbook_inventory as inventory;
use opsbook_sandbox as sandbox;
pub use opsbook_twin as twin;
pub use opsbook_wire as wire;
pub use opsbook_world::{self as world, transport};

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the subcommand and maps the outcome to an exit status:
/// 0 passed, 1 a check failed, 2 usage/config/script error, 130 interrupted.
pub fn run() -> ExitCode {
    // The tokens this process can see are known to the redactor before anything is printed.
    secret::learn_environment();
    let args = match cli::Arguments::try_parse_from(twin::argv::translate(std::env::args_os().collect())) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    init_logging(args.global.verbose);
    match subcommand::execute(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // An error may quote an argument or a file: its control characters are escaped.
            opsbook_base::say!("{}", opsbook_base::shown::escaped(&e.to_string()));
            ExitCode::from(if matches!(e, error::Error::Interrupted(_)) { 130 } else { 2 })
        }
    }
}

/// Diagnostics on stderr: warnings by default, `-v` debug, `-vv` trace, or the level in
/// `$RUST_LOG`. Every line passes through the secret redactor.
fn init_logging(verbose: u8) {
    use tracing_subscriber::filter::LevelFilter;
    let from_env = std::env::var("RUST_LOG").ok().and_then(|v| v.trim().parse::<LevelFilter>().ok());
    let level = match verbose {
        0 => from_env.unwrap_or(LevelFilter::WARN),
        1 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(colour)
        .with_target(false)
        .with_writer(|| secret::RedactingWriter::new(std::io::stderr()))
        .try_init();
}
