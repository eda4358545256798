//! Parsers for what the stack's servers answer: InfluxDB's annotated CSV, Prometheus
//! exposition text, Loki's query JSON and Loki's running config. Pure functions over text,
//! shared by the host modules and the twin, and tested against captures of real servers.
//! None of them panics on any input; malformed input is an `Err` saying where.

pub mod exposition;
pub mod flux_csv;
pub mod loki_config;
pub mod loki_json;

/// The first bytes of a body, for quoting in a failed check: at most `max` characters on one
/// line, with an ellipsis when cut.
pub fn excerpt(body: &str, max: usize) -> String {
    let one_line: String = body.trim().chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if one_line.chars().count() > max {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    } else {
        one_line
    }
}
