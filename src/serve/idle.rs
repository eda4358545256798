//! Connections that go quiet are closed: the service's listener hands axum each connection
//! wrapped so that a read or a write waiting longer than `IDLE` without a byte moving ends it
//! with an error, and hyper closes it. That covers a client that connects and sends nothing, one
//! that stops in the middle of its request (half-open, as a slow-loris client leaves it), one
//! that keeps an idle connection alive, and one that never reads its answer.
//!
//! A request's head (its request line and headers, up to the blank line) must also arrive
//! whole within `HEAD` of its first byte (of the connection, for the first request): a client
//! dripping a header line every few seconds moves bytes, so quietness alone would keep it
//! forever, and enough of them would take every descriptor the service has.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// How long a connection may stay quiet (nothing read, nothing written) before it is closed.
pub(super) const IDLE: Duration = Duration::from_secs(10);

/// How long a request's head may take to arrive, however steadily it drips.
pub(super) const HEAD: Duration = Duration::from_secs(10);

/// A listener whose connections close when they stay quiet for `IDLE`.
pub(super) struct ClosingIdle(pub(super) TcpListener);

impl axum::serve::Listener for ClosingIdle {
    type Io = Quiet;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Quiet, SocketAddr) {
        let (stream, address) = axum::serve::Listener::accept(&mut self.0).await;
        let head_by = Some(Instant::now() + HEAD);
        (Quiet { stream, deadline: Box::pin(tokio::time::sleep(IDLE)), head_by, head: Head::Reading(0) }, address)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// Where a connection is in its current request's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Head {
    /// Reading a head: how many bytes of its ending `\r\n\r\n` the last bytes matched.
    Reading(u8),
    /// The head arrived (the body, the handler, the answer follow).
    Read,
    /// An answer was written: the next byte read begins the next request's head.
    Answered,
}

impl Head {
    /// The state after `bytes` were read, and whether the head ended within them.
    fn after(self, bytes: &[u8]) -> (Head, bool) {
        let mut matched = match self {
            Head::Read => return (Head::Read, false),
            Head::Reading(n) => n,
            Head::Answered => 0,
        };
        for &b in bytes {
            matched = match (matched, b) {
                (0 | 2, b'\r') => matched + 1,
                (1 | 3, b'\n') => matched + 1,
                (_, b'\r') => 1,
                _ => 0,
            };
            if matched == 4 {
                return (Head::Read, true);
            }
        }
        (Head::Reading(matched), false)
    }
}

/// A connection with a deadline that every byte moved pushes back by `IDLE`, and never past
/// the time its current request's head must have arrived by (`HEAD`).
pub(super) struct Quiet {
    stream: TcpStream,
    deadline: Pin<Box<Sleep>>,
    head_by: Option<Instant>,
    head: Head,
}

impl Quiet {
    /// Something moved: the connection has `IDLE` again, unless its head is due sooner.
    fn moved(&mut self) {
        let idle = Instant::now() + IDLE;
        self.deadline.as_mut().reset(self.head_by.map_or(idle, |by| by.min(idle)));
    }

    /// Bytes were read: the head's deadline starts with a request's first byte and ends with
    /// its blank line.
    fn read(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.head == Head::Answered {
            self.head_by = Some(Instant::now() + HEAD);
        }
        let (head, ended) = self.head.after(bytes);
        self.head = head;
        if ended {
            self.head_by = None;
        }
    }

    /// Nothing moved: an error once the deadline has passed, else wait (for the stream or the
    /// deadline, whichever comes first).
    fn waiting<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) if self.head_by.is_some_and(|by| by <= Instant::now()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the request's head took over {}s", HEAD.as_secs()),
            ))),
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the connection stayed quiet for {}s", IDLE.as_secs()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn after<T>(&mut self, polled: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => self.waiting(cx),
            ready => {
                self.moved();
                ready
            }
        }
    }
}

impl AsyncRead for Quiet {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.head_by.is_some_and(|by| by <= Instant::now()) {
            return this.waiting(cx);
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.read(&buf.filled()[before..]);
        }
        this.after(polled, cx)
    }
}

impl AsyncWrite for Quiet {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            this.head = Head::Answered;
        }
        this.after(polled, cx)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.after(polled, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_ends_at_its_blank_line_however_the_bytes_are_split() {
        let head = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody";
        for split in 0..head.len() {
            let (first, ended_early) = Head::Reading(0).after(&head[..split]);
            let (_, ended) = first.after(&head[split..]);
            assert!(ended_early != ended, "split at {split}");
            assert_eq!(ended_early, split >= 27, "split at {split}");
        }
        assert_eq!(Head::Reading(0).after(b"a\r\r\n\r\n"), (Head::Read, true));
        assert_eq!(Head::Reading(0).after(b"X-A: 1\r\nX-B: 2\r\n"), (Head::Reading(2), false));
        assert_eq!(Head::Answered.after(b"\r\n\r\n"), (Head::Read, true));
        assert_eq!(Head::Read.after(b"\r\n\r\n"), (Head::Read, false));
    }
}
