//! The one process runner: a child process with a deadline, for host commands (through the
//! `Commands` seam) and for `token_command` alike.
//!
//! The child gets its own process group, so on timeout, or when the caller gives up (Ctrl-C
//! drops the future), the whole group — the command and anything it started — is killed, not
//! just the direct child. Both pipes are read as the child writes, so a chatty child cannot
//! block on a full pipe and a command that times out still shows what it printed.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

/// A command to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    pub argv: Vec<String>,
    pub timeout: Duration,
    pub env: Vec<(String, String)>,
    pub stdin: Option<String>,
}

/// How it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// `None` when a signal ended it (or the timeout did).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
    pub timed_out: bool,
}

/// A pipe read to its end in the background; what arrived so far is readable at any time.
struct Collected {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: tokio::task::JoinHandle<()>,
}

impl Collected {
    fn start<R>(pipe: Option<R>) -> Collected
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = bytes.clone();
        let done = tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut chunk = [0u8; 8192];
            while let Ok(n @ 1..) = tokio::io::AsyncReadExt::read(&mut pipe, &mut chunk).await {
                sink.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&chunk[..n]);
            }
        });
        Collected { bytes, done }
    }

    /// Waits a moment for the end of the pipe (a grandchild may still hold it open), then
    /// returns what arrived.
    async fn text(self) -> String {
        let _ = tokio::time::timeout(Duration::from_millis(200), self.done).await;
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Kills the process group unless disarmed: covers timeouts and abandoned futures alike.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            kill_group(pid);
        }
    }
}

/// Runs `inv.argv` (no shell) and waits at most `inv.timeout`; on timeout the process group is
/// killed and `timed_out` is set. A command that cannot be started is an `Err` naming it.
pub async fn run(inv: &Invocation) -> Result<Completed, String> {
    let (program, args) = inv.argv.split_first().ok_or("empty command")?;
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(if inv.stdin.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("`{program}` not found in PATH"),
        std::io::ErrorKind::PermissionDenied => format!("`{program}` is not executable"),
        _ => format!("cannot start `{program}`: {e}"),
    })?;
    let mut guard = GroupGuard(child.id());
    if let (Some(text), Some(mut stdin)) = (inv.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    // Read both pipes as the child writes, so a command that times out still shows
    // what it printed (often the best clue to why it hung).
    let out = Collected::start(child.stdout.take());
    let err = Collected::start(child.stderr.take());
    let waited = tokio::time::timeout(inv.timeout, child.wait()).await;
    let timed_out = waited.is_err();
    if timed_out {
        drop(guard); // kill the group now: the pipes close and the readers finish
    } else {
        guard.0 = None;
    }
    let code = match waited {
        Ok(Ok(status)) => status.code(),
        Ok(Err(e)) => return Err(format!("waiting for `{program}`: {e}")),
        Err(_) => None,
    };
    let (stdout, mut stderr) = (out.text().await, err.text().await);
    if timed_out {
        let note = format!("killed after {}", humantime::format_duration(inv.timeout));
        stderr = if stderr.trim().is_empty() { note } else { format!("{}\n{note}", stderr.trim_end()) };
    }
    Ok(Completed { code, stdout, stderr, duration: started.elapsed(), timed_out })
}

/// `run` from synchronous code that may or may not be inside a runtime (ssh's master starts,
/// `token_command`).
pub fn run_blocking(inv: Invocation) -> Result<Completed, String> {
    // On a thread with a runtime of its own, which drives the child's pipes itself. Blocking
    // on the process's shared runtime instead was tried for a fleet's master starts: a cold
    // 100-host run used no less CPU.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime for the command: {e}"))?;
        runtime.block_on(run(&inv))
    })
    .join()
    .map_err(|_| "the command runner panicked".to_string())?
}

/// SIGKILL to the process group led by `pid`.
pub(crate) fn kill_group(pid: u32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(a: &[&str], timeout: Duration) -> Invocation {
        Invocation { argv: a.iter().map(|s| s.to_string()).collect(), timeout, ..Invocation::default() }
    }

    #[test]
    fn captures_output_and_status() {
        let f = run_blocking(inv(&["sh", "-c", "echo out; echo err >&2; exit 3"], Duration::from_secs(5))).unwrap();
        assert_eq!((f.code, f.stdout.as_str(), f.stderr.as_str(), f.timed_out), (Some(3), "out\n", "err\n", false));
    }

    #[test]
    fn timeout_kills_the_whole_group_and_keeps_what_was_printed() {
        let f =
            run_blocking(inv(&["sh", "-c", "echo started; sleep 30 & sleep 30"], Duration::from_millis(200))).unwrap();
        assert_eq!(
            (f.code, f.stdout.as_str(), f.stderr.as_str(), f.timed_out),
            (None, "started\n", "killed after 200ms", true)
        );
        assert!(f.duration < Duration::from_secs(5), "{:?}", f.duration);
    }

    #[test]
    fn missing_program_is_named() {
        let e = run_blocking(inv(&["no-such-program-xyz"], Duration::from_secs(1))).unwrap_err();
        assert_eq!(e, "`no-such-program-xyz` not found in PATH");
    }
}
