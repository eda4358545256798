//! The stack twin: faithful stand-ins for the four components, speaking the real wire
//! formats (each written and read by `opsbook_wire`), usable as processes (`opsbook twin
//! SERVICE`, e.g. as systemd units under the stack's names and ports; see `process`) and
//! in-process (the `--sandbox`, see `opsbook-sandbox`'s `components.rs`). Both start a twin the same
//! way: its state from options, then `twin::serve(state, listener, stop)` (each component
//! implements `Twin`), stopped by SIGINT/SIGTERM or by a `Shutdown` handle.
//!
//! One folder per component:
//! - `metrics_db/`: InfluxDB 2 API (health, ping, ready, setup, buckets and orgs in pages,
//!   authorizations, write, Flux query, config); a fresh server until onboarding, or started
//!   already onboarded (`tenant`, `onboarding`); data in memory (`store`), the Flux subset in
//!   `flux/`, the token check as a middleware layer.
//! - `log_store/`: Loki 3.4 API (ready, metrics, push, query_range/query, labels, series,
//!   config); LogQL subset in `logql`, Loki 3's own labels in `loki3`, its log lines in `voice`.
//! - `agent/`: Telegraf-like sampler of the real host writing line protocol.
//! - `shipper/`: Alloy-like journal follower pushing to the log store, with its own
//!   `/metrics`, `/-/ready`, `/-/reload`, and `validate`.
//!
//! Shared: `logger` (where lines go), `go_time` (Go's duration and time texts), `faults` (the
//! sandbox's failure knobs), `toml_check`
//! (config diagnostics of agent and shipper), `argv` (the real programs' command lines, which
//! the twins accept: Loki's single-dash flags, Telegraf's `--config`). Each process logs to stdout in its
//! counterpart's style, so under systemd the journal holds its lines.

#![deny(missing_docs)]
// The twin speaks as the vendors' programs do on their own stdout and stderr (`telegraf
// --test`, `alloy validate`, a server's log lines): it prints as they print, not through
// opsbook's output layer.
#![allow(clippy::disallowed_macros)]

pub mod agent;
mod argv;
pub(crate) mod faults;
mod go_time;
pub mod log_store;
pub mod logger;
pub mod metrics_db;
mod notify;
mod process;
pub mod shipper;
pub(crate) mod toml_check;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;

pub use argv::translate as translate_argv;
use opsbook_world::BoxFuture;
pub use process::{Service, TwinArgs, run};

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
fn listener_of(what: &str, listener: Option<TcpListener>) -> std::io::Result<TcpListener> {
    listener.ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("the {what} serves HTTP: give it a listener"))
    })
}

/// Now, in nanoseconds since the epoch (the twins' one clock).
pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// A `reqwest` client for the twins' own requests (agent writes, shipper pushes), sent as
/// `user_agent`. Each request sets its own timeout; connecting is bounded here. On a host
/// without CA certificates (a minimal Debian has no ca-certificates) it still sends over
/// http://, as Telegraf and Alloy do: only an https:// address then fails, when it is used.
pub fn http_client(user_agent: &str) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = || reqwest::Client::builder().user_agent(user_agent).connect_timeout(Duration::from_secs(5));
    builder().build().or_else(|_| builder().tls_certs_only([]).build()).unwrap_or_default()
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

/// The `PROGRAM_build_info` gauge every Go server of the stack exposes (Prometheus' version
/// collector), as the log store's and the shipper's `/metrics` carry it.
pub(crate) fn build_info(w: &mut opsbook_wire::exposition::Writer, program: &str, version: &str, go: &str, tags: &str) {
    let name = format!("{program}_build_info");
    w.family(
        &name,
        "gauge",
        &format!(
            "A metric with a constant '1' value labeled by version, revision, branch, goversion from which \
             {program} was built, and the goos and goarch for the build."
        ),
    )
    .sample(
        &name,
        &[
            ("branch", "HEAD"),
            ("goarch", "amd64"),
            ("goos", "linux"),
            ("goversion", go),
            ("revision", "opsbook-twin"),
            ("tags", tags),
            ("version", version),
        ],
        1.0,
    );
}
