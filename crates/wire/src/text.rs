//! Small pieces of text every format shares: an answer's excerpt for a failed check, and a
//! float written as the Go servers write it.

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
