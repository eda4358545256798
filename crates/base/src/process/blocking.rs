//! A process started for synchronous callers (ssh master starts, commands over ssh from
//! synchronous code, `token_command`), with no async runtime: `start` gives the child as a
//! `Running`, whose pipes and exit (through a pidfd) one thread watches with one `poll(2)` —
//! many at once (`Children`: a fleet's ssh masters, all starting together), or one alone
//! (`run_blocking`, in `children`).
//!
//! No thread or tokio runtime per call: a cold 100-host run starts a hundred ssh masters at
//! once, and a thread and runtime for each would cost about 15 % more of opsbook's own CPU
//! than one `poll` on the caller's thread. Same contract as `run` (the tests run
//! both): own process group, killed whole on timeout; both pipes read as the child writes;
//! after the child exits, its pipes are read for at most `GRACE` more (a grandchild may hold
//! them open).

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::shared::{Completed, GroupGuard, Invocation, MAX_OUTPUT, killed_note, pidfd_open, spawn_error, too_much};
use super::staying::{Handover, Staying};

/// How long the pipes are read after the child exited, as `run` waits for them.
const GRACE: Duration = Duration::from_millis(200);

/// Without a pidfd (Linux before 5.3), how often the child's exit is looked for.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// Starts `inv.argv` (no shell) in its own process group; `Children` watches it until it is
/// done, at most `inv.timeout`. A command that cannot be started is an `Err` naming it.
pub fn start(inv: Invocation) -> Result<Running, String> {
    spawn(inv, None).map(|(running, _)| running)
}

/// `start` for a child that stays (`Staying`): done, for `Children`, once it prints the line
/// `ready` on stdout — an exit status of 0 and what it printed so far — and left running,
/// its stdin open, from then on the `Staying`'s. Ending before that, or not ready within
/// `inv.timeout`, is reported as for any child. `inv.stdin` is not used.
pub fn start_staying(inv: Invocation, ready: &str) -> Result<(Running, Staying), String> {
    let (running, staying) = spawn(Invocation { stdin: None, ..inv }, Some(ready))?;
    Ok((running, staying.expect("a child that stays has its Staying")))
}

fn spawn(inv: Invocation, stays: Option<&str>) -> Result<(Running, Option<Staying>), String> {
    let (program, args) = inv.argv.split_first().ok_or("empty command")?;
    let started = Instant::now();
    let mut cmd = std::process::Command::new(program);
    let stdin = inv.stdin.is_some() || stays.is_some();
    cmd.args(args)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
    let guard = GroupGuard(Some(child.id()));
    let (stays, staying) = match stays {
        Some(ready) => {
            let (handover, staying) = Handover::new(ready, child.stdin.take());
            (Some(handover), Some(staying))
        }
        None => (None, None),
    };
    let running = Running {
        program: program.clone(),
        out: Pipe::open(child.stdout.take().map(OwnedFd::from)),
        err: Pipe::open(child.stderr.take().map(OwnedFd::from)),
        feed: child.stdin.take().zip(inv.stdin).map(|(pipe, text)| Feed::new(pipe.into(), text.into_bytes())),
        // The child is not reaped before we wait for it, so its pid cannot have been reused.
        exit: pidfd_open(child.id()),
        child,
        guard,
        started,
        timeout: inv.timeout,
        stage: Stage::Live,
        stays,
        ends_group: false,
    };
    Ok((running, staying))
}

/// A child started by `start`: its output pipes, its input and its exit, watched together
/// until it is done (`advance`).
pub struct Running {
    program: String,
    child: Child,
    guard: GroupGuard,
    out: Pipe,
    err: Pipe,
    feed: Option<Feed>,
    /// A pidfd, readable once the child exited; `None` where the kernel has none.
    exit: Option<OwnedFd>,
    started: Instant,
    timeout: Duration,
    stage: Stage,
    /// A child that stays (`start_staying`): what it is handed to once ready.
    stays: Option<Handover>,
    /// Whether what the child left running in its group is killed when it exits
    /// (`ending_its_group`).
    ends_group: bool,
}

/// Where a watched child stands.
enum Stage {
    /// Running: waiting for its exit, its deadline or too much output.
    Live,
    /// Exited (or killed at its deadline): its pipes are read until they close or `until`.
    Draining { status: ExitStatus, timed_out: bool, until: Instant },
}

impl Running {
    /// The same child, whose process group — whatever it started and left running, `sleep
    /// 300 &` — is killed when it exits, not only at its deadline.
    pub fn ending_its_group(mut self) -> Running {
        self.ends_group = true;
        self
    }

    /// Adds the descriptors to watch now to `fds`, each with the events awaited.
    pub(super) fn interest(&self, fds: &mut Vec<libc::pollfd>) {
        let mut watch = |fd: Option<RawFd>, events| {
            if let Some(fd) = fd {
                fds.push(libc::pollfd { fd, events, revents: 0 });
            }
        };
        let live = matches!(self.stage, Stage::Live);
        watch(self.out.raw(), libc::POLLIN);
        watch(self.err.raw(), libc::POLLIN);
        watch(self.feed.as_ref().map(|f| f.pipe.as_raw_fd()), libc::POLLOUT);
        watch(self.exit.as_ref().filter(|_| live).map(|fd| fd.as_raw_fd()), libc::POLLIN);
    }

    /// When this child needs looking at even if none of its descriptors is ready.
    pub(super) fn due(&self, now: Instant) -> Instant {
        match self.stage {
            Stage::Live if self.exit.is_some() => self.started + self.timeout,
            Stage::Live => (self.started + self.timeout).min(now + EXIT_POLL),
            Stage::Draining { until, .. } => until,
        }
    }

    /// Serves what `polled` (its own descriptors, as `interest` gave them, after a `poll`)
    /// says is ready, then moves on: how it ended, once it is done.
    pub(super) fn advance(&mut self, polled: &[libc::pollfd]) -> Option<Result<Completed, String>> {
        let ready = |fd: Option<RawFd>| fd.is_some_and(|fd| polled.iter().any(|p| p.fd == fd && p.revents != 0));
        if ready(self.out.raw()) {
            self.out.read_available();
        }
        if ready(self.err.raw()) {
            self.err.read_available();
        }
        if ready(self.feed.as_ref().map(|f| f.pipe.as_raw_fd())) && self.feed.as_mut().is_some_and(Feed::write_some) {
            self.feed = None; // all written, or the child closed its input: close ours
        }
        if let Some(done) = self.ready_to_stay() {
            return Some(Ok(done));
        }
        let exited = self.exit.is_none() || ready(self.exit.as_ref().map(|fd| fd.as_raw_fd()));
        let now = Instant::now();
        if let Stage::Live = self.stage
            && let Err(e) = self.watch_live(exited, now)
        {
            return Some(Err(e));
        }
        match self.stage {
            Stage::Draining { status, timed_out, until }
                if now >= until || (self.out.fd.is_none() && self.err.fd.is_none()) =>
            {
                Some(Ok(self.completed(status, timed_out)))
            }
            _ => None,
        }
    }

    /// A child that stays, once it printed its ready line: handed to its `Staying`, and done
    /// here as if it had exited with status 0.
    fn ready_to_stay(&mut self) -> Option<Completed> {
        let ready = self.stays.as_ref().is_some_and(|h| self.out.holds(&h.ready)) && matches!(self.stage, Stage::Live);
        if !ready {
            return None;
        }
        let group = std::mem::replace(&mut self.guard, GroupGuard(None));
        let (stdout, unread) = self.out.past(&self.stays.as_ref().expect("checked above").ready);
        self.stays.take().expect("checked above").hand_over(self.child.id(), self.exit.take(), group, stdout, unread);
        let (stdout, stderr) = (self.out.text(), self.err.text());
        Some(Completed { code: Some(0), stdout, stderr, duration: self.started.elapsed(), timed_out: false })
    }

    /// A live child: drained once it exited, killed at its deadline, refused when it printed
    /// too much.
    fn watch_live(&mut self, exited: bool, now: Instant) -> Result<(), String> {
        let waiting = |e| format!("waiting for `{}`: {e}", self.program);
        if self.ends_group && exited && self.exit.is_some() {
            // Exited, not yet reaped: its pid still names its group, and nobody else's.
            self.guard.kill();
        }
        let status = match exited.then(|| self.child.try_wait()).transpose().map_err(waiting)?.flatten() {
            Some(status) if self.ends_group => {
                self.guard.kill(); // without a pidfd: at once after reaping it
                Some(status)
            }
            Some(status) => {
                self.guard.0 = None;
                Some(status)
            }
            None => None,
        };
        if let Some(pipe) = self.overflowed() {
            self.guard.kill(); // printed too much: the group is killed
            let _ = self.child.wait();
            return Err(too_much(&self.program, pipe));
        }
        let timed_out = status.is_none() && now >= self.started + self.timeout;
        let status = match status {
            Some(status) => status,
            None if timed_out => {
                self.guard.kill(); // kill the group now: the pipes close and the rest is read
                self.child.wait().map_err(waiting)?
            }
            None => return Ok(()),
        };
        self.feed = None;
        self.stage = Stage::Draining { status, timed_out, until: Instant::now() + GRACE };
        Ok(())
    }

    /// The pipe that printed more than `MAX_OUTPUT`, if one did.
    fn overflowed(&self) -> Option<&'static str> {
        if self.out.overflowed {
            Some("stdout")
        } else if self.err.overflowed {
            Some("stderr")
        } else {
            None
        }
    }

    fn completed(&self, status: ExitStatus, timed_out: bool) -> Completed {
        let (stdout, mut stderr) = (self.out.text(), self.err.text());
        if timed_out {
            stderr = killed_note(&stderr, self.timeout);
        }
        let code = if timed_out { None } else { status.code() };
        Completed { code, stdout, stderr, duration: self.started.elapsed(), timed_out }
    }
}

/// One output pipe: what arrived, and the pipe while it is open; closed once more than
/// `MAX_OUTPUT` arrived (`overflowed`).
struct Pipe {
    fd: Option<File>,
    bytes: Vec<u8>,
    overflowed: bool,
}

impl Pipe {
    fn open(fd: Option<OwnedFd>) -> Pipe {
        Pipe { fd: fd.map(nonblocking).map(File::from), bytes: Vec::new(), overflowed: false }
    }

    fn raw(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// Reads what the pipe holds; at its end (or on an error) it is closed.
    fn read_available(&mut self) {
        let Some(file) = &mut self.fd else { return };
        let mut chunk = [0u8; 8192];
        loop {
            match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    self.bytes.extend_from_slice(&chunk[..n]);
                    if self.bytes.len() > MAX_OUTPUT {
                        self.bytes.truncate(MAX_OUTPUT);
                        self.overflowed = true;
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.fd = None;
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The pipe itself, and what it held after `line` (which it holds): the pipe is no longer
    /// read here.
    fn past(&mut self, line: &str) -> (Option<File>, Vec<u8>) {
        let line = line.as_bytes();
        let end = (0..=self.bytes.len().saturating_sub(line.len()))
            .find(|&at| self.bytes[at..].starts_with(line) && (at == 0 || self.bytes[at - 1] == b'\n'))
            .map_or(self.bytes.len(), |at| at + line.len());
        let unread = self.bytes[end..].to_vec();
        self.bytes.truncate(end);
        (self.fd.take(), unread)
    }

    /// Whether what arrived so far holds `line` (with its newline) as a whole line.
    fn holds(&self, line: &str) -> bool {
        let line = line.as_bytes();
        self.bytes.windows(line.len()).enumerate().any(|(at, w)| w == line && (at == 0 || self.bytes[at - 1] == b'\n'))
    }
}

/// The child's input, written as it takes it.
struct Feed {
    pipe: File,
    text: Vec<u8>,
    written: usize,
}

impl Feed {
    fn new(pipe: OwnedFd, text: Vec<u8>) -> Feed {
        Feed { pipe: File::from(nonblocking(pipe)), text, written: 0 }
    }

    /// Writes what the pipe takes; true once there is nothing more to write (all written, or
    /// the child will not read it).
    fn write_some(&mut self) -> bool {
        while self.written < self.text.len() {
            match self.pipe.write(&self.text[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(_) => return true,
            }
        }
        true
    }
}

fn nonblocking(fd: OwnedFd) -> OwnedFd {
    // SAFETY: fcntl on a descriptor we own; failing leaves it blocking, which poll still serves.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    fd
}

#[cfg(test)]
mod tests {
    use super::super::tests::{both, inv};
    use super::*;

    #[test]
    fn input_larger_than_a_pipe_is_fed_while_output_larger_than_a_pipe_is_read() {
        // 1 MiB through `cat` both ways: a runner that wrote all input before reading, or read
        // one pipe at a time, would block on a full pipe until the timeout.
        let text = "0123456789abcdef".repeat(65536);
        let mut i = inv(&["sh", "-c", "cat; echo done >&2"], Duration::from_secs(20));
        i.stdin = Some(text.clone());
        let f = both(i).unwrap();
        assert_eq!((f.code, f.stdout.len(), f.stderr.as_str(), f.timed_out), (Some(0), text.len(), "done\n", false));
        assert!(f.stdout == text);
    }

    #[test]
    fn a_child_that_does_not_read_its_input_still_ends() {
        let mut i = inv(&["true"], Duration::from_secs(10));
        i.stdin = Some("x".repeat(1 << 20));
        let f = both(i).unwrap();
        assert_eq!((f.code, f.timed_out), (Some(0), false));
    }

    #[test]
    fn a_grandchild_holding_the_pipes_does_not_hold_the_caller_past_the_grace() {
        let f = both(inv(&["sh", "-c", "echo parent; (sleep 5; echo late) &"], Duration::from_secs(10))).unwrap();
        assert_eq!((f.code, f.stdout.as_str(), f.timed_out), (Some(0), "parent\n", false));
        assert!(f.duration < Duration::from_secs(3), "{:?}", f.duration);
    }

    #[test]
    fn a_child_ending_its_group_leaves_nothing_it_started_running() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > {}; echo done", pid_file.display());
        let running = start(inv(&["sh", "-c", &script], Duration::from_secs(10))).unwrap().ending_its_group();
        let mut one = super::super::Children::new();
        one.add((), running);
        let f = one.next_done().unwrap().1.unwrap();
        assert_eq!((f.code, f.stdout.as_str(), f.timed_out), (Some(0), "done\n", false));
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // The group's processes are killed; `sleep` is reaped by init, a moment later.
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            // SAFETY: signal 0 only asks whether the process exists.
            let exists = unsafe { libc::kill(pid, 0) == 0 };
            !exists || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        });
        assert!(gone, "`sleep 300 &` outlived the command");
    }

    #[test]
    fn the_environment_given_reaches_the_child() {
        let mut i = inv(&["sh", "-c", "printf %s \"$OPSBOOK_X\""], Duration::from_secs(5));
        i.env = vec![("OPSBOOK_X".into(), "given".into())];
        assert_eq!(both(i).unwrap().stdout, "given");
    }
}
