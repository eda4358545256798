//! How the metrics-db twin answers, as InfluxDB 2 does: API answers in tab-indented JSON,
//! errors as `{"code","message"}` with the code in `X-Platform-Error-Code` (and, through
//! kithttp's `API.Err`, logged), and the query parameters routes read. Shared by the routes in
//! `http`, `tenant_http` and `onboarding`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::database::MetricsDb;
use crate::logger::Level;

/// InfluxDB 2's API answers (its `api.Respond`, InfluxDB v2.7.12 `kit/transport/http/api.go`)
/// are `json.MarshalIndent(v, "", "\t")`: indented with tabs, no final newline.
pub(super) fn json_answer(status: StatusCode, v: &Value) -> Response {
    use serde::Serialize;
    let mut body = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut body, serde_json::ser::PrettyFormatter::with_indent(b"\t"));
    let _ = v.serialize(&mut ser);
    (status, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], body).into_response()
}

/// An error as InfluxDB 2 answers it (its `kit/transport/http/error_handler.go`): exactly
/// `{"code","message"}`, marshalled compact with no final newline, and the code repeated in
/// `X-Platform-Error-Code`.
pub(super) fn error_answer((status, v): (StatusCode, Value)) -> Response {
    let code = v.get("code").and_then(Value::as_str).unwrap_or("internal error").to_string();
    let message = v.get("message").and_then(Value::as_str).unwrap_or("An internal error has occurred");
    let body = json!({"code": code, "message": message}).to_string();
    let mut response = (status, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], body).into_response();
    if let Ok(value) = HeaderValue::from_str(&code) {
        response.headers_mut().insert("x-platform-error-code", value);
    }
    response
}

/// An error answered through kithttp's `API.Err` (InfluxDB v2.7.12
/// `kit/transport/http/api.go`): `{"code","message"}` indented with tabs (no final newline),
/// the code in `X-Platform-Error-Code`, and `lvl=error msg="api error encountered"` in the
/// log (with `handler=` where the handler names itself).
pub(super) fn api_err(db: &MetricsDb, handler: Option<&str>, (status, v): (StatusCode, Value)) -> Response {
    use serde::Serialize;
    let code = v.get("code").and_then(Value::as_str).unwrap_or("internal error").to_string();
    let message = v.get("message").and_then(Value::as_str).unwrap_or("an internal error has occurred").to_string();
    let mut fields: Vec<(&str, &str)> = handler.map(|h| ("handler", h)).into_iter().collect();
    fields.push(("error", &message));
    db.log_line(Level::Error, "api error encountered", &fields);
    let mut body = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut body, serde_json::ser::PrettyFormatter::with_indent(b"\t"));
    let _ = json!({"code": code, "message": message}).serialize(&mut ser);
    let mut response = (status, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], body).into_response();
    if let Ok(value) = HeaderValue::from_str(&code) {
        response.headers_mut().insert("x-platform-error-code", value);
    }
    response
}

pub(super) type Params = Vec<(String, String)>;

pub(super) fn param<'a>(params: &'a Params, name: &str) -> Option<&'a str> {
    params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}
