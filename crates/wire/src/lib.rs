//! The stack's wire formats, each read and written in one place: InfluxDB's annotated CSV
//! (`flux_csv`), line protocol (`line_protocol`), Prometheus exposition text
//! (`exposition`), Loki's query JSON (`loki_json`), Loki's push bodies (`loki_push`),
//! Loki's running config (`loki_config`) and HTTP body compression (`content_encoding`).
//! The verbs read what servers answer with them; the twin writes its answers (and
//! reads its requests) with the same code, so both sides agree by construction. Pure
//! functions over text and bytes, tested against captures of real servers; they import
//! nothing from `host` or `twin`. None of them panics on any input; malformed input is an
//! `Err` saying where.

pub mod content_encoding;
pub mod exposition;
pub mod flux_csv;
pub mod line_protocol;
pub mod log_level;
pub mod loki_config;
pub mod loki_json;
pub mod loki_push;

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

/// A float as Go's `strconv.FormatFloat(f, 'f', -1, 64)` writes it (the shortest decimal:
/// `1`, `0.25`), with infinities and NaN spelled `+Inf`, `-Inf`, `NaN` as Prometheus, Loki and
/// InfluxDB all do.
pub(crate) fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{f}")
    }
}
