//! `agent::` — the metrics agent's configuration test: `telegraf --config PATH --test`
//! gathers once and prints each metric as `> ` + line protocol without sending anything;
//! the output is parsed, and the result says what was collected.

use std::sync::Arc;

use rhai::{Array, Dynamic, Map, Module};

use super::tools::{command, run_tool, tail};
use super::{Host, HostResult};
use crate::config::keys;
use crate::register;
use crate::wire::line_protocol::{self as lineproto, FieldValue};

pub fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "config_test",
        ["Map"],
        "/// Runs the agent's configuration test (`metrics_agent.test_command`, by default\n\
         /// `telegraf --config {config} --test`) and parses the line protocol it prints:\n\
         /// `#{ok, detail, points, measurements, cpu, mem, disk, records, errors}`. `records` are\n\
         /// `#{measurement, tags, fields, timestamp}`. Throws when the tool cannot be run.",
        move || config_test(&h)
    );
    m
}

fn field(v: &FieldValue) -> Dynamic {
    match v {
        FieldValue::Float(f) => (*f).into(),
        FieldValue::Int(i) => (*i).into(),
        FieldValue::UInt(u) => i64::try_from(*u).map(Dynamic::from).unwrap_or_else(|_| Dynamic::from(*u as f64)),
        FieldValue::Bool(b) => (*b).into(),
        FieldValue::Str(s) => s.clone().into(),
    }
}

fn config_test(host: &Host) -> HostResult<Map> {
    let path = host.config.text(keys::METRICS_AGENT_CONFIG);
    let argv = command(host, keys::METRICS_AGENT_TEST_COMMAND, &["telegraf", "--config", "{config}", "--test"], &path);
    let done = run_tool(host, argv, keys::METRICS_AGENT_TEST_COMMAND)?;
    let mut records = Array::new();
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
                    let tags: Map = p.tags.iter().map(|(k, v)| (k.into(), v.clone().into())).collect();
                    let fields: Map = p.fields.iter().map(|(k, v)| (k.into(), field(v))).collect();
                    let mut r = Map::new();
                    r.insert("measurement".into(), p.measurement.into());
                    r.insert("tags".into(), tags.into());
                    r.insert("fields".into(), fields.into());
                    r.insert("timestamp".into(), p.timestamp.map_or(Dynamic::UNIT, Dynamic::from));
                    records.push(r.into());
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
    let mut m = Map::new();
    m.insert("ok".into(), ok.into());
    m.insert("detail".into(), detail.into());
    m.insert("points".into(), (records.len() as i64).into());
    for name in ["cpu", "mem", "disk"] {
        m.insert(name.into(), measurements.iter().any(|x| x == name).into());
    }
    m.insert("measurements".into(), measurements.into_iter().map(Dynamic::from).collect::<Array>().into());
    m.insert("records".into(), records.into());
    m.insert("errors".into(), errors.into_iter().chain(parse_errors).map(Dynamic::from).collect::<Array>().into());
    Ok(m)
}
