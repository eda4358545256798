//! Connections that go quiet are closed: the service's listener hands axum each connection
//! wrapped so that a read or a write waiting longer than `IDLE` without a byte moving ends it
//! with an error, and hyper closes it. That covers a client that connects and sends nothing, one
//! that stops in the middle of its request (half-open, as a slow-loris client leaves it), one
//! that keeps an idle connection alive, and one that never reads its answer.

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

/// A listener whose connections close when they stay quiet for `IDLE`.
pub(super) struct ClosingIdle(pub(super) TcpListener);

impl axum::serve::Listener for ClosingIdle {
    type Io = Quiet;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Quiet, SocketAddr) {
        let (stream, address) = axum::serve::Listener::accept(&mut self.0).await;
        (Quiet { stream, deadline: Box::pin(tokio::time::sleep(IDLE)) }, address)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection with a deadline that every byte moved pushes back by `IDLE`.
pub(super) struct Quiet {
    stream: TcpStream,
    deadline: Pin<Box<Sleep>>,
}

impl Quiet {
    /// Something moved: the connection has `IDLE` again.
    fn moved(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + IDLE);
    }

    /// Nothing moved: an error once the deadline has passed, else wait (for the stream or the
    /// deadline, whichever comes first).
    fn waiting<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
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
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        this.after(polled, cx)
    }
}

impl AsyncWrite for Quiet {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
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
