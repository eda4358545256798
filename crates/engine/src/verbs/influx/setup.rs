//! `influx::onboard`: setting up a fresh InfluxDB 2 as deploy does, as the vendor's Ansible
//! role and `influx setup` do — one org, one bucket with its retention, a user, and an operator
//! token that opsbook keeps where `metrics_db.token_file` points (mode 0600) and never shows.
//!
//! Read in InfluxDB OSS v2.7.12 (`tenant/http_server_onboarding.go`, `onboarding.go`):
//! `GET /api/v2/setup` answers `{"allowed": true}` until the first setup; `POST /api/v2/setup`
//! takes `username`, `password`, `org`, `bucket`, `retentionPeriodSeconds` and an optional
//! `token`, answers 201 with the user, org, bucket and `auth` (an operator authorization),
//! and 422 `conflict` once set up. The token is made here and written to its file *before*
//! the request, so a setup that succeeds can never leave the operator without its token.

use rhai::{Map, Module, NativeCallContext};
use serde_json::json;

use super::api::{awaits_setup, refusal, url};
use crate::register;
use crate::verbs::context::{Context, context};
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::text;
use opsbook_base::config::keys;
use opsbook_world::Request;

/// Adds `influx::onboard` to the `influx::` module.
pub(super) fn add(m: &mut Module) {
    register!(
        m,
        "onboard",
        Changes,
        ["options: Map", "Map"],
        "/// Sets up a fresh metrics database (`POST /api/v2/setup`): the configured org and bucket,\n\
         /// `retention` (a duration, `0s` for infinite: the default), `username` (`opsbook`), a\n\
         /// random password nobody needs (reset it with the token: `influx user password`), and\n\
         /// an operator token written to `metrics_db.token_file` (mode 0600, never shown).\n\
         /// `#{changed: false}` when the server is set up already. Throws when no token_file is\n\
         /// configured, or quoting the server when it refuses.",
        "influx::onboard(#{ retention: \"30d\" })",
        |call: NativeCallContext, options: Map| onboard(&context(&call), &options)
    );
}

fn onboard(cx: &Context, options: &Map) -> VerbResult<Map> {
    let (username, retention) = onboard_options(options)?;
    let config = cx.config();
    let mut out = Map::new();
    match awaits_setup(cx)? {
        Some(true) => {}
        Some(false) => {
            out.insert("changed".into(), false.into());
            out.insert("detail".into(), "the metrics database is set up already".into());
            return Ok(out);
        }
        None => {
            return Err(fail("cannot tell whether the metrics database is set up: GET /api/v2/setup did not answer"));
        }
    }
    let Some(file) = config.token_file() else {
        return Err(fail(
            "set metrics_db.token_file: onboarding makes the operator token and keeps it there (mode 0600)",
        ));
    };
    let (org, bucket) = (config.text(keys::METRICS_DB_ORG), config.text(keys::METRICS_DB_BUCKET));
    let action = format!(
        "set up the metrics database (org {org}, bucket {bucket}, retention {}) and keep its operator token in {}",
        if retention == 0 { "infinite".to_string() } else { format!("{retention}s") },
        file.display()
    );
    out.insert("changed".into(), true.into());
    out.insert("detail".into(), action.clone().into());
    if cx.plan(&action) {
        out.insert("dry_run".into(), true.into());
        return Ok(out);
    }
    let token = opsbook_base::secret::random_token().map_err(fail)?;
    let password = opsbook_base::secret::random_token().map_err(fail)?;
    opsbook_base::secret::write_token_file(&file, &token).map_err(fail)?;
    let body = json!({
        "username": username, "password": password.expose(), "org": org, "bucket": bucket,
        "retentionPeriodSeconds": retention, "token": token.expose(),
    });
    let request = Request::new(reqwest::Method::POST, url(cx, "/api/v2/setup"))
        .header("content-type", "application/json")
        .body(body.to_string());
    match cx.send(request)? {
        Ok(r) if r.status == 201 => {
            // The token verbs use is the one just written.
            config.forget_token();
            Ok(out)
        }
        Ok(r) => Err(fail(format!("the metrics database refused its setup: {}", refusal(&r)))),
        Err(why) => Err(fail(format!("cannot set up the metrics database: {why}"))),
    }
}

/// `username` and `retention` (seconds, 0 for infinite) from the options, with their defaults.
fn onboard_options(options: &Map) -> VerbResult<(String, u64)> {
    let mut username = "opsbook".to_string();
    let mut retention = 0;
    for (k, v) in options {
        match k.as_str() {
            "username" => username = text(v),
            "retention" => retention = crate::verbs::time::duration_arg(v)?.as_secs(),
            other => {
                return Err(fail(format!("influx::onboard: unknown option `{other}` (username, retention)")));
            }
        }
    }
    if username.trim().is_empty() {
        return Err(fail("influx::onboard: `username` is empty"));
    }
    Ok((username, retention))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_have_defaults_and_unknown_ones_are_refused() {
        assert_eq!(onboard_options(&Map::new()).unwrap(), ("opsbook".to_string(), 0));
        let mut given = Map::new();
        given.insert("retention".into(), "30d".into());
        assert_eq!(onboard_options(&given).unwrap(), ("opsbook".to_string(), 30 * 86_400));
        given.insert("retentoin".into(), "1d".into());
        assert_eq!(
            onboard_options(&given).unwrap_err().to_string(),
            "Runtime error: influx::onboard: unknown option `retentoin` (username, retention)"
        );
    }
}
