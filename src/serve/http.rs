//! The service's HTTP endpoints (axum): `/healthz`, `/readyz`, `/metrics`, `/api/runs`
//! (`?job=NAME&host=NAME&limit=N`), `/api/runs/{id}` and the status page `/`.
//!
//! Every answer is computed from the in-memory state (`State`), except the run listings,
//! which read the history when it works. Health bodies are short text naming what fails, for
//! a person reading `curl` output as much as for a probe reading the status.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State as Shared};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::state::{JobView, State};
use crate::history::command::failed_checks;

/// The router over the shared state.
pub(super) fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/runs", get(runs))
        .route("/api/runs/{id}", get(run))
        .with_state(state)
}

fn text(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

fn json_answer(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// What fails in a job, in one line, or `None` when its latest run passed.
fn failure(v: &JobView) -> Option<String> {
    if let Some(problem) = &v.problem {
        return Some(format!("{}: cannot run: {}", v.title(), problem.lines().next().unwrap_or_default()));
    }
    let Some(latest) = v.runs.back() else {
        return Some(format!("{}: no run yet", v.title()));
    };
    if latest.outcome == "passed" {
        return None;
    }
    let mut why = v.latest.as_deref().map(failed_checks).unwrap_or_default();
    if let Some(message) = v.latest.as_deref().and_then(|r| r["error"]["message"].as_str()) {
        why.push(message.to_string());
    }
    Some(format!("{}: {} (run {}): {}", v.title(), latest.outcome, latest.id, why.join("; ")))
}

async fn healthz(Shared(state): Shared<Arc<State>>) -> Response {
    let (failures, n, hosts) = state.with_jobs(|jobs| {
        let failures = jobs.values().filter_map(failure).collect::<Vec<_>>();
        let names: std::collections::BTreeSet<&str> = jobs.values().map(|v| v.spec.name.as_str()).collect();
        let hosts: std::collections::BTreeSet<&str> = jobs.values().map(|v| v.host.as_str()).collect();
        (failures, names.len(), hosts.len())
    });
    if failures.is_empty() {
        let s = if n == 1 { "" } else { "s" };
        // Said only when jobs watch other hosts: one machine's answer stays as it was.
        let on = if hosts > 1 { format!(" on {hosts} hosts") } else { String::new() };
        text(StatusCode::OK, format!("ok: the latest run of {n} job{s} passed{on}\n"))
    } else {
        // A thrown text or a check's name is the runbook's (or a host's): read on a terminal by
        // whoever curls this, so its control characters are escaped.
        let failures: Vec<_> = failures.iter().map(|f| opsbook_base::escaped(f).into_owned()).collect();
        text(StatusCode::SERVICE_UNAVAILABLE, format!("failing:\n{}\n", failures.join("\n")))
    }
}

async fn readyz(Shared(state): Shared<Arc<State>>) -> Response {
    let waiting: Vec<String> =
        state.with_jobs(|jobs| jobs.values().filter(|v| !v.ready()).map(JobView::title).collect());
    if waiting.is_empty() {
        text(StatusCode::OK, "ready: every job ran\n".into())
    } else {
        text(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: no run yet of {}\n", waiting.join(", ")))
    }
}

async fn metrics(Shared(state): Shared<Arc<State>>) -> Response {
    let body = tokio::task::spawn_blocking(move || super::metrics::render(&state)).await.unwrap_or_default();
    (StatusCode::OK, [(header::CONTENT_TYPE, opsbook_wire::exposition::CONTENT_TYPE)], body).into_response()
}

async fn page(Shared(state): Shared<Arc<State>>) -> Response {
    let body = tokio::task::spawn_blocking(move || super::page::render(&state)).await.unwrap_or_default();
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

#[derive(serde::Deserialize)]
struct RunsQuery {
    job: Option<String>,
    host: Option<String>,
    limit: Option<usize>,
}

async fn runs(Shared(state): Shared<Arc<State>>, Query(q): Query<RunsQuery>) -> Response {
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    let runs = tokio::task::spawn_blocking(move || {
        state
            .recent(q.job.as_deref(), q.host.as_deref(), limit)
            .iter()
            .map(|r| {
                let mut v = r.to_json();
                v["url"] = json!(format!("/api/runs/{}", r.id));
                v
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    json_answer(StatusCode::OK, &json!({ "runs": runs }))
}

async fn run(Shared(state): Shared<Arc<State>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return json_answer(StatusCode::BAD_REQUEST, &json!({"error": format!("`{id}` is not a run id (a number)")}));
    };
    match tokio::task::spawn_blocking(move || state.run(id)).await.ok().flatten() {
        Some(r) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], r.report.clone()).into_response(),
        None => json_answer(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("no run {id}: it never existed or is past the retention")}),
        ),
    }
}
