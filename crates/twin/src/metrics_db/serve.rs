//! The metrics database serving its routes (`http`) until told to stop, logging its welcome,
//! where it listens and its stop as InfluxDB does.

use std::sync::Arc;

use tokio::net::TcpListener;

use super::database::{COMMIT, MetricsDb, VERSION};
use super::http;
use crate::logger::Level;
use crate::running::{Stop, Twin, listener_of};
use opsbook_world::BoxFuture;

impl Twin for MetricsDb {
    fn run(self: Arc<Self>, listener: Option<TcpListener>, stop: Stop) -> BoxFuture<'static, std::io::Result<()>> {
        Box::pin(async move { serve(listener_of("metrics database", listener)?, self, stop).await })
    }
}

/// Serves the metrics database on `listener` until `shutdown` completes.
async fn serve(listener: TcpListener, db: Arc<MetricsDb>, shutdown: Stop) -> std::io::Result<()> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let level = db.options.log_level.clone();
    db.log_always(
        Level::Info,
        "Welcome to InfluxDB",
        &[("version", VERSION), ("commit", COMMIT), ("log_level", level.as_str())],
    );
    db.log_line(Level::Info, "Listening", &[("service", "tcp-listener"), ("transport", "http"), ("addr", &addr)]);
    let db2 = db.clone();
    let result = axum::serve(listener, http::router(db)).with_graceful_shutdown(shutdown).await;
    db2.log_line(Level::Info, "Stopping", &[("service", "tcp-listener")]);
    result
}
