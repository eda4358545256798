//! Time: `sleep`, `duration` and the parsing of duration arguments that every module shares
//! (`"5s"`, `"1m 30s"`, `"250ms"`, or a number of seconds).

use std::time::{Duration, Instant};

use rhai::{Dynamic, ImmutableString, Module, NativeCallContext};

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use crate::register;

/// These functions as global ones (no namespace).
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "sleep",
        Reads,
        ["duration: ?", "()"],
        "/// Waits for a duration (`\"5s\"`, `\"1m\"`, or seconds as a number). Ctrl-C ends it.\n\
         /// Prefer `wait::until` where you wait for something to become true.",
        "sleep(\"100ms\")",
        |call: NativeCallContext, d: Dynamic| -> VerbResult<()> { sleep(&context(&call), duration_arg(&d)?) }
    );
    register!(
        &mut m,
        "duration",
        Reads,
        ["text: ?", "f64"],
        "/// A duration in seconds, from `\"5s\"`, `\"1m 30s\"`, `\"250ms\"` or a number.",
        "duration(\"1m30s\")",
        |d: Dynamic| -> VerbResult<f64> { Ok(duration_arg(&d)?.as_secs_f64()) }
    );
    m
}

/// Sleeps on the runtime, with a progress line for waits of two seconds and more.
pub(crate) fn sleep(cx: &Context, total: Duration) -> VerbResult<()> {
    let started = Instant::now();
    let result = cx.block_on(|| async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let end = tokio::time::Instant::now() + total;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(end) => break,
                _ = tick.tick() => if total >= Duration::from_secs(2) {
                    opsbook_base::show_progress("sleeping", started.elapsed(), total);
                },
            }
        }
    });
    opsbook_base::clear_progress();
    result
}

/// A duration argument: text parsed like the config's durations, or seconds as a number.
/// A duration that must be more than zero: a time limit, an interval or a window (`what`
/// names it in the refusal: `timeout`). Zero of these is refused, not obeyed.
pub(crate) fn positive_duration_arg(value: &Dynamic, what: &str) -> VerbResult<Duration> {
    let d = duration_arg(value)?;
    if d.is_zero() {
        return Err(fail(format!("`{what}` is {}: it must be more than zero", super::values::text(value))));
    }
    Ok(d)
}

pub(crate) fn duration_arg(value: &Dynamic) -> VerbResult<Duration> {
    let bad = |shown: String| fail(format!("`{shown}` is not a duration (try \"5s\", \"2m\" or a number of seconds)"));
    if let Some(s) = value.read_lock::<ImmutableString>() {
        return opsbook_base::config::parse_duration(&s).ok_or_else(|| bad(s.to_string()));
    }
    let secs = if let Ok(i) = value.as_int() {
        i as f64
    } else if let Ok(f) = value.as_float() {
        f
    } else {
        return Err(bad(value.to_string()));
    };
    if secs.is_finite() && secs >= 0.0 { Ok(Duration::from_secs_f64(secs)) } else { Err(bad(value.to_string())) }
}
