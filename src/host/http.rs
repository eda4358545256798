//! `http::` — plain HTTP for runbooks: requests that return the whole response, and probes
//! that never throw. Every request has a timeout (`http.timeout`, 5 s by default, or the
//! `timeout` option); redirects are reported, not followed.

use std::sync::Arc;
use std::time::Duration;

use rhai::{Dynamic, Map, Module};

use super::time::duration_arg;
use super::{Host, HostResult, fail};
use crate::http_client::{Request, Response};
use crate::register;

pub fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    for (name, method) in
        [("get", reqwest::Method::GET), ("head", reqwest::Method::HEAD), ("post", reqwest::Method::POST)]
    {
        let h = host.clone();
        let method2 = method.clone();
        register!(
            &mut m,
            name,
            ["url: &str", "Map"],
            "/// Sends the request and returns `#{status, ok, headers, text, elapsed_ms}` (`ok`: a 2xx\n\
             /// status). Throws when no HTTP answer came back (refused, timed out, TLS…).",
            move |url: &str| request(&h, method.clone(), url, &Map::new())
        );
        let h = host.clone();
        register!(
            &mut m,
            name,
            ["url: &str", "options: Map", "Map"],
            "/// Like the one-argument form, with options `#{headers: #{…}, body: \"…\", timeout: \"5s\"}`.",
            move |url: &str, options: Map| request(&h, method2.clone(), url, &options)
        );
    }
    let h = host.clone();
    register!(
        &mut m,
        "probe",
        ["url: &str", "Map"],
        "/// GETs `url` and never throws: `#{ok, status, detail, elapsed_ms}`. `ok` is a 2xx answer;\n\
         /// otherwise `detail` says why (\"connection refused\", \"timed out after 5s\", the status and\n\
         /// the first bytes of the body).",
        move |url: &str| probe(&h, url, &Map::new())
    );
    let h = host.clone();
    register!(
        &mut m,
        "probe",
        ["url: &str", "options: Map", "Map"],
        "/// A probe with options `#{method: \"HEAD\", timeout: \"2s\", headers: #{…}}`.",
        move |url: &str, options: Map| probe(&h, url, &options)
    );
    m
}

fn build<'a>(method: reqwest::Method, url: &str, options: &Map) -> HostResult<Request<'a>> {
    let mut req = Request::new(method, url);
    for (k, v) in options {
        match k.as_str() {
            "headers" => {
                let headers = v.read_lock::<Map>().ok_or_else(|| fail("http: `headers` must be a map"))?;
                for (name, value) in headers.iter() {
                    req = req.header(name, &super::core::text(value));
                }
            }
            "body" => req = req.body(super::core::text(v).into_bytes()),
            "timeout" => req = req.timeout(Some(duration_arg(v)?)),
            "method" => {}
            other => return Err(fail(format!("http: unknown option `{other}` (headers, body, timeout, method)"))),
        }
    }
    Ok(req)
}

fn request(host: &Host, method: reqwest::Method, url: &str, options: &Map) -> HostResult<Map> {
    let req = build(method.clone(), url, options)?;
    match host.send(req)? {
        Ok(response) => Ok(response_map(&response)),
        Err(reason) => Err(fail(format!("{method} {url}: {reason}"))),
    }
}

/// `#{status, ok, headers, text, elapsed_ms}` of a response.
pub fn response_map(r: &Response) -> Map {
    let mut headers = Map::new();
    for (k, v) in &r.headers {
        headers.insert(k.as_str().into(), v.clone().into());
    }
    let mut m = Map::new();
    m.insert("status".into(), (r.status as i64).into());
    m.insert("ok".into(), (200..300).contains(&r.status).into());
    m.insert("headers".into(), headers.into());
    m.insert("text".into(), r.body.clone().into());
    m.insert("elapsed_ms".into(), (r.elapsed.as_millis() as i64).into());
    m
}

/// A probe result map.
pub fn probe_result(ok: bool, status: Option<u16>, detail: impl Into<String>, elapsed: Option<Duration>) -> Map {
    let mut m = Map::new();
    m.insert("ok".into(), ok.into());
    m.insert("status".into(), status.map_or(Dynamic::UNIT, |s| (s as i64).into()));
    m.insert("detail".into(), detail.into().into());
    m.insert("elapsed_ms".into(), elapsed.map_or(Dynamic::UNIT, |e| (e.as_millis() as i64).into()));
    m
}

fn probe(host: &Host, url: &str, options: &Map) -> HostResult<Map> {
    let method = match options.get("method").map(super::core::text).as_deref() {
        None | Some("GET") | Some("get") => reqwest::Method::GET,
        Some("HEAD") | Some("head") => reqwest::Method::HEAD,
        Some(other) => return Err(fail(format!("http::probe: method `{other}` (GET or HEAD)"))),
    };
    let req = build(method, url, options)?;
    Ok(match host.send(req)? {
        Ok(r) if (200..300).contains(&r.status) => {
            probe_result(true, Some(r.status), format!("HTTP {}", r.status), Some(r.elapsed))
        }
        Ok(r) => probe_result(false, Some(r.status), r.summary(), Some(r.elapsed)),
        Err(reason) => probe_result(false, None, reason, None),
    })
}
