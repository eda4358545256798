//! Flux evaluation: the stages run over tables (filter, aggregates and selectors, limit,
//! group), and filter bodies evaluated on rows with Flux's null semantics.

use std::collections::HashMap;

use super::parser::Expr;
use super::planner::Agg;
use super::table::{Body, Rows, Segment, Table, segment_constant};
use super::value::{ColType, Value, value_at};

pub(super) fn compare(a: &Value, op: &str, b: &Value) -> Option<bool> {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (a, b) {
        (Value::Null, _) | (_, Value::Null) => return None,
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Time(x), Value::Time(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (x, y) => {
            let f = |v: &Value| match v {
                Value::Float(f) => Some(*f),
                Value::Int(i) => Some(*i as f64),
                Value::UInt(u) => Some(*u as f64),
                _ => None,
            };
            f(x)?.partial_cmp(&f(y)?)
        }
    };
    let ord = ord?;
    Some(match op {
        "==" => ord == Ordering::Equal,
        "!=" => ord != Ordering::Equal,
        "<" => ord == Ordering::Less,
        "<=" => ord != Ordering::Greater,
        ">" => ord == Ordering::Greater,
        ">=" => ord != Ordering::Less,
        _ => return None,
    })
}

/// Evaluates a filter body; `None` is Flux's null (the row is dropped).
pub(super) fn eval(e: &Expr, get: &dyn Fn(&str) -> Value, now: i64) -> Option<Value> {
    Some(match e {
        Expr::Str(s) => Value::Str(s.clone()),
        Expr::Int(i) => Value::Int(*i),
        Expr::Float(f) => Value::Float(*f),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Time(t) => Value::Time(*t),
        Expr::Now => Value::Time(now),
        Expr::Dur(d) => Value::Int(*d),
        Expr::Column { name, .. } => match get(name) {
            Value::Null => return None,
            v => v,
        },
        Expr::Exists(inner) => Value::Bool(eval(inner, get, now).is_some()),
        Expr::Not(inner) => match eval(inner, get, now)? {
            Value::Bool(b) => Value::Bool(!b),
            _ => return None,
        },
        Expr::And(a, b) => {
            let x = matches!(eval(a, get, now), Some(Value::Bool(true)));
            Value::Bool(x && matches!(eval(b, get, now), Some(Value::Bool(true))))
        }
        Expr::Or(a, b) => {
            let x = matches!(eval(a, get, now), Some(Value::Bool(true)));
            Value::Bool(x || matches!(eval(b, get, now), Some(Value::Bool(true))))
        }
        Expr::Cmp(a, op @ ("=~" | "!~"), b) => {
            let Value::Str(text) = eval(a, get, now)? else { return None };
            let Expr::Regex(re) = &**b else { return None };
            Value::Bool(re.is_match(&text) == (*op == "=~"))
        }
        Expr::Cmp(a, op, b) => Value::Bool(compare(&eval(a, get, now)?, op, &eval(b, get, now)?)?),
        Expr::Regex(_) | Expr::Array(_) | Expr::Func { .. } | Expr::Ident(_) => return None,
    })
}

pub(super) fn references_row_columns(e: &Expr) -> bool {
    match e {
        Expr::Column { name, .. } => name == "_time" || name == "_value",
        Expr::Cmp(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => references_row_columns(a) || references_row_columns(b),
        Expr::Not(a) | Expr::Exists(a) => references_row_columns(a),
        _ => false,
    }
}

pub(super) fn passes(e: &Expr, get: &dyn Fn(&str) -> Value, now: i64) -> bool {
    matches!(eval(e, get, now), Some(Value::Bool(true)))
}

pub(super) fn apply_filter<'a>(tables: Vec<Table<'a>>, body: &Expr, keep_empty: bool, now: i64) -> Vec<Table<'a>> {
    let per_row = references_row_columns(body);
    let mut out = Vec::new();
    for mut t in tables {
        let (start, stop) = (t.start, t.stop);
        match &mut t.body {
            Body::Segments(segs) => {
                let mut kept = Vec::new();
                for seg in segs.drain(..) {
                    let constant = |name: &str| segment_constant(&seg, name, start, stop);
                    if !per_row {
                        if passes(body, &constant, now) {
                            kept.push(seg);
                        }
                        continue;
                    }
                    let picked: Vec<usize> = seg
                        .rows
                        .indices()
                        .filter(|&i| {
                            let get = |name: &str| match name {
                                "_time" => Value::Time(seg.series.times[i]),
                                "_value" => value_at(&seg.series.values, i),
                                other => constant(other),
                            };
                            passes(body, &get, now)
                        })
                        .collect();
                    if !picked.is_empty() {
                        kept.push(Segment { series: seg.series, rows: Rows::Picked(picked) });
                    }
                }
                *segs = kept;
            }
            Body::Rows { columns, rows } => {
                let names: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
                rows.retain(|row| {
                    let get = |name: &str| names.iter().position(|n| n == name).map_or(Value::Null, |i| row[i].clone());
                    passes(body, &get, now)
                });
            }
        }
        if keep_empty || !t.is_empty() {
            out.push(t);
        }
    }
    out
}

pub(super) fn numeric(v: &Value) -> Option<f64> {
    match v {
        Value::Float(f) => Some(*f),
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        _ => None,
    }
}

pub(super) fn apply_agg<'a>(tables: Vec<Table<'a>>, agg: Agg) -> Result<Vec<Table<'a>>, String> {
    let mut out = Vec::new();
    for t in tables {
        let columns = t.columns()?;
        let value_idx = columns.iter().position(|(n, _)| n == "_value");
        let value_type = value_idx.map(|i| columns[i].1);
        let name = format!("{agg:?}").to_lowercase();
        if matches!(agg, Agg::Sum | Agg::Mean | Agg::Max | Agg::Min)
            && !matches!(value_type, Some(ColType::Float | ColType::Int | ColType::UInt))
        {
            return Err(format!(
                "unsupported input type for {name} aggregate: {}",
                value_type.map_or("null", |t| t.datatype())
            ));
        }
        let Some(vi) = value_idx else {
            return Err(format!("{name}(): column \"_value\" does not exist"));
        };
        match agg {
            Agg::Count | Agg::Sum | Agg::Mean => {
                // Aggregates keep the group key columns and a new _value.
                let mut cols: Vec<(String, ColType)> =
                    columns.iter().filter(|(n, _)| t.key.contains(n)).cloned().collect();
                let mut row: Vec<Value> = cols.iter().map(|(n, _)| t.key_value(n)).collect();
                let value = match agg {
                    Agg::Count => (ColType::Int, Value::Int(t.len() as i64)),
                    _ => sum_or_mean(t.rows(&columns), vi, agg, value_type),
                };
                cols.push(("_value".into(), value.0));
                row.push(value.1);
                out.push(Table {
                    key: t.key.clone(),
                    start: t.start,
                    stop: t.stop,
                    body: Body::Rows { columns: cols, rows: vec![row] },
                });
            }
            Agg::Max | Agg::Min | Agg::First | Agg::Last => {
                let mut best: Option<Vec<Value>> = None;
                for r in t.rows(&columns) {
                    let better = match (&best, agg) {
                        (None, _) => true,
                        (Some(_), Agg::First) => false,
                        (Some(_), Agg::Last) => true,
                        (Some(b), Agg::Max) => numeric(&r[vi]) > numeric(&b[vi]),
                        (Some(b), _) => numeric(&r[vi]) < numeric(&b[vi]),
                    };
                    if better {
                        best = Some(r);
                    }
                }
                let rows: Vec<Vec<Value>> = best.into_iter().collect();
                out.push(Table {
                    key: t.key.clone(),
                    start: t.start,
                    stop: t.stop,
                    body: Body::Rows { columns, rows },
                });
            }
        }
    }
    Ok(out)
}

/// The `_value` of `sum()` or `mean()` over `rows` (`vi` is the `_value` column, of
/// `value_type`) and its type: a sum keeps the column's type, a mean is a float (null over no
/// value).
fn sum_or_mean(
    rows: impl Iterator<Item = Vec<Value>>,
    vi: usize,
    agg: Agg,
    value_type: Option<ColType>,
) -> (ColType, Value) {
    let (mut sum_f, mut sum_i, mut sum_u, mut n) = (0f64, 0i64, 0u64, 0usize);
    for r in rows {
        match &r[vi] {
            Value::Float(f) => sum_f += f,
            Value::Int(i) => sum_i = sum_i.wrapping_add(*i),
            Value::UInt(u) => sum_u = sum_u.wrapping_add(*u),
            _ => continue,
        }
        n += 1;
    }
    let total = sum_f + sum_i as f64 + sum_u as f64;
    match (agg, value_type) {
        (Agg::Mean, _) if n == 0 => (ColType::Float, Value::Null),
        (Agg::Mean, _) => (ColType::Float, Value::Float(total / n as f64)),
        (_, Some(ColType::Int)) => (ColType::Int, Value::Int(sum_i)),
        (_, Some(ColType::UInt)) => (ColType::UInt, Value::UInt(sum_u)),
        _ => (ColType::Float, Value::Float(sum_f)),
    }
}

pub(super) fn apply_limit<'a>(tables: Vec<Table<'a>>, n: usize, offset: usize) -> Vec<Table<'a>> {
    tables
        .into_iter()
        .map(|mut t| {
            match &mut t.body {
                Body::Rows { rows, .. } => {
                    *rows = rows.drain(..).skip(offset).take(n).collect();
                }
                Body::Segments(segs) => {
                    let (mut skip, mut take) = (offset, n);
                    let mut kept = Vec::new();
                    for seg in segs.drain(..) {
                        let idx: Vec<usize> = seg.rows.indices().collect();
                        let from = skip.min(idx.len());
                        skip -= from;
                        let count = take.min(idx.len() - from);
                        take -= count;
                        if count > 0 {
                            kept.push(Segment {
                                series: seg.series,
                                rows: Rows::Picked(idx[from..from + count].to_vec()),
                            });
                        }
                    }
                    *segs = kept;
                }
            }
            t
        })
        .collect()
}

/// Value of a column as a grouping key (text that sorts and compares like the value).
pub(super) fn key_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Str(s) => format!("s{s}"),
        other => format!("{other:?}"),
    }
}

pub(super) fn apply_group<'a>(
    tables: Vec<Table<'a>>,
    columns: &[String],
    except: bool,
) -> Result<Vec<Table<'a>>, String> {
    let (start, stop) = tables.first().map_or((0, 0), |t| (t.start, t.stop));
    let all_segments = tables.iter().all(|t| matches!(t.body, Body::Segments(_)));
    let by_constant_columns = !except && !columns.iter().any(|c| c == "_time" || c == "_value");
    if all_segments && by_constant_columns {
        return Ok(regroup_segments(tables, columns, (start, stop)));
    }
    // General case: rows regrouped by the key columns' values; columns are the union.
    let mut union: Vec<(String, ColType)> = Vec::new();
    let mut materialized = Vec::new();
    for t in &tables {
        let (cols, rows) = t.materialize()?;
        for c in &cols {
            match union.iter().find(|(n, _)| *n == c.0) {
                Some((_, ty)) if *ty != c.1 => {
                    return Err(format!(
                        "schema collision detected: column \"{}\" is both of type {} and {}",
                        c.0,
                        ty.datatype(),
                        c.1.datatype()
                    ));
                }
                Some(_) => {}
                None => union.push(c.clone()),
            }
        }
        materialized.push((cols, rows));
    }
    let key_cols: Vec<String> = union
        .iter()
        .map(|(n, _)| n.clone())
        .filter(|n| if except { !columns.contains(n) } else { columns.contains(n) })
        .collect();
    let mut order: Vec<Vec<String>> = Vec::new();
    let mut groups: HashMap<Vec<String>, Vec<Vec<Value>>> = HashMap::new();
    for (cols, rows) in materialized {
        for row in rows {
            let full: Vec<Value> = union
                .iter()
                .map(|(n, _)| cols.iter().position(|(c, _)| c == n).map_or(Value::Null, |i| row[i].clone()))
                .collect();
            let k: Vec<String> = key_cols
                .iter()
                .map(|c| union.iter().position(|(n, _)| n == c).map_or(String::new(), |i| key_text(&full[i])))
                .collect();
            if !groups.contains_key(&k) {
                order.push(k.clone());
            }
            groups.entry(k).or_default().push(full);
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|k| groups.remove(&k))
        .map(|rows| Table { key: key_cols.clone(), start, stop, body: Body::Rows { columns: union.clone(), rows } })
        .collect())
}

/// `group(columns:)` by columns constant in each series (tags, `_field`, `_measurement`, the
/// window): the series views regrouped without building rows, in the order their keys first
/// appear; each table's key is the grouping columns it has.
fn regroup_segments<'a>(tables: Vec<Table<'a>>, columns: &[String], (start, stop): (i64, i64)) -> Vec<Table<'a>> {
    let mut order: Vec<Vec<String>> = Vec::new();
    let mut groups: HashMap<Vec<String>, Vec<Segment<'a>>> = HashMap::new();
    for t in tables {
        let Body::Segments(segs) = t.body else { continue };
        for seg in segs {
            let k: Vec<String> =
                columns.iter().map(|c| key_text(&segment_constant(&seg, c, t.start, t.stop))).collect();
            if !groups.contains_key(&k) {
                order.push(k.clone());
            }
            groups.entry(k).or_default().push(seg);
        }
    }
    order
        .into_iter()
        .filter_map(|k| groups.remove(&k))
        .map(|segs| {
            let mut t = Table { key: Vec::new(), start, stop, body: Body::Segments(segs) };
            let cols = t.columns().unwrap_or_default();
            t.key = cols.iter().map(|(n, _)| n.clone()).filter(|n| columns.contains(n)).collect();
            t
        })
        .collect()
}
