//! `influx::` — the metrics database through its InfluxDB 2 API: health and ping probes,
//! bucket listing (every page) and one bucket by name, Flux queries with typed rows, and the
//! storage backend. The base address, org and token come from the configuration; the token is
//! added to requests here and never reaches the script. How InfluxDB OSS v2.7.12 answers a
//! fresh server, an all-access token and a long bucket list: influx/api.rs; the token and the
//! requests carrying it: influx/authed.rs; buckets: influx/bucket.rs.

pub(crate) mod api;
mod authed;
mod bucket;
mod setup;
mod write;

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};
use serde::Serialize;
use serde_json::Value as Json;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::values::{Probe, text};
use crate::register;
use authed::{authed, token};
use bucket::{bucket, buckets};
use opsbook_base::config::keys;
use opsbook_wire::flux_csv::{self, Value};
use opsbook_world::{Request, Response};

/// The `influx::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "health",
        Reads,
        ["Map"],
        "/// GET /health, never throws: `#{ok, status, detail, elapsed_ms, state, version, message}`.\n\
         /// `ok` when the answer is 200 and the server reports `pass`.",
        "influx::health().ok",
        |call: NativeCallContext| health(&context(&call))
    );
    register!(
        &mut m,
        "ping",
        Reads,
        ["Map"],
        "/// HEAD /ping, never throws: `#{ok, status, detail, elapsed_ms, version, build}`; `ok` on 204.",
        "influx::ping()",
        |call: NativeCallContext| ping(&context(&call))
    );
    register!(
        &mut m,
        "buckets",
        Reads,
        ["Array"],
        "/// The buckets the token can see, every page of them (100 a page, following `links.next`):\n\
         /// `[#{name, id, retention, type}]`, retention in seconds (0: forever). Throws quoting the\n\
         /// server when the listing is refused, or saying it is not set up yet.",
        "influx::buckets()",
        |call: NativeCallContext| buckets(&context(&call))
    );
    register!(
        &mut m,
        "bucket",
        Reads,
        ["name: &str", "?"],
        "/// One bucket by name in the configured org (`GET /api/v2/buckets?org=…&name=…`): `#{name,\n\
         /// id, retention, type}`, or `()` when there is none. Throws when the server refuses (a bad\n\
         /// token, an unknown org, not set up yet).",
        "influx::bucket(config.metrics_db.bucket)",
        |call: NativeCallContext, name: &str| bucket(&context(&call), name)
    );
    register!(
        &mut m,
        "query",
        Reads,
        ["flux: &str", "Array"],
        "/// Runs a Flux query and returns every row of every table as a map of typed values\n\
         /// (`_value`, `_time`, `_field`, tags…). Throws quoting InfluxDB's error; a refused token\n\
         /// says so without showing it.",
        "influx::query(`from(bucket: \"${config.metrics_db.bucket}\") |> range(start: -5m) |> limit(n: 1)`)",
        |call: NativeCallContext, flux: &str| query(&context(&call), flux)
    );
    register!(
        &mut m,
        "storage",
        Reads,
        ["Map"],
        "/// The storage facts from the server's runtime configuration (GET /api/v2/config), never\n\
         /// throws: the probe record plus `backend` (\"local\", or `()`), `path` (`engine-path`) and\n\
         /// `skipped`. That endpoint needs an operator token: refused to an all-access one, the\n\
         /// facts come from the server's config file (`metrics_db.config`) on the host, or\n\
         /// `skipped` says why they cannot be told. stdlib/verify.rhai decides the verdict.",
        "influx::storage()",
        |call: NativeCallContext| storage(&context(&call))
    );
    setup::add(&mut m);
    write::add(&mut m);
    m
}

/// What /health says besides the verdict.
#[derive(Serialize)]
struct Health {
    /// `pass`, `fail`…; empty when the answer did not say.
    state: String,
    version: String,
    message: String,
}

/// The record of a /health answer: absent fields read as empty text, a body that is not JSON
/// (or not an object) fails the probe quoting it.
fn health_answer(r: &Response) -> Probe<Health> {
    let json: Option<Json> = serde_json::from_str(&r.body).ok().filter(Json::is_object);
    let field = |k: &str| json.as_ref().and_then(|j| j.get(k)).and_then(Json::as_str).unwrap_or("").to_string();
    let facts = Health { state: field("status"), version: field("version"), message: field("message") };
    let ok = r.status == 200 && facts.state == "pass";
    let detail = if json.is_none() {
        format!("not InfluxDB's health JSON: {}", r.summary())
    } else if ok {
        let version = if facts.version.is_empty() { String::new() } else { format!(" ({})", facts.version) };
        format!("HTTP 200, {}{version}", facts.message)
    } else if facts.state.is_empty() {
        format!("HTTP {}, no `status` in the answer: {}", r.status, r.summary())
    } else {
        format!("HTTP {}, status `{}`: {}", r.status, facts.state, facts.message)
    };
    Probe::new(ok, Some(r.status), detail, Some(r.elapsed)).with(facts)
}

fn health(cx: &Context) -> VerbResult<Map> {
    match cx.send(Request::new(reqwest::Method::GET, api::url(cx, "/health")))? {
        Ok(r) => health_answer(&r).into_map(),
        Err(reason) => Probe::unanswered(reason)
            .with(Health { state: String::new(), version: String::new(), message: String::new() })
            .into_map(),
    }
}

/// What HEAD /ping says: the server's version and build, empty when the headers are absent.
#[derive(Serialize)]
struct Ping {
    version: String,
    build: String,
}

fn ping(cx: &Context) -> VerbResult<Map> {
    let r = match cx.send(Request::new(reqwest::Method::HEAD, api::url(cx, "/ping")))? {
        Ok(r) => r,
        Err(reason) => {
            return Probe::unanswered(reason).with(Ping { version: String::new(), build: String::new() }).into_map();
        }
    };
    let facts = Ping {
        version: r.header("x-influxdb-version").unwrap_or("").to_string(),
        build: r.header("x-influxdb-build").unwrap_or("").to_string(),
    };
    let ok = r.status == 204;
    let detail = if ok { format!("HTTP 204, version {}", facts.version) } else { r.summary() };
    Probe::new(ok, Some(r.status), detail, Some(r.elapsed)).with(facts).into_map()
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

fn query(cx: &Context, flux: &str) -> VerbResult<Array> {
    let org = cx.config().text(keys::METRICS_DB_ORG);
    if org.is_empty() {
        return Err(fail("no organisation configured for the metrics database: set metrics_db.org or INFLUX_ORG"));
    }
    let body = serde_json::json!({
        "query": flux,
        "type": "flux",
        "dialect": {"header": true, "annotations": ["datatype", "group", "default"], "delimiter": ","},
    });
    let path = format!("/api/v2/query?org={}", api::form_encode(&org));
    let request = Request::new(reqwest::Method::POST, api::url(cx, &path))
        .header("content-type", "application/json")
        .header("accept", "application/csv")
        .body(body.to_string());
    let r = authed(cx, request)?;
    if r.content_type().contains("html") {
        return Err(fail(format!("the metrics database answered with a web page, not CSV: {}", r.summary())));
    }
    // Asked with annotations, an answer with rows starts with `#datatype`: anything else is
    // not the database's CSV, and is quoted.
    let body = r.body.trim_start();
    if !body.is_empty() && !body.starts_with('#') {
        return Err(fail(format!("the metrics database's answer is not annotated CSV: {}", r.summary())));
    }
    let rows = flux_csv::parse(&r.body)
        .map_err(|e| fail(format!("metrics database: {e}; it answered {}", opsbook_wire::excerpt(&r.body, 160))))?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let m: Map = row.into_iter().map(|(k, v)| (k.into(), dynamic(v))).collect();
            Dynamic::from_map(m)
        })
        .collect())
}

/// What the metrics database says about its storage: the facts, not a verdict.
#[derive(Serialize)]
struct Storage {
    /// `local` when the runtime configuration names an engine path, else `()`.
    backend: Option<String>,
    /// Where the engine keeps its data (`engine-path`), `()` when absent, null or empty.
    path: Option<String>,
    /// Why the storage cannot be told with this token (`()` when it can): the verdict is a
    /// skip, never a failure of a healthy server.
    skipped: Option<String>,
}

/// The engine path of a `GET /api/v2/config` answer.
fn engine_path(body: &str) -> Option<String> {
    let json: Json = serde_json::from_str(body).ok()?;
    json.get("config")?.get("engine-path")?.as_str().filter(|p| !p.is_empty()).map(str::to_string)
}

fn storage(cx: &Context) -> VerbResult<Map> {
    let none = || Storage { backend: None, path: None, skipped: None };
    let token = match token(cx) {
        Ok(t) => t,
        Err(e) => return Probe::unanswered(text(&Dynamic::from(e.to_string()))).with(none()).into_map(),
    };
    let r = match cx.send(Request::new(reqwest::Method::GET, api::url(cx, "/api/v2/config")).token(Some(&token)))? {
        Ok(r) => r,
        Err(reason) => return Probe::unanswered(reason).with(none()).into_map(),
    };
    if api::needs_operator(&r) {
        return storage_without_operator(cx, &r);
    }
    if r.status != 200 {
        let refused = api::refusal_of(cx, &r)?;
        return Probe::new(false, Some(r.status), refused, Some(r.elapsed)).with(none()).into_map();
    }
    let path = engine_path(&r.body);
    let detail = match &path {
        Some(p) => format!("local disk: engine at {p}"),
        None => format!("no `engine-path` in the runtime config: {}", r.summary()),
    };
    let facts = Storage { backend: path.is_some().then(|| "local".to_string()), path, skipped: None };
    Probe::new(true, Some(200), detail, Some(r.elapsed)).with(facts).into_map()
}

/// `/api/v2/config` refused a token that is not an operator's (an all-access token, InfluxDB
/// v2.7.12 `http/config.go`): the engine path from the server's config file, or a skip.
fn storage_without_operator(cx: &Context, r: &Response) -> VerbResult<Map> {
    let message = serde_json::from_str::<Json>(&r.body)
        .ok()
        .and_then(|j| j.get("message").and_then(Json::as_str).map(str::to_string))
        .unwrap_or_default();
    let why = format!("/api/v2/config needs an operator token (the configured one is not: {message})");
    let elapsed = Some(r.elapsed);
    match api::engine_path_from_file(cx, &why)? {
        Ok((path, file)) => {
            let detail = format!("local disk: engine at {path} (from {file}; {why})");
            let facts = Storage { backend: Some("local".into()), path: Some(path), skipped: None };
            Probe::new(true, Some(r.status), detail, elapsed).with(facts).into_map()
        }
        Err(reason) => {
            let facts = Storage { backend: None, path: None, skipped: Some(reason.clone()) };
            Probe::new(true, Some(r.status), reason, elapsed).with(facts).into_map()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Response {
        Response {
            status,
            headers: vec![],
            body: body.to_string(),
            elapsed: std::time::Duration::from_millis(3),
            too_large: None,
        }
    }

    #[test]
    fn health_answers_absent_null_empty_and_present() {
        let real = r#"{"name":"influxdb","message":"ready for queries and writes","status":"pass","checks":[],"version":"v2.7.11","commit":"fbf5d4ab5e"}"#;
        let p = health_answer(&answer(200, real));
        assert_eq!((p.ok, p.detail.as_str()), (true, "HTTP 200, ready for queries and writes (v2.7.11)"));
        // No version field: the detail does not show an empty pair of brackets.
        let p = health_answer(&answer(200, r#"{"status":"pass","message":"ready"}"#));
        assert_eq!((p.ok, p.detail.as_str(), p.facts.version.as_str()), (true, "HTTP 200, ready", ""));
        let p = health_answer(&answer(200, r#"{"status":null}"#));
        assert_eq!(
            (p.ok, p.detail.as_str()),
            (false, "HTTP 200, no `status` in the answer: HTTP 200: {\"status\":null}")
        );
        let p = health_answer(&answer(503, r#"{"status":"fail","message":"not ready"}"#));
        assert_eq!((p.ok, p.detail.as_str()), (false, "HTTP 503, status `fail`: not ready"));
        for body in ["", "null", "[]", "<html>"] {
            let p = health_answer(&answer(200, body));
            assert!(!p.ok && p.detail.starts_with("not InfluxDB's health JSON"), "{body}: {}", p.detail);
        }
    }

    #[test]
    fn engine_path_absent_null_empty_and_present() {
        assert_eq!(
            engine_path(r#"{"config":{"engine-path":"/var/lib/influxdb2/engine"}}"#).as_deref(),
            Some("/var/lib/influxdb2/engine")
        );
        for body in [
            r#"{"config":{}}"#,
            r#"{"config":null}"#,
            r#"{"config":{"engine-path":null}}"#,
            r#"{"config":{"engine-path":""}}"#,
            "{}",
            "",
        ] {
            assert_eq!(engine_path(body), None, "{body}");
        }
    }

    #[test]
    fn query_csv_with_no_table_is_no_rows() {
        // InfluxDB answers a query that matches nothing with an empty body (or blank lines).
        for body in ["", "\r\n", "\r\n\r\n"] {
            assert_eq!(flux_csv::parse(body), Ok(vec![]), "{body:?}");
        }
    }
}
