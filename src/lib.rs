//! opsbook: operate and verify a monitoring stack through editable Rhai runbooks.
//!
//! The binary is a scripting host. Rust provides the verbs (`host/`), the catalog of
//! runbooks and modules, the engine and its limits, the configuration and the reports;
//! every procedure lives in `runbooks/*.rhai` and `stdlib/*.rhai`.

pub mod cancel;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod connect;
pub mod diagnostic;
pub mod engine;
pub mod error;
pub mod fleet;
pub mod functions;
pub mod gathering;
pub mod history;
pub mod host;
pub mod http_client;
pub mod inventory;
pub mod process;
pub mod progress;
pub mod repl;
pub mod report;
pub mod runbook;
pub mod sandbox;
pub mod scripts;
pub mod secret;
pub mod serve;
pub mod session;
pub mod subcommand;
pub mod transport;
pub mod twin;
pub mod wire;
pub mod world;

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the subcommand and maps the outcome to an exit status:
/// 0 passed, 1 a check failed, 2 usage/config/script error, 130 interrupted.
pub fn run() -> ExitCode {
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
            eprintln!("{}", secret::redact(&e.to_string()));
            ExitCode::from(2)
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
