//! The secret value itself (`Secret`), and every secret text the process has seen, in each
//! encoding a writer may apply (`encoding.rs`), which `redact` blanks out of any text.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use super::encoding;

pub(super) const REDACTED: &str = "<redacted>";

/// A value that must never be shown: the metrics database's API token.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Box<str>);

impl Secret {
    /// Wraps a secret text and remembers it for `redact()`.
    pub fn new(text: impl Into<String>) -> Secret {
        let text: String = text.into();
        let text = text.trim().to_string();
        let mut known = known().lock().unwrap_or_else(|e| e.into_inner());
        for form in encoding::forms(&text) {
            if form.len() >= 4 && !known.iter().any(|k| k == &form) {
                known.push(form);
            }
        }
        Secret(text.into_boxed_str())
    }

    /// The secret text; only for building the request that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is empty (no token).
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

pub(super) fn redact_known(text: &str) -> Cow<'_, str> {
    let known = known().lock().unwrap_or_else(|e| e.into_inner());
    let lower = text.to_ascii_lowercase();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    for k in known.iter() {
        let k = k.to_ascii_lowercase();
        cuts.extend(lower.match_indices(k.as_str()).map(|(at, _)| (at, at + k.len())));
    }
    if cuts.is_empty() {
        return Cow::Borrowed(text);
    }
    cuts.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (start, end) in cuts {
        if start >= done {
            out.push_str(&text[done..start]);
            out.push_str(REDACTED);
            done = end;
        } else if end > done {
            done = end;
        }
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}
