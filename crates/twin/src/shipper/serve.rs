//! The log shipper serving its local endpoint (`http`) and running its pipeline until told to
//! stop, logging its start and stop as Alloy does; open connections may delay the stop a
//! moment, no more.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::http;
use super::pipeline::{Shipper, VERSION};
use crate::logger::Level;
use crate::running::{Stop, Twin, listener_of};
use opsbook_world::BoxFuture;

impl Twin for Shipper {
    fn run(self: Arc<Self>, listener: Option<TcpListener>, stop: Stop) -> BoxFuture<'static, std::io::Result<()>> {
        Box::pin(async move { serve(listener_of("log shipper", listener)?, self, stop).await })
    }
}

/// How long open connections may delay the stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves the local endpoint on `listener` and ships the journal until `shutdown`.
async fn serve(listener: TcpListener, shipper: Arc<Shipper>, shutdown: Stop) -> std::io::Result<()> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    shipper.say(Level::Info, "starting Alloy", &[("version", VERSION)]);
    shipper.say(Level::Info, "now listening for http traffic", &[("service", "http"), ("addr", &addr)]);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut stopping = stop_rx.clone();
    let worker = shipper.clone();
    let pipeline = tokio::spawn(async move { worker.pipeline(stop_rx).await });
    let server = axum::serve(listener, http::router(shipper.clone())).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    // A client holding a connection open must not keep the shipper from stopping (the
    // service manager would kill it after its stop timeout and call the unit failed).
    let result = tokio::select! {
        result = server.into_future() => result,
        _ = async {
            let _ = stopping.wait_for(|stop| *stop).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => Ok(()),
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), pipeline).await;
    // The journal follower, dropped with the pipeline, kills and reaps its journalctl: give it
    // that moment, so the shipper stops with no process of its unit left behind.
    tokio::time::sleep(Duration::from_millis(300)).await;
    shipper.say(Level::Info, "Alloy stopped", &[]);
    result
}
