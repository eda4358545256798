//! `run_blocking`: the process runner for synchronous callers (ssh master starts, commands
//! over ssh from synchronous code, `token_command`), with no async runtime: the caller's
//! thread watches the child's pipes and its exit with one `poll(2)` (the exit through a pidfd).
//!
//! Why not a thread with a small tokio runtime per call, as before: a cold 100-host run starts
//! a hundred ssh masters at once, and without the thread and runtime each it used about 15 %
//! less of its own CPU (README's performance section). Same contract as `run` (the tests run
//! both): own process group, killed whole on timeout; both pipes read as the child writes;
//! after the child exits, its pipes are read for at most `GRACE` more (a grandchild may hold
//! them open).

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{Completed, GroupGuard, Invocation, MAX_OUTPUT, killed_note, pidfd_open, spawn_error, too_much};

/// How long the pipes are read after the child exited, as `run` waits for them.
const GRACE: Duration = Duration::from_millis(200);

/// Without a pidfd (Linux before 5.3), how often the child's exit is looked for.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// Runs `inv.argv` (no shell) on this thread and waits at most `inv.timeout`; on timeout the
/// process group is killed and `timed_out` is set. A command that cannot be started is an
/// `Err` naming it.
pub fn run_blocking(inv: Invocation) -> Result<Completed, String> {
    let (program, args) = inv.argv.split_first().ok_or("empty command")?;
    let started = Instant::now();
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(if inv.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
    let mut guard = GroupGuard(Some(child.id()));
    let mut watch = Watch {
        out: Pipe::open(child.stdout.take().map(OwnedFd::from)),
        err: Pipe::open(child.stderr.take().map(OwnedFd::from)),
        feed: child.stdin.take().zip(inv.stdin.clone()).map(|(pipe, text)| Feed::new(pipe.into(), text.into_bytes())),
        // The child is not reaped before we wait for it, so its pid cannot have been reused.
        exit: pidfd_open(child.id()),
    };
    let exited =
        watch.until_exit(&mut child, started + inv.timeout).map_err(|e| format!("waiting for `{program}`: {e}"))?;
    if let Some(pipe) = watch.overflowed() {
        drop(guard); // printed too much: the group is killed
        let _ = child.wait();
        return Err(too_much(program, pipe));
    }
    let status = match exited {
        Some(status) => {
            guard.0 = None;
            status
        }
        None => {
            drop(guard); // kill the group now: the pipes close and the rest is read below
            child.wait().map_err(|e| format!("waiting for `{program}`: {e}"))?
        }
    };
    watch.feed = None;
    watch.drain(Instant::now() + GRACE);
    let (stdout, mut stderr) = (watch.out.text(), watch.err.text());
    let timed_out = exited.is_none();
    if timed_out {
        stderr = killed_note(&stderr, inv.timeout);
    }
    let code = if timed_out { None } else { status.code() };
    Ok(Completed { code, stdout, stderr, duration: started.elapsed(), timed_out })
}

/// The child's output pipes, its input, and its exit, watched together.
struct Watch {
    out: Pipe,
    err: Pipe,
    feed: Option<Feed>,
    /// A pidfd, readable once the child exited; `None` where the kernel has none.
    exit: Option<OwnedFd>,
}

impl Watch {
    /// Reads and writes the pipes until the child exits (its status) or `deadline` (`None`).
    fn until_exit(&mut self, child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(Some(status));
            }
            let now = Instant::now();
            if now >= deadline || self.overflowed().is_some() {
                return Ok(None);
            }
            let wait = if self.exit.is_some() { deadline - now } else { (deadline - now).min(EXIT_POLL) };
            self.poll_once(wait, true)?;
        }
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

    /// Reads the output pipes until both ended or `until` passed.
    fn drain(&mut self, until: Instant) {
        while self.out.fd.is_some() || self.err.fd.is_some() {
            let now = Instant::now();
            if now >= until || self.poll_once(until - now, false).is_err() {
                return;
            }
        }
    }

    /// One `poll` over what is still open (and the exit, when `exit` is asked), then every
    /// ready pipe served.
    fn poll_once(&mut self, wait: Duration, exit: bool) -> std::io::Result<()> {
        let mut fds = Vec::with_capacity(4);
        let mut watch = |fd: Option<RawFd>, events| {
            if let Some(fd) = fd {
                fds.push(libc::pollfd { fd, events, revents: 0 });
            }
        };
        watch(self.out.raw(), libc::POLLIN);
        watch(self.err.raw(), libc::POLLIN);
        watch(self.feed.as_ref().map(|f| f.pipe.as_raw_fd()), libc::POLLOUT);
        watch(self.exit.as_ref().filter(|_| exit).map(|fd| fd.as_raw_fd()), libc::POLLIN);
        let millis = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live, correctly sized array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        let ready = |fd: Option<RawFd>| fd.is_some_and(|fd| fds.iter().any(|p| p.fd == fd && p.revents != 0));
        if ready(self.out.raw()) {
            self.out.read_available();
        }
        if ready(self.err.raw()) {
            self.err.read_available();
        }
        if ready(self.feed.as_ref().map(|f| f.pipe.as_raw_fd())) && self.feed.as_mut().is_some_and(Feed::write_some) {
            self.feed = None; // all written, or the child closed its input: close ours
        }
        Ok(())
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
    fn the_environment_given_reaches_the_child() {
        let mut i = inv(&["sh", "-c", "printf %s \"$OPSBOOK_X\""], Duration::from_secs(5));
        i.env = vec![("OPSBOOK_X".into(), "given".into())];
        assert_eq!(both(i).unwrap().stdout, "given");
    }
}
