//! Entry point: everything happens in `opsbook::run`, which maps the outcome to an exit code.

fn main() -> std::process::ExitCode {
    opsbook::run()
}
