//! What the `influx::` verbs need to read InfluxDB 2 as it really answers, checked in the
//! source of InfluxDB OSS v2.7.12 (commit ec9dcde5d6; docs/upstream-checked.md §5–§7):
//!
//! - A fresh `influxd` has no user, org, bucket or token until onboarding. Every token gets
//!   401 `unauthorized access`, exactly as a wrong token on a set-up server does; only
//!   `GET /api/v2/setup` (no authentication) tells them apart: `{"allowed": true}` while it is
//!   not set up (`tenant/http_server_onboarding.go`).
//! - `GET /api/v2/config` requires an operator token (`http/config.go`): an all-access token
//!   gets 401 `access to /api/v2/config requires operator permissions`. The storage facts are
//!   then read from the server's own configuration file, or the check is skipped saying why.
//! - `GET /api/v2/buckets` answers in pages (`paging.go`: default 20, at most 100, a larger
//!   `limit` is a 400), with `links.next` while a page is full; permissions are filtered after
//!   paging, so a short page may hide more. One bucket is asked for by `?org=…&name=…`
//!   (404 `bucket "…" not found` when absent).

use serde_json::Value as Json;

use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use opsbook_base::config::keys;
use opsbook_world::{Request, Response};

/// What an operator reads when the server is not set up yet.
pub(super) const NOT_SET_UP: &str = "the metrics database is not set up yet (run deploy, or `influx setup`): \
GET /api/v2/setup answers \"allowed\": true";

/// The largest page InfluxDB serves (`paging.go` `MaxPageSize`).
pub(super) const PAGE: usize = 100;

/// Pages followed at most: 100 000 buckets, far beyond any server (a guard against links
/// that never end).
const MAX_PAGES: usize = 1000;

/// Whether the server still waits for its onboarding: `Some(true)` when `GET /api/v2/setup`
/// answers `"allowed": true`, `None` when it cannot tell.
pub(super) fn awaits_setup(cx: &Context) -> VerbResult<Option<bool>> {
    let url = url(cx, "/api/v2/setup");
    Ok(match cx.send(Request::new(reqwest::Method::GET, url))? {
        Ok(r) if r.status == 200 => {
            serde_json::from_str::<Json>(&r.body).ok().and_then(|j| j.get("allowed").and_then(Json::as_bool))
        }
        _ => None,
    })
}

/// The refusal of an authenticated request as an operator should read it: a 401 from a
/// server that is not set up says so, instead of blaming the token.
pub(super) fn refusal_of(cx: &Context, r: &Response) -> VerbResult<String> {
    if r.status == 401 && awaits_setup(cx)? == Some(true) {
        return Ok(NOT_SET_UP.to_string());
    }
    Ok(refusal(r))
}

/// A bucket listing page: its buckets and the `links.next` to follow, if any.
pub(super) fn page(body: &str) -> Result<(Vec<Json>, Option<String>), String> {
    let json: Json = serde_json::from_str(body)
        .map_err(|_| format!("bucket listing is not JSON: {}", opsbook_wire::excerpt(body, 120)))?;
    let list = match json.get("buckets") {
        Some(Json::Array(list)) => list.clone(),
        Some(Json::Null) => Vec::new(),
        _ => return Err(format!("bucket listing has no `buckets` array: {}", opsbook_wire::excerpt(body, 120))),
    };
    let next = json.pointer("/links/next").and_then(Json::as_str).filter(|n| !n.is_empty()).map(str::to_string);
    Ok((list, next))
}

/// Every bucket the token can see, page after page (`limit=100`, then `links.next` until a
/// page has none or is empty).
pub(super) fn all_buckets(cx: &Context, get: impl Fn(&str) -> VerbResult<Response>) -> VerbResult<Vec<Json>> {
    let mut all = Vec::new();
    let mut seen = Vec::new();
    let mut next = Some(format!("/api/v2/buckets?limit={PAGE}"));
    while let Some(path) = next.take() {
        if seen.len() == MAX_PAGES || seen.contains(&path) {
            cx.log(opsbook_base::report::Level::Warn, &format!("bucket listing: stopped following pages at {path}"));
            break;
        }
        let r = get(&path)?;
        let (buckets, link) = page(&r.body).map_err(fail)?;
        seen.push(path);
        if !buckets.is_empty() {
            next = link;
        }
        all.extend(buckets);
    }
    Ok(all)
}

/// The path asking for one bucket by name (in the configured org when there is one).
pub(super) fn by_name_path(org: &str, name: &str) -> String {
    let name = form_encode(name);
    if org.is_empty() {
        format!("/api/v2/buckets?name={name}")
    } else {
        format!("/api/v2/buckets?org={}&name={name}", form_encode(org))
    }
}

/// Whether a 404 says the bucket is absent (not the org: `organization name "…" not found`).
pub(super) fn bucket_absent(r: &Response) -> bool {
    let message = serde_json::from_str::<Json>(&r.body)
        .ok()
        .and_then(|j| j.get("message").and_then(Json::as_str).map(str::to_string))
        .unwrap_or_default();
    r.status == 404 && message.starts_with("bucket ")
}

/// Whether `/api/v2/config` refused the token for not being an operator's.
pub(super) fn needs_operator(r: &Response) -> bool {
    r.status == 401 && r.body.contains("requires operator permissions")
}

/// The engine path a server's configuration file names (`engine-path`, in TOML `engine-path =
/// "…"`, YAML `engine-path: …` or JSON `"engine-path": "…"`, as influxd reads them).
pub(super) fn engine_path_in_file(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim().trim_start_matches('"');
        let rest = line.strip_prefix("engine-path")?.trim_start().trim_start_matches('"').trim_start();
        let value = rest.strip_prefix('=').or_else(|| rest.strip_prefix(':'))?;
        let value = value.split(" #").next()?.trim().trim_end_matches(',').trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        (!value.is_empty()).then(|| value.to_string())
    })
}

/// Where a server refusing `/api/v2/config` to this token keeps its engine, read from its
/// configuration file (`metrics_db.config`) on the host: `Ok((path, file))`, or why it cannot
/// be told (the reason starts with `why`).
pub(super) fn engine_path_from_file(host: &Context, why: &str) -> VerbResult<Result<(String, String), String>> {
    let file = host.config().text(keys::METRICS_DB_CONFIG);
    let files = host.world().files.clone();
    let at = file.clone();
    let read = host.block_on(|| async move { files.read(&at).await })?;
    Ok(match read {
        Ok(Some((text, _))) => match engine_path_in_file(&text) {
            Some(path) => Ok((path, file)),
            None => Err(format!("{why}; {file} names no engine-path (influxd's default then depends on its user)")),
        },
        Ok(None) => Err(format!("{why}; {file} does not exist on the host (set metrics_db.config)")),
        Err(e) => Err(format!("{why}; {e}")),
    })
}

pub(super) fn url(cx: &Context, path: &str) -> String {
    format!("{}{path}", cx.config().text(keys::METRICS_DB_URL).trim_end_matches('/'))
}

/// An error answer as an operator should read it.
pub(super) fn refusal(r: &Response) -> String {
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

/// Percent-encoding for a query-string value.
pub(crate) fn form_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_their_next_links() {
        let (b, next) = page(r#"{"links":{"self":"/x","next":"/api/v2/buckets?descending=false&limit=100&offset=100"},"buckets":[{"name":"a"}]}"#).unwrap();
        assert_eq!((b.len(), next.as_deref()), (1, Some("/api/v2/buckets?descending=false&limit=100&offset=100")));
        assert_eq!(page(r#"{"links":{"self":"/x"},"buckets":[]}"#).unwrap(), (vec![], None));
        assert_eq!(page(r#"{"buckets":null}"#).unwrap(), (vec![], None));
        assert!(page(r#"{"links":{}}"#).is_err() && page("oops").is_err());
    }

    #[test]
    fn a_bucket_asked_by_name() {
        assert_eq!(by_name_path("my org", "telegraf"), "/api/v2/buckets?org=my%20org&name=telegraf");
        assert_eq!(by_name_path("", "a b"), "/api/v2/buckets?name=a%20b");
        let answer = |status, body: &str| Response {
            status,
            headers: vec![],
            body: body.into(),
            elapsed: std::time::Duration::ZERO,
            too_large: None,
        };
        assert!(bucket_absent(&answer(
            404,
            "{\n\t\"code\": \"not found\",\n\t\"message\": \"bucket \\\"x\\\" not found\"\n}"
        )));
        assert!(!bucket_absent(&answer(404, r#"{"code":"not found","message":"organization name \"o\" not found"}"#)));
        assert!(needs_operator(&answer(
            401,
            r#"{"code":"unauthorized","message":"access to /api/v2/config requires operator permissions"}"#
        )));
        assert!(!needs_operator(&answer(401, r#"{"code":"unauthorized","message":"unauthorized access"}"#)));
    }

    #[test]
    fn engine_paths_in_influxd_config_files() {
        let toml =
            "bolt-path = \"/var/lib/influxdb/influxd.bolt\"\nengine-path = \"/var/lib/influxdb/engine\" # data\n";
        assert_eq!(engine_path_in_file(toml).as_deref(), Some("/var/lib/influxdb/engine"));
        assert_eq!(engine_path_in_file("engine-path: /data/engine\n").as_deref(), Some("/data/engine"));
        assert_eq!(engine_path_in_file("{\n  \"engine-path\": \"/j/engine\",\n}").as_deref(), Some("/j/engine"));
        for none in ["", "# engine-path = \"/x\"\n", "engine-path = \"\"\n", "engine-path-x = 1\n"] {
            assert_eq!(engine_path_in_file(none), None, "{none}");
        }
    }
}
