//! The process seam: running a command (argv, no shell) with a deadline. The real
//! implementation starts it in its own process group and kills the whole group on timeout or
//! when the caller gives up (Ctrl-C drops the future), so nothing it started lingers.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use super::BoxFuture;

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

pub trait Commands: Send + Sync {
    /// Runs the command; `Err` when it could not start (e.g. not in PATH: "`x` not found in PATH").
    fn run<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>>;
}

/// Real child processes.
pub struct Processes;

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
            crate::process::kill_group(pid);
        }
    }
}

impl Commands for Processes {
    fn run<'a>(&'a self, inv: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>> {
        Box::pin(async move {
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
        })
    }
}
