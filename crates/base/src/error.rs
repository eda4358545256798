//! Errors that stop opsbook before or outside a runbook's checks (exit status 2).
//!
//! Errors are data; the wording lives in the one `Display` below. Messages are lower-case,
//! name things in backticks, and end with a remedy where one exists. A failed *check* is not
//! an error: it is a record in the report (exit status 1).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;

#[derive(Debug)]
/// What can stop a command before or outside a run's checks; `Display` words each for the
/// operator.
pub enum Error {
    /// The command line asked for something that cannot be done.
    Usage(String),
    /// No runbook of that name.
    UnknownRunbook {
        /// The name asked for.
        name: String,
        /// The nearest names found.
        suggestions: Vec<String>,
    },
    /// No module of that name.
    UnknownModule {
        /// The name asked for.
        name: String,
        /// The nearest names found.
        suggestions: Vec<String>,
    },
    /// `--set KEY=…` for a parameter the runbook does not declare.
    UnknownParam {
        /// The runbook.
        runbook: String,
        /// The key given.
        key: String,
        /// The parameters it declares.
        declared: Vec<String>,
        /// The nearest of them.
        suggestions: Vec<String>,
    },
    /// A parameter's value of the wrong kind.
    BadParamValue {
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
        /// What it accepts, in words.
        expected: String,
    },
    /// A config file, runbook or module that does not parse, with its position.
    Located(Box<Diagnostic>),
    /// A configuration file that could not be read.
    ConfigFileMissing {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A file given to opsbook that is not a regular file of text of a sane size
    /// (`input::read_text`), in words.
    Unreadable {
        /// Why, naming the file.
        message: String,
    },
    /// A configuration value a key does not accept.
    ConfigValue {
        /// The key.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The API token could not be had (its file, its command), in words.
    Token(String),
    /// An I/O failure.
    Io {
        /// What was being done.
        context: String,
        /// The failure.
        source: std::io::Error,
    },
    /// Several runbooks or modules failed `opsbook check`.
    Many(Vec<Error>),
    /// Ctrl-C or SIGTERM before anything ran (while a sandbox was set up): what was done
    /// by then. Exit status 130, as an interrupted run.
    Interrupted(String),
}

impl Error {
    /// A diagnostic as an error.
    pub fn located(d: Diagnostic) -> Error {
        Error::Located(Box::new(d))
    }
}

fn did_you_mean(f: &mut fmt::Formatter<'_>, suggestions: &[String]) -> fmt::Result {
    match suggestions {
        [] => Ok(()),
        [one] => write!(f, "\n  help: did you mean `{one}`?"),
        many => {
            let list: Vec<String> = many.iter().map(|s| format!("`{s}`")).collect();
            write!(f, "\n  help: did you mean one of {}?", list.join(", "))
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(message) => write!(f, "error: {message}"),
            Error::UnknownRunbook { name, suggestions } => {
                write!(f, "error: no runbook named `{name}`")?;
                did_you_mean(f, suggestions)?;
                write!(f, "\n  help: `opsbook list` shows every runbook and where it comes from")
            }
            Error::UnknownModule { name, suggestions } => {
                write!(f, "error: no stdlib module named `{name}`")?;
                did_you_mean(f, suggestions)
            }
            Error::UnknownParam { runbook, key, declared, suggestions } => {
                write!(f, "error: runbook `{runbook}` has no parameter `{key}`")?;
                did_you_mean(f, suggestions)?;
                if declared.is_empty() {
                    write!(f, "\n  note: `{runbook}` declares no parameters")
                } else {
                    write!(f, "\n  note: its parameters are {}", declared.join(", "))
                }
            }
            Error::BadParamValue { key, value, expected } => {
                write!(f, "error: parameter `{key}` expects {expected}, got `{value}`")
            }
            Error::Located(d) => write!(f, "{}", d.to_string().trim_end()),
            Error::Unreadable { message } => write!(f, "error: {message}"),
            Error::ConfigFileMissing { path, reason } => {
                write!(f, "error: cannot read config file `{}`: {reason}", path.display())
            }
            Error::ConfigValue { key, problem } => write!(f, "error: config `{key}`: {problem}"),
            Error::Token(message) => write!(f, "error: API token: {message}"),
            Error::Io { context, source } => write!(f, "error: {context}\n  caused by: {source}"),
            Error::Interrupted(what) => write!(f, "interrupted: {what}"),
            Error::Many(errors) => {
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

/// A text file read as `input::read_text` reads it, refused as an opsbook error: a missing or
/// unreadable file keeps the wording `missing` gives it (e.g. the configuration's "cannot read
/// config file"), anything else is explained.
pub fn read_text_or(
    path: &Path,
    kind: crate::input::Kind,
    missing: impl FnOnce(std::io::Error) -> Error,
) -> Result<String, Error> {
    crate::input::read_text(path, kind).map_err(|r| match r {
        crate::input::Refused::Io(e) => missing(e),
        other => Error::Unreadable { message: other.explain(kind, path) },
    })
}

#[cfg(test)]
mod tests {}
