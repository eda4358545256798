//! `loki::` — the log store through its Loki API: readiness, labels, log and metric queries,
//! a diagnostic push, and the storage backend. Log selectors go to `query_range`: since
//! Loki 3.2 the instant endpoint answers 400 to them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::influx::api::form_encode;
use super::result::{VerbResult, fail};
use super::time::positive_duration_arg;
use super::values::{Probe, record};
use crate::register;
use opsbook_base::config::keys;
use opsbook_wire::loki::{self, QueryResult};
use opsbook_world::{Request, Response};

/// The `loki::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    server_verbs(&mut m);
    query_verbs(&mut m);
    m
}

fn server_verbs(m: &mut Module) {
    register!(
        m,
        "ready",
        Reads,
        ["Map"],
        "/// GET /ready, never throws: `#{ok, status, detail, elapsed_ms}`. `ok` when the body says `ready`; while\n\
         /// Loki starts (503) `detail` quotes its reason, e.g. \"waiting for 15s after being ready\".",
        "loki::ready().ok",
        |call: NativeCallContext| ready(&context(&call))
    );
    register!(
        m,
        "labels",
        Reads,
        ["Array"],
        "/// The label names the log store knows; empty when it has received nothing yet (Loki then\n\
         /// answers without `data`). Throws quoting the server on failure.",
        "loki::labels()",
        |call: NativeCallContext| strings(&context(&call), "/loki/api/v1/labels".to_string())
    );
    register!(
        m,
        "label_values",
        Reads,
        ["name: &str", "Array"],
        "/// The values of one label.",
        "loki::label_values(\"hostname\")",
        |call: NativeCallContext, name: &str| {
            strings(&context(&call), format!("/loki/api/v1/label/{}/values", form_encode(name)))
        }
    );
    register!(
        m,
        "query",
        Reads,
        ["query: &str", "Array"],
        "/// `query(selector, #{})` with the defaults: the last hour, at most 100 lines.",
        "loki::query(`{unit=\"loki.service\"}`)",
        |call: NativeCallContext, q: &str| query(&context(&call), q, &Map::new())
    );
}

fn query_verbs(m: &mut Module) {
    register!(
        m,
        "query",
        Reads,
        ["query: &str", "options: Map", "Array"],
        "/// Log lines for a selector (`{hostname=\"h1\"} |= \"x\"`), newest first:\n\
         /// `[#{time, time_ns, line, labels}]`. Options: `limit` (100), `since` (\"1h\"), `start_us`\n\
         /// (a moment's `us`: from then on, instead of `since`), `direction` (\"backward\"). A metric query (`count_over_time(…)`) returns `[#{time, value, labels}]`.",
        "loki::query(`{unit=\"loki.service\"}`, #{ since: \"10m\", limit: 5 })",
        |call: NativeCallContext, q: &str, options: Map| query(&context(&call), q, &options)
    );
    register!(
        m,
        "push",
        Changes,
        ["labels: Map", "line: &str", "Map"],
        "/// Pushes one line with these labels (diagnostics), never throws: `#{ok, status, detail,\n\
         /// elapsed_ms}`.",
        "loki::push(#{ job: \"opsbook-demo\" }, \"hello from a runbook\")",
        |call: NativeCallContext, labels: Map, line: &str| push(&context(&call), &labels, line)
    );
    register!(
        m,
        "storage",
        Reads,
        ["Map"],
        "/// The storage backend from GET /config, never throws: the probe record plus the facts\n\
         /// `backend` (the last `schema_config` period's `object_store`, the one in force; `()` when\n\
         /// none is named), `object_storage` and `periods`. stdlib/verify.rhai decides the verdict.",
        "loki::storage()",
        |call: NativeCallContext| storage(&context(&call))
    );
}

fn url(cx: &Context, path: &str) -> String {
    format!("{}{path}", cx.config().text(keys::LOG_STORE_URL).trim_end_matches('/'))
}

fn get(cx: &Context, path: &str) -> VerbResult<Response> {
    let u = url(cx, path);
    match cx.send(Request::new(reqwest::Method::GET, &u))? {
        Ok(r) if r.status == 200 => Ok(r),
        Ok(r) => Err(fail(format!("the log store answered {}", r.summary()))),
        // A reason that names the address already (an answer too large) is not prefixed again.
        Err(reason) if reason.contains(&u) => Err(fail(reason)),
        Err(reason) => Err(fail(format!("GET {u}: {reason}"))),
    }
}

fn ready(cx: &Context) -> VerbResult<Map> {
    match cx.send(Request::new(reqwest::Method::GET, url(cx, "/ready")))? {
        Err(reason) => Probe::unanswered(reason),
        Ok(r) if r.status == 200 && r.body.trim() == "ready" => Probe::new(true, Some(200), "ready", Some(r.elapsed)),
        Ok(r) if r.status == 503 => Probe::new(
            false,
            Some(503),
            format!("not ready yet: {}", opsbook_wire::excerpt(&r.body, 160)),
            Some(r.elapsed),
        ),
        Ok(r) => Probe::new(false, Some(r.status), format!("expected `ready`, got {}", r.summary()), Some(r.elapsed)),
    }
    .into_map()
}

/// Whether a successful answer carries nothing: `data` absent or null. A Loki that has
/// received no line yet answers the label endpoints with `{"status":"success"}` alone.
fn empty_success(body: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else { return false };
    let data = v.get("data").filter(|d| !d.is_null());
    v.get("status").and_then(|s| s.as_str()) == Some("success")
        && data.is_none_or(|d| d.get("result").is_some_and(|r| r.is_null()))
}

/// A label or label-value list: absent or null `data` is an empty list; `data` that is
/// not a list of strings is an error quoting it.
fn strings_answer(body: &str) -> Result<Vec<String>, String> {
    if empty_success(body) {
        return Ok(Vec::new());
    }
    loki::parse_strings(body)
}

/// A query answer: absent or null `data` or `data.result` is no lines; a series whose
/// labels, values or value are null has no label, or no point, rather than a made-up one.
fn query_answer(body: &str) -> Result<QueryResult, String> {
    if empty_success(body) {
        return Ok(QueryResult::Streams(Vec::new()));
    }
    loki::parse_query(&without_null_series_fields(body))
}

/// The answer with null `stream`, `metric`, `values` and `value` fields of its series dropped
/// (absent and null mean the same here); any other answer unchanged.
fn without_null_series_fields(body: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(body) else { return body.to_string() };
    let Some(series) = v.pointer_mut("/data/result").and_then(|r| r.as_array_mut()) else { return body.to_string() };
    for s in series.iter_mut().filter_map(|s| s.as_object_mut()) {
        s.retain(|k, v| !(v.is_null() && matches!(k.as_str(), "stream" | "metric" | "values" | "value")));
    }
    v.to_string()
}

fn strings(cx: &Context, path: String) -> VerbResult<Array> {
    let r = get(cx, &path)?;
    let list = strings_answer(&r.body).map_err(|e| fail(format!("log store: {e}")))?;
    Ok(list.into_iter().map(Dynamic::from).collect())
}

fn rfc3339_ns(ns: i128) -> String {
    let d = Duration::from_nanos(ns.max(0) as u64);
    humantime::format_rfc3339_nanos(UNIX_EPOCH + d).to_string()
}

fn query(cx: &Context, q: &str, options: &Map) -> VerbResult<Array> {
    let mut limit: i64 = 100;
    let mut since = Duration::from_secs(3600);
    let mut direction = "backward".to_string();
    let mut start_us = None;
    for (k, v) in options {
        match k.as_str() {
            "limit" => {
                limit = v.as_int().map_err(|_| fail("loki::query: `limit` must be an integer"))?;
                if limit < 1 {
                    return Err(fail(format!("loki::query: `limit` is {limit}: it must be more than zero")));
                }
            }
            "since" => since = positive_duration_arg(v, "since")?,
            "start_us" => {
                let us = v.as_int().map_err(|_| fail("loki::query: `start_us` must be an integer (moment().us)"))?;
                start_us = Some(us.max(0) as u128);
            }
            "direction" => direction = super::values::text(v),
            other => {
                return Err(fail(format!("loki::query: unknown option `{other}` (limit, since, start_us, direction)")));
            }
        }
    }
    let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let start_ns = start_us.map_or_else(|| now_ns.saturating_sub(since.as_nanos()), |us| us * 1000);
    let log_query = q.trim_start().starts_with('{');
    let path = if log_query {
        format!(
            "/loki/api/v1/query_range?query={}&limit={limit}&start={start_ns}&end={now_ns}&direction={}",
            form_encode(q),
            form_encode(&direction)
        )
    } else {
        format!("/loki/api/v1/query?query={}&limit={limit}&time={now_ns}", form_encode(q))
    };
    let r = get(cx, &path)?;
    let parsed = query_answer(&r.body).map_err(|e| fail(format!("log store: {e}")))?;
    match parsed {
        QueryResult::Streams(entries) => entries
            .into_iter()
            .map(|e| {
                let labels = e.labels.into_iter().collect();
                record(&Line { time: rfc3339_ns(e.time_ns), time_ns: e.time_ns as i64, line: e.line, labels })
            })
            .map(|r| r.map(Dynamic::from_map))
            .collect(),
        QueryResult::Metric(samples) => samples
            .into_iter()
            .map(|s| record(&Sample { time: s.time_s, value: s.value, labels: s.labels.into_iter().collect() }))
            .map(|r| r.map(Dynamic::from_map))
            .collect(),
    }
}

/// One log line of a query's answer.
#[derive(Serialize)]
struct Line {
    /// RFC 3339 with nanoseconds.
    time: String,
    time_ns: i64,
    line: String,
    labels: BTreeMap<String, String>,
}

/// One sample of a metric query's answer.
#[derive(Serialize)]
struct Sample {
    /// Seconds since the epoch.
    time: f64,
    value: f64,
    labels: BTreeMap<String, String>,
}

fn push(cx: &Context, labels: &Map, line: &str) -> VerbResult<Map> {
    let stream: serde_json::Map<String, serde_json::Value> =
        labels.iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(super::values::text(v)))).collect();
    let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let body = serde_json::json!({"streams": [{"stream": stream, "values": [[now_ns.to_string(), line]]}]});
    let request = Request::new(reqwest::Method::POST, url(cx, "/loki/api/v1/push"))
        .header("content-type", "application/json")
        .body(body.to_string());
    match cx.send(request)? {
        Err(reason) => Probe::unanswered(reason),
        Ok(r) if r.status == 204 || r.status == 200 => Probe::new(true, Some(r.status), "accepted", Some(r.elapsed)),
        Ok(r) => Probe::new(false, Some(r.status), r.summary(), Some(r.elapsed)),
    }
    .into_map()
}

/// What the log store says about its storage: the facts, not a verdict (stdlib decides).
#[derive(Serialize)]
struct Storage {
    /// The `object_store` of the schema period in force (the last), `()` when none is named.
    backend: Option<String>,
    /// Whether that backend is object storage (s3, gcs, azure…) rather than local disk.
    object_storage: bool,
    /// Every schema period's `object_store`, oldest first.
    periods: Vec<String>,
}

fn storage(cx: &Context) -> VerbResult<Map> {
    let r = match cx.send(Request::new(reqwest::Method::GET, url(cx, "/config")))? {
        Ok(r) => r,
        Err(reason) => return Probe::unanswered(reason).with(storage_facts(&[])).into_map(),
    };
    if r.status != 200 {
        return Probe::new(false, Some(r.status), r.summary(), Some(r.elapsed)).with(storage_facts(&[])).into_map();
    }
    let periods = periods_of(&r.body);
    let detail = match periods.last() {
        Some(store) => {
            let kind = if loki::is_object_storage(store) { "object storage" } else { "local disk" };
            format!("{kind}: {store} (schema periods: {})", periods.join(", "))
        }
        None => format!("no schema_config object_store in /config: {}", r.summary()),
    };
    Probe::new(true, Some(200), detail, Some(r.elapsed)).with(storage_facts(&periods)).into_map()
}

/// The `object_store` of each schema period; YAML's null (`null`, `~`) names no store.
fn periods_of(config: &str) -> Vec<String> {
    let mut periods = loki::object_stores(config);
    periods.retain(|p| !matches!(p.as_str(), "null" | "Null" | "NULL" | "~"));
    periods
}

fn storage_facts(periods: &[String]) -> Storage {
    let backend = periods.last().cloned();
    Storage {
        object_storage: backend.as_deref().is_some_and(loki::is_object_storage),
        backend,
        periods: periods.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/wire/loki-3.4.6/{name}", concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn label_lists_absent_null_empty_and_present() {
        // The capture of a Loki that has received nothing: `{"status":"success"}`, no data.
        let capture = fixture("labels-empty.txt");
        let body = capture.lines().last().unwrap();
        assert_eq!(strings_answer(body), Ok(vec![]));
        assert_eq!(strings_answer(r#"{"status":"success","data":null}"#), Ok(vec![]));
        assert_eq!(strings_answer(r#"{"status":"success","data":[]}"#), Ok(vec![]));
        assert_eq!(strings_answer(&fixture("label-hostname-values.json")), Ok(vec!["h1".to_string()]));
        assert_eq!(strings_answer(r#"{"status":"success","data":{}}"#), Err("`data` is not a list".to_string()));
        assert_eq!(strings_answer(r#"{"data":[]}"#), Err(r#"answer has no `status`: {"data":[]}"#.to_string()));
        assert_eq!(strings_answer(r#"{"status":"error","error":"boom"}"#), Err("status `error`: boom".to_string()));
    }

    #[test]
    fn query_answers_absent_null_empty_and_present() {
        let nothing = QueryResult::Streams(vec![]);
        assert_eq!(query_answer(r#"{"status":"success"}"#), Ok(nothing.clone()));
        assert_eq!(query_answer(r#"{"status":"success","data":null}"#), Ok(nothing.clone()));
        assert_eq!(
            query_answer(r#"{"status":"success","data":{"resultType":"streams","result":null}}"#),
            Ok(nothing.clone())
        );
        assert_eq!(
            query_answer(r#"{"status":"success","data":{"resultType":"streams","result":[]}}"#),
            Ok(nothing.clone())
        );
        assert_eq!(
            query_answer(r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#),
            Ok(QueryResult::Metric(vec![]))
        );
        // A stream whose labels or values are null carries no line and no label.
        let bare = r#"{"status":"success","data":{"resultType":"streams","result":[{"stream":null,"values":null},{"values":[["5","x"]]}]}}"#;
        assert_eq!(
            query_answer(bare),
            Ok(QueryResult::Streams(vec![loki::LogEntry { time_ns: 5, line: "x".into(), labels: vec![] }]))
        );
        // A metric series whose points are null has none; its null labels are no labels.
        let null_points =
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":null,"values":null}]}}"#;
        assert_eq!(query_answer(null_points), Ok(QueryResult::Metric(vec![])));
        let null_value =
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"value":null}]}}"#;
        assert_eq!(query_answer(null_value), Ok(QueryResult::Metric(vec![])));
        let QueryResult::Streams(lines) = query_answer(&fixture("query-range-streams.json")).unwrap() else {
            panic!("streams expected")
        };
        assert!(!lines.is_empty() && lines.iter().all(|l| l.labels.iter().any(|(k, _)| k == "service_name")));
        let QueryResult::Metric(samples) = query_answer(&fixture("query-range-matrix.json")).unwrap() else {
            panic!("matrix expected")
        };
        assert!(!samples.is_empty() && samples.iter().all(|s| s.value.is_finite()));
        assert_eq!(
            query_answer(r#"{"status":"success","data":{"resultType":"scalar","result":[1, "2"]}}"#),
            Err("unknown resultType `scalar`".to_string())
        );
    }

    #[test]
    fn schema_periods_absent_null_empty_and_present() {
        assert_eq!(periods_of(""), Vec::<String>::new());
        assert_eq!(periods_of("server:\n  http_listen_port: 3100\n"), Vec::<String>::new());
        assert_eq!(periods_of("schema_config:\n  configs: []\n"), Vec::<String>::new());
        let period =
            |store: &str| format!("schema_config:\n  configs:\n  - from: 2024-01-01\n    object_store: {store}\n");
        for none in ["", "null", "~", "\"\""] {
            assert_eq!(periods_of(&period(none)), Vec::<String>::new(), "{none:?}");
        }
        assert_eq!(periods_of(&period("s3")), vec!["s3".to_string()]);
        assert_eq!(periods_of(&fixture("config.yaml")), vec!["filesystem".to_string()]);
    }

    #[test]
    fn storage_facts_without_periods_name_no_backend() {
        let none = record(&storage_facts(&[])).unwrap();
        assert!(none["backend"].is_unit() && !none["object_storage"].as_bool().unwrap());
        let periods = periods_of(&fixture("config.yaml"));
        let facts = record(&storage_facts(&periods)).unwrap();
        assert_eq!(facts["backend"].to_string(), "filesystem");
        assert!(!facts["object_storage"].as_bool().unwrap());
        let moved = record(&storage_facts(&["filesystem".into(), "s3".into()])).unwrap();
        assert_eq!((moved["backend"].to_string(), moved["object_storage"].as_bool().unwrap()), ("s3".into(), true));
    }
}
