//! What the process runners share (`run` in `process.rs`, `run_blocking` and `start` in
//! `blocking.rs`): the command and how it ended, the bound on what it may print, the process
//! group killed on every way out, and the words of their errors.

use std::time::Duration;

/// A command to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// How long it may run before it is killed.
    pub timeout: Duration,
    /// Environment variables added to this process's.
    pub env: Vec<(String, String)>,
    /// Written to its stdin, if any.
    pub stdin: Option<String>,
}

/// How it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// `None` when a signal ended it (or the timeout did).
    pub code: Option<i32>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// How long it ran.
    pub duration: Duration,
    /// Whether the timeout ended it.
    pub timed_out: bool,
}

impl Completed {
    /// How a command that did not succeed ended, in words that always say something: its exit
    /// status (a signal, its deadline) and the end of what it said on stderr, or that it said
    /// nothing — never a message ending in a colon.
    pub fn failure(&self) -> String {
        let how = match self.code {
            _ if self.timed_out => "it did not finish in time".to_string(),
            Some(code) => format!("exit status {code}"),
            None => "ended by a signal".to_string(),
        };
        format!("{how}{}", said_on_stderr(&self.stderr))
    }
}

/// `: ` and the last lines of what a failed command said on stderr (at most three lines and
/// 500 characters, `…` where cut), or `, nothing on stderr`: what follows its exit status.
pub fn said_on_stderr(stderr: &str) -> String {
    let said = stderr.trim();
    if said.is_empty() {
        return ", nothing on stderr".to_string();
    }
    let lines: Vec<&str> = said.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let last = lines[lines.len().saturating_sub(3)..].join("\n");
    let chars = last.chars().count();
    let cut = chars > 500 || lines.len() > 3;
    let kept: String = last.chars().skip(chars.saturating_sub(500)).collect();
    format!(": {}{kept}", if cut { "…" } else { "" })
}

/// The most a command may print on each of stdout and stderr: more, and it is stopped and
/// refused (`too_much`) rather than held in memory — a `token_command` printing a gigabyte.
pub const MAX_OUTPUT: usize = 16 << 20;

/// Why a command's output was refused, in the words every runner uses (`printed_too_much`
/// knows them).
pub fn too_much(program: &str, pipe: &str) -> String {
    format!("`{program}` printed more than {} MiB on {pipe}: it was stopped", MAX_OUTPUT >> 20)
}

/// Whether `reason` (an `Err` of `run` or `run_blocking`) says the command printed too much:
/// a caller adds the advice that fits what it ran (`too_much`'s wording lives here).
pub fn printed_too_much(reason: &str) -> bool {
    reason.ends_with(": it was stopped") && reason.contains(&format!(" printed more than {} MiB on ", MAX_OUTPUT >> 20))
}

/// Kills the process group unless disarmed: covers timeouts and abandoned futures alike.
pub(super) struct GroupGuard(pub(super) Option<u32>);

impl GroupGuard {
    /// Kills the group now (and disarms the guard).
    pub(super) fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            kill_group(pid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Why `program` could not be started, in the words both runners use.
pub(super) fn spawn_error(program: &str, e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("`{program}` not found in PATH"),
        std::io::ErrorKind::PermissionDenied => format!("`{program}` is not executable"),
        std::io::ErrorKind::ArgumentListTooLong => format!(
            "cannot start `{program}`: its command line is longer than this machine lets a program start with \
             (E2BIG); pass large data in a file or on standard input rather than as arguments"
        ),
        _ => format!("cannot start `{program}`: {e}"),
    }
}

/// What a command killed at its timeout printed on stderr, followed by why it ended.
pub(super) fn killed_note(stderr: &str, timeout: Duration) -> String {
    let note = format!("killed after {}", humantime::format_duration(timeout));
    if stderr.trim().is_empty() { note } else { format!("{}\n{note}", stderr.trim_end()) }
}

/// A pidfd for process `pid` (readable once it exits), or `None` when it is gone already or
/// the kernel has none (Linux before 5.3).
pub(crate) fn pidfd_open(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a descriptor we now own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as std::os::fd::RawFd) })
}

/// SIGKILL to the process group led by `pid`.
pub(crate) fn kill_group(pid: u32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}
