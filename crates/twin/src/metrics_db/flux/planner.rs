//! Flux planning: a pipeline's calls checked and turned into stages (bucket, time range,
//! filters, aggregates, limit, group, yield), with InfluxDB's wording for what is wrong.

use super::parser::{Call, Expr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Agg {
    Count,
    Sum,
    Mean,
    Max,
    Min,
    First,
    Last,
}

#[derive(Debug, Clone)]
pub(super) enum Stage {
    Filter { body: Expr, keep_empty: bool },
    Agg(Agg),
    Limit { n: usize, offset: usize },
    Group { columns: Vec<String>, except: bool },
    Yield(String),
}

/// One pipeline, checked: its bucket, time range and stages.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) bucket: String,
    pub(super) start: i64,
    pub(super) stop: i64,
    pub(super) stages: Vec<Stage>,
}

pub(super) fn call_error(c: &Call, msg: &str) -> String {
    format!("error at @{}:{}: {msg}", c.line, c.col)
}

pub(super) fn arg<'a>(c: &'a Call, name: &str) -> Option<&'a Expr> {
    c.args.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

pub(super) fn only_args(c: &Call, allowed: &[&str]) -> Result<(), String> {
    match c.args.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
        Some((k, _)) => Err(call_error(c, &format!("unsupported by the twin: parameter `{k}` of {}()", c.name))),
        None => Ok(()),
    }
}

pub(super) fn time_arg(c: &Call, e: &Expr, now: i64) -> Result<i64, String> {
    match e {
        Expr::Dur(d) => Ok(now + d),
        Expr::Time(t) => Ok(*t),
        Expr::Now => Ok(now),
        // Flux takes integers as Unix seconds here.
        Expr::Int(s) => Ok(s.saturating_mul(1_000_000_000)),
        _ => Err(call_error(c, "range() start and stop must be a duration, a time or now()")),
    }
}

pub(super) fn plan(calls: Vec<Call>, now: i64) -> Result<Plan, String> {
    let first = &calls[0];
    if first.name != "from" {
        return Err(call_error(
            first,
            &format!("unsupported by the twin: a pipeline starting with {}() (start with from(bucket: …))", first.name),
        ));
    }
    only_args(first, &["bucket"])?;
    let bucket = match arg(first, "bucket") {
        Some(Expr::Str(b)) => b.clone(),
        _ => return Err(call_error(first, "from() needs bucket: \"name\" (bucketID is not supported by the twin)")),
    };
    let mut range = None;
    let mut stages = Vec::new();
    for c in &calls[1..] {
        match c.name.as_str() {
            "range" => {
                only_args(c, &["start", "stop"])?;
                if range.is_some() {
                    return Err(call_error(c, "unsupported by the twin: a second range()"));
                }
                if stages.iter().any(|s| !matches!(s, Stage::Filter { .. })) {
                    return Err(call_error(c, "unsupported by the twin: range() after an aggregate, limit or group"));
                }
                let start = arg(c, "start").ok_or_else(|| call_error(c, "missing required argument start"))?;
                let start = time_arg(c, start, now)?;
                let stop = arg(c, "stop").map(|s| time_arg(c, s, now)).transpose()?.unwrap_or(now);
                range = Some((start, stop));
            }
            "filter" => stages.push(filter_stage(c)?),
            name @ ("count" | "sum" | "mean" | "max" | "min" | "first" | "last") => stages.push(agg_stage(c, name)?),
            "limit" => stages.push(limit_stage(c)?),
            "group" => stages.push(group_stage(c)?),
            "yield" => stages.push(yield_stage(c)?),
            "from" => return Err(call_error(c, "from() must start a pipeline")),
            other => {
                return Err(call_error(
                    c,
                    &format!(
                        "unsupported by the twin: function {other}() (supported: from, range, filter, count, sum, mean, \
                         max, min, first, last, limit, group, yield)"
                    ),
                ));
            }
        }
    }
    let Some((start, stop)) = range else {
        return Err(format!(
            "error in building plan while starting program: cannot submit unbounded read to \"{bucket}\"; try bounding 'from' with a call to 'range'"
        ));
    };
    Ok(Plan { bucket, start, stop, stages })
}

fn filter_stage(c: &Call) -> Result<Stage, String> {
    only_args(c, &["fn", "onEmpty"])?;
    let Some(Expr::Func { param, body }) = arg(c, "fn") else {
        return Err(call_error(c, "filter() needs fn: (r) => …"));
    };
    let keep_empty = match arg(c, "onEmpty") {
        None => false,
        Some(Expr::Str(s)) if s == "drop" => false,
        Some(Expr::Str(s)) if s == "keep" => true,
        Some(_) => return Err(call_error(c, "onEmpty must be \"keep\" or \"drop\"")),
    };
    check_fn_body(c, param, body)?;
    Ok(Stage::Filter { body: (**body).clone(), keep_empty })
}

fn agg_stage(c: &Call, name: &str) -> Result<Stage, String> {
    only_args(c, &["column"])?;
    match arg(c, "column") {
        None => {}
        Some(Expr::Str(col)) if col == "_value" => {}
        Some(_) => {
            return Err(call_error(c, &format!("unsupported by the twin: {name}() on a column other than _value")));
        }
    }
    Ok(Stage::Agg(match name {
        "count" => Agg::Count,
        "sum" => Agg::Sum,
        "mean" => Agg::Mean,
        "max" => Agg::Max,
        "min" => Agg::Min,
        "first" => Agg::First,
        _ => Agg::Last,
    }))
}

fn limit_stage(c: &Call) -> Result<Stage, String> {
    only_args(c, &["n", "offset"])?;
    let n = match arg(c, "n") {
        Some(Expr::Int(n)) if *n >= 0 => *n as usize,
        _ => return Err(call_error(c, "limit() needs n: a non-negative integer")),
    };
    let offset = match arg(c, "offset") {
        None => 0,
        Some(Expr::Int(o)) if *o >= 0 => *o as usize,
        _ => return Err(call_error(c, "limit() offset must be a non-negative integer")),
    };
    Ok(Stage::Limit { n, offset })
}

fn group_stage(c: &Call) -> Result<Stage, String> {
    only_args(c, &["columns", "mode"])?;
    let columns = match arg(c, "columns") {
        None => Vec::new(),
        Some(Expr::Array(items)) => items
            .iter()
            .map(|i| match i {
                Expr::Str(s) => Ok(s.clone()),
                _ => Err(call_error(c, "group() columns must be strings")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(call_error(c, "group() columns must be an array of strings")),
    };
    let except = match arg(c, "mode") {
        None => false,
        Some(Expr::Str(m)) if m == "by" => false,
        Some(Expr::Str(m)) if m == "except" => true,
        Some(_) => return Err(call_error(c, "group() mode must be \"by\" or \"except\"")),
    };
    Ok(Stage::Group { columns, except })
}

fn yield_stage(c: &Call) -> Result<Stage, String> {
    only_args(c, &["name"])?;
    let name = match arg(c, "name") {
        None => "_result".to_string(),
        Some(Expr::Str(n)) => n.clone(),
        Some(_) => return Err(call_error(c, "yield() name must be a string")),
    };
    Ok(Stage::Yield(name))
}

/// Filter bodies may only read the function's record parameter.
pub(super) fn check_fn_body(c: &Call, param: &str, e: &Expr) -> Result<(), String> {
    match e {
        Expr::Column { record, .. } if record != param => {
            Err(call_error(c, &format!("undefined identifier {record} (the function's parameter is {param})")))
        }
        Expr::Cmp(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            check_fn_body(c, param, a)?;
            check_fn_body(c, param, b)
        }
        Expr::Not(a) | Expr::Exists(a) => check_fn_body(c, param, a),
        Expr::Ident(name) => Err(call_error(c, &format!("undefined identifier {name}"))),
        Expr::Func { .. } | Expr::Array(_) => {
            Err(call_error(c, "unsupported by the twin: this expression in a filter"))
        }
        _ => Ok(()),
    }
}
