//! The API token as a type that cannot leak by accident.
//!
//! A `Secret` prints as `<redacted>` through `Debug` and `Display` and has no `Serialize`, so
//! putting it in a log line, an error or a report shows nothing. The only way to the text is
//! `expose()`, called where an `Authorization` header is built. As a second line of defence,
//! every secret ever exposed is remembered and `redact()` blanks it out of any text that is
//! about to leave the process (reports, diagnostics, log lines): a server that echoes the token
//! back in an error body cannot make opsbook print it.

mod token;

pub use token::{TokenSource, random as random_token, write_file as write_token_file};

use std::borrow::Cow;
use std::fmt;
use std::sync::{Mutex, OnceLock};

const REDACTED: &str = "<redacted>";

/// A value that must never be shown: the metrics database's API token.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Box<str>);

impl Secret {
    /// Wraps a secret text and remembers it for `redact()`.
    pub fn new(text: impl Into<String>) -> Secret {
        let text: String = text.into();
        let text = text.trim().to_string();
        if text.len() >= 4 {
            let mut known = known().lock().unwrap_or_else(|e| e.into_inner());
            if !known.iter().any(|k| k == &text) {
                known.push(text.clone());
            }
        }
        Secret(text.into_boxed_str())
    }

    /// The secret text; only for building the request that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

fn known() -> &'static Mutex<Vec<String>> {
    static KNOWN: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    KNOWN.get_or_init(|| Mutex::new(Vec::new()))
}

/// `text` with every known secret replaced by `<redacted>`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let known = known().lock().unwrap_or_else(|e| e.into_inner());
    if !known.iter().any(|k| text.contains(k.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for k in known.iter() {
        out = out.replace(k.as_str(), REDACTED);
    }
    Cow::Owned(out)
}

/// A writer that redacts secrets line by line; used for stdout reports and stderr logs.
pub struct RedactingWriter<W: std::io::Write> {
    inner: W,
}

impl<W: std::io::Write> RedactingWriter<W> {
    pub fn new(inner: W) -> Self {
        RedactingWriter { inner }
    }
}

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.inner.write_all(redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
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
    }
}
