//! `wait::until`: polling with a deadline, in place of blind waits.

use std::time::{Duration, Instant};

use rhai::{Dynamic, EvalAltResult, FnPtr, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::time::positive_duration_arg;
use super::values::record;
use crate::register;

/// The `wait::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "until",
        Reads,
        ["condition: FnPtr", "options: ?", "Map"],
        "/// Calls `condition` until it returns true (or a map whose `ok` is true), or the deadline\n\
         /// passes. `options` is a deadline (`\"60s\"`) or `#{timeout: \"60s\", every: \"500ms\"}`.\n\
         /// Returns `#{ok, waited, attempts, last}`: `waited` in seconds, `last` the final value\n\
         /// the condition returned (or the error it raised). Never throws on timeout.",
        "wait::until(|| loki::ready().ok, #{ timeout: \"60s\", every: \"1s\" })",
        |ctx: NativeCallContext, condition: FnPtr, options: Dynamic| until(&context(&ctx), &ctx, &condition, &options)
    );
    m
}

struct Options {
    timeout: Duration,
    every: Duration,
}

fn options(value: &Dynamic) -> VerbResult<Options> {
    let mut o = Options { timeout: Duration::from_secs(60), every: Duration::from_millis(250) };
    if let Some(map) = value.read_lock::<Map>() {
        for (k, v) in map.iter() {
            match k.as_str() {
                "timeout" => o.timeout = positive_duration_arg(v, "timeout")?,
                "every" => o.every = positive_duration_arg(v, "every")?,
                other => return Err(fail(format!("wait::until: unknown option `{other}` (timeout, every)"))),
            }
        }
    } else if !value.is_unit() {
        o.timeout = positive_duration_arg(value, "timeout")?;
    }
    o.every = o.every.max(Duration::from_millis(10));
    Ok(o)
}

/// Whether a condition's value means "done".
fn truthy(value: &Dynamic) -> bool {
    if let Ok(b) = value.as_bool() {
        return b;
    }
    value.read_lock::<Map>().and_then(|m| m.get("ok").and_then(|v| v.as_bool().ok())).unwrap_or(false)
}

/// Whether the error (under any call wrappers) was raised by `throw` or a host function.
fn is_runtime(e: &EvalAltResult) -> bool {
    match e {
        EvalAltResult::ErrorInFunctionCall(.., inner, _) => is_runtime(inner),
        EvalAltResult::ErrorRuntime(..) => true,
        _ => false,
    }
}

fn innermost_message(e: &EvalAltResult) -> String {
    match e {
        EvalAltResult::ErrorInFunctionCall(.., inner, _) => innermost_message(inner),
        EvalAltResult::ErrorRuntime(value, _) => super::values::text(value),
        other => other.to_string(),
    }
}

fn until(cx: &Context, ctx: &NativeCallContext, condition: &FnPtr, options_value: &Dynamic) -> VerbResult<Map> {
    let o = options(options_value)?;
    let started = Instant::now();
    let mut attempts: i64 = 0;
    let (ok, last) = loop {
        attempts += 1;
        let last = match condition.call_within_context::<Dynamic>(ctx, ()) {
            Ok(v) => v,
            // A probe that throws is "not yet"; a broken script is not.
            Err(e) if is_runtime(&e) => Dynamic::from(innermost_message(&e)),
            Err(e) => return Err(e),
        };
        if truthy(&last) {
            break (true, last);
        }
        let elapsed = started.elapsed();
        if elapsed >= o.timeout {
            break (false, last);
        }
        opsbook_base::show_progress("waiting", elapsed, o.timeout);
        let nap = o.every.min(o.timeout - elapsed);
        let slept = cx.block_on(|| tokio::time::sleep(nap));
        if let Err(e) = slept {
            opsbook_base::clear_progress();
            return Err(e);
        }
    };
    opsbook_base::clear_progress();
    // Milliseconds are all a report needs (`waited 0.215s`, not `0.215067339s`).
    let waited = (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    let mut result = record(&Waited { ok, waited, attempts })?;
    result.insert("last".into(), last);
    Ok(result)
}

/// What a wait came to; `last` (any value the condition returned) is added beside it.
#[derive(Serialize)]
struct Waited {
    ok: bool,
    /// Seconds.
    waited: f64,
    attempts: i64,
}
