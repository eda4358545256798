//! What a Flux table holds: a cell's value, a column's type (as the CSV `#datatype`
//! annotation names it), a table's schema, and the value at a row of a stored column.

use crate::metrics_db::store::Column;

/// A value in a table cell.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Str(String),
    Float(f64),
    Int(i64),
    UInt(u64),
    Bool(bool),
    /// Nanoseconds since the epoch.
    Time(i64),
}

/// Column names and types of a table, in order.
pub(crate) type Schema = Vec<(String, ColType)>;

/// A column's type, named in the CSV `#datatype` annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColType {
    Str,
    Float,
    Int,
    UInt,
    Bool,
    Time,
}

impl ColType {
    pub(crate) fn datatype(self) -> &'static str {
        match self {
            ColType::Str => "string",
            ColType::Float => "double",
            ColType::Int => "long",
            ColType::UInt => "unsignedLong",
            ColType::Bool => "boolean",
            ColType::Time => "dateTime:RFC3339",
        }
    }

    pub(crate) fn of_column(c: &Column) -> ColType {
        match c {
            Column::Float(_) => ColType::Float,
            Column::Int(_) => ColType::Int,
            Column::UInt(_) => ColType::UInt,
            Column::Bool(_) => ColType::Bool,
            Column::Str(_) => ColType::Str,
        }
    }
}

pub(crate) fn value_at(c: &Column, i: usize) -> Value {
    match c {
        Column::Float(v) => Value::Float(v[i]),
        Column::Int(v) => Value::Int(v[i]),
        Column::UInt(v) => Value::UInt(v[i]),
        Column::Bool(v) => Value::Bool(v[i]),
        Column::Str(v) => Value::Str(v[i].clone()),
    }
}
