//! A command run on a host as a session of its shared connection: no local `ssh` client, no
//! process of ours at all, and no thread of ours but the caller's.
//!
//! The master is asked over its control socket (`Mux::ask_session`) to open a session whose
//! stdin and stdout are one socket pair of ours and stderr another; we write the input, read
//! both outputs to their end and read the master's answers — its hello, the session opened, the
//! command's exit status — from the control connection, all in one `poll(2)` loop on the
//! calling thread, bounded in time and in size. Starting a local `ssh` client for each command
//! cost opsbook a fork and the client's start (its configuration, its keys' paths, the mux
//! handshake) — tens of times a host in a rollout; a session costs a few messages on a unix
//! socket. Reading them on the runtime's threads cost two thread switches for each message (a
//! worker woken by the kernel, then the waiting thread woken by the worker); here the kernel
//! wakes the caller itself.
//!
//! The loop looks at the run's Ctrl-C and time limit (`Cancel::cancelled_here`) ten times a
//! second: an interrupted session ends at once (`Ended::Interrupted`), as an awaited one would.
//!
//! What a session cannot tell apart the way a process can: a command killed by a signal and a
//! connection lost both end with no exit status (`Ended::NoStatus`); the caller words it.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::mux::{self, Mux, SessionWord};
use opsbook_base::Cancel;
use opsbook_base::process::{Completed, MAX_OUTPUT};

/// How a session ended, when it was opened.
pub(super) enum Ended {
    /// The command exited; `timed_out` when it was given up on at the limit instead.
    Completed(Completed),
    /// The session ended without an exit status: the command was killed by a signal, or the
    /// connection was lost. What it printed on stderr comes with it.
    NoStatus { stderr: String },
    /// The command printed more than `MAX_OUTPUT` on this pipe: it was stopped.
    TooMuch(&'static str),
    /// The run was interrupted (Ctrl-C, its time limit): the session was closed.
    Interrupted,
}

/// The most opening a session may take: the master answers once the host opened the channel.
const OPEN_LIMIT: Duration = Duration::from_secs(10);
/// How often a wait looks at the run's Ctrl-C and time limit.
const LOOK: Duration = Duration::from_millis(100);

/// Runs blocking `work` from async code: on a worker of a multi-threaded runtime, having the
/// runtime move its other tasks elsewhere first (`block_in_place`); anywhere else — a thread
/// blocked on a runtime, as a run's is, or a runtime of one thread — as it is.
pub(super) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// Runs `command` (one string, for the remote login shell) as a session of the master at the
/// other end of `control` (a new connection to its socket), giving it `stdin` (or an empty
/// input), for at most `limit`, on this thread. `Err` when no session could be opened (the
/// master is gone or refused): nothing ran.
pub(super) fn run(control: UnixStream, command: &str, stdin: Option<&[u8]>, limit: Duration) -> Result<Ended, String> {
    let started = Instant::now();
    let pair = || UnixStream::pair().map_err(|e| format!("a socket pair for a session: {e}"));
    let ((io, io_theirs), (err, err_theirs)) = (pair()?, pair()?);
    let stdio = [io_theirs.as_raw_fd(), io_theirs.as_raw_fd(), err_theirs.as_raw_fd()];
    let control = Mux::ask_session(control, limit.min(OPEN_LIMIT), command, stdio)?.into_stream();
    // The master holds its own copies now: ours would keep the outputs from ever ending.
    drop((io_theirs, err_theirs));
    let mut talk = Talk::new(control, io, err, stdin.unwrap_or_default())?;
    let (deadline, open_by) = (started + limit, started + limit.min(OPEN_LIMIT));
    loop {
        if Cancel::cancelled_here() {
            return Ok(Ended::Interrupted);
        }
        let now = Instant::now();
        if !talk.opened && now >= open_by {
            return Err("the ssh master did not answer in time".into());
        }
        if now >= deadline {
            let stderr = format!("no answer within {}: the session was closed", humantime::format_duration(limit));
            let done =
                Completed { code: None, stdout: String::new(), stderr, duration: started.elapsed(), timed_out: true };
            return Ok(Ended::Completed(done));
        }
        let until = if talk.opened { deadline } else { open_by };
        talk.wait((until - now).min(LOOK))?;
        if let Some(ended) = talk.step()? {
            return Ok(match ended {
                Ended::Completed(mut done) => {
                    done.duration = started.elapsed();
                    Ended::Completed(done)
                }
                other => other,
            });
        }
    }
}

/// One session's three sockets and what came on them so far.
struct Talk<'a> {
    control: UnixStream,
    io: UnixStream,
    err: UnixStream,
    input: &'a [u8],
    /// The control connection's bytes not yet a whole message.
    said: Vec<u8>,
    opened: bool,
    status: Option<u32>,
    control_done: bool,
    out: Option<Vec<u8>>,
    errors: Option<Vec<u8>>,
    out_done: bool,
    err_done: bool,
    /// Which sockets `wait` found ready: control, io (to read), io (to write), err.
    ready: [bool; 4],
}

impl<'a> Talk<'a> {
    fn new(control: UnixStream, io: UnixStream, err: UnixStream, input: &'a [u8]) -> Result<Talk<'a>, String> {
        for socket in [&control, &io, &err] {
            socket.set_nonblocking(true).map_err(|e| format!("a session's socket: {e}"))?;
        }
        let talk = Talk {
            control,
            io,
            err,
            input,
            said: Vec::new(),
            opened: false,
            status: None,
            control_done: false,
            out: Some(Vec::new()),
            errors: Some(Vec::new()),
            out_done: false,
            err_done: false,
            ready: [false; 4],
        };
        if input.is_empty() {
            talk.end_input();
        }
        Ok(talk)
    }

    /// The command's input is all given: it reads its end.
    fn end_input(&self) {
        let _ = self.io.shutdown(std::net::Shutdown::Write);
    }

    /// Waits at most `pause` for any of the sockets to have something.
    fn wait(&mut self, pause: Duration) -> Result<(), String> {
        let entry =
            |fd: i32, wanted: bool, events: i16| libc::pollfd { fd: if wanted { fd } else { -1 }, events, revents: 0 };
        let mut fds = [
            entry(self.control.as_raw_fd(), !self.control_done, libc::POLLIN),
            entry(self.io.as_raw_fd(), !self.out_done, libc::POLLIN),
            entry(self.io.as_raw_fd(), !self.input.is_empty(), libc::POLLOUT),
            entry(self.err.as_raw_fd(), !self.err_done, libc::POLLIN),
        ];
        let millis = pause.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live array of initialised pollfd structs, its length passed with it.
        let found = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
        if found < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(format!("waiting on a session: {e}"));
            }
        }
        self.ready = fds.map(|f| f.fd >= 0 && f.revents != 0);
        Ok(())
    }

    /// Takes in what `wait` found ready; how the session ended, once it has.
    fn step(&mut self) -> Result<Option<Ended>, String> {
        let [control, out, input, err] = self.ready;
        if control {
            self.hear_master()?;
        }
        if input {
            self.give_input();
        }
        if out && take(&mut self.io, &mut self.out) {
            self.out_done = true;
        }
        if err && take(&mut self.err, &mut self.errors) {
            self.err_done = true;
        }
        if self.out.is_none() {
            return Ok(Some(Ended::TooMuch("stdout")));
        }
        if self.errors.is_none() {
            return Ok(Some(Ended::TooMuch("stderr")));
        }
        if !(self.out_done && self.err_done && (self.control_done || self.status.is_some())) {
            return Ok(None);
        }
        let text = |bytes: Option<Vec<u8>>| String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned();
        let (stdout, stderr) = (text(self.out.take()), text(self.errors.take()));
        Ok(Some(match self.status {
            Some(code) => Ended::Completed(Completed {
                code: Some(code as i32),
                stdout,
                stderr,
                duration: Duration::ZERO,
                timed_out: false,
            }),
            None => Ended::NoStatus { stderr },
        }))
    }

    /// Reads the control connection: the master's hello, the session opened (`Err`, nothing
    /// ran, when it was refused or the master went away first) and the exit status.
    fn hear_master(&mut self) -> Result<(), String> {
        let mut chunk = [0u8; 512];
        loop {
            match self.control.read(&mut chunk) {
                Ok(0) => {
                    self.control_done = true;
                    break;
                }
                Ok(n) => self.said.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.control_done = true;
                    break;
                }
            }
        }
        while self.said.len() >= 4 {
            let length = u32::from_be_bytes(self.said[..4].try_into().expect("four bytes")) as usize;
            if length > mux::MAX_REPLY {
                return Err(format!("the control socket sent a {length}-byte message: not an ssh master"));
            }
            if self.said.len() < 4 + length {
                break;
            }
            let body: Vec<u8> = self.said.drain(..4 + length).skip(4).collect();
            match mux::session_word(&body)? {
                SessionWord::Opened => self.opened = true,
                SessionWord::Refused(why) => return Err(why),
                SessionWord::Exit(status) => self.status = Some(status),
                SessionWord::Hello | SessionWord::Other => {}
            }
        }
        if self.control_done && !self.opened {
            return Err("the ssh master closed the control connection".into());
        }
        Ok(())
    }

    /// Writes as much of the input as the socket takes; its end once all is given. The command
    /// may exit without reading it all: that is its business.
    fn give_input(&mut self) {
        match (&self.io).write(self.input) {
            Ok(n) => self.input = &self.input[n..],
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => return,
            Err(_) => self.input = &[],
        }
        if self.input.is_empty() {
            self.end_input();
        }
    }
}

/// Reads what `socket` has into `kept` (`None` once past `MAX_OUTPUT`); true at its end.
fn take(socket: &mut UnixStream, kept: &mut Option<Vec<u8>>) -> bool {
    let mut chunk = [0u8; 16 << 10];
    loop {
        match socket.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => match kept {
                Some(bytes) if bytes.len() + n <= MAX_OUTPUT => bytes.extend_from_slice(&chunk[..n]),
                _ => {
                    *kept = None;
                    return true;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}
