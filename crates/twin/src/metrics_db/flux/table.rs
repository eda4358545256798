//! Flux tables: views over stored series (a series and a row range) until an aggregate or
//! selector makes rows, so a count over a million points reads the columns without building
//! a row for each point.

use super::value::{ColType, Schema, Value, value_at};
use crate::metrics_db::store::Series;

/// Which rows of a series a segment holds.
#[derive(Debug, Clone)]
pub(super) enum Rows {
    Range(usize, usize),
    Picked(Vec<usize>),
}

impl Rows {
    pub(super) fn len(&self) -> usize {
        match self {
            Rows::Range(lo, hi) => hi - lo,
            Rows::Picked(p) => p.len(),
        }
    }

    pub(super) fn indices(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        match self {
            Rows::Range(lo, hi) => Box::new(*lo..*hi),
            Rows::Picked(p) => Box::new(p.iter().copied()),
        }
    }
}

/// A view on some rows of one series.
#[derive(Debug, Clone)]
pub(super) struct Segment<'a> {
    pub(super) series: &'a Series,
    pub(super) rows: Rows,
}

#[derive(Debug, Clone)]
pub(super) enum Body<'a> {
    /// Views on stored series; columns `_start,_stop,_time,_value,_field,_measurement,tags…`.
    Segments(Vec<Segment<'a>>),
    /// Rows made by an aggregate or selector.
    Rows { columns: Vec<(String, ColType)>, rows: Vec<Vec<Value>> },
}

/// One result table: its group key (column names) and its data.
#[derive(Debug, Clone)]
pub(crate) struct Table<'a> {
    pub(super) key: Vec<String>,
    pub(super) start: i64,
    pub(super) stop: i64,
    pub(super) body: Body<'a>,
}

/// Columns of a segment body whose value is constant per segment.
pub(super) fn segment_constant(seg: &Segment<'_>, name: &str, start: i64, stop: i64) -> Value {
    match name {
        "_start" => Value::Time(start),
        "_stop" => Value::Time(stop),
        "_measurement" => Value::Str(seg.series.measurement.clone()),
        "_field" => Value::Str(seg.series.field.clone()),
        tag => seg.series.tag(tag).map_or(Value::Null, |v| Value::Str(v.to_string())),
    }
}

impl<'a> Table<'a> {
    /// Column names and types, in InfluxDB's order.
    pub(crate) fn columns(&self) -> Result<Vec<(String, ColType)>, String> {
        match &self.body {
            Body::Rows { columns, .. } => Ok(columns.clone()),
            Body::Segments(segs) => {
                let mut value_type: Option<ColType> = None;
                let mut tags: Vec<&str> = Vec::new();
                for s in segs {
                    let t = ColType::of_column(&s.series.values);
                    match value_type {
                        Some(v) if v != t => {
                            return Err(format!(
                                "schema collision: cannot group {} and {} types together",
                                v.datatype(),
                                t.datatype()
                            ));
                        }
                        _ => value_type = Some(t),
                    }
                    for (k, _) in &s.series.tags {
                        if !tags.contains(&k.as_str()) {
                            tags.push(k);
                        }
                    }
                }
                tags.sort();
                let mut cols = vec![
                    ("_start".to_string(), ColType::Time),
                    ("_stop".to_string(), ColType::Time),
                    ("_time".to_string(), ColType::Time),
                    ("_value".to_string(), value_type.unwrap_or(ColType::Float)),
                    ("_field".to_string(), ColType::Str),
                    ("_measurement".to_string(), ColType::Str),
                ];
                cols.extend(tags.into_iter().map(|t| (t.to_string(), ColType::Str)));
                Ok(cols)
            }
        }
    }

    /// The group key's column names.
    pub(crate) fn key(&self) -> &[String] {
        &self.key
    }

    pub(crate) fn len(&self) -> usize {
        match &self.body {
            Body::Segments(segs) => segs.iter().map(|s| s.rows.len()).sum(),
            Body::Rows { rows, .. } => rows.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every row, cells in `columns()` order.
    pub(crate) fn rows(&self, columns: &[(String, ColType)]) -> Box<dyn Iterator<Item = Vec<Value>> + '_> {
        match &self.body {
            Body::Rows { rows, .. } => Box::new(rows.iter().cloned()),
            Body::Segments(segs) => {
                let names: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
                let (start, stop) = (self.start, self.stop);
                Box::new(segs.iter().flat_map(move |seg| {
                    let constants: Vec<Value> = names.iter().map(|n| segment_constant(seg, n, start, stop)).collect();
                    let names = names.clone();
                    seg.rows.indices().map(move |i| {
                        names
                            .iter()
                            .zip(&constants)
                            .map(|(n, c)| match n.as_str() {
                                "_time" => Value::Time(seg.series.times[i]),
                                "_value" => value_at(&seg.series.values, i),
                                _ => c.clone(),
                            })
                            .collect()
                    })
                }))
            }
        }
    }

    pub(super) fn materialize(&self) -> Result<(Schema, Vec<Vec<Value>>), String> {
        let columns = self.columns()?;
        let rows = self.rows(&columns).collect();
        Ok((columns, rows))
    }

    /// The value of a group-key column (the same on every row).
    pub(super) fn key_value(&self, name: &str) -> Value {
        match &self.body {
            Body::Segments(segs) => {
                segs.first().map_or(Value::Null, |s| segment_constant(s, name, self.start, self.stop))
            }
            Body::Rows { columns, rows } => columns
                .iter()
                .position(|(n, _)| n == name)
                .and_then(|i| rows.first().map(|r| r[i].clone()))
                .unwrap_or(Value::Null),
        }
    }
}
