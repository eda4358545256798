//! A command run on a host as a session of its shared connection: no local `ssh` client, no
//! process of ours at all.
//!
//! The master is asked over its control socket (`mux::open_session`) to open a session whose
//! stdin, stdout and stderr are three socket pairs of ours; we write the input, read both
//! outputs to their end and read the command's exit status from the control connection, all
//! on the runtime, bounded in time and in size. Starting a local `ssh` client for each command
//! cost opsbook a fork and the client's start (its configuration, its keys' paths, the mux
//! handshake) — tens of times a host in a rollout; a session costs a few messages on a unix
//! socket.
//!
//! What a session cannot tell apart the way a process can: a command killed by a signal and a
//! connection lost both end with no exit status (`Ended::NoStatus`); the caller words it.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream as StdStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::mux::{self, Mux};
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
}

/// Runs `command` (one string, for the remote login shell) as a session of the master on
/// `socket`, giving it `stdin` (or an empty input), for at most `limit`. `Err` when no session
/// could be opened (the master is gone or refused): nothing ran.
pub(super) async fn run(
    socket: PathBuf,
    command: String,
    stdin: Option<String>,
    limit: Duration,
) -> Result<Ended, String> {
    let started = Instant::now();
    let pair = || StdStream::pair().map_err(|e| format!("a socket pair for a session: {e}"));
    let ((in_ours, in_theirs), (out_ours, out_theirs), (err_ours, err_theirs)) = (pair()?, pair()?, pair()?);
    let open = limit.min(OPEN_LIMIT);
    // The master answers once the host opened the channel: a network round trip, off the runtime.
    let control = tokio::task::spawn_blocking(move || {
        let stdio = [in_theirs.as_raw_fd(), out_theirs.as_raw_fd(), err_theirs.as_raw_fd()];
        Mux::open_session(&socket, open, &command, stdio).map(Mux::into_stream)
        // Our copies of the session's ends close here: the master holds its own.
    })
    .await
    .map_err(|e| format!("opening a session: {e}"))??;
    let [control, input, out, err] = [control, in_ours, out_ours, err_ours].map(nonblocking);
    let (control, mut input, out, err) = (control?, input?, out?, err?);
    let talk = async {
        let give = async {
            if let Some(text) = stdin {
                // The command may exit without reading it all: that is its business.
                let _ = input.write_all(text.as_bytes()).await;
            }
            drop(input);
        };
        let (_, out, err, status) = tokio::join!(give, read_all(out), read_all(err), exit_status(control));
        (out, err, status)
    };
    let Ok((out, err, status)) = tokio::time::timeout(limit, talk).await else {
        let stderr = format!("no answer within {}: the session was closed", humantime::format_duration(limit));
        let done =
            Completed { code: None, stdout: String::new(), stderr, duration: started.elapsed(), timed_out: true };
        return Ok(Ended::Completed(done));
    };
    let (out, err) = match (out, err) {
        (Some(out), Some(err)) => (out, err),
        (None, _) => return Ok(Ended::TooMuch("stdout")),
        (_, None) => return Ok(Ended::TooMuch("stderr")),
    };
    let (stdout, stderr) = (String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned());
    Ok(match status {
        Some(code) => Ended::Completed(Completed {
            code: Some(code as i32),
            stdout,
            stderr,
            duration: started.elapsed(),
            timed_out: false,
        }),
        None => Ended::NoStatus { stderr },
    })
}

/// The most opening a session may take: the master answers once the host opened the channel.
const OPEN_LIMIT: Duration = Duration::from_secs(10);

fn nonblocking(stream: StdStream) -> Result<UnixStream, String> {
    stream.set_nonblocking(true).and_then(|()| UnixStream::from_std(stream)).map_err(|e| e.to_string())
}

/// Everything `pipe` gives until its end; `None` past `MAX_OUTPUT`.
async fn read_all(mut pipe: UnixStream) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return Some(bytes),
            Ok(n) if bytes.len() + n > MAX_OUTPUT => return None,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The command's exit status from the session's control connection; `None` when it closes
/// without one.
async fn exit_status(mut control: UnixStream) -> Option<u32> {
    loop {
        let mut length = [0u8; 4];
        control.read_exact(&mut length).await.ok()?;
        let length = u32::from_be_bytes(length) as usize;
        if length > mux::MAX_REPLY {
            return None;
        }
        let mut body = vec![0u8; length];
        control.read_exact(&mut body).await.ok()?;
        if let Some(status) = mux::exit_status(&body) {
            return Some(status);
        }
    }
}
