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
            let waited = tokio::time::timeout(inv.timeout, child.wait_with_output()).await;
            Ok(match waited {
                Ok(Ok(out)) => {
                    guard.0 = None;
                    Completed {
                        code: out.status.code(),
                        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                        duration: started.elapsed(),
                        timed_out: false,
                    }
                }
                Ok(Err(e)) => return Err(format!("waiting for `{program}`: {e}")),
                Err(_) => {
                    drop(guard); // kill the group now
                    Completed {
                        code: None,
                        stdout: String::new(),
                        stderr: format!("killed after {}", humantime::format_duration(inv.timeout)),
                        duration: started.elapsed(),
                        timed_out: true,
                    }
                }
            })
        })
    }
}
