//! `influx::write` and `influx::ensure_bucket`: what a round trip through the metrics database
//! needs — a point written (`POST /api/v2/write`, line protocol, nanosecond precision) and a
//! bucket of its own to write it in, made when missing (`POST /api/v2/buckets` with the org's
//! ID from `GET /api/v2/orgs?org=NAME`), so the check's points never land among the users' data.
//!
//! Read in InfluxDB OSS v2.7.12 (`http/write_handler.go`, `tenant/http_server_bucket.go`): a
//! write answers 204; a missing bucket 404 `{"code":"not found","message":"bucket \"X\" not
//! found"}`; a bucket is created with `orgID`, `name` and `retentionRules` (`expire`,
//! `everySeconds`), 201.

use rhai::{Map, Module, NativeCallContext};
use serde_json::json;

use super::api::{form_encode, refusal, url};
use super::authed::{authed, token};
use super::bucket::bucket;
use crate::register;
use crate::verbs::context::{Context, context};
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::time::positive_duration_arg;
use crate::verbs::values::Probe;
use opsbook_base::config::keys;
use opsbook_world::Request;

/// Adds `influx::write` and `influx::ensure_bucket` to the `influx::` module (the registry
/// puts them there: this file builds on influx.rs, which does not know it).
pub(super) fn add(m: &mut Module) {
    register!(
        m,
        "write",
        Changes,
        ["bucket: &str", "lines: &str", "Map"],
        "/// Writes line protocol (nanosecond timestamps) into a bucket of the configured org, never\n\
         /// throws: `#{ok, status, detail, elapsed_ms}`; `ok` on 204, else the server's answer quoted.",
        "influx::write(\"opsbook_probe\", \"opsbook_probe,host=h1 marker=\\\"m1\\\"\")",
        |call: NativeCallContext, bucket: &str, lines: &str| write(&context(&call), bucket, lines)
    );
    register!(
        m,
        "ensure_bucket",
        Changes,
        ["name: &str", "options: Map", "Map"],
        "/// The bucket `name` in the configured org, made when missing with `retention` (a duration;\n\
         /// `0s` keeps data forever) and `description`: `#{changed, detail}`. Throws quoting the\n\
         /// server when it refuses (a token not allowed to make buckets).",
        "influx::ensure_bucket(\"opsbook_probe\", #{ retention: \"1h\" })",
        |call: NativeCallContext, name: &str, options: Map| ensure_bucket(&context(&call), name, &options)
    );
}

fn write(cx: &Context, bucket: &str, lines: &str) -> VerbResult<Map> {
    let org = cx.config().text(keys::METRICS_DB_ORG);
    let path = format!("/api/v2/write?org={}&bucket={}&precision=ns", form_encode(&org), form_encode(bucket));
    let action = format!("write {} line(s) into bucket {bucket}", lines.lines().count());
    if cx.plan(&action) {
        return Probe::new(true, None, format!("would {action}"), None).into_map();
    }
    let token = token(cx)?;
    let request = Request::new(reqwest::Method::POST, url(cx, &path))
        .header("content-type", "text/plain; charset=utf-8")
        .body(lines.to_string())
        .token(Some(&token));
    let started = std::time::Instant::now();
    let probe = match cx.send(request)? {
        Ok(r) if r.status == 204 => Probe::new(true, Some(r.status), "written (204)", Some(started.elapsed())),
        Ok(r) => Probe::new(false, Some(r.status), refusal(&r), Some(started.elapsed())),
        Err(why) => Probe::new(false, None, format!("POST {}: {why}", url(cx, &path)), Some(started.elapsed())),
    };
    probe.into_map()
}

fn ensure_bucket(cx: &Context, name: &str, options: &Map) -> VerbResult<Map> {
    let mut retention = 0u64;
    let mut description = String::new();
    for (k, v) in options {
        match k.as_str() {
            "retention" => retention = positive_duration_arg(v, "retention").map(|d| d.as_secs())?,
            "description" => description = crate::verbs::values::text(v),
            other => {
                return Err(fail(format!("influx::ensure_bucket: unknown option `{other}` (retention, description)")));
            }
        }
    }
    let mut out = Map::new();
    if bucket(cx, name)?.is_map() {
        out.insert("changed".into(), false.into());
        out.insert("detail".into(), format!("bucket {name} is there").into());
        return Ok(out);
    }
    let org = cx.config().text(keys::METRICS_DB_ORG);
    let action = format!("make bucket {name} in org {org} (retention {})", kept(retention));
    out.insert("changed".into(), true.into());
    out.insert("detail".into(), action.clone().into());
    if cx.plan(&action) {
        return Ok(out);
    }
    let org_id = org_id(cx, &org)?;
    let rules = if retention == 0 { json!([]) } else { json!([{"type": "expire", "everySeconds": retention}]) };
    let body = json!({"orgID": org_id, "name": name, "description": description, "retentionRules": rules});
    let request = Request::new(reqwest::Method::POST, url(cx, "/api/v2/buckets"))
        .header("content-type", "application/json")
        .body(body.to_string());
    authed(cx, request).map_err(|e| fail(format!("cannot {action}: {e}")))?;
    Ok(out)
}

/// The ID of the org named `org` (`GET /api/v2/orgs?org=NAME`).
fn org_id(cx: &Context, org: &str) -> VerbResult<String> {
    let path = format!("/api/v2/orgs?org={}", form_encode(org));
    let r = authed(cx, Request::new(reqwest::Method::GET, url(cx, &path)))?;
    let v: serde_json::Value = serde_json::from_str(&r.body)
        .map_err(|e| fail(format!("GET {path}: not JSON ({e}): {}", opsbook_wire::excerpt(&r.body, 160))))?;
    v["orgs"]
        .as_array()
        .and_then(|orgs| orgs.iter().find(|o| o["name"] == org))
        .and_then(|o| o["id"].as_str())
        .map(str::to_string)
        .ok_or_else(|| fail(format!("the metrics database has no org named {org} that this token can see")))
}

/// A retention as an operator reads it.
fn kept(seconds: u64) -> String {
    if seconds == 0 {
        "forever".to_string()
    } else {
        humantime::format_duration(std::time::Duration::from_secs(seconds)).to_string()
    }
}
