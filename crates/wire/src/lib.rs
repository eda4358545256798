//! The stack's wire formats, each read and written in one place: InfluxDB's annotated CSV
//! (`flux_csv`), line protocol (`line_protocol`), Prometheus exposition text
//! (`exposition`), Loki's query JSON, push bodies and running config (`loki`), the level a
//! vendor's log line carries (`log_level`) and HTTP body compression (`decompress`).
//! The verbs read what servers answer with them; the twin writes its answers (and
//! reads its requests) with the same code, so both sides agree by construction. Pure
//! functions over text and bytes, tested against captures of real servers; they import
//! nothing from `host` or `twin`. None of them panics on any input; malformed input is an
//! `Err` saying where.

#![deny(missing_docs)]

mod content_encoding;
pub mod exposition;
pub mod flux_csv;
pub mod line_protocol;
pub mod log_level;
pub mod loki;
mod text;

pub use content_encoding::decompress;
pub use text::excerpt;
