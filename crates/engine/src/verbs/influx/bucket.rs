//! Buckets as scripts see them: every bucket of the org (all pages) and one bucket by name
//! (`()` when there is none), each with its name, ID, type and retention.

use rhai::{Array, Dynamic};
use serde::Serialize;
use serde_json::Value as Json;

use super::api;
use super::authed::{get, token};
use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::record;
use opsbook_base::config::keys;
use opsbook_world::Request;

/// One bucket as scripts see it.
#[derive(Debug, PartialEq, Serialize)]
struct Bucket {
    name: String,
    id: String,
    #[serde(rename = "type")]
    kind: String,
    /// Seconds; 0 is forever (no rule, or a rule of 0).
    retention: i64,
}

/// A bucket of a listing. A bucket without `retentionRules`, or with null or empty rules,
/// keeps its data forever; absent text fields read as empty.
fn bucket_of(b: &Json) -> Bucket {
    let s = |k: &str| b.get(k).and_then(Json::as_str).unwrap_or("").to_string();
    let retention = b
        .get("retentionRules")
        .and_then(Json::as_array)
        .and_then(|r| r.first())
        .and_then(|r| r.get("everySeconds"))
        .and_then(Json::as_i64)
        .unwrap_or(0);
    Bucket { name: s("name"), id: s("id"), kind: s("type"), retention }
}

/// A bucket listing: `buckets` null or empty is no bucket; absent is not a listing at all
/// (an error quoting the answer).
#[cfg(test)]
fn buckets_answer(body: &str) -> Result<Vec<Bucket>, String> {
    Ok(api::page(body)?.0.iter().map(bucket_of).collect())
}

pub(super) fn buckets(cx: &Context) -> VerbResult<Array> {
    let all = api::all_buckets(cx, |path| get(cx, path))?;
    all.iter().map(|b| record(&bucket_of(b)).map(Dynamic::from_map)).collect()
}

pub(super) fn bucket(cx: &Context, name: &str) -> VerbResult<Dynamic> {
    let path = api::by_name_path(&cx.config().text(keys::METRICS_DB_ORG), name);
    let token = token(cx)?;
    let r = match cx.send(Request::new(reqwest::Method::GET, api::url(cx, &path)).token(Some(&token)))? {
        Ok(r) => r,
        Err(reason) if reason.contains(&api::url(cx, &path)) => return Err(fail(reason)),
        Err(reason) => return Err(fail(format!("GET {}: {reason}", api::url(cx, &path)))),
    };
    if api::bucket_absent(&r) {
        return Ok(Dynamic::UNIT);
    }
    if !(200..300).contains(&r.status) {
        return Err(fail(api::refusal_of(cx, &r)?));
    }
    let (found, _) = api::page(&r.body).map_err(fail)?;
    match found.iter().map(bucket_of).find(|b| b.name == name) {
        Some(b) => record(&b).map(Dynamic::from_map),
        None => Ok(Dynamic::UNIT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_listings_absent_null_empty_and_present() {
        let b = |name: &str, retention| Bucket { name: name.into(), id: "1".into(), kind: "user".into(), retention };
        assert_eq!(buckets_answer(r#"{"buckets":[]}"#), Ok(vec![]));
        assert_eq!(buckets_answer(r#"{"buckets":null}"#), Ok(vec![]));
        assert_eq!(
            buckets_answer(r#"{"links":{}}"#),
            Err("bucket listing has no `buckets` array: {\"links\":{}}".into())
        );
        assert_eq!(buckets_answer("oops"), Err("bucket listing is not JSON: oops".into()));
        let rules = |r: &str| format!(r#"{{"buckets":[{{"name":"t","id":"1","type":"user"{r}}}]}}"#);
        assert_eq!(buckets_answer(&rules("")), Ok(vec![b("t", 0)]));
        assert_eq!(buckets_answer(&rules(r#","retentionRules":null"#)), Ok(vec![b("t", 0)]));
        assert_eq!(buckets_answer(&rules(r#","retentionRules":[]"#)), Ok(vec![b("t", 0)]));
        assert_eq!(
            buckets_answer(&rules(r#","retentionRules":[{"type":"expire","everySeconds":3600}]"#)),
            Ok(vec![b("t", 3600)])
        );
        let bare = buckets_answer(r#"{"buckets":[{"name":null}]}"#).unwrap();
        assert_eq!(bare, vec![Bucket { name: String::new(), id: String::new(), kind: String::new(), retention: 0 }]);
    }
}
