//! `alloy::` — the log shipper's offline validation (`alloy validate PATH`) and its
//! experimental live reload (`POST /-/reload` on its local endpoint), and its own clock
//! (`batch_wait`, the first retry's back-off) read from its configuration.

use rhai::{Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::VerbResult;
use super::tools::{command, run_tool, tail};
use super::values::{Probe, record};
use crate::register;
use opsbook_base::config::keys;
use opsbook_world::Request;

/// The `alloy::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "validate",
        Reads,
        ["Map"],
        "/// Validates the shipper's configuration offline (`log_shipper.validate_command`, by default\n\
         /// `alloy validate {config}`): `#{ok, detail, errors}`, `errors` its diagnostics. Throws\n\
         /// when the tool cannot be run.",
        "alloy::validate().ok",
        |call: NativeCallContext| validate(&context(&call))
    );
    register!(
        &mut m,
        "reload",
        Changes,
        ["Map"],
        "/// Asks the running shipper to reload (POST /-/reload), never throws: `#{ok, status,\n\
         /// detail, elapsed_ms}`. Reload is experimental: on failure, restart the unit instead.",
        "alloy::reload()",
        |call: NativeCallContext| reload(&context(&call))
    );
    register!(
        &mut m,
        "timing",
        Reads,
        ["Map"],
        "/// The shipper's own clock from its configuration file: `#{batch_wait, min_backoff, file,\n\
         /// set}` in seconds (Alloy's defaults 1 and 0.5 where the file sets none; `set` says whether\n\
         /// it sets `batch_wait`). How long a line takes to reach the log store is the runbook's\n\
         /// arithmetic over these.",
        "alloy::timing().batch_wait",
        |call: NativeCallContext| timing(&context(&call))
    );
    m
}

/// The outcome of the offline validation.
#[derive(Serialize)]
struct Validation {
    ok: bool,
    detail: String,
    /// One `file:line:col: message` per problem the validator named.
    errors: Vec<String>,
}

fn validate(cx: &Context) -> VerbResult<Map> {
    let path = cx.config().text(keys::LOG_SHIPPER_CONFIG);
    let default = opsbook_base::components::default_check(keys::LOG_SHIPPER_VALIDATE_COMMAND.name);
    let argv = command(cx, keys::LOG_SHIPPER_VALIDATE_COMMAND, default, &path);
    let done = run_tool(cx, argv, keys::LOG_SHIPPER_VALIDATE_COMMAND)?;
    let ok = done.code == Some(0) && !done.timed_out;
    let errors = if ok { Vec::new() } else { diagnostics(&format!("{}\n{}", done.stderr, done.stdout)) };
    let detail = if ok {
        format!("{path} is valid")
    } else if done.timed_out {
        format!("validation did not finish: {}", done.stderr)
    } else {
        format!("{path} is invalid: {}", tail(&format!("{}\n{}", done.stdout, done.stderr), 4))
    };
    record(&Validation { ok, detail, errors })
}

/// One `file:line:col: message` per problem from a validator's output: Alloy prints
/// `Error: file:line:col: message` and a source excerpt; rustc-style tools print `error: message`
/// then ` --> file:line:col`. Excerpts and summaries are dropped; output in neither shape is
/// kept line by line, so nothing the tool said is lost.
fn diagnostics(output: &str) -> Vec<String> {
    let mut found: Vec<(String, bool)> = Vec::new(); // (text, has a location)
    for line in output.lines().map(str::trim) {
        let lower = line.to_ascii_lowercase();
        if let Some(rest) = lower.starts_with("error:").then(|| line["error:".len()..].trim()) {
            if rest.contains(" is invalid (") {
                continue; // the summary line
            }
            let located = rest.split(':').nth(2).is_some_and(|c| c.trim().parse::<u32>().is_ok());
            found.push((rest.to_string(), located));
        } else if let Some(at) = line.strip_prefix("-->")
            && let Some((text, located)) = found.last_mut()
            && !*located
        {
            *text = format!("{}: {text}", at.trim());
            *located = true;
        }
    }
    if found.is_empty() {
        return output.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
    }
    found.into_iter().map(|(text, _)| text).collect()
}

/// The shipper's own clock, as `alloy::timing` returns it.
#[derive(Serialize)]
struct Timing {
    /// Seconds a batch waits after its first entry before it is sent (the largest of its
    /// endpoints'; Alloy's default 1 s).
    batch_wait: f64,
    /// Seconds before the first retry of a failed push (Alloy's `min_backoff_period`, 0.5 s).
    min_backoff: f64,
    /// The file read, and whether it sets `batch_wait` itself.
    file: String,
    set: bool,
}

/// `batch_wait` and `min_backoff_period` (`min_backoff` in the twin's TOML) from the
/// configuration file: every `KEY = "DURATION"` line, the largest winning.
fn timing(cx: &Context) -> VerbResult<Map> {
    let path = cx.config().text(keys::LOG_SHIPPER_CONFIG);
    let files = cx.world().files.clone();
    let asked = path.clone();
    let text = match cx.block_on(|| async move { files.read(&asked).await })? {
        Ok(Some((text, _))) => text,
        Ok(None) => return Err(super::result::fail(format!("the shipper's configuration {path} is not there"))),
        Err(e) => return Err(super::result::fail(format!("cannot read the shipper's configuration {path}: {e}"))),
    };
    let largest = |keys: &[&str]| -> Option<f64> {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .filter(|(k, _)| keys.contains(&k.trim()))
            .filter_map(|(_, v)| {
                opsbook_base::config::parse_duration(v.split("//").next()?.split('#').next()?.trim().trim_matches('"'))
            })
            .map(|d| d.as_secs_f64())
            .reduce(f64::max)
    };
    let batch_wait = largest(&["batch_wait"]);
    record(&Timing {
        batch_wait: batch_wait.unwrap_or(1.0),
        min_backoff: largest(&["min_backoff_period", "min_backoff"]).unwrap_or(0.5),
        file: path,
        set: batch_wait.is_some(),
    })
}

fn reload(cx: &Context) -> VerbResult<Map> {
    let url = format!("{}/-/reload", cx.config().text(keys::LOG_SHIPPER_URL).trim_end_matches('/'));
    if cx.plan(&format!("POST {url}")) {
        return Probe::new(true, None, "dry run", None).into_map();
    }
    match cx.send(Request::new(reqwest::Method::POST, &url))? {
        Err(reason) => Probe::unanswered(reason),
        Ok(r) if r.status == 200 => Probe::new(true, Some(200), opsbook_wire::excerpt(&r.body, 120), Some(r.elapsed)),
        Ok(r) => Probe::new(false, Some(r.status), r.summary(), Some(r.elapsed)),
    }
    .into_map()
}

#[cfg(test)]
mod tests {
    use super::diagnostics;

    #[test]
    fn validator_output_becomes_one_line_per_problem() {
        let alloy = "Error: /etc/alloy/config.alloy:3:3: unrecognized attribute name \"batchwait\"\n\n2 | loki.write \"default\" {\n3 |   batchwait = \"1s\"\n  |   ^^^^^^^^^\n4 | }\n";
        assert_eq!(diagnostics(alloy), ["/etc/alloy/config.alloy:3:3: unrecognized attribute name \"batchwait\""]);
        let twin = "error: unknown key `batchwait` in [write]; did you mean `batch_wait`?\n --> /x/alloy.toml:3:1\n  |\n3 | batchwait = \"1s\"\n  | ^\nError: /x/alloy.toml is invalid (1 problem)\n";
        assert_eq!(
            diagnostics(twin),
            ["/x/alloy.toml:3:1: unknown key `batchwait` in [write]; did you mean `batch_wait`?"]
        );
        assert_eq!(diagnostics("panic: something odd\n\n  at main.go:1\n"), ["panic: something odd", "  at main.go:1"]);
    }
}
