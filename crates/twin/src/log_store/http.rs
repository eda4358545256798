//! The log-store twin's HTTP side: routes, parameters as Loki reads them (the query string,
//! and on POST a form body too; times in every form Loki accepts; default look-backs), and
//! answers in Loki's JSON (written by `opsbook_wire::loki`) and plain-text errors.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query as QueryParams, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, middleware};
use serde_json::json;

use super::logql::{self, Query};
use super::state::{LogStore, VERSION};
use super::stats::stats;
use crate::clock::now_ns;
use crate::faults;
use opsbook_wire::{exposition, loki};

/// A 400 (or other) answer in Loki's plain-text style. Query errors come without a final
/// newline (as captured from Loki 3.4); `/ready` and push errors, written by Go's
/// `http.Error`, with one.
fn text_error(status: StatusCode, text: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")],
        text.into(),
    )
        .into_response()
}

fn text_line(status: StatusCode, text: &str) -> Response {
    text_error(status, format!("{text}\n"))
}

/// A JSON answer with the content type Loki gives its JSON.
fn json_ok(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json; charset=UTF-8")], body).into_response()
}

/// Loki's timestamp parameter: float seconds, integer seconds (≤ 10 digits) or nanoseconds,
/// or RFC 3339.
fn parse_time(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.contains('.')
        && let Ok(f) = text.parse::<f64>()
    {
        return Ok((f * 1e9).round() as i64);
    }
    if let Ok(n) = text.parse::<i64>() {
        return Ok(if text.trim_start_matches('-').len() <= 10 { n.saturating_mul(1_000_000_000) } else { n });
    }
    humantime::parse_rfc3339_weak(text)
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .ok_or_else(|| format!("cannot parse {text:?} to a valid timestamp"))
}

/// A duration parameter: Prometheus text (`5m`) or float seconds.
fn parse_step(text: &str) -> Result<Duration, String> {
    logql::parse_duration(text)
        .or_else(|| text.parse::<f64>().ok().filter(|f| *f > 0.0).map(Duration::from_secs_f64))
        .ok_or_else(|| format!("cannot parse {text:?} to a valid duration"))
}

type Params = Vec<(String, String)>;

fn param<'a>(params: &'a Params, name: &str) -> Option<&'a str> {
    params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `start`/`end` with a default look-back (Loki: 1 h for queries, 6 h for label lookups);
/// `since` replaces the look-back.
fn window(params: &Params, default_back: Duration) -> Result<(i64, i64), String> {
    let end = param(params, "end").map(parse_time).transpose()?.unwrap_or_else(now_ns);
    let back = param(params, "since").map(parse_step).transpose()?.unwrap_or(default_back);
    let start = param(params, "start").map(parse_time).transpose()?.unwrap_or(end - back.as_nanos() as i64);
    if end < start {
        return Err("end timestamp must not be before or equal to start time".into());
    }
    Ok((start, end))
}

async fn handle_query(store: &LogStore, params: &Params, instant: bool) -> Response {
    store.counters.queries.fetch_add(1, Ordering::Relaxed);
    let began = Instant::now();
    let Some(text) = param(params, "query") else {
        return text_error(StatusCode::BAD_REQUEST, "query parameter `query` is required");
    };
    let query = match logql::parse(text) {
        Ok(q) => q,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    let limit = match param(params, "limit").map(str::parse::<usize>) {
        None => 100,
        Some(Ok(0)) | Some(Err(_)) => {
            return text_error(StatusCode::BAD_REQUEST, "limit must be a positive value");
        }
        Some(Ok(n)) => n,
    };
    let forward = match param(params, "direction").unwrap_or("backward").to_ascii_lowercase().as_str() {
        "forward" => true,
        "backward" => false,
        other => return text_error(StatusCode::BAD_REQUEST, format!("invalid direction '{other}'")),
    };
    match (query, instant) {
        (Query::Log(_), true) => text_error(
            StatusCode::BAD_REQUEST,
            "log queries are not supported as an instant query type, please change your query to a range query type",
        ),
        (Query::Log(sel), false) => {
            let (start, end) = match window(params, Duration::from_secs(3600)) {
                Ok(w) => w,
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let (result, tally) = store.select_logs(&sel, start, end, limit, forward);
            if tally.returned >= limit {
                store.limit_met(text);
            }
            json_ok(loki::write_streams(&result, stats(&tally, began.elapsed())))
        }
        (Query::Metric(m), true) => {
            let t = match param(params, "time").map(parse_time).transpose() {
                Ok(t) => t.unwrap_or_else(now_ns),
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let (series, tally) = store.eval_metric(&m, &[t]);
            json_ok(loki::write_vector(&series, stats(&tally, began.elapsed())))
        }
        (Query::Metric(m), false) => {
            let (start, end) = match window(params, Duration::from_secs(3600)) {
                Ok(w) => w,
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let step = match param(params, "step").map(parse_step).transpose() {
                // Loki's default: a 250th of the range, at least a second.
                Ok(s) => {
                    s.unwrap_or_else(|| Duration::from_secs((((end - start) / 1_000_000_000) / 250).max(1) as u64))
                }
                Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
            };
            let step_ns = (step.as_nanos() as i64).max(1);
            if (end - start) / step_ns > 11_000 {
                return text_error(
                    StatusCode::BAD_REQUEST,
                    "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
                );
            }
            // Evaluation times are aligned to the step, as Loki's query frontend aligns them.
            let first = start.div_euclid(step_ns) * step_ns;
            let times: Vec<i64> =
                (0..).map(|i| first + i * step_ns).take_while(|t| *t <= end).filter(|t| *t >= start).collect();
            let (series, tally) = store.eval_metric(&m, &times);
            json_ok(loki::write_matrix(&series, stats(&tally, began.elapsed())))
        }
    }
}

async fn ready(State(store): State<Arc<LogStore>>) -> Response {
    if store.is_ready() {
        text_line(StatusCode::OK, "ready")
    } else {
        text_line(StatusCode::SERVICE_UNAVAILABLE, "Ingester not ready: waiting for 15s after being ready")
    }
}

async fn metrics(State(store): State<Arc<LogStore>>) -> Response {
    ([(header::CONTENT_TYPE, exposition::CONTENT_TYPE)], store.metrics_text()).into_response()
}

async fn push_handler(State(store): State<Arc<LogStore>>, headers: HeaderMap, body: Bytes) -> Response {
    store.counters.push_requests.fetch_add(1, Ordering::Relaxed);
    let h = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let encoding = loki::encoding_of(&h(header::CONTENT_TYPE));
    let plain = match opsbook_wire::decompress(&h(header::CONTENT_ENCODING), &body, 100 << 20) {
        Ok(p) => p,
        Err(e) => return text_line(StatusCode::BAD_REQUEST, &e),
    };
    let streams = match loki::decode(encoding, &plain) {
        Ok(s) => s,
        Err(e) => {
            store.push_undecodable(&e);
            return text_line(StatusCode::BAD_REQUEST, &e);
        }
    };
    match store.ingest(streams) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err((status, text)) => text_line(status, &text),
    }
}

async fn query_range(State(store): State<Arc<LogStore>>, QueryParams(params): QueryParams<Params>) -> Response {
    handle_query(&store, &params, false).await
}

async fn query_range_post(
    State(store): State<Arc<LogStore>>,
    QueryParams(params): QueryParams<Params>,
    form: Result<Form<Params>, FormRejection>,
) -> Response {
    handle_query(&store, &with_form(params, form), false).await
}

async fn query_instant(State(store): State<Arc<LogStore>>, QueryParams(params): QueryParams<Params>) -> Response {
    handle_query(&store, &params, true).await
}

async fn query_instant_post(
    State(store): State<Arc<LogStore>>,
    QueryParams(params): QueryParams<Params>,
    form: Result<Form<Params>, FormRejection>,
) -> Response {
    handle_query(&store, &with_form(params, form), true).await
}

/// POSTed requests may carry their parameters in the query string and, form-encoded, in the
/// body; as in Go's `ParseForm`, the body's values win (`param` reads the last). A body that
/// is not a form adds nothing.
fn with_form(mut params: Params, form: Result<Form<Params>, FormRejection>) -> Params {
    if let Ok(Form(more)) = form {
        params.extend(more);
    }
    params
}

async fn labels(State(store): State<Arc<LogStore>>, QueryParams(params): QueryParams<Params>) -> Response {
    match window(&params, Duration::from_secs(6 * 3600)) {
        Ok((start, end)) => json_ok(loki::write_strings(&store.label_names(start, end))),
        Err(e) => text_error(StatusCode::BAD_REQUEST, e),
    }
}

async fn label_values(
    State(store): State<Arc<LogStore>>,
    Path(name): Path<String>,
    QueryParams(params): QueryParams<Params>,
) -> Response {
    let (start, end) = match window(&params, Duration::from_secs(6 * 3600)) {
        Ok(w) => w,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    let selector = match param(&params, "query").map(logql::parse).transpose() {
        Ok(Some(Query::Log(s))) => Some(s),
        Ok(Some(Query::Metric(_))) => return text_error(StatusCode::BAD_REQUEST, "query must be a stream selector"),
        Ok(None) => None,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    json_ok(loki::write_strings(&store.label_values(&name, start, end, selector.as_ref())))
}

async fn series(State(store): State<Arc<LogStore>>, QueryParams(params): QueryParams<Params>) -> Response {
    series_answer(&store, &params)
}

async fn series_post(
    State(store): State<Arc<LogStore>>,
    QueryParams(params): QueryParams<Params>,
    form: Result<Form<Params>, FormRejection>,
) -> Response {
    series_answer(&store, &with_form(params, form))
}

fn series_answer(store: &LogStore, params: &Params) -> Response {
    let (start, end) = match window(params, Duration::from_secs(6 * 3600)) {
        Ok(w) => w,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
    };
    let mut selectors = Vec::new();
    for (_, m) in params.iter().filter(|(k, _)| k == "match[]" || k == "match") {
        match logql::parse(m) {
            Ok(Query::Log(s)) => selectors.push(s),
            Ok(Query::Metric(_)) => return text_error(StatusCode::BAD_REQUEST, "match[] must be a stream selector"),
            Err(e) => return text_error(StatusCode::BAD_REQUEST, e),
        }
    }
    json_ok(loki::write_series(&store.series(&selectors, start, end)))
}

async fn buildinfo() -> Response {
    let info = json!({"version": format!("v{VERSION}"), "revision": "opsbook-twin", "branch": "HEAD",
        "buildUser": "", "buildDate": "", "goVersion": ""});
    json_ok(info.to_string())
}

async fn config(State(store): State<Arc<LogStore>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], store.config_yaml()).into_response()
}

async fn method_not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

async fn not_found() -> Response {
    text_line(StatusCode::NOT_FOUND, "404 page not found")
}

/// The HTTP routes, with the fault middleware in front.
/// With `auth_enabled: true` in its config file, Loki refuses API calls that name no tenant
/// (`X-Scope-OrgID`): 401 `no org id`.
async fn require_tenant(
    State(store): State<Arc<LogStore>>,
    request: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    if store.options.file.auth_enabled && !request.headers().contains_key("x-scope-orgid") {
        return text_line(StatusCode::UNAUTHORIZED, "no org id");
    }
    next.run(request).await
}

pub(super) fn router(store: Arc<LogStore>) -> Router {
    let api = Router::new()
        .route("/loki/api/v1/push", post(push_handler))
        .route("/loki/api/v1/query_range", get(query_range).post(query_range_post))
        .route("/loki/api/v1/query", get(query_instant).post(query_instant_post))
        .route("/loki/api/v1/labels", get(labels).post(labels))
        .route("/loki/api/v1/label/{name}/values", get(label_values))
        .route("/loki/api/v1/series", get(series).post(series_post))
        .route_layer(middleware::from_fn_with_state(store.clone(), require_tenant));
    Router::new()
        .route("/ready", get(ready).head(method_not_allowed))
        .route("/metrics", get(metrics))
        .route("/config", get(config))
        .merge(api)
        .route("/loki/api/v1/status/buildinfo", get(buildinfo))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(store.faults.clone(), faults::apply))
        .with_state(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_in_every_form_loki_accepts() {
        assert_eq!(parse_time("1795338824").unwrap(), 1_795_338_824_000_000_000);
        assert_eq!(parse_time("1795338824104597505").unwrap(), 1_795_338_824_104_597_505);
        assert_eq!(parse_time("1795338824.5").unwrap(), 1_795_338_824_500_000_000);
        assert_eq!(parse_time("2026-11-22T09:13:44Z").unwrap(), 1_795_338_824_000_000_000);
        assert_eq!(parse_time("soon").unwrap_err(), "cannot parse \"soon\" to a valid timestamp");
    }
}
