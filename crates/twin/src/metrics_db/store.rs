//! The metrics-db twin's storage: buckets of series held in memory.
//!
//! A series is one measurement, tag set and field, as in InfluxDB's storage engine; its
//! points are kept sorted by time in a column of the field's type (a float field costs 16
//! bytes a point). Writing the same series and time again overwrites the value, a field
//! written with another type than it has is a type conflict, and points older than the
//! retention window are dropped, so memory stays bounded.

use std::collections::HashMap;

use opsbook_wire::line_protocol::{FieldValue, Point};

/// A series' values, all of one type.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Column {
    Float(Vec<f64>),
    Int(Vec<i64>),
    UInt(Vec<u64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
}

impl Column {
    fn new(v: &FieldValue) -> Column {
        match v {
            FieldValue::Float(_) => Column::Float(Vec::new()),
            FieldValue::Int(_) => Column::Int(Vec::new()),
            FieldValue::UInt(_) => Column::UInt(Vec::new()),
            FieldValue::Bool(_) => Column::Bool(Vec::new()),
            FieldValue::Str(_) => Column::Str(Vec::new()),
        }
    }

    /// InfluxDB's name of the type, as its errors say it.
    pub(super) fn type_name(&self) -> &'static str {
        match self {
            Column::Float(_) => "float",
            Column::Int(_) => "integer",
            Column::UInt(_) => "unsigned",
            Column::Bool(_) => "boolean",
            Column::Str(_) => "string",
        }
    }

    fn drain_front(&mut self, n: usize) {
        match self {
            Column::Float(v) => drop(v.drain(..n)),
            Column::Int(v) => drop(v.drain(..n)),
            Column::UInt(v) => drop(v.drain(..n)),
            Column::Bool(v) => drop(v.drain(..n)),
            Column::Str(v) => drop(v.drain(..n)),
        }
    }

    /// Stores `value` at `index`: a replacement when `replace`, an insertion otherwise.
    /// The caller has checked the type.
    fn put(&mut self, index: usize, replace: bool, value: FieldValue) {
        macro_rules! put {
            ($vec:expr, $v:expr) => {
                if replace { $vec[index] = $v } else { $vec.insert(index, $v) }
            };
        }
        match (self, value) {
            (Column::Float(c), FieldValue::Float(v)) => put!(c, v),
            (Column::Int(c), FieldValue::Int(v)) => put!(c, v),
            (Column::UInt(c), FieldValue::UInt(v)) => put!(c, v),
            (Column::Bool(c), FieldValue::Bool(v)) => put!(c, v),
            (Column::Str(c), FieldValue::Str(v)) => put!(c, v),
            _ => {}
        }
    }

    fn accepts(&self, v: &FieldValue) -> bool {
        matches!(
            (self, v),
            (Column::Float(_), FieldValue::Float(_))
                | (Column::Int(_), FieldValue::Int(_))
                | (Column::UInt(_), FieldValue::UInt(_))
                | (Column::Bool(_), FieldValue::Bool(_))
                | (Column::Str(_), FieldValue::Str(_))
        )
    }
}

/// One series: measurement, sorted tags, field, and its points in time order.
#[derive(Debug, Clone)]
pub(super) struct Series {
    pub measurement: String,
    pub tags: Vec<(String, String)>,
    pub field: String,
    pub times: Vec<i64>,
    pub values: Column,
}

impl Series {
    /// The index range of points with `start <= time < stop`.
    pub(super) fn window(&self, start: i64, stop: i64) -> (usize, usize) {
        (self.times.partition_point(|t| *t < start), self.times.partition_point(|t| *t < stop))
    }

    pub(super) fn tag(&self, name: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WriteError {
    TypeConflict { field: String, measurement: String, input: &'static str, existing: &'static str, dropped: usize },
    Full { max: usize },
}

/// Measurement and sorted tags: the part of a series key shared by its fields.
type SeriesKey = (String, Vec<(String, String)>);

/// A bucket: its identity and its series.
#[derive(Debug)]
pub(super) struct Bucket {
    pub name: String,
    pub id: String,
    /// Series by (measurement, tags) and then by field.
    series: HashMap<SeriesKey, HashMap<String, Series>>,
    points: usize,
}

impl Bucket {
    pub(super) fn new(name: &str, id: String) -> Bucket {
        Bucket { name: name.to_string(), id, series: HashMap::new(), points: 0 }
    }

    pub(super) fn point_count(&self) -> usize {
        self.points
    }

    /// Every series, sorted as InfluxDB's storage returns them (measurement, tags, field).
    pub(super) fn sorted_series(&self) -> Vec<&Series> {
        let mut all: Vec<&Series> = self.series.values().flat_map(|f| f.values()).collect();
        all.sort_by(|a, b| (&a.measurement, &a.tags, &a.field).cmp(&(&b.measurement, &b.tags, &b.field)));
        all
    }

    /// Stores points whose times are already in nanoseconds. Either every point is stored or,
    /// on a type conflict or when full, none of the conflicting ones (the rest are kept, as
    /// InfluxDB's partial writes do).
    pub(super) fn write(&mut self, points: Vec<Point>, max_points: usize) -> Result<usize, WriteError> {
        let incoming: usize = points.iter().map(|p| p.fields.len()).sum();
        if self.points + incoming > max_points {
            return Err(WriteError::Full { max: max_points });
        }
        let mut written = 0;
        let mut conflict = None;
        for p in points {
            let Some(ts) = p.timestamp else { continue };
            let mut tags = p.tags;
            tags.sort();
            let fields = self.series.entry((p.measurement.clone(), tags.clone())).or_default();
            for (field, value) in p.fields {
                let series = fields.entry(field.clone()).or_insert_with(|| Series {
                    measurement: p.measurement.clone(),
                    tags: tags.clone(),
                    field: field.clone(),
                    times: Vec::new(),
                    values: Column::new(&value),
                });
                if !series.values.accepts(&value) {
                    let input = Column::new(&value).type_name();
                    match &mut conflict {
                        None => {
                            conflict = Some(WriteError::TypeConflict {
                                field,
                                measurement: p.measurement.clone(),
                                input,
                                existing: series.values.type_name(),
                                dropped: 1,
                            })
                        }
                        Some(WriteError::TypeConflict { dropped, .. }) => *dropped += 1,
                        Some(_) => {}
                    }
                    continue;
                }
                // Appends are the common case; late points are inserted in order.
                let (index, replace) = match series.times.last() {
                    Some(last) if *last < ts => (series.times.len(), false),
                    None => (0, false),
                    _ => {
                        let i = series.times.partition_point(|t| *t < ts);
                        (i, series.times.get(i) == Some(&ts))
                    }
                };
                if !replace {
                    series.times.insert(index, ts);
                    self.points += 1;
                }
                series.values.put(index, replace, value);
                written += 1;
            }
        }
        match conflict {
            Some(c) => Err(c),
            None => Ok(written),
        }
    }

    /// Drops points older than `cutoff` (ns); returns how many.
    pub(super) fn evict(&mut self, cutoff: i64) -> usize {
        let mut dropped = 0;
        for fields in self.series.values_mut() {
            fields.retain(|_, s| {
                let n = s.times.partition_point(|t| *t < cutoff);
                if n > 0 {
                    s.times.drain(..n);
                    s.values.drain_front(n);
                    dropped += n;
                }
                !s.times.is_empty()
            });
        }
        self.series.retain(|_, f| !f.is_empty());
        self.points -= dropped;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsbook_wire::line_protocol;

    fn points(text: &str) -> Vec<Point> {
        line_protocol::parse(text).unwrap()
    }

    #[test]
    fn writes_sort_overwrite_and_evict() {
        let mut b = Bucket::new("telegraf", "0000000000000001".into());
        b.write(points("cpu,host=a,cpu=cpu-total usage_system=1.5,usage_idle=90 300\ncpu,cpu=cpu-total,host=a usage_system=2.5 100"), 100)
            .unwrap();
        b.write(points("cpu,host=a,cpu=cpu-total usage_system=9 300"), 100).unwrap();
        let series = b.sorted_series();
        assert_eq!(series.len(), 2);
        let sys = series.iter().find(|s| s.field == "usage_system").unwrap();
        assert_eq!(sys.times, vec![100, 300]);
        assert_eq!(sys.values, Column::Float(vec![2.5, 9.0]));
        assert_eq!(sys.tags, vec![("cpu".to_string(), "cpu-total".to_string()), ("host".into(), "a".into())]);
        assert_eq!(b.point_count(), 3);
        assert_eq!(sys.window(100, 300), (0, 1));
        assert_eq!(b.evict(200), 1);
        assert_eq!(b.point_count(), 2);
    }

    #[test]
    fn type_conflicts_and_capacity_are_refused() {
        let mut b = Bucket::new("b", "1".into());
        b.write(points("m f=1i 1"), 100).unwrap();
        let e = b.write(points("m f=1.5 2"), 100).unwrap_err();
        assert!(matches!(e, WriteError::TypeConflict { input: "float", existing: "integer", .. }), "{e:?}");
        assert_eq!(b.write(points("m f=2i,g=1i 3"), 2).unwrap_err(), WriteError::Full { max: 2 });
    }
}
