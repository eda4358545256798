//! The API token as a type that cannot leak by accident.
//!
//! A `Secret` prints as `<redacted>` through `Debug` and `Display` and has no `Serialize`, so
//! putting it in a log line, an error or a report shows nothing. The only way to the text is
//! `expose()`, called where an `Authorization` header is built. As a second line of defence,
//! every secret ever exposed is remembered and `redact()` blanks it out of any text that is
//! about to leave the process (reports, diagnostics, log lines): a server that echoes the token
//! back in an error body cannot make opsbook print it.
//!
//! That is the one redaction point: every way out — `stdout()`, `stderr()`, `say!`, the
//! report writers, the log writer — is a `RedactingWriter`, and the values are known before
//! anything is printed (`learn_environment` at start, the configuration's own when it is read,
//! `learn_assignments` before a file is parsed), in any letter case, in every encoding a
//! writer applies (JSON, XML, HTML, URL: `encoding.rs`) and in every line of a multi-line one.
//! `Secret` and the list of known values live in `value.rs`, the token's sources in `token.rs`,
//! passwords in URLs in `url_password.rs`.

mod encoding;
mod token;
mod url_password;
mod value;

pub use token::{TokenSource, random as random_token, write_file as write_token_file};
pub use url_password::learn as learn_url_passwords;
pub use value::Secret;

use std::borrow::Cow;

use value::{REDACTED, redact_known};

/// `text` with every known secret replaced by `<redacted>`, in any letter case (ssh, for one,
/// lowers a host name before quoting it), and the password of every URL in it too, known or
/// not (`http://bob:<redacted>@host`).
pub fn redact(text: &str) -> Cow<'_, str> {
    match url_password::blank(text, REDACTED) {
        Cow::Borrowed(text) => redact_known(text),
        Cow::Owned(blanked) => Cow::Owned(redact_known(&blanked).into_owned()),
    }
}

/// Learns the token values this process can see before anything is read or printed: the
/// environment's `INFLUX_TOKEN` (which an inventory may look up, `{{ lookup('env',
/// 'INFLUX_TOKEN') }}`, whether or not the configuration uses it). The configuration adds
/// its own (`token`, `token_file`) when it is loaded, and `token_command`'s when it runs.
pub fn learn_environment() {
    if let Ok(text) = std::env::var("INFLUX_TOKEN") {
        Secret::new(text);
    }
}

/// Learns the value of every `token = …` assignment in a configuration's text, and the
/// password of every URL in it, before it is parsed: a syntax error quoting that line cannot
/// show them.
pub fn learn_assignments(text: &str) {
    url_password::learn(text);
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        // `token` in `[metrics_db]`, dotted, or a host's `config.metrics_db.token`.
        if key != "token" && !key.ends_with("metrics_db.token") {
            continue;
        }
        let value = value.trim();
        let value = value.split_once(" #").map_or(value, |(v, _)| v).trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'').trim();
        if !value.is_empty() {
            Secret::new(value);
        }
    }
}

/// The process's standard output through the redactor: what every command prints goes here.
pub fn stdout() -> RedactingWriter<std::io::StdoutLock<'static>> {
    RedactingWriter::new(std::io::stdout().lock())
}

/// The process's standard error through the redactor.
pub fn stderr() -> RedactingWriter<Stderr> {
    RedactingWriter::new(Stderr)
}

thread_local! {
    /// What this thread's `say!` wrote while `capturing_stderr` held it.
    static CAPTURED: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Standard error, or this thread's capture while `capturing_stderr` runs.
pub struct Stderr;

impl std::io::Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let captured = CAPTURED.with_borrow_mut(|captured| captured.as_mut().map(|c| c.extend_from_slice(buf)));
        if captured.is_none() {
            std::io::stderr().lock().write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Runs `f` with what this thread prints on stderr kept instead of printed, and returns it:
/// an in-process caller (a test driving a session) reads the diagnostics a run would show.
pub fn capturing_stderr<T>(f: impl FnOnce() -> T) -> (T, String) {
    let before = CAPTURED.with_borrow_mut(|captured| captured.replace(Vec::new()));
    let value = f();
    let kept = CAPTURED.with_borrow_mut(|captured| std::mem::replace(captured, before)).unwrap_or_default();
    (value, String::from_utf8_lossy(&kept).into_owned())
}

/// Prints a line on stderr through the redactor (what `eprintln!` would print).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut err = $crate::secret::stderr();
        let _ = writeln!(err, $($arg)*);
    }};
}

/// Prints a line on stdout through the redactor (what `println!` would print). With `say!`,
/// the only way opsbook's own code prints (`clippy.toml` refuses the print macros elsewhere).
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = $crate::secret::stdout();
        let _ = writeln!(out, $($arg)*);
    }};
}

/// Prints on stderr through the redactor without ending the line (what `eprint!` would print).
#[macro_export]
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut err = $crate::secret::stderr();
        let _ = write!(err, $($arg)*);
    }};
}

/// A writer that redacts secrets line by line; used for stdout reports and stderr logs.
///
/// Text is held until its line is complete (or the writer is flushed or dropped), so a
/// secret written in pieces is still seen whole.
pub struct RedactingWriter<W: std::io::Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: std::io::Write> RedactingWriter<W> {
    /// A writer redacting what it passes on to `inner`.
    pub fn new(inner: W) -> Self {
        RedactingWriter { inner, pending: Vec::new() }
    }

    fn pass(&mut self, upto: usize) -> std::io::Result<()> {
        let line: Vec<u8> = self.pending.drain(..upto).collect();
        let text = String::from_utf8_lossy(&line);
        self.inner.write_all(redact(&text).as_bytes())
    }
}

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(last) = self.pending.iter().rposition(|&b| b == b'\n') {
            self.pass(last + 1)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.pass(self.pending.len())?;
        self.inner.flush()
    }
}

impl<W: std::io::Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_formats_its_text() {
        let s = Secret::new("canary-secret-123");
        assert_eq!(format!("{s} {s:?}"), "<redacted> <redacted>");
        assert_eq!(s.expose(), "canary-secret-123");
    }

    #[test]
    fn redact_blanks_known_secrets() {
        let _s = Secret::new("tok-abcdef-987");
        assert_eq!(redact("got tok-abcdef-987 back"), "got <redacted> back");
        assert_eq!(redact("nothing here"), "nothing here");
        assert_eq!(redact("host TOK-ABCDEF-987 lowered"), "host <redacted> lowered");
    }

    #[test]
    fn a_secret_written_in_pieces_is_still_redacted() {
        use std::io::Write;
        let _s = Secret::new("piecewise-secret-55");
        let mut seen = Vec::new();
        {
            let mut w = RedactingWriter::new(&mut seen);
            write!(w, "a piecewise-").unwrap();
            write!(w, "secret-55 b\nc").unwrap();
        }
        assert_eq!(String::from_utf8(seen).unwrap(), "a <redacted> b\nc");
    }

    #[test]
    fn a_token_assigned_in_a_broken_file_is_learned() {
        learn_assignments("[metrics_db]\ntoken = \"assigned-secret-66\n");
        assert_eq!(redact("2 | token = \"assigned-secret-66"), "2 | token = \"<redacted>");
    }
}
