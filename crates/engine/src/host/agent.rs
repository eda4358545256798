//! `agent::` — the metrics agent's configuration test: `telegraf --config PATH --test`
//! gathers once and prints each metric as `> ` + line protocol without sending anything;
//! the output is parsed, and the result says what was collected.

use std::sync::Arc;

use std::collections::BTreeMap;

use rhai::{Engine, Map, Module};
use serde::Serialize;

use super::tools::{command, run_tool, tail};
use super::values::record;
use super::{Host, HostResult};
use crate::config::keys;
use crate::register;
use crate::wire::line_protocol::{self as lineproto, FieldValue};

/// Registers the `agent::` namespace.
pub(crate) fn register(engine: &mut Engine, host: &Arc<Host>) {
    engine.register_static_module("agent", module(host).into());
}

fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "config_test",
        Reads,
        ["Map"],
        "/// Runs the agent's configuration test (`metrics_agent.test_command`, by default\n\
         /// `telegraf --config {config} --test`) and parses the line protocol it prints:\n\
         /// `#{ok, detail, points, measurements, records, errors}`. `records` are\n\
         /// `#{measurement, tags, fields, timestamp}`; which measurements must be there is the\n\
         /// runbook's decision. Throws when the tool cannot be run.",
        "agent::config_test().ok",
        move || config_test(&h)
    );
    m
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
}

fn config_test(host: &Host) -> HostResult<Map> {
    let path = host.config().text(keys::METRICS_AGENT_CONFIG);
    let argv = command(host, keys::METRICS_AGENT_TEST_COMMAND, &["telegraf", "--config", "{config}", "--test"], &path);
    let done = run_tool(host, argv, keys::METRICS_AGENT_TEST_COMMAND)?;
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
        format!("exit status {}: {}", done.code.map_or("signal".into(), |c| c.to_string()), tail(&done.stderr, 3))
    } else if !parse_errors.is_empty() {
        format!("unparsable line protocol: {}", parse_errors.join("; "))
    } else if !errors.is_empty() {
        format!("errors: {}", errors.join(" | "))
    } else {
        "the test printed no metrics".to_string()
    };
    let errors = errors.into_iter().chain(parse_errors).collect();
    record(&ConfigTest { ok, detail, points: records.len(), measurements, records, errors })
}
