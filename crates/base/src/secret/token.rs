//! Where the metrics database's API token comes from, and reading it from there.
//!
//! One `TokenSource` per configuration: given inline (a config value, `$INFLUX_TOKEN`, or
//! handed over by the sandbox), a file that must not be readable by group or others, or a
//! command that prints it (run with a deadline; its stdout is never quoted, since it may hold
//! part of the token). Resolving yields a `Secret`, or a reason an operator can act on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::value::Secret;
use crate::process::{self, Invocation};

/// Where the token comes from, in the order the configuration is consulted.
#[derive(Debug, Clone)]
pub enum TokenSource {
    /// No token configured: calls that need one say so.
    None,
    /// The token itself.
    Given(Secret),
    /// A file holding it (mode 0600 or stricter).
    File(PathBuf),
    /// A command printing it on stdout.
    Command {
        /// The command and its arguments.
        argv: Vec<String>,
        /// How long it may take.
        timeout: Duration,
    },
}

impl TokenSource {
    /// Reads the token: `Ok(None)` when none is configured.
    pub fn resolve(&self) -> Result<Option<Secret>, String> {
        match self {
            TokenSource::None => Ok(None),
            TokenSource::Given(secret) => Ok(Some(secret.clone())),
            TokenSource::File(path) => read_file(path).map(Some),
            TokenSource::Command { argv, timeout } => run_command(argv, *timeout).map(Some),
        }
    }
}

fn read_file(path: &Path) -> Result<Secret, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read token_file `{}`: {e}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    // A device or FIFO (a link to /dev/zero) is refused as one: `chmod` would change the device.
    if meta.is_file() && mode & 0o077 != 0 {
        return Err(format!(
            "token_file `{}` is readable by group or others (mode {mode:04o})\n  help: run `chmod 600 {}`",
            path.display(),
            path.display()
        ));
    }
    let text = crate::input::read_text(path, crate::input::Kind::TOKEN).map_err(|r| match r {
        crate::input::Refused::Io(e) => format!("cannot read token_file `{}`: {e}", path.display()),
        other => other.explain(crate::input::Kind::TOKEN, path),
    })?;
    if text.trim().is_empty() {
        return Err(format!("token_file `{}` is empty", path.display()));
    }
    Ok(Secret::new(text))
}

fn run_command(argv: &[String], timeout: Duration) -> Result<Secret, String> {
    let invocation = Invocation { argv: argv.to_vec(), timeout, ..Invocation::default() };
    // A token command has nothing to leave running: what it started in the background ends with it.
    let out = process::run_blocking_ending_its_group(invocation).map_err(|e| format!("token_command failed: {e}"))?;
    if out.timed_out {
        return Err(format!(
            "token_command (`{}`) did not finish within {}",
            argv[0],
            humantime::format_duration(timeout)
        ));
    }
    if out.code != Some(0) {
        // stdout may hold part of the token: only stderr is quoted.
        // Only the program is named: the rest of the command line may carry secrets too.
        return Err(format!(
            "token_command (`{}`) exited with {}: {}",
            argv[0],
            out.code.map_or("a signal".to_string(), |c| format!("status {c}")),
            out.stderr.trim()
        ));
    }
    let max = crate::input::Kind::TOKEN.max_bytes;
    if out.stdout.len() as u64 > max {
        return Err(format!("token_command (`{}`) printed more than the {} KiB a token may be", argv[0], max >> 10));
    }
    let token = out.stdout.trim().to_string();
    if token.is_empty() {
        return Err(format!("token_command (`{}`) printed nothing", argv[0]));
    }
    Ok(Secret::new(token))
}

/// Writes a new token to `path` as `token_file` expects it: mode 0600 from the start, written
/// beside the file and renamed into place (the old file or the new one, never half), its
/// folder made (0700) when missing. The token is never shown, not even in an error.
pub fn write_file(path: &Path, token: &Secret) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let shown = path.display();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot make the folder of token_file `{shown}`: {e}"))?;
    if let Err(e) = crate::atomic::write(path, token.expose().as_bytes(), 0o600) {
        return Err(format!("cannot write token_file `{shown}`: {e}"));
    }
    Ok(())
}

/// A new random token (48 hex digits from the kernel's random source).
pub fn random() -> Result<Secret, String> {
    use std::io::Read;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom for a new token: {e}"))?;
    Ok(Secret::new(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_token_file_is_0600_and_reads_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/influx.token");
        let token = random().unwrap();
        write_file(&path, &token).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_file(&path).unwrap().expose(), token.expose());
        assert_eq!(token.expose().len(), 48);
    }
}
