//! `loki::` — the log store through its Loki API: readiness, labels, log and metric queries,
//! a diagnostic push, and the storage backend. Log selectors go to `query_range`: since
//! Loki 3.2 the instant endpoint answers 400 to them.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rhai::{Array, Dynamic, Map, Module};

use super::http::probe_result;
use super::influx::form_encode;
use super::time::duration_arg;
use super::{Host, HostResult, fail};
use crate::config::keys;
use crate::http_client::{Request, Response};
use crate::register;
use crate::wire::loki_config;
use crate::wire::loki_json::{self, QueryResult};

pub fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "ready",
        ["Map"],
        "/// GET /ready, never throws: `#{ok, status, detail}`. `ok` when the body says `ready`; while\n\
         /// Loki starts (503) `detail` quotes its reason, e.g. \"waiting for 15s after being ready\".",
        move || ready(&h)
    );
    let h = host.clone();
    register!(
        &mut m,
        "labels",
        ["Array"],
        "/// The label names the log store knows (throws quoting the server on failure).",
        move || strings(&h, "/loki/api/v1/labels".to_string())
    );
    let h = host.clone();
    register!(&mut m, "label_values", ["name: &str", "Array"], "/// The values of one label.", move |name: &str| {
        strings(&h, format!("/loki/api/v1/label/{}/values", form_encode(name)))
    });
    let h = host.clone();
    register!(
        &mut m,
        "query",
        ["query: &str", "Array"],
        "/// `query(selector, #{})` with the defaults: the last hour, at most 100 lines.",
        move |q: &str| query(&h, q, &Map::new())
    );
    let h = host.clone();
    register!(
        &mut m,
        "query",
        ["query: &str", "options: Map", "Array"],
        "/// Log lines for a selector (`{hostname=\"h1\"} |= \"x\"`), newest first:\n\
         /// `[#{time, time_ns, line, labels}]`. Options: `limit` (100), `since` (\"1h\"), `direction`\n\
         /// (\"backward\"). A metric query (`count_over_time(…)`) returns `[#{time, value, labels}]`.",
        move |q: &str, options: Map| query(&h, q, &options)
    );
    let h = host.clone();
    register!(
        &mut m,
        "push",
        ["labels: Map", "line: &str", "Map"],
        "/// Pushes one line with these labels (diagnostics), never throws: `#{ok, status, detail}`.",
        move |labels: Map, line: &str| push(&h, &labels, line)
    );
    let h = host.clone();
    register!(
        &mut m,
        "storage",
        ["Map"],
        "/// The storage backend in force (last `schema_config` period of GET /config), never throws:\n\
         /// `#{ok, backend, object_storage, detail}`.",
        move || storage(&h)
    );
    m
}

fn url(host: &Host, path: &str) -> String {
    format!("{}{path}", host.config.text(keys::LOG_STORE_URL).trim_end_matches('/'))
}

fn get(host: &Host, path: &str) -> HostResult<Response> {
    let u = url(host, path);
    match host.send(Request::new(reqwest::Method::GET, &u))? {
        Ok(r) if r.status == 200 => Ok(r),
        Ok(r) => Err(fail(format!("the log store answered {}", r.summary()))),
        Err(reason) => Err(fail(format!("GET {u}: {reason}"))),
    }
}

fn ready(host: &Host) -> HostResult<Map> {
    Ok(match host.send(Request::new(reqwest::Method::GET, url(host, "/ready")))? {
        Err(reason) => probe_result(false, None, reason, None),
        Ok(r) if r.status == 200 && r.body.trim() == "ready" => probe_result(true, Some(200), "ready", Some(r.elapsed)),
        Ok(r) if r.status == 503 => probe_result(
            false,
            Some(503),
            format!("not ready yet: {}", crate::wire::excerpt(&r.body, 160)),
            Some(r.elapsed),
        ),
        Ok(r) => probe_result(false, Some(r.status), format!("expected `ready`, got {}", r.summary()), Some(r.elapsed)),
    })
}

fn strings(host: &Host, path: String) -> HostResult<Array> {
    let r = get(host, &path)?;
    let list = loki_json::parse_strings(&r.body).map_err(|e| fail(format!("log store: {e}")))?;
    Ok(list.into_iter().map(Dynamic::from).collect())
}

fn labels_map(labels: Vec<(String, String)>) -> Map {
    labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect()
}

fn rfc3339_ns(ns: i128) -> String {
    let d = Duration::from_nanos(ns.max(0) as u64);
    humantime::format_rfc3339_nanos(UNIX_EPOCH + d).to_string()
}

fn query(host: &Host, q: &str, options: &Map) -> HostResult<Array> {
    let mut limit: i64 = 100;
    let mut since = Duration::from_secs(3600);
    let mut direction = "backward".to_string();
    for (k, v) in options {
        match k.as_str() {
            "limit" => limit = v.as_int().map_err(|_| fail("loki::query: `limit` must be an integer"))?,
            "since" => since = duration_arg(v)?,
            "direction" => direction = super::core::text(v),
            other => return Err(fail(format!("loki::query: unknown option `{other}` (limit, since, direction)"))),
        }
    }
    let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let start_ns = now_ns.saturating_sub(since.as_nanos());
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
    let r = get(host, &path)?;
    let parsed = loki_json::parse_query(&r.body).map_err(|e| fail(format!("log store: {e}")))?;
    Ok(match parsed {
        QueryResult::Streams(entries) => entries
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("time".into(), rfc3339_ns(e.time_ns).into());
                m.insert("time_ns".into(), (e.time_ns as i64).into());
                m.insert("line".into(), e.line.into());
                m.insert("labels".into(), labels_map(e.labels).into());
                Dynamic::from_map(m)
            })
            .collect(),
        QueryResult::Metric(samples) => samples
            .into_iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("time".into(), s.time_s.into());
                m.insert("value".into(), s.value.into());
                m.insert("labels".into(), labels_map(s.labels).into());
                Dynamic::from_map(m)
            })
            .collect(),
    })
}

fn push(host: &Host, labels: &Map, line: &str) -> HostResult<Map> {
    let stream: serde_json::Map<String, serde_json::Value> =
        labels.iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(super::core::text(v)))).collect();
    let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let body = serde_json::json!({"streams": [{"stream": stream, "values": [[now_ns.to_string(), line]]}]});
    let request = Request::new(reqwest::Method::POST, url(host, "/loki/api/v1/push"))
        .header("content-type", "application/json")
        .body(body.to_string());
    Ok(match host.send(request)? {
        Err(reason) => probe_result(false, None, reason, None),
        Ok(r) if r.status == 204 || r.status == 200 => probe_result(true, Some(r.status), "accepted", Some(r.elapsed)),
        Ok(r) => probe_result(false, Some(r.status), r.summary(), Some(r.elapsed)),
    })
}

fn storage(host: &Host) -> HostResult<Map> {
    let r = match host.send(Request::new(reqwest::Method::GET, url(host, "/config")))? {
        Ok(r) => r,
        Err(reason) => return Ok(probe_result(false, None, reason, None)),
    };
    if r.status != 200 {
        return Ok(probe_result(false, Some(r.status), r.summary(), Some(r.elapsed)));
    }
    let stores = loki_config::object_stores(&r.body);
    let mut m = match stores.last() {
        Some(store) => {
            let kind = if loki_config::is_object_storage(store) { "object storage" } else { "local disk" };
            probe_result(
                true,
                Some(200),
                format!("{kind}: {store} (schema periods: {})", stores.join(", ")),
                Some(r.elapsed),
            )
        }
        None => probe_result(
            false,
            Some(200),
            format!("no schema_config object_store in /config: {}", r.summary()),
            Some(r.elapsed),
        ),
    };
    let last = stores.last().cloned().unwrap_or_default();
    m.insert("object_storage".into(), (!last.is_empty() && loki_config::is_object_storage(&last)).into());
    m.insert("backend".into(), last.into());
    Ok(m)
}
