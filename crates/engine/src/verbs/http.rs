//! `http::` — plain HTTP for runbooks: requests that return the whole response, and probes
//! that never throw. Every request has a timeout (`http.timeout`, 5 s by default, or the
//! `timeout` option); redirects are reported, not followed.

use std::collections::BTreeMap;

use rhai::{Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::time::positive_duration_arg;
use super::values::{Probe, record};
use crate::register;
use opsbook_world::{Request, Response};

/// The `http::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    for (name, method) in [("get", reqwest::Method::GET), ("head", reqwest::Method::HEAD)] {
        let method2 = method.clone();
        register!(
            &mut m,
            name,
            Reads,
            ["url: &str", "Map"],
            "/// Sends the request and returns `#{status, ok, headers, text, elapsed_ms}` (`ok`: a 2xx\n\
             /// status). An answer larger than `http.max_body` is not read: `ok` is false and `error` says\n\
             /// so. Throws when no HTTP answer came back (refused, timed out, TLS…).",
            format!("http::{name}(config.log_store.url + \"/ready\")"),
            move |call: NativeCallContext, url: &str| request(&context(&call), method.clone(), url, &Map::new())
        );
        register!(
            &mut m,
            name,
            Reads,
            ["url: &str", "options: Map", "Map"],
            "/// Like the one-argument form, with options `#{headers: #{…}, body: \"…\", timeout: \"5s\"}`.",
            format!(
                "http::{name}(config.log_store.url + \"/ready\", #{{ timeout: \"5s\", headers: #{{ accept: \"text/plain\" }} }})"
            ),
            move |call: NativeCallContext, url: &str, options: Map| request(
                &context(&call),
                method2.clone(),
                url,
                &options
            )
        );
    }
    // A POST asks the server to change something: planned under `--dry-run`, never sent.
    register!(
        &mut m,
        "post",
        Changes,
        ["url: &str", "Map"],
        "/// POSTs to `url` and returns `#{status, ok, headers, text, elapsed_ms}` as `http::get` does.\n\
         /// Under `--dry-run` it is planned, not sent (`#{planned: true, ok: true, status: 0, …}`).",
        "http::post(config.metrics_db.url + \"/api/v2/write\")",
        |call: NativeCallContext, url: &str| post(&context(&call), url, &Map::new())
    );
    register!(
        &mut m,
        "post",
        Changes,
        ["url: &str", "options: Map", "Map"],
        "/// Like the one-argument form, with options `#{headers: #{…}, body: \"…\", timeout: \"5s\"}`.",
        "http::post(config.log_store.url + \"/loki/api/v1/push\", #{ body: \"{}\", headers: #{ \"content-type\": \"application/json\" } })",
        |call: NativeCallContext, url: &str, options: Map| post(&context(&call), url, &options)
    );
    register!(
        &mut m,
        "probe",
        Reads,
        ["url: &str", "Map"],
        "/// GETs `url` and never throws: `#{ok, status, detail, elapsed_ms}`. `ok` is a 2xx answer;\n\
         /// otherwise `detail` says why (\"connection refused\", \"timed out after 5s\", the status and\n\
         /// the first bytes of the body).",
        "http::probe(config.log_store.url + \"/ready\")",
        |call: NativeCallContext, url: &str| probe(&context(&call), url, &Map::new())
    );
    register!(
        &mut m,
        "probe",
        Reads,
        ["url: &str", "options: Map", "Map"],
        "/// A probe with options `#{method: \"HEAD\", timeout: \"2s\", headers: #{…}}`.",
        "http::probe(config.log_store.url + \"/ready\", #{ timeout: \"5s\" })",
        |call: NativeCallContext, url: &str, options: Map| probe(&context(&call), url, &options)
    );
    m
}

fn build<'a>(method: reqwest::Method, url: &str, options: &Map) -> VerbResult<Request<'a>> {
    let mut req = Request::new(method, url);
    for (k, v) in options {
        match k.as_str() {
            "headers" => {
                let headers = v.read_lock::<Map>().ok_or_else(|| fail("http: `headers` must be a map"))?;
                for (name, value) in headers.iter() {
                    req = req.header(name, &super::values::text(value));
                }
            }
            "body" => req = req.body(super::values::text(v).into_bytes()),
            "timeout" => req = req.timeout(Some(positive_duration_arg(v, "timeout")?)),
            "method" => {}
            other => return Err(fail(format!("http: unknown option `{other}` (headers, body, timeout, method)"))),
        }
    }
    Ok(req)
}

fn request(cx: &Context, method: reqwest::Method, url: &str, options: &Map) -> VerbResult<Map> {
    let req = build(method.clone(), url, options)?;
    match cx.send_answer(req)? {
        Ok(response) => response_map(&response),
        // A reason naming the address already (a bad one, an answer too large) is not prefixed.
        Err(reason) if reason.contains(url) => Err(fail(reason)),
        Err(reason) => Err(fail(format!("{method} {url}: {reason}"))),
    }
}

/// A POST, unless the run only plans (`--dry-run`): then nothing is sent, and what comes back
/// says it was planned.
fn post(cx: &Context, url: &str, options: &Map) -> VerbResult<Map> {
    build(reqwest::Method::POST, url, options)?;
    if cx.plan(&format!("POST {url}")) {
        let mut planned = record(&ResponseRecord {
            status: 0,
            ok: true,
            headers: BTreeMap::new(),
            text: "",
            elapsed_ms: 0,
            error: None,
        })?;
        planned.insert("planned".into(), true.into());
        return Ok(planned);
    }
    request(cx, reqwest::Method::POST, url, options)
}

/// A whole response as scripts see it.
#[derive(Serialize)]
struct ResponseRecord<'a> {
    status: u16,
    ok: bool,
    headers: BTreeMap<&'a str, &'a str>,
    text: &'a str,
    elapsed_ms: u64,
    /// Why `text` is empty though the server answered: `answer larger than 16 MB from URL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// `#{status, ok, headers, text, elapsed_ms}` of a response.
fn response_map(r: &Response) -> VerbResult<Map> {
    record(&ResponseRecord {
        status: r.status,
        ok: (200..300).contains(&r.status) && r.too_large.is_none(),
        headers: r.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
        text: &r.body,
        elapsed_ms: r.elapsed.as_millis() as u64,
        error: r.too_large.as_deref(),
    })
}

fn probe(cx: &Context, url: &str, options: &Map) -> VerbResult<Map> {
    let method = match options.get("method").map(super::values::text).as_deref() {
        None | Some("GET") | Some("get") => reqwest::Method::GET,
        Some("HEAD") | Some("head") => reqwest::Method::HEAD,
        Some(other) => return Err(fail(format!("http::probe: method `{other}` (GET or HEAD)"))),
    };
    let req = build(method, url, options)?;
    match cx.send(req)? {
        Ok(r) if (200..300).contains(&r.status) => {
            Probe::new(true, Some(r.status), format!("HTTP {}", r.status), Some(r.elapsed))
        }
        Ok(r) => Probe::new(false, Some(r.status), r.summary(), Some(r.elapsed)),
        Err(reason) => Probe::unanswered(reason),
    }
    .into_map()
}
