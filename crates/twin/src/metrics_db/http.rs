//! The metrics-db twin's HTTP side: routes, the token check as one middleware layer over
//! every `/api/v2` route but setup, request decoding (query parameters, Flux bodies raw or
//! JSON) and answers in InfluxDB 2's JSON (tab-indented) and CSV; `/ready` with its
//! four-space JSON. Tenancy routes (buckets, orgs, authorizations) are in `tenant_http`,
//! setup in `onboarding`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query as QueryParams, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde_json::{Value, json};

use super::answers::{Params, api_err, error_answer, json_answer, param};
use super::database::{COMMIT, MetricsDb, VERSION, internal, invalid};
use super::tenant::Authorization;
use super::{onboarding, tenant_http};
use crate::faults;
use crate::logger::Level;

use opsbook_wire::flux_csv::Dialect;

/// The token check of every `/api/v2` route but setup: without a known token in
/// `Authorization: Token …`, InfluxDB's 401 and the handler never runs; with one, its
/// authorization goes to the handler. A fresh server knows no token, so every one is refused
/// the same way as a wrong one (`http/authentication_middleware.go`).
async fn require_token(State(db): State<Arc<MetricsDb>>, mut request: Request, next: Next) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let Some(auth) = db.authorize(authorization) else {
        // InfluxDB v2.7.12 logs a refused token at info only.
        db.log_line(Level::Info, "Unauthorized", &[("error", "authorization not found")]);
        return error_answer((
            StatusCode::UNAUTHORIZED,
            json!({"code": "unauthorized", "message": "unauthorized access"}),
        ));
    };
    request.extensions_mut().insert(auth);
    next.run(request).await
}

/// The org a write names (by name or ID), which must exist.
fn check_org(db: &MetricsDb, params: &Params) -> Result<(), Box<Response>> {
    let tenant = db.tenant_read();
    match (param(params, "org"), param(params, "orgID")) {
        (None, None) => Err(Box::new(error_answer(invalid("Please provide either orgID or org")))),
        (Some(org), _) if tenant.org_by_name(org).or_else(|| tenant.org_by_id(org)).is_some() => Ok(()),
        (None, Some(id)) if tenant.org_by_id(id).is_some() => Ok(()),
        (Some(org), _) => Err(Box::new(error_answer((
            StatusCode::NOT_FOUND,
            json!({"code": "not found", "message": format!("organization name \"{org}\" not found")}),
        )))),
        (None, Some(id)) => Err(Box::new(error_answer((
            StatusCode::NOT_FOUND,
            json!({"code": "not found", "message": format!("organization not found: {id}")}),
        )))),
    }
}

/// The org of a query, as InfluxDB v2.7.12 decodes it (`http/requests.go`
/// `queryOrganization`, wrapped by `decodeProxyQueryRequest`): every failure is a 400
/// `invalid` `failed to decode request body: …`.
fn check_query_org(db: &MetricsDb, params: &Params) -> Result<(), (StatusCode, Value)> {
    let tenant = db.tenant_read();
    let why = match (param(params, "orgID"), param(params, "org")) {
        (Some(id), _) if tenant.org_by_id(id).is_some() => return Ok(()),
        (Some(_), _) => "organization not found".to_string(),
        (None, Some(name)) if tenant.org_by_name(name).is_some() => return Ok(()),
        (None, Some(name)) => format!("organization name \"{name}\" not found"),
        (None, None) => "Please provide either orgID or org".to_string(),
    };
    Err(invalid(&format!("failed to decode request body: {why}")))
}

/// InfluxDB 2 writes this body from a format string, spacing and all.
async fn health() -> Response {
    let body = format!(
        "{{\"name\":\"influxdb\", \"message\":\"ready for queries and writes\", \"status\":\"pass\", \"checks\":[], \"version\": {VERSION:?}, \"commit\": {COMMIT:?}}}\n"
    );
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], body).into_response()
}

async fn ping() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// `GET /ready` (InfluxDB v2.7.12 `http/ready.go`): a `json.Encoder` with four-space indent,
/// so a final newline; `started` is when the server was built, `up` a Go duration.
async fn ready(State(db): State<Arc<MetricsDb>>) -> Response {
    let up = db.started.elapsed().unwrap_or_default();
    let started = crate::go_time::rfc3339_nano(db.started);
    let body = format!(
        "{{\n    \"status\": \"ready\",\n    \"started\": {},\n    \"up\": {}\n}}\n",
        Value::from(started),
        Value::from(crate::go_time::duration(up))
    );
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], body).into_response()
}

/// `GET /api/v2/config` (InfluxDB v2.7.12 `http/config.go`): operator tokens only; any other
/// is a 401 through `API.Err`.
async fn config(State(db): State<Arc<MetricsDb>>, Extension(auth): Extension<Authorization>) -> Response {
    if !auth.is_operator() {
        let message = "access to /api/v2/config requires operator permissions";
        return api_err(
            &db,
            Some("config"),
            (StatusCode::UNAUTHORIZED, json!({"code": "unauthorized", "message": message})),
        );
    }
    json_answer(StatusCode::OK, &db.config_json())
}

async fn write(
    State(db): State<Arc<MetricsDb>>,
    headers: HeaderMap,
    QueryParams(params): QueryParams<Params>,
    body: Bytes,
) -> Response {
    if let Err(r) = check_org(&db, &params) {
        return *r;
    }
    let Some(bucket) = param(&params, "bucket").or_else(|| param(&params, "bucketID")) else {
        return error_answer(invalid("bucket not specified"));
    };
    let bucket = {
        // A bucket ID names the bucket too.
        let names =
            db.buckets.read().map(|b| b.values().find(|x| x.id == bucket).map(|x| x.name.clone())).ok().flatten();
        names.unwrap_or_else(|| bucket.to_string())
    };
    let encoding = headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("");
    let plain = match opsbook_wire::decompress(encoding, &body, 64 << 20) {
        Ok(p) => p,
        Err(e) => return error_answer(invalid(&format!("unable to read data: {e}"))),
    };
    let Ok(text) = String::from_utf8(plain) else {
        return error_answer(invalid("unable to parse points: body is not valid UTF-8"));
    };
    match db.write_lines(&bucket, param(&params, "precision").unwrap_or("ns"), &text) {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => {
            db.log_line(
                Level::Warn,
                "failed to write points",
                &[("bucket", &bucket), ("error", &e.1["message"].to_string())],
            );
            error_answer(e)
        }
    }
}

/// The query from a raw Flux body or InfluxDB's JSON body, with its dialect.
fn query_request(headers: &HeaderMap, body: &[u8]) -> Result<(String, Dialect), (StatusCode, Value)> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let text = String::from_utf8_lossy(body).into_owned();
    if content_type.starts_with("application/vnd.flux") {
        return Ok((text, Dialect::default()));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| invalid(&format!("failed to decode request body: {e}")))?;
    if let Some(kind) = v.get("type").and_then(Value::as_str)
        && kind != "flux"
    {
        return Err(invalid(&format!("unsupported query type \"{kind}\" (the twin speaks Flux)")));
    }
    let query = v
        .get("query")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("failed to decode request body: request body requires either spec or query"))?
        .to_string();
    let mut dialect = Dialect::default();
    if let Some(d) = v.get("dialect") {
        if let Some(h) = d.get("header").and_then(Value::as_bool) {
            dialect.header = h;
        }
        if let Some(list) = d.get("annotations").and_then(Value::as_array) {
            for a in list {
                match a.as_str() {
                    Some(name @ ("datatype" | "group" | "default")) => dialect.annotations.push(name.to_string()),
                    _ => return Err(invalid(&format!("unknown annotation {a}"))),
                }
            }
        }
        if let Some(delim) = d.get("delimiter").and_then(Value::as_str)
            && delim != ","
        {
            return Err(invalid("unsupported by the twin: a delimiter other than \",\""));
        }
    }
    Ok((query, dialect))
}

async fn query(
    State(db): State<Arc<MetricsDb>>,
    headers: HeaderMap,
    QueryParams(params): QueryParams<Params>,
    body: Bytes,
) -> Response {
    if let Err(e) = check_query_org(&db, &params) {
        return error_answer(e);
    }
    let (src, dialect) = match query_request(&headers, &body) {
        Ok(q) => q,
        Err(e) => return error_answer(e),
    };
    let db2 = db.clone();
    // Queries over many points take a while: keep them off the async workers.
    let answer = tokio::task::spawn_blocking(move || db2.query(&src, &dialect)).await;
    match answer {
        Ok(Ok(csv)) => ([(header::CONTENT_TYPE, "text/csv; charset=utf-8"), (header::VARY, "Accept-Encoding")], csv)
            .into_response(),
        Ok(Err(e)) => error_answer(e),
        Err(e) => error_answer(internal(&format!("query failed: {e}"))),
    }
}

async fn not_found() -> Response {
    error_answer((StatusCode::NOT_FOUND, json!({"code": "not found", "message": "path not found"})))
}

/// Adds the headers every InfluxDB answer carries.
async fn version_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert("x-influxdb-build", HeaderValue::from_static("OSS"));
    h.insert("x-influxdb-version", HeaderValue::from_static(VERSION));
    response
}

/// The HTTP routes: the `/api/v2` ones behind the token check, the fault middleware in front
/// of all, InfluxDB's version headers on every answer.
pub(super) fn router(db: Arc<MetricsDb>) -> Router {
    let api = Router::new()
        .route("/api/v2/buckets", get(tenant_http::get_buckets).post(tenant_http::post_bucket))
        .route("/api/v2/orgs", get(tenant_http::get_orgs))
        .route("/api/v2/authorizations", post(tenant_http::post_authorization))
        .route("/api/v2/config", get(config))
        .route("/api/v2/write", post(write))
        .route("/api/v2/query", post(query))
        .route_layer(middleware::from_fn_with_state(db.clone(), require_token));
    Router::new()
        .route("/health", get(health))
        .route("/ping", get(ping))
        .route("/ready", get(ready))
        .route("/api/v2/setup", get(onboarding::is_onboarding).post(onboarding::setup))
        .merge(api)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(db.faults.clone(), faults::apply))
        .layer(middleware::from_fn(version_headers))
        .with_state(db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_bodies_raw_and_json() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/vnd.flux"));
        assert_eq!(query_request(&h, b"from(bucket:\"b\")").unwrap().1, Dialect::default());
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = br#"{"query":"q","type":"flux","dialect":{"header":true,"annotations":["datatype","group","default"],"delimiter":","}}"#;
        let (q, d) = query_request(&h, body).unwrap();
        assert_eq!((q.as_str(), d.annotations.len()), ("q", 3));
        assert_eq!(
            query_request(&h, b"{").unwrap_err(),
            (
                StatusCode::BAD_REQUEST,
                json!({"code": "invalid", "message": "failed to decode request body: EOF while parsing an object at line 1 column 1"})
            )
        );
        assert_eq!(
            query_request(&h, br#"{"query":"q","type":"influxql"}"#).unwrap_err(),
            (
                StatusCode::BAD_REQUEST,
                json!({"code": "invalid", "message": "unsupported query type \"influxql\" (the twin speaks Flux)"})
            )
        );
    }
}
