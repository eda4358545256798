//! Global functions every runbook uses: recording checks, sections and log lines, reading
//! parameters, the environment, the host name and the clock (`now`, `moment`, `age`).

use rhai::{Dynamic, Map, Module, NativeCallContext};

use super::context::context;
use super::result::{VerbResult, fail};
// Other parts of opsbook read values the way reports show them.
pub use super::values::{text, time_text};
use crate::register;
use opsbook_base::report::{Level, Outcome};

/// Environment variables scripts may not read: they hold the secret.
const SECRET_VARS: &[&str] = &["INFLUX_TOKEN"];

/// These functions as global ones (no namespace).
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    flags(&mut m);
    stopping(&mut m);
    records(&mut m);
    parameters_and_facts(&mut m);
    clock(&mut m);
    m
}

fn flags(m: &mut Module) {
    register!(
        m,
        "dry_run",
        Reads,
        ["bool"],
        "/// Whether this run only plans (`--dry-run`): mutating calls say what they would do.",
        "if dry_run() { log(\"planning only\") }",
        |call: NativeCallContext| context(&call).dry_run
    );
    register!(
        m,
        "sandbox",
        Reads,
        ["bool"],
        "/// Whether this run acts on the sandbox's simulated stack (`--sandbox`).",
        "sandbox()",
        |call: NativeCallContext| context(&call).world().sandbox
    );

    register!(
        m,
        "check",
        Reads,
        ["name: &str", "ok: bool", "bool"],
        "/// Records a check that passed when `ok` is true. Returns `ok`.",
        "check(\"loki ready\", loki::ready().ok)",
        |call: NativeCallContext, name: &str, ok: bool| {
            let h = context(&call);
            h.record(name, outcome(ok), "", None, None);
            ok
        }
    );
    register!(
        m,
        "check",
        Reads,
        ["name: &str", "ok: bool", "detail: ?", "bool"],
        "/// Records a check with a detail saying what was seen. Returns `ok`.",
        "check(\"influxdb healthy\", influx::health().ok, influx::health().detail)",
        |call: NativeCallContext, name: &str, ok: bool, detail: Dynamic| {
            let h = context(&call);
            h.record(name, outcome(ok), &text(&detail), None, None);
            ok
        }
    );
    register!(
        m,
        "check",
        Reads,
        ["name: &str", "result: Map", "bool"],
        "/// Records a check from a map `#{ok, detail, expected, actual}`; `ok` is required.\n/// Returns `ok`.",
        "check(\"loki ready\", #{ ok: true, detail: \"ready\", expected: \"200\", actual: \"200\" })",
        |call: NativeCallContext, name: &str, result: Map| -> VerbResult<bool> {
            let h = context(&call);
            let ok = result
                .get("ok")
                .and_then(|v| v.as_bool().ok())
                .ok_or_else(|| fail(format!("check `{name}`: the map needs a boolean `ok`")))?;
            let field = |k: &str| result.get(k).filter(|v| !v.is_unit()).map(text);
            h.record(name, outcome(ok), &field("detail").unwrap_or_default(), field("expected"), field("actual"));
            Ok(ok)
        }
    );
}

fn records(m: &mut Module) {
    register!(
        m,
        "warn",
        Reads,
        ["name: &str", "detail: ?", "()"],
        "/// Records a warning: worth a look, but not a failure.",
        "warn(\"disk nearly full\", \"91% used\")",
        |call: NativeCallContext, name: &str, detail: Dynamic| context(&call).record(
            name,
            Outcome::Warn,
            &text(&detail),
            None,
            None
        )
    );
    register!(
        m,
        "skip",
        Reads,
        ["name: &str", "reason: ?", "()"],
        "/// Records a check that was not run, and why.",
        "skip(\"container checks\", \"the servers run as native units\")",
        |call: NativeCallContext, name: &str, reason: Dynamic| context(&call).record(
            name,
            Outcome::Skip,
            &text(&reason),
            None,
            None
        )
    );
    register!(
        m,
        "section",
        Reads,
        ["name: &str", "()"],
        "/// Starts a group of checks; reports show the records under it.",
        "section(\"servers\")",
        |call: NativeCallContext, name: &str| context(&call).section(name)
    );
    register!(
        m,
        "log",
        Reads,
        ["message: ?", "()"],
        "/// Writes a line into the report's log (and to the screen).",
        "log(`checked ${hostname()}`)",
        |call: NativeCallContext, message: Dynamic| context(&call).log(Level::Info, &text(&message))
    );

    register!(
        m,
        "failed_checks",
        Reads,
        ["i64"],
        "/// How many checks have failed so far in this run (for a closing verdict).",
        "if failed_checks() > 0 { log(\"something failed\") }",
        |call: NativeCallContext| context(&call).failed_checks() as i64
    );
}

/// `exit(code)` and `exit()`, in place of Rhai's own (which would end the run as if it had run
/// to its end): the run stops there and reports it, with `code` as its exit status.
fn stopping(m: &mut Module) {
    register!(
        m,
        "exit",
        Reads,
        ["code: i64", "()"],
        "/// Stops the run here: the report says so, and `code` (0 to 255) is the run's exit status\n\
         /// (1 for `exit(0)` after a failed check). No `catch` stops it.",
        "if false { exit(3) }",
        |code: i64| -> VerbResult<()> {
            let code = u8::try_from(code).map_err(|_| {
                fail(format!("exit takes a whole number from 0 to 255 (the run's exit status), not {code}"))
            })?;
            Err(super::result::stop(code))
        }
    );
    register!(
        m,
        "exit",
        Reads,
        ["()"],
        "/// Stops the run here with exit status 0 (1 when a check failed). No `catch` stops it.",
        "if false { exit() }",
        || -> VerbResult<()> { Err(super::result::stop(0)) }
    );
}

fn parameters_and_facts(m: &mut Module) {
    register!(
        m,
        "param",
        Reads,
        ["name: &str", "default: ?", "?"],
        "/// A runbook parameter: the `--set name=value` given on the command line, else `default`.\n\
         /// Declare each parameter once at the top of the runbook; `opsbook show` lists them and\n\
         /// the kind of the default decides what `--set` accepts.",
        "param(\"window\", \"20s\")",
        |call: NativeCallContext, name: &str, default: Dynamic| context(&call).param_override(name).unwrap_or(default)
    );

    register!(
        m,
        "env",
        Reads,
        ["name: &str", "?"],
        "/// The environment variable `name`, or `()` when unset. Secrets (INFLUX_TOKEN) are refused.",
        "env(\"HOME\")",
        |name: &str| -> VerbResult<Dynamic> {
            if SECRET_VARS.contains(&name) {
                return Err(fail(format!(
                    "`{name}` holds a secret; scripts never see it (the influx:: functions use it for you)"
                )));
            }
            Ok(std::env::var(name).map(Dynamic::from).unwrap_or(Dynamic::UNIT))
        }
    );
    register!(
        m,
        "parse_json",
        Reads,
        ["text: &str", "?"],
        "/// Parses JSON text into maps, arrays and values (throws quoting the error).",
        "parse_json(\"{\\\"status\\\": \\\"pass\\\"}\").status",
        |text: &str| -> VerbResult<Dynamic> {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| fail(format!("not JSON ({e}): {}", opsbook_wire::excerpt(text, 160))))?;
            rhai::serde::to_dynamic(value)
        }
    );
    register!(
        m,
        "hostname",
        Reads,
        ["String"],
        "/// The host name of the machine this run acts on.",
        "hostname()",
        |call: NativeCallContext| context(&call).hostname()
    );
    register!(
        m,
        "run_id",
        Reads,
        ["String"],
        "/// This run's id (`20261128T210307Z-ab12`: when it began, UTC, and a tag), the same on\n\
         /// every host it acts on; a rollback point records it.",
        "log(`run ${run_id()}`)",
        opsbook_world::run_id
    );
    register!(
        m,
        "operator",
        Reads,
        ["String"],
        "/// Who runs this run: `user@machine` of the operator's machine (not of the host acted on).",
        "log(`by ${operator()}`)",
        opsbook_world::run_by
    );
}

/// The clock: `now()`, `moment()` (an instant in the forms a check after a change needs) and
/// `age()` (how old a piece of evidence is).
fn clock(m: &mut Module) {
    register!(
        m,
        "moment",
        Reads,
        ["Map"],
        "/// This instant, to the microsecond, in the forms a check after a change needs: `#{us,\n\
         /// journal, rfc3339, text}` — microseconds since the epoch, `@SECONDS.MICROS` (what\n\
         /// `journal::errors` and `--since` take), RFC 3339 (a Flux `range(start:)`) and `now()`'s\n\
         /// text. Evidence stamped after it was made after the change.",
        "moment().rfc3339",
        || -> VerbResult<Map> { Ok(moment(std::time::SystemTime::now())) }
    );
    register!(
        m,
        "moment",
        Reads,
        ["us: i64", "Map"],
        "/// The instant `us` microseconds after the epoch (a run's `started_us`, a moment's `us`),\n\
         /// in `moment()`'s forms.",
        "moment(moment().us).journal",
        |us: i64| -> VerbResult<Map> {
            Ok(moment(std::time::UNIX_EPOCH + std::time::Duration::from_micros(us.max(0) as u64)))
        }
    );
    register!(
        m,
        "age",
        Reads,
        ["time: ?", "f64"],
        "/// Seconds from `time` to now: an RFC 3339 text (a row's `_time`, a line's `time`) or\n\
         /// nanoseconds since the epoch (a line's `time_ns`). How old the newest evidence is.",
        "age(\"2026-11-28T00:00:00Z\")",
        |time: Dynamic| -> VerbResult<f64> {
            let now_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let ns = match time.as_int() {
                Ok(ns) => ns.max(0) as u128,
                Err(_) => {
                    let shown = text(&time);
                    let us = opsbook_wire::log_level::rfc3339_us(&shown)
                        .ok_or_else(|| fail(format!("age: `{shown}` is not an RFC 3339 time")))?;
                    u128::from(us) * 1000
                }
            };
            Ok((now_ns as f64 - ns as f64) / 1e9)
        }
    );
    register!(
        m,
        "now",
        Reads,
        ["String"],
        "/// The current time as `YYYY-MM-DD HH:MM:SS UTC`, a form `journalctl --since` accepts.",
        "journal::errors(\"loki\", now())",
        now_text
    );
}

fn outcome(ok: bool) -> Outcome {
    if ok { Outcome::Pass } else { Outcome::Fail }
}

/// `moment()`'s forms of `t`.
fn moment(t: std::time::SystemTime) -> Map {
    let us = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros()) as i64;
    let mut m = Map::new();
    m.insert("us".into(), us.into());
    m.insert("journal".into(), format!("@{}.{:06}", us / 1_000_000, us % 1_000_000).into());
    m.insert("rfc3339".into(), opsbook_wire::flux_csv::time_text(us * 1000).into());
    m.insert("text".into(), time_text(t).into());
    m
}

/// `YYYY-MM-DD HH:MM:SS UTC` for now.
pub(crate) fn now_text() -> String {
    super::values::time_text(std::time::SystemTime::now())
}
