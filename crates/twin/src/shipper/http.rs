//! The shipper twin's local HTTP endpoint (127.0.0.1:12345 by default), as Alloy's:
//! `/metrics`, `/-/ready`, `/-/healthy` and `/-/reload` (200 `config reloaded`, or 400 with
//! the error).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::pipeline::Shipper;
use opsbook_wire::exposition;

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body.into()).into_response()
}

async fn metrics(State(s): State<Arc<Shipper>>) -> Response {
    ([(header::CONTENT_TYPE, exposition::CONTENT_TYPE)], s.metrics_text()).into_response()
}

async fn ready(State(s): State<Arc<Shipper>>) -> Response {
    if s.faults.not_ready.load(Ordering::Relaxed) {
        text(StatusCode::SERVICE_UNAVAILABLE, "Alloy is not ready.\n")
    } else {
        text(StatusCode::OK, "Alloy is ready.\n")
    }
}

async fn healthy() -> Response {
    text(StatusCode::OK, "All Alloy components are healthy.\n")
}

async fn reload(State(s): State<Arc<Shipper>>) -> Response {
    match s.reload() {
        Ok(()) => text(StatusCode::OK, "config reloaded\n"),
        Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}

async fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "404 page not found\n")
}

pub(super) fn router(shipper: Arc<Shipper>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/-/ready", get(ready))
        .route("/-/healthy", get(healthy))
        .route("/-/reload", get(reload).post(reload))
        .fallback(not_found)
        .with_state(shipper)
}
