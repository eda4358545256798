//! The token and the requests that carry it: the metrics database's API token from the
//! configuration (never handed to a script), and a request sent with it whose refusal is an
//! error in the operator's words.

use super::api;
use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use opsbook_base::secret::Secret;
use opsbook_world::{Request, Response};

pub(super) fn token(cx: &Context) -> VerbResult<Secret> {
    match cx.config().token().map_err(|e| fail(e.to_string()))? {
        Some(t) => Ok(t),
        None => Err(fail(
            "no API token configured for the metrics database: set metrics_db.token_file, metrics_db.token_command or INFLUX_TOKEN",
        )),
    }
}

pub(super) fn authed(cx: &Context, request: Request<'_>) -> VerbResult<Response> {
    let token = token(cx)?;
    let what = format!("{} {}", request.method, request.url);
    match cx.send(request.token(Some(&token)))? {
        Ok(r) if (200..300).contains(&r.status) => Ok(r),
        Ok(r) => Err(fail(api::refusal_of(cx, &r)?)),
        Err(reason) => Err(fail(format!("{what}: {reason}"))),
    }
}

/// `GET` of a path (a link the server gave, or one of ours) with the token.
pub(super) fn get(cx: &Context, path: &str) -> VerbResult<Response> {
    let target =
        if path.starts_with("http://") || path.starts_with("https://") { path.to_string() } else { api::url(cx, path) };
    authed(cx, Request::new(reqwest::Method::GET, target))
}
