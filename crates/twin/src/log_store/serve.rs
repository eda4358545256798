//! The log store serving its routes (`http`) until told to stop, logging as Loki does over its
//! life: its start, the `empty ring` error while the ring forms, and its shutdown.

use std::sync::Arc;

use tokio::net::TcpListener;

use super::state::LogStore;
use super::{http, voice};
use crate::running::{Stop, Twin, listener_of};
use opsbook_world::BoxFuture;

impl Twin for LogStore {
    fn run(self: Arc<Self>, listener: Option<TcpListener>, stop: Stop) -> BoxFuture<'static, std::io::Result<()>> {
        Box::pin(async move { serve(listener_of("log store", listener)?, self, stop).await })
    }
}

/// Serves the log store on `listener` until `shutdown` completes, logging as Loki does
/// over its life: its start, the `empty ring` error while the ring forms, and the
/// `context canceled` errors of its shutdown.
async fn serve(listener: TcpListener, store: Arc<LogStore>, shutdown: Stop) -> std::io::Result<()> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    store.started(&addr);
    let forming = tokio::spawn(voice::ring_forming(store.clone()));
    let result = axum::serve(listener, http::router(store.clone())).with_graceful_shutdown(shutdown).await;
    forming.abort();
    store.stopped();
    result
}
