//! `telegraf::` — the metrics agent: its configuration test, run with the flags its unit really
//! uses (`telegraf -config … -config-directory … --test` gathers once and prints each metric
//! as `> ` + line protocol without sending anything; telegraf/unit.rs reads the flags), the
//! errors of the log file its configuration may send its log to, and a reload watched until
//! it settled (telegraf/log.rs). Checked against Telegraf v1.32.0 and v1.39.3.

pub(crate) mod log;
pub(crate) mod unit;

use std::collections::BTreeMap;

use rhai::{Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::VerbResult;
use super::tools::{command, run_tool};
use super::values::record;
use crate::register;
use opsbook_base::config::keys;
use opsbook_wire::line_protocol::{self as lineproto, FieldValue};

/// The `telegraf::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "config_test",
        Reads,
        ["Map"],
        "/// Runs the agent's configuration test with the configuration its unit loads: the unit's\n\
         /// program and its `-config`/`-config-directory` flags from ExecStart (`$TELEGRAF_OPTS`\n\
         /// from /etc/default/telegraf), so a broken file in telegraf.d fails it; without a unit,\n\
         /// `metrics_agent.exec`'s flags. `metrics_agent.test_command`, when set, is run instead.\n\
         /// Parses the line protocol it prints: `#{ok, detail, points, measurements, records,\n\
         /// errors, command}`. `records` are `#{measurement, tags, fields, timestamp}`; which\n\
         /// measurements must be there is the runbook's decision. Throws when it cannot be run.",
        "telegraf::config_test().ok",
        |call: NativeCallContext| config_test(&context(&call))
    );
    register!(
        &mut m,
        "logfile_errors",
        Reads,
        ["since: &str", "Map"],
        "/// Where the agent logs, from its configuration (`[agent] logfile`, in the files its unit\n\
         /// loads), and when it is a file, that file's error lines since `since` in the unit's\n\
         /// current run, read over the host's connection: `#{logs_to, path, looked, read, errors,\n\
         /// detail}`. `logs_to` is `journal` (nothing to read here), `file` or `unknown`; `looked`\n\
         /// false says why in `detail`. `errors` are `#{time, message, after_start}`.",
        "telegraf::logfile_errors(\"1 hour ago\")",
        |call: NativeCallContext, since: &str| self::log::logfile_errors(&context(&call), since)
    );
    register!(
        &mut m,
        "watch_reload",
        Reads,
        ["options: Map", "Map"],
        "/// After a reload signal: waits until the agent logged `I! Reloading Telegraf config` and\n\
         /// its start lines again (journal, or its log file), then checks its main PID `pid` still\n\
         /// runs `units.settle` later. Options `#{pid, since, timeout: \"30s\"}`: the main PID and\n\
         /// a time (`now()`) taken before the signal. Returns a check record `#{ok, detail, pid,\n\
         /// reloaded, lines}`; a process that exits fails it, quoting its last lines.",
        "telegraf::watch_reload(#{ pid: unit::status(config.metrics_agent.unit).main_pid, since: \"1 min ago\", timeout: \"1s\" })",
        |call: NativeCallContext, options: Map| self::log::watch_reload(&context(&call), &options)
    );
    register!(
        &mut m,
        "timing",
        Reads,
        ["Map"],
        "/// The agent's own clock, from the `[agent]` table of the files its unit loads: `#{interval,\n\
         /// flush_interval, collection_jitter, flush_jitter}` in seconds (Telegraf's defaults 10, 10,\n\
         /// 0, 0 where a file sets none) and `files`, the files read. How long a point made after a\n\
         /// change takes to reach the database is the runbook's arithmetic over these.",
        "telegraf::timing().flush_interval",
        |call: NativeCallContext| timing(&context(&call))
    );
    m
}

/// The agent's collection and flush timing, as `telegraf::timing` returns it.
#[derive(Serialize)]
struct Timing {
    interval: f64,
    flush_interval: f64,
    collection_jitter: f64,
    flush_jitter: f64,
    files: Vec<String>,
}

fn timing(cx: &Context) -> VerbResult<Map> {
    let command = self::unit::agent_command(cx)?;
    let target = self::unit::log_target(cx, &command)?.map_err(super::result::fail)?;
    let seconds = |key: &str, default: f64| -> VerbResult<f64> {
        let Some(text) = target.agent.get(key) else { return Ok(default) };
        opsbook_base::config::parse_duration(text).map(|d| d.as_secs_f64()).ok_or_else(|| {
            super::result::fail(format!(
                "the agent's [agent] {key} = \"{text}\" is not a duration (in {})",
                target.read.join(", ")
            ))
        })
    };
    record(&Timing {
        interval: seconds("interval", 10.0)?,
        flush_interval: seconds("flush_interval", 10.0)?,
        collection_jitter: seconds("collection_jitter", 0.0)?,
        flush_jitter: seconds("flush_jitter", 0.0)?,
        files: target.read.clone(),
    })
}

/// One metric the test printed.
#[derive(Serialize)]
struct Point {
    measurement: String,
    tags: BTreeMap<String, String>,
    fields: BTreeMap<String, Field>,
    timestamp: Option<i64>,
}

/// A field value as line protocol typed it.
#[derive(Serialize)]
#[serde(untagged)]
enum Field {
    Float(f64),
    Int(i64),
    Bool(bool),
    Str(String),
}

fn field(v: &FieldValue) -> Field {
    match v {
        FieldValue::Float(f) => Field::Float(*f),
        FieldValue::Int(i) => Field::Int(*i),
        // Rhai's integers are i64: a larger unsigned value is kept as a float.
        FieldValue::UInt(u) => i64::try_from(*u).map(Field::Int).unwrap_or(Field::Float(*u as f64)),
        FieldValue::Bool(b) => Field::Bool(*b),
        FieldValue::Str(s) => Field::Str(s.clone()),
    }
}

/// What the configuration test printed. Which measurements must be there is the runbook's
/// decision (stdlib/verify.rhai), not this function's.
#[derive(Serialize)]
struct ConfigTest {
    /// Exit 0, at least one metric, every output line parsed and no `E!` line.
    ok: bool,
    detail: String,
    points: usize,
    /// The measurements printed, in order of first appearance.
    measurements: Vec<String>,
    records: Vec<Point>,
    /// The tool's `E!` lines and the output lines that are not line protocol.
    errors: Vec<String>,
    /// The command run.
    command: Vec<String>,
}

fn config_test(cx: &Context) -> VerbResult<Map> {
    let path = cx.config().text(keys::METRICS_AGENT_CONFIG);
    let argv = match cx.config().command(keys::METRICS_AGENT_TEST_COMMAND) {
        Some(_) => command(cx, keys::METRICS_AGENT_TEST_COMMAND, &[], &path),
        None => self::unit::agent_command(cx)?.argv(&["--test"]),
    };
    let done = run_tool(cx, argv.clone(), keys::METRICS_AGENT_TEST_COMMAND)?;
    let mut records = Vec::new();
    let mut measurements: Vec<String> = Vec::new();
    let mut parse_errors = Vec::new();
    for (i, line) in done.stdout.lines().enumerate() {
        let Some(lp) = line.strip_prefix("> ") else { continue };
        match lineproto::parse(lp) {
            Ok(points) => {
                for p in points {
                    if !measurements.contains(&p.measurement) {
                        measurements.push(p.measurement.clone());
                    }
                    records.push(Point {
                        tags: p.tags.iter().cloned().collect(),
                        fields: p.fields.iter().map(|(k, v)| (k.clone(), field(v))).collect(),
                        measurement: p.measurement,
                        timestamp: p.timestamp,
                    });
                }
            }
            Err(e) => parse_errors.push(format!("output line {}: {}", i + 1, e.message)),
        }
    }
    // Telegraf prefixes its own errors with `E!`.
    let errors: Vec<String> = done
        .stderr
        .lines()
        .chain(done.stdout.lines())
        .filter(|l| l.contains(" E! ") || l.starts_with("E! "))
        .map(str::to_string)
        .collect();
    let ok = done.code == Some(0) && !records.is_empty() && parse_errors.is_empty() && errors.is_empty();
    let detail = if done.timed_out {
        format!("the configuration test did not finish: {}", done.stderr)
    } else if ok {
        format!("{} points from {}", records.len(), measurements.join(", "))
    } else if done.code != Some(0) {
        done.failure()
    } else if !parse_errors.is_empty() {
        format!("unparsable line protocol: {}", parse_errors.join("; "))
    } else if !errors.is_empty() {
        format!("errors: {}", errors.join(" | "))
    } else {
        "the test printed no metrics".to_string()
    };
    let errors = errors.into_iter().chain(parse_errors).collect();
    record(&ConfigTest { ok, detail, points: records.len(), measurements, records, errors, command: argv })
}
