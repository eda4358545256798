//! Fault knobs shared by the twin servers, so `--sandbox --fault …` can rehearse failure
//! paths: a slow server, a server answering 500 or garbage, a refused token. Every knob is an
//! atomic, flipped at any time from another task; the middleware in this file reads them on
//! each request, so a change takes effect on the next request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What a twin server does wrong on purpose. All off by default.
#[derive(Debug, Default)]
pub struct Faults {
    /// Every answer is delayed this many milliseconds (a slow or overloaded server).
    pub(crate) delay_ms: AtomicU64,
    /// Non-zero: every answer is this status with a short plain-text body (e.g. 500).
    pub(crate) fail_status: AtomicU16,
    /// Every answer is 200 with an HTML page instead of the API's format (a proxy's error
    /// page, a wrong port).
    pub garbage: AtomicBool,
    /// metrics-db: every token is refused with 401, as after the token was revoked.
    pub(crate) refuse_token: AtomicBool,
    /// metrics-db: the operator token setup made acts as an all-access token (every resource
    /// type of its org, no operator rights), as a token made with `influx auth create
    /// --all-access`: `/api/v2/config` refuses it.
    pub(crate) all_access_token: AtomicBool,
}

impl Faults {
    pub fn new() -> Arc<Faults> {
        Arc::new(Faults::default())
    }

    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms.load(Ordering::Relaxed))
    }

    pub fn set_fail_status(&self, status: u16) {
        self.fail_status.store(status, Ordering::Relaxed);
    }

    pub fn set_garbage(&self, on: bool) {
        self.garbage.store(on, Ordering::Relaxed);
    }

    pub fn set_refuse_token(&self, on: bool) {
        self.refuse_token.store(on, Ordering::Relaxed);
    }

    pub(crate) fn refuses_token(&self) -> bool {
        self.refuse_token.load(Ordering::Relaxed)
    }

    pub fn set_all_access_token(&self, on: bool) {
        self.all_access_token.store(on, Ordering::Relaxed);
    }

    pub(crate) fn all_access_token(&self) -> bool {
        self.all_access_token.load(Ordering::Relaxed)
    }

    /// Whether any knob is set.
    pub fn any(&self) -> bool {
        !self.delay().is_zero()
            || self.fail_status.load(Ordering::Relaxed) != 0
            || self.garbage.load(Ordering::Relaxed)
            || self.refuses_token()
            || self.all_access_token()
    }

    /// Clears every knob.
    pub fn clear(&self) {
        self.set_delay(Duration::ZERO);
        self.set_fail_status(0);
        self.set_garbage(false);
        self.set_refuse_token(false);
        self.set_all_access_token(false);
    }
}

/// Page served by the `garbage` knob: what a misconfigured reverse proxy answers.
pub(crate) const GARBAGE_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Welcome</title></head>\
<body><h1>It works!</h1><p>This is not the API you are looking for.</p></body></html>\n";

/// axum middleware applying the knobs before the real handler runs.
pub(crate) async fn apply(State(faults): State<std::sync::Arc<Faults>>, request: Request, next: Next) -> Response {
    let delay = faults.delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let status = faults.fail_status.load(Ordering::Relaxed);
    if status != 0 {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let text = format!("{} {}\n", code.as_u16(), code.canonical_reason().unwrap_or("error"));
        return (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response();
    }
    if faults.garbage.load(Ordering::Relaxed) {
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
            .body(Body::from(GARBAGE_PAGE))
            .unwrap_or_default();
    }
    next.run(request).await
}
