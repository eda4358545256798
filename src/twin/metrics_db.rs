//! The metrics-db twin: an in-memory stand-in for InfluxDB 2 speaking its HTTP API.
//!
//! - `GET|HEAD /health`: InfluxDB's health JSON; `GET|HEAD /ping`: 204 with
//!   `X-Influxdb-Version` and `X-Influxdb-Build` (every answer carries both, as InfluxDB's do).
//! - `GET /api/v2/buckets`, `POST /api/v2/write` (line protocol, gzip too), `POST
//!   /api/v2/query` (Flux subset of `flux`, raw `application/vnd.flux` or a JSON body with a
//!   dialect; CSV from `flux_csv`), `GET /api/v2/config` (runtime config with `engine-path`).
//! - Every `/api/v2` call needs `Authorization: Token <token>`; otherwise 401
//!   `{"code":"unauthorized","message":"unauthorized access"}`. The token is never logged.
//!
//! Errors are InfluxDB's JSON `{"code": …, "message": …}`. Points live in memory and are
//! dropped when older than the retention window.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query as QueryParams, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::faults::{self, Faults};
use super::flux;
use super::flux_csv::{self, Dialect};
use super::logger::{self, Level, Sink};
use super::points::{Bucket, WriteError};
use crate::secret::Secret;

/// The InfluxDB version the twin reports.
pub const VERSION: &str = "v2.7.11";
/// The commit InfluxDB reports beside its version.
pub const COMMIT: &str = "fbf5d4ab5e";

#[derive(Debug, Clone)]
pub struct Options {
    pub org: String,
    /// Buckets that exist from the start.
    pub buckets: Vec<String>,
    /// Points older than this are dropped.
    pub retention: Duration,
    /// Most points held over all buckets.
    pub max_points: usize,
    /// `engine-path` in `/api/v2/config`.
    pub engine_path: String,
    /// Address shown in `/api/v2/config` (`http-bind-address`).
    pub listen: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            org: "opsbook".into(),
            buckets: vec!["telegraf".into()],
            retention: Duration::from_secs(3600),
            max_points: 5_000_000,
            engine_path: "/var/lib/influxdb2/engine".into(),
            listen: "127.0.0.1:8086".into(),
        }
    }
}

/// A running metrics database's state; share it with `Arc`.
pub struct MetricsDb {
    pub options: Options,
    pub faults: Arc<Faults>,
    token: Secret,
    log: Sink,
    org_id: String,
    buckets: RwLock<BTreeMap<String, Bucket>>,
    /// When retention last ran (ns), so it runs at most once a second.
    last_evict: AtomicI64,
    writes: AtomicU64,
    queries: AtomicU64,
}

fn id16(seed: u64) -> String {
    format!("{:016x}", seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 0x0100_0000_0000_0000)
}

impl MetricsDb {
    pub fn new(options: Options, token: Secret, log: Sink) -> Arc<MetricsDb> {
        let mut buckets = BTreeMap::new();
        for (i, name) in options.buckets.iter().enumerate() {
            buckets.insert(name.clone(), Bucket::new(name, id16(i as u64 + 11)));
        }
        Arc::new(MetricsDb {
            org_id: id16(7),
            options,
            faults: Faults::new(),
            token,
            log,
            buckets: RwLock::new(buckets),
            last_evict: AtomicI64::new(0),
            writes: AtomicU64::new(0),
            queries: AtomicU64::new(0),
        })
    }

    /// InfluxDB's log style: `ts=… lvl=info msg=… log_id=… k=v`.
    fn log_line(&self, level: Level, msg: &str, fields: &[(&str, &str)]) {
        let lvl = match level {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        };
        let mut line =
            format!("ts={} lvl={lvl} msg={} log_id=0twin000000", logger::now_rfc3339(6), logger::logfmt_value(msg));
        for (k, v) in fields {
            line.push_str(&format!(" {k}={}", logger::logfmt_value(v)));
        }
        (self.log)(level, &line);
    }

    /// Points held over all buckets.
    pub fn point_count(&self) -> usize {
        self.buckets.read().map(|b| b.values().map(Bucket::point_count).sum()).unwrap_or(0)
    }

    /// Creates a bucket (no-op when it exists).
    pub fn create_bucket(&self, name: &str) {
        if let Ok(mut b) = self.buckets.write() {
            let n = b.len() as u64;
            b.entry(name.to_string()).or_insert_with(|| Bucket::new(name, id16(n + 11)));
        }
    }

    fn evict_if_due(&self, buckets: &mut BTreeMap<String, Bucket>) {
        let now = flux::now_ns();
        if now - self.last_evict.load(Ordering::Relaxed) < 1_000_000_000 {
            return;
        }
        self.last_evict.store(now, Ordering::Relaxed);
        let cutoff = now - self.options.retention.as_nanos() as i64;
        for b in buckets.values_mut() {
            b.evict(cutoff);
        }
    }

    /// Writes line protocol to a bucket, as `POST /api/v2/write` does.
    pub fn write_lines(&self, bucket: &str, precision: &str, text: &str) -> Result<usize, (StatusCode, Value)> {
        let multiplier: i64 = match precision {
            "" | "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            other => {
                return Err(invalid(&format!("invalid precision \"{other}\": must be one of ns, us, ms or s")));
            }
        };
        let mut points = crate::lineproto::parse(text).map_err(|e| {
            let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or("");
            (
                StatusCode::BAD_REQUEST,
                json!({"code": "invalid", "line": e.line,
                    "message": format!("unable to parse '{}': {} (column {})", line, e.message, e.column)}),
            )
        })?;
        // Points without a time get the server's, truncated to the precision, as InfluxDB does.
        let now = flux::now_ns() / multiplier * multiplier;
        for p in &mut points {
            p.timestamp = Some(p.timestamp.map_or(now, |t| t.saturating_mul(multiplier)));
        }
        let mut buckets = self.buckets.write().map_err(|_| internal("storage lock poisoned"))?;
        self.evict_if_due(&mut buckets);
        let held: usize = buckets.values().map(Bucket::point_count).sum();
        let Some(b) = buckets.get_mut(bucket) else {
            return Err((
                StatusCode::NOT_FOUND,
                json!({"code": "not found", "message": format!("bucket \"{bucket}\" not found")}),
            ));
        };
        let room = self.options.max_points.saturating_sub(held) + b.point_count();
        match b.write(points, room) {
            Ok(n) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
                Ok(n)
            }
            Err(WriteError::TypeConflict { field, measurement, input, existing, dropped }) => Err((
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"code": "unprocessable entity", "message": format!(
                    "failure writing points to database: partial write: field type conflict: input field \"{field}\" on measurement \"{measurement}\" is type {input}, already exists as type {existing} dropped={dropped}"
                )}),
            )),
            Err(WriteError::Full { max }) => Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"code": "request too large", "message": format!(
                    "the twin holds at most {max} points; older points leave with the retention window"
                )}),
            )),
        }
    }

    /// Runs a Flux query and encodes the CSV answer.
    pub fn query(&self, src: &str, dialect: &Dialect) -> Result<String, (StatusCode, Value)> {
        self.queries.fetch_add(1, Ordering::Relaxed);
        let program = flux::compile(src, flux::now_ns()).map_err(|m| invalid(&m))?;
        let mut buckets = self.buckets.write().map_err(|_| internal("storage lock poisoned"))?;
        self.evict_if_due(&mut buckets);
        drop(buckets);
        let buckets = self.buckets.read().map_err(|_| internal("storage lock poisoned"))?;
        for name in program.buckets() {
            if !buckets.contains_key(name) {
                return Err((
                    StatusCode::NOT_FOUND,
                    json!({"code": "not found", "message": format!(
                        "failed to initialize execute state: could not find bucket \"{name}\""
                    )}),
                ));
            }
        }
        let results = flux::run(&program, &|name| buckets.get(name)).map_err(|m| invalid(&m))?;
        flux_csv::encode(&results, dialect).map_err(|m| invalid(&m))
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        if self.faults.refuses_token() {
            return false;
        }
        let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let given = value.strip_prefix("Token ").or_else(|| value.strip_prefix("Bearer ")).unwrap_or("");
        constant_time_eq(given.trim().as_bytes(), self.token.expose().as_bytes())
    }

    fn buckets_json(&self) -> Value {
        let org = &self.org_id;
        let retention = self.options.retention.as_secs();
        let created = "2026-01-01T00:00:00.000000000Z";
        let bucket = |id: &str, name: &str, kind: &str, every: u64| {
            json!({
                "id": id, "orgID": org, "type": kind, "name": name,
                "retentionRules": [{"type": "expire", "everySeconds": every, "shardGroupDurationSeconds": 3600}],
                "createdAt": created, "updatedAt": created,
                "links": {
                    "labels": format!("/api/v2/buckets/{id}/labels"),
                    "members": format!("/api/v2/buckets/{id}/members"),
                    "org": format!("/api/v2/orgs/{org}"),
                    "owners": format!("/api/v2/buckets/{id}/owners"),
                    "self": format!("/api/v2/buckets/{id}"),
                    "write": format!("/api/v2/write?org={org}&bucket={id}")
                },
                "labels": []
            })
        };
        let mut list =
            vec![bucket(&id16(1), "_monitoring", "system", 604_800), bucket(&id16(2), "_tasks", "system", 259_200)];
        if let Ok(b) = self.buckets.read() {
            list.extend(b.values().map(|b| bucket(&b.id, &b.name, "user", retention)));
        }
        json!({"links": {"self": "/api/v2/buckets?descending=false&limit=20&offset=0"}, "buckets": list})
    }

    fn config_json(&self) -> Value {
        let port = self.options.listen.rsplit_once(':').map_or("8086", |(_, p)| p);
        let pairs: Vec<(&str, Value)> = vec![
            ("assets-path", json!("")),
            ("bolt-path", json!("/var/lib/influxdb2/influxd.bolt")),
            ("e2e-testing", json!(false)),
            ("engine-path", json!(self.options.engine_path)),
            ("feature-flags", json!(null)),
            ("flux-log-enabled", json!(false)),
            ("hardening-enabled", json!(false)),
            ("http-bind-address", json!(format!(":{port}"))),
            ("http-idle-timeout", json!(180_000_000_000u64)),
            ("http-read-header-timeout", json!(10_000_000_000u64)),
            ("http-read-timeout", json!(0)),
            ("http-write-timeout", json!(0)),
            ("influxql-max-select-buckets", json!(0)),
            ("influxql-max-select-point", json!(0)),
            ("influxql-max-select-series", json!(0)),
            ("instance-id", json!("")),
            ("log-level", json!("info")),
            ("metrics-disabled", json!(false)),
            ("no-tasks", json!(false)),
            ("pprof-disabled", json!(false)),
            ("query-concurrency", json!(1024)),
            ("query-initial-memory-bytes", json!(0)),
            ("query-max-memory-bytes", json!(0)),
            ("query-memory-bytes", json!(0)),
            ("query-queue-size", json!(1024)),
            ("reporting-disabled", json!(true)),
            ("secret-store", json!("bolt")),
            ("session-length", json!(60)),
            ("session-renew-disabled", json!(false)),
            ("sqlite-path", json!("/var/lib/influxdb2/influxd.sqlite")),
            ("storage-cache-max-memory-size", json!(1_073_741_824u64)),
            ("storage-retention-check-interval", json!(1_800_000_000_000u64)),
            ("storage-wal-fsync-delay", json!(0)),
            ("store", json!("disk")),
            ("testing-always-allow-setup", json!(false)),
            ("tls-cert", json!("")),
            ("tls-key", json!("")),
            ("tls-min-version", json!("1.2")),
            ("tls-strict-ciphers", json!(false)),
            ("tracing-type", json!("")),
            ("ui-disabled", json!(false)),
            ("vault-addr", json!("")),
        ];
        let config: serde_json::Map<String, Value> = pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        json!({"config": config})
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // Length leaks, content does not: compare every byte either way.
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= (*x ^ b.get(i).copied().unwrap_or(0)) as usize;
    }
    diff == 0 && !b.is_empty()
}

fn invalid(message: &str) -> (StatusCode, Value) {
    (StatusCode::BAD_REQUEST, json!({"code": "invalid", "message": message}))
}

fn internal(message: &str) -> (StatusCode, Value) {
    (StatusCode::INTERNAL_SERVER_ERROR, json!({"code": "internal error", "message": message}))
}

fn json_answer(status: StatusCode, v: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], format!("{v:#}\n")).into_response()
}

fn error_answer((status, v): (StatusCode, Value)) -> Response {
    json_answer(status, &v)
}

fn unauthorized() -> Response {
    error_answer((StatusCode::UNAUTHORIZED, json!({"code": "unauthorized", "message": "unauthorized access"})))
}

type Params = Vec<(String, String)>;

fn param<'a>(params: &'a Params, name: &str) -> Option<&'a str> {
    params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The org must be named (by name or ID) and be this twin's.
fn check_org(db: &MetricsDb, params: &Params) -> Result<(), Box<Response>> {
    match (param(params, "org"), param(params, "orgID")) {
        (None, None) => Err(Box::new(error_answer(invalid("Please provide either orgID or org")))),
        (Some(org), _) if org == db.options.org || org == db.org_id => Ok(()),
        (None, Some(id)) if id == db.org_id => Ok(()),
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

async fn health() -> Response {
    json_answer(
        StatusCode::OK,
        &json!({"name": "influxdb", "message": "ready for queries and writes", "status": "pass", "checks": [],
            "version": VERSION, "commit": COMMIT}),
    )
}

async fn ping() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

async fn buckets(
    State(db): State<Arc<MetricsDb>>,
    headers: HeaderMap,
    QueryParams(params): QueryParams<Params>,
) -> Response {
    if !db.authorized(&headers) {
        return unauthorized();
    }
    let mut v = db.buckets_json();
    if let Some(name) = param(&params, "name")
        && let Some(list) = v.get_mut("buckets").and_then(Value::as_array_mut)
    {
        list.retain(|b| b["name"] == name);
    }
    json_answer(StatusCode::OK, &v)
}

async fn config(State(db): State<Arc<MetricsDb>>, headers: HeaderMap) -> Response {
    if !db.authorized(&headers) {
        return unauthorized();
    }
    json_answer(StatusCode::OK, &db.config_json())
}

async fn write(
    State(db): State<Arc<MetricsDb>>,
    headers: HeaderMap,
    QueryParams(params): QueryParams<Params>,
    body: Bytes,
) -> Response {
    if !db.authorized(&headers) {
        return unauthorized();
    }
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
    let plain = match super::push::decompress(encoding, &body, 64 << 20) {
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
    if !db.authorized(&headers) {
        return unauthorized();
    }
    if let Err(r) = check_org(&db, &params) {
        return *r;
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

/// The HTTP routes, with the fault middleware in front.
pub fn router(db: Arc<MetricsDb>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ping", get(ping))
        .route("/api/v2/buckets", get(buckets))
        .route("/api/v2/config", get(config))
        .route("/api/v2/write", post(write))
        .route("/api/v2/query", post(query))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(db.faults.clone(), faults::apply))
        .layer(axum::middleware::from_fn(version_headers))
        .with_state(db)
}

/// Serves the metrics database on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    db: Arc<MetricsDb>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    db.log_line(Level::Info, "Welcome to InfluxDB", &[("version", VERSION), ("commit", COMMIT)]);
    db.log_line(Level::Info, "Listening", &[("service", "tcp-listener"), ("transport", "http"), ("addr", &addr)]);
    let db2 = db.clone();
    let result = axum::serve(listener, router(db)).with_graceful_shutdown(shutdown).await;
    db2.log_line(Level::Info, "Stopping", &[("service", "tcp-listener")]);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Arc<MetricsDb> {
        MetricsDb::new(Options::default(), Secret::new("s3cret"), logger::discard())
    }

    #[test]
    fn write_then_query_with_precision_and_errors() {
        let db = db();
        let now_s = flux::now_ns() / 1_000_000_000;
        db.write_lines(
            "telegraf",
            "s",
            &format!("cpu,cpu=cpu-total usage_system=5 {now_s}\ncpu,cpu=cpu-total usage_system=7"),
        )
        .unwrap();
        let csv = db.query(r#"from(bucket:"telegraf")|>range(start:-1m)|>max()"#, &Dialect::default()).unwrap();
        assert!(csv.contains(",7,usage_system,cpu,cpu-total\r\n"), "{csv}");
        let (status, body) = db.write_lines("telegraf", "ns", "cpu usage=").unwrap_err();
        assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid")));
        assert_eq!(db.write_lines("nope", "ns", "m f=1").unwrap_err().0, StatusCode::NOT_FOUND);
        assert_eq!(
            db.write_lines("telegraf", "ns", "cpu,cpu=cpu-total usage_system=5i").unwrap_err().0,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            db.query("from(bucket:\"x\")|>range(start:-1m)", &Dialect::default()).unwrap_err().0,
            StatusCode::NOT_FOUND
        );
        let (status, body) =
            db.query("from(bucket:\"telegraf\")|>range(start:-1m)|>sort()", &Dialect::default()).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["message"].as_str().unwrap().contains("sort()"));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"abd", b"abc"));
        assert!(!constant_time_eq(b"", b""));
    }

    #[test]
    fn query_bodies_raw_and_json() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/vnd.flux"));
        assert_eq!(query_request(&h, b"from(bucket:\"b\")").unwrap().1, Dialect::default());
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = br#"{"query":"q","type":"flux","dialect":{"header":true,"annotations":["datatype","group","default"],"delimiter":","}}"#;
        let (q, d) = query_request(&h, body).unwrap();
        assert_eq!((q.as_str(), d.annotations.len()), ("q", 3));
        assert!(query_request(&h, b"{").is_err());
        assert!(query_request(&h, br#"{"query":"q","type":"influxql"}"#).is_err());
    }
}
