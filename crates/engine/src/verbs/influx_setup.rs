//! `influx::setup`: a new InfluxDB 2 set up as `influx setup` does it — through
//! `POST /api/v2/setup`, which a fresh server allows once — with the configured organisation
//! and bucket and the configured API token as its operator token, so the token opsbook
//! already holds is the server's from the start (the token never reaches the script, and no
//! new one is made that nobody keeps). A package's influxd starts fresh: deploy sets it up.

use std::sync::Arc;

use rhai::{Map, Module};
use serde_json::json;

use super::file::Changed;
use super::values::{record, text};
use super::{Context, VerbResult, fail};
use crate::config::keys;
use crate::http_client::Request;
use crate::register;
use crate::report::Level;

/// Adds `setup` to the `influx` module.
pub(crate) fn add(m: &mut Module, cx: &Arc<Context>) {
    let h = cx.clone();
    register!(
        m,
        "setup",
        Changes,
        ["Map"],
        "/// Sets a fresh metrics database up (`POST /api/v2/setup`, as `influx setup`): the configured\n\
         /// organisation and bucket, user `opsbook`, the configured token as the operator token.\n\
         /// A server set up already is left alone. Returns `#{changed}`.",
        "influx::setup()",
        move || setup(&h, &Map::new())
    );
    let h = cx.clone();
    register!(
        m,
        "setup",
        Changes,
        ["options: Map", "Map"],
        "/// With `#{username: \"admin\"}`: that user instead of `opsbook`.",
        "influx::setup(#{ username: \"admin\" })",
        move |options: Map| setup(&h, &options)
    );
}

/// Whether the server still allows its setup (`GET /api/v2/setup`); an error when it cannot tell.
fn allowed(cx: &Context) -> VerbResult<bool> {
    super::influx_api::awaits_setup(cx)?.ok_or_else(|| {
        let address = super::influx::url(cx, "/api/v2/setup");
        fail(format!(
            "influx::setup: {address} did not say whether the server awaits its setup (is it InfluxDB 2, and up?)"
        ))
    })
}

fn setup(cx: &Context, options: &Map) -> VerbResult<Map> {
    for k in options.keys() {
        if k != "username" {
            return Err(fail(format!("influx::setup: unknown option `{k}` (username)")));
        }
    }
    let username = options.get("username").map(text).filter(|u| !u.is_empty()).unwrap_or_else(|| "opsbook".into());
    if !allowed(cx)? {
        return record(&Changed { changed: false, dry_run: false });
    }
    let config = cx.config();
    let (org, bucket) = (config.text(keys::METRICS_DB_ORG), config.text(keys::METRICS_DB_BUCKET));
    if org.is_empty() || bucket.is_empty() {
        return Err(fail(
            "influx::setup: give the organisation and bucket to make (metrics_db.org, metrics_db.bucket)",
        ));
    }
    let token = config.token().map_err(|e| fail(e.to_string()))?.ok_or_else(|| {
        fail("influx::setup: no API token configured to make the operator token: set metrics_db.token_file, metrics_db.token_command or INFLUX_TOKEN")
    })?;

    let what = format!("organisation {org}, bucket {bucket}, user {username}, the configured token as operator token");
    if cx.plan(&format!("set up the metrics database: {what}")) {
        return record(&Changed { changed: true, dry_run: true });
    }
    let body = json!({"username": username, "org": org, "bucket": bucket, "token": token.expose()}).to_string();
    let request = Request::new(reqwest::Method::POST, super::influx::url(cx, "/api/v2/setup"))
        .header("Content-Type", "application/json")
        .body(body);
    match cx.send(request)? {
        Ok(r) if (200..300).contains(&r.status) => {
            cx.log(Level::Info, &format!("changed metrics database: set up ({what})"));
            record(&Changed { changed: true, dry_run: false })
        }
        Ok(r) => Err(fail(format!("influx::setup: the metrics database refused its setup: {}", r.summary()))),
        Err(reason) => Err(fail(format!("influx::setup: {reason}"))),
    }
}
