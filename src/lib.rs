//! opsbook: operate and verify a monitoring stack through editable Rhai runbooks.
//!
//! The command line over the layers in `crates/`: parsing arguments, the subcommands, the
//! REPL, `serve` and its history. Every procedure lives in `runbooks/*.rhai` and
//! `stdlib/*.rhai`; the verbs they call live in `opsbook-engine` (see ARCHITECTURE.md).
//!
//! Its face is `run` (what the binary calls) and the parsed command line (`parse`,
//! `Arguments`, `Command`: what the docs test reads); every module is private.

#![deny(missing_docs)]

mod cli;
mod generate;
mod history;
mod inventory_show;
mod options;
mod outside_inventory;
mod repl;
mod scripts;
mod serve;
mod subcommand;

pub use cli::{Arguments, Command, parse};

use std::process::ExitCode;

/// Parses the command line, runs the subcommand and maps the outcome to an exit status:
/// 0 passed, 1 a check failed, 2 usage/config/script error, 75 a host's change lock held by
/// another run, 124 timed out, 130 interrupted.
pub fn run() -> ExitCode {
    opsbook_base::two_heaps();
    // What every engine shares is built on a thread of its own while the command line and the
    // configuration are read: a runbook's run (`opsbook … run NAME`) starts on it at once.
    if std::env::args_os().skip(1).any(|arg| arg == "run") {
        opsbook_engine::engine::prepare_in_background();
    }
    // The tokens this process can see are known to the redactor before anything is printed.
    opsbook_base::secret::learn_environment();
    let args = match cli::parse(std::env::args_os().collect()) {
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
            opsbook_base::say!("{}", opsbook_base::escaped(&e.to_string()));
            ExitCode::from(if matches!(e, opsbook_base::Error::Interrupted(_)) { 130 } else { 2 })
        }
    }
}

/// How a diagnostic's fields are written: a field's value may hold text from outside (a
/// server's answer, a journal line), so its control characters are written visibly, as in every
/// other human output (`shown::escaped`).
fn log_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    let fields = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = format!("{value:?}");
        let shown = opsbook_base::escaped(&text);
        if field.name() == "message" { write!(w, "{shown}") } else { write!(w, "{}={shown}", field.name()) }
    });
    tracing_subscriber::field::MakeExt::delimited(fields, " ")
}

/// Diagnostics on stderr: warnings by default, `-v` debug, `-vv` trace, or the level in
/// `$RUST_LOG`. Every line passes through the secret redactor; control characters in its
/// fields are written visibly.
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
        .fmt_fields(log_fields())
        .with_writer(|| opsbook_base::secret::RedactingWriter::new(std::io::stderr()))
        .try_init();
}

#[cfg(test)]
mod log_tests {
    /// A diagnostic quoting a hostile answer shows its control characters, never sends them.
    #[test]
    fn control_characters_in_a_diagnostic_are_written_visibly() {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_target(false)
            .without_time()
            .with_level(false)
            .fmt_fields(super::log_fields())
            .with_writer(move || Sink(sink.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(body = "\u{1b}]0;PWNED\u{7}", "the server said \u{1b}[2J");
        });
        let written = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
        // A text field is quoted and escaped by its Debug already; the message is not, until here.
        assert_eq!(written.trim_start(), "the server said \\x1b[2J body=\"\\u{1b}]0;PWNED\\u{7}\"\n");
        assert!(!written.contains('\u{1b}') && !written.contains('\u{7}'), "{written:?}");
    }

    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
