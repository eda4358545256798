//! How a twin runs and is told to stop: the `Twin` trait every component implements, `serve`
//! (the one way each starts, as a process and in the sandbox), the `Stop` future it ends on —
//! SIGINT/SIGTERM for a process (`stop_signal`), a `Shutdown` handle in the sandbox — and the
//! listener a server twin is given.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use opsbook_world::BoxFuture;

/// How a running twin is told to stop: SIGINT/SIGTERM for a process (`stop_signal`), its
/// `Shutdown` handle in the sandbox.
pub type Stop = BoxFuture<'static, ()>;

/// A twin component from its start until it is told to stop.
pub trait Twin: Send + Sync + 'static {
    /// Serves on `listener` until `stop` completes, logging its start and stop as its
    /// counterpart does. The agent serves nothing and takes `None`; the servers need one.
    fn run(self: Arc<Self>, listener: Option<TcpListener>, stop: Stop) -> BoxFuture<'static, std::io::Result<()>>;
}

/// Runs `twin` until `stop` completes: the one way every twin starts, as a process
/// (`opsbook twin SERVICE`) and in the sandbox.
pub fn serve<T: Twin>(
    twin: Arc<T>,
    listener: Option<TcpListener>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> BoxFuture<'static, std::io::Result<()>> {
    twin.run(listener, Box::pin(stop))
}

/// The listener a server twin was given, or the error of starting one without.
pub(crate) fn listener_of(what: &str, listener: Option<TcpListener>) -> std::io::Result<TcpListener> {
    listener.ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("the {what} serves HTTP: give it a listener"))
    })
}

/// Completes on SIGINT or SIGTERM.
pub(crate) fn stop_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let int = signal(SignalKind::interrupt());
    let term = signal(SignalKind::terminate());
    async move {
        match (int, term) {
            (Ok(mut i), Ok(mut t)) => {
                tokio::select! {
                    _ = i.recv() => {},
                    _ = t.recv() => {},
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }
}

/// Starts a server future on a fresh loopback port; for tests and the sandbox.
pub async fn loopback() -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind("127.0.0.1:0").await
}

/// A shutdown handle: `trigger()` ends the `signal()` future a server was started with.
#[derive(Clone, Default)]
pub struct Shutdown(Arc<tokio::sync::Notify>, Arc<std::sync::atomic::AtomicBool>);

impl Shutdown {
    /// A handle not yet triggered.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Ends every `signal()` future of this handle, those made later included.
    pub fn trigger(&self) {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.notify_waiters();
    }

    /// A future that ends once `trigger` is called.
    pub fn signal(&self) -> impl Future<Output = ()> + Send + use<> {
        let this = self.clone();
        async move {
            loop {
                let notified = this.0.notified();
                if this.1.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                notified.await;
            }
        }
    }
}
