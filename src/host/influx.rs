//! `influx::` — the metrics database through its InfluxDB 2 API: health and ping probes,
//! bucket listing, Flux queries with typed rows, and the storage backend. The base address,
//! org and token come from the configuration; the token is added to requests here and never
//! reaches the script.

use std::sync::Arc;

use rhai::{Array, Dynamic, Map, Module};
use serde_json::Value as Json;

use super::http::probe_result;
use super::{Host, HostResult, fail};
use crate::config::keys;
use crate::http_client::{Request, Response};
use crate::register;
use crate::secret::Secret;
use crate::wire::flux_csv::{self, Value};

pub fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "health",
        ["Map"],
        "/// GET /health, never throws: `#{ok, status, state, version, message, detail}`. `ok` when\n\
         /// the answer is 200 and the server reports `pass`.",
        move || health(&h)
    );
    let h = host.clone();
    register!(
        &mut m,
        "ping",
        ["Map"],
        "/// HEAD /ping, never throws: `#{ok, status, version, build, detail}`; `ok` on 204.",
        move || ping(&h)
    );
    let h = host.clone();
    register!(
        &mut m,
        "buckets",
        ["Array"],
        "/// The buckets the token can see: `[#{name, id, retention, type}]`, retention in seconds\n\
         /// (0: forever). Throws quoting the server when the listing is refused.",
        move || buckets(&h)
    );
    let h = host.clone();
    register!(
        &mut m,
        "query",
        ["flux: &str", "Array"],
        "/// Runs a Flux query and returns every row of every table as a map of typed values\n\
         /// (`_value`, `_time`, `_field`, tags…). Throws quoting InfluxDB's error; a refused token\n\
         /// says so without showing it.",
        move |flux: &str| query(&h, flux)
    );
    let h = host.clone();
    register!(
        &mut m,
        "storage",
        ["Map"],
        "/// The storage backend from the server's runtime configuration (GET /api/v2/config), never\n\
         /// throws: `#{ok, backend, path, detail}`.",
        move || storage(&h)
    );
    m
}

fn url(host: &Host, path: &str) -> String {
    format!("{}{path}", host.config.text(keys::METRICS_DB_URL).trim_end_matches('/'))
}

fn token(host: &Host) -> HostResult<Secret> {
    match host.config.token().map_err(|e| fail(e.to_string()))? {
        Some(t) => Ok(t),
        None => Err(fail(
            "no API token configured for the metrics database: set metrics_db.token_file, metrics_db.token_command or INFLUX_TOKEN",
        )),
    }
}

/// An error answer as an operator should read it.
fn refusal(r: &Response) -> String {
    let json: Option<Json> = serde_json::from_str(&r.body).ok();
    let code = json.as_ref().and_then(|j| j.get("code")).and_then(Json::as_str).unwrap_or("");
    let message = json.as_ref().and_then(|j| j.get("message")).and_then(Json::as_str);
    match (r.status, message) {
        (401, m) => format!(
            "the metrics database refused the API token (HTTP 401{}{})",
            if code.is_empty() { String::new() } else { format!(" {code}") },
            m.map(|m| format!(": {m}")).unwrap_or_default()
        ),
        (status, Some(m)) => format!("the metrics database answered HTTP {status} {code}: {m}"),
        _ => format!("the metrics database answered {}", r.summary()),
    }
}

fn health(host: &Host) -> HostResult<Map> {
    let r = match host.send(Request::new(reqwest::Method::GET, url(host, "/health")))? {
        Ok(r) => r,
        Err(reason) => return Ok(probe_result(false, None, reason, None)),
    };
    let json: Option<Json> = serde_json::from_str(&r.body).ok();
    let field = |k: &str| json.as_ref().and_then(|j| j.get(k)).and_then(Json::as_str).unwrap_or("").to_string();
    let state = field("status");
    let ok = r.status == 200 && state == "pass";
    let detail = if ok {
        format!("HTTP 200, {} ({})", field("message"), field("version"))
    } else if json.is_none() {
        format!("not InfluxDB's health JSON: {}", r.summary())
    } else {
        format!("HTTP {}, status `{state}`: {}", r.status, field("message"))
    };
    let mut m = probe_result(ok, Some(r.status), detail, Some(r.elapsed));
    m.insert("state".into(), state.into());
    m.insert("version".into(), field("version").into());
    m.insert("message".into(), field("message").into());
    Ok(m)
}

fn ping(host: &Host) -> HostResult<Map> {
    let r = match host.send(Request::new(reqwest::Method::HEAD, url(host, "/ping")))? {
        Ok(r) => r,
        Err(reason) => return Ok(probe_result(false, None, reason, None)),
    };
    let version = r.header("x-influxdb-version").unwrap_or("").to_string();
    let ok = r.status == 204;
    let detail = if ok { format!("HTTP 204, version {version}") } else { r.summary() };
    let mut m = probe_result(ok, Some(r.status), detail, Some(r.elapsed));
    m.insert("version".into(), version.into());
    m.insert("build".into(), r.header("x-influxdb-build").unwrap_or("").to_string().into());
    Ok(m)
}

fn authed(host: &Host, request: Request<'_>) -> HostResult<Response> {
    let token = token(host)?;
    let what = format!("{} {}", request.method, request.url);
    match host.send(request.token(Some(&token)))? {
        Ok(r) if (200..300).contains(&r.status) => Ok(r),
        Ok(r) => Err(fail(refusal(&r))),
        Err(reason) => Err(fail(format!("{what}: {reason}"))),
    }
}

fn buckets(host: &Host) -> HostResult<Array> {
    let r = authed(host, Request::new(reqwest::Method::GET, url(host, "/api/v2/buckets?limit=100")))?;
    let json: Json =
        serde_json::from_str(&r.body).map_err(|_| fail(format!("bucket listing is not JSON: {}", r.summary())))?;
    let list =
        json.get("buckets").and_then(Json::as_array).ok_or_else(|| fail("bucket listing has no `buckets` array"))?;
    Ok(list
        .iter()
        .map(|b| {
            let mut m = Map::new();
            let s = |k: &str| b.get(k).and_then(Json::as_str).unwrap_or("").to_string();
            m.insert("name".into(), s("name").into());
            m.insert("id".into(), s("id").into());
            m.insert("type".into(), s("type").into());
            let retention = b
                .get("retentionRules")
                .and_then(Json::as_array)
                .and_then(|r| r.first())
                .and_then(|r| r.get("everySeconds"))
                .and_then(Json::as_i64)
                .unwrap_or(0);
            m.insert("retention".into(), retention.into());
            Dynamic::from_map(m)
        })
        .collect())
}

fn dynamic(v: Value) -> Dynamic {
    match v {
        Value::Null => Dynamic::UNIT,
        Value::Str(s) | Value::Time(s) => s.into(),
        Value::Long(i) => i.into(),
        Value::ULong(u) => i64::try_from(u).map(Dynamic::from).unwrap_or_else(|_| Dynamic::from(u as f64)),
        Value::Double(f) => f.into(),
        Value::Bool(b) => b.into(),
    }
}

fn query(host: &Host, flux: &str) -> HostResult<Array> {
    let org = host.config.text(keys::METRICS_DB_ORG);
    if org.is_empty() {
        return Err(fail("no organisation configured for the metrics database: set metrics_db.org or INFLUX_ORG"));
    }
    let body = serde_json::json!({
        "query": flux,
        "type": "flux",
        "dialect": {"header": true, "annotations": ["datatype", "group", "default"], "delimiter": ","},
    });
    let path = format!("/api/v2/query?org={}", form_encode(&org));
    let request = Request::new(reqwest::Method::POST, url(host, &path))
        .header("content-type", "application/json")
        .header("accept", "application/csv")
        .body(body.to_string());
    let r = authed(host, request)?;
    if r.content_type().contains("html") {
        return Err(fail(format!("the metrics database answered with a web page, not CSV: {}", r.summary())));
    }
    let rows = flux_csv::parse(&r.body).map_err(|e| fail(format!("metrics database: {e}")))?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let m: Map = row.into_iter().map(|(k, v)| (k.into(), dynamic(v))).collect();
            Dynamic::from_map(m)
        })
        .collect())
}

fn storage(host: &Host) -> HostResult<Map> {
    let token = match token(host) {
        Ok(t) => t,
        Err(e) => return Ok(probe_result(false, None, super::core::text(&Dynamic::from(e.to_string())), None)),
    };
    let r = match host.send(Request::new(reqwest::Method::GET, url(host, "/api/v2/config")).token(Some(&token)))? {
        Ok(r) => r,
        Err(reason) => return Ok(probe_result(false, None, reason, None)),
    };
    if r.status != 200 {
        return Ok(probe_result(false, Some(r.status), refusal(&r), Some(r.elapsed)));
    }
    let json: Option<Json> = serde_json::from_str(&r.body).ok();
    let path = json
        .as_ref()
        .and_then(|j| j.get("config"))
        .and_then(|c| c.get("engine-path"))
        .and_then(Json::as_str)
        .map(str::to_string);
    let mut m = match &path {
        Some(p) => probe_result(true, Some(200), format!("local disk: engine at {p}"), Some(r.elapsed)),
        None => probe_result(
            false,
            Some(200),
            format!("no `engine-path` in the runtime config: {}", r.summary()),
            Some(r.elapsed),
        ),
    };
    m.insert("backend".into(), if path.is_some() { "local" } else { "" }.into());
    m.insert("path".into(), path.unwrap_or_default().into());
    Ok(m)
}

/// Percent-encoding for a query-string value.
pub fn form_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
