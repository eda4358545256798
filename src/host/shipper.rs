//! `shipper::` — the log shipper's offline validation (`alloy validate PATH`) and its
//! experimental live reload (`POST /-/reload` on its local endpoint).

use std::sync::Arc;

use rhai::{Array, Dynamic, Map, Module};

use super::http::probe_result;
use super::tools::{command, run_tool, tail};
use super::{Host, HostResult};
use crate::http_client::Request;
use crate::register;

pub fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "validate",
        ["Map"],
        "/// Validates the shipper's configuration offline (`log_shipper.validate_command`, by default\n\
         /// `alloy validate {config}`): `#{ok, detail, errors}`, `errors` its diagnostics. Throws\n\
         /// when the tool cannot be run.",
        move || validate(&h)
    );
    let h = host.clone();
    register!(
        &mut m,
        "reload",
        ["Map"],
        "/// Asks the running shipper to reload (POST /-/reload), never throws: `#{ok, status,\n\
         /// detail}`. Reload is experimental: on failure, restart the unit instead.",
        move || reload(&h)
    );
    m
}

fn validate(host: &Host) -> HostResult<Map> {
    let path = host.config.text("log_shipper.config");
    let argv = command(host, "log_shipper.validate_command", &["alloy", "validate", "{config}"], &path);
    let done = run_tool(host, argv, "log_shipper.validate_command")?;
    let ok = done.code == Some(0) && !done.timed_out;
    let errors: Array = if ok {
        Array::new()
    } else {
        done.stderr
            .lines()
            .chain(done.stdout.lines())
            .filter(|l| !l.trim().is_empty())
            .map(|l| Dynamic::from(l.to_string()))
            .collect()
    };
    let detail = if ok {
        format!("{path} is valid")
    } else if done.timed_out {
        format!("validation did not finish: {}", done.stderr)
    } else {
        format!("{path} is invalid: {}", tail(&format!("{}\n{}", done.stdout, done.stderr), 4))
    };
    let mut m = Map::new();
    m.insert("ok".into(), ok.into());
    m.insert("detail".into(), detail.into());
    m.insert("errors".into(), errors.into());
    Ok(m)
}

fn reload(host: &Host) -> HostResult<Map> {
    let url = format!("{}/-/reload", host.config.text("log_shipper.url").trim_end_matches('/'));
    if host.plan(&format!("POST {url}")) {
        return Ok(probe_result(true, None, "dry run", None));
    }
    Ok(match host.send(Request::new(reqwest::Method::POST, &url))? {
        Err(reason) => probe_result(false, None, reason, None),
        Ok(r) if r.status == 200 => probe_result(true, Some(200), crate::wire::excerpt(&r.body, 120), Some(r.elapsed)),
        Ok(r) => probe_result(false, Some(r.status), r.summary(), Some(r.elapsed)),
    })
}
