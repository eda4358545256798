//! Prometheus text exposition (format 0.0.4), both ways: `# HELP`, `# TYPE`, and samples
//! `name{label="value",…} value [timestamp]` with escaped label values and `+Inf`/`-Inf`/`NaN`.
//! Histogram and summary series (`_bucket`, `_sum`, `_count`) are ordinary samples here.
//! `parse` reads a scrape (the host's `prom::` verbs); `Writer` writes the twins' `/metrics`
//! (the log store's and the shipper's).

use std::collections::HashMap;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric's name (a histogram's `_bucket`, `_sum`, `_count` included).
    pub name: String,
    /// The labels between the braces, in the order written.
    pub labels: Vec<(String, String)>,
    /// The sample's value.
    pub value: f64,
}

/// A parsed scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Every sample line, in the order of the text.
    pub samples: Vec<Sample>,
    /// Metric family → `counter`, `gauge`, `histogram`, `summary` or `untyped`.
    pub types: HashMap<String, String>,
    /// Metric family → its `# HELP` text.
    pub help: HashMap<String, String>,
}

impl Exposition {
    /// Sum of the samples named `name` whose labels include every pair of `want`.
    pub fn sum(&self, name: &str, want: &[(String, String)]) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.samples.iter().filter(|s| s.name == name) {
            if want.iter().all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v)) {
                found = true;
                total += s.value;
            }
        }
        found.then_some(total)
    }
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit())
}

/// Parses the labels after `{`; returns them and the rest after `}`.
/// Label pairs, in the order written.
type Labels = Vec<(String, String)>;

fn parse_labels(mut rest: &str, line_no: usize) -> Result<(Labels, &str), String> {
    let err = |what: &str| format!("line {line_no}: {what}");
    let mut labels = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let end = rest.find(|c: char| !is_name_char(c, false)).unwrap_or(rest.len());
        if end == 0 {
            return Err(err("expected a label name"));
        }
        let key = rest[..end].to_string();
        rest = rest[end..].trim_start();
        rest = rest.strip_prefix('=').ok_or_else(|| err("expected `=` after a label name"))?.trim_start();
        rest = rest.strip_prefix('"').ok_or_else(|| err("expected a quoted label value"))?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let consumed = loop {
            match chars.next() {
                None => return Err(err("unterminated label value")),
                Some((i, '"')) => break i + 1,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(err("unterminated escape")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key, value));
        rest = rest[consumed..].trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(err("expected `,` or `}` after a label"));
        }
    }
}

/// Parses a whole exposition.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut parts = comment.trim_start().splitn(3, char::is_whitespace);
            match (parts.next(), parts.next(), parts.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    out.types.insert(name.to_string(), kind.trim().to_string());
                }
                (Some("HELP"), Some(name), help) => {
                    out.help.insert(name.to_string(), help.unwrap_or("").trim().to_string());
                }
                _ => {}
            }
            continue;
        }
        let end = line.find(|c: char| !is_name_char(c, false)).unwrap_or(line.len());
        if end == 0 || !line.starts_with(|c: char| is_name_char(c, true)) {
            return Err(format!("line {line_no}: expected a metric name, found `{}`", crate::text::excerpt(line, 40)));
        }
        let name = line[..end].to_string();
        let mut rest = &line[end..];
        let mut labels = Vec::new();
        if let Some(after) = rest.strip_prefix('{') {
            let (parsed, after) = parse_labels(after, line_no)?;
            labels = parsed;
            rest = after;
        }
        let mut fields = rest.split_whitespace();
        let value_text = fields.next().ok_or_else(|| format!("line {line_no}: `{name}` has no value"))?;
        let value = parse_value(value_text).ok_or_else(|| format!("line {line_no}: `{value_text}` is not a number"))?;
        out.samples.push(Sample { name, labels, value });
    }
    Ok(out)
}

/// The content type of an exposition answer.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Writes an exposition family by family: `family` for the `# HELP`/`# TYPE` lines, then
/// `sample` for each of its samples.
#[derive(Debug, Default)]
pub struct Writer {
    out: String,
}

impl Writer {
    /// An empty exposition.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// Starts a family: `# HELP name help` and `# TYPE name kind`.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Writer {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        self.out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        self
    }

    /// One sample line; label values are escaped.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) -> &mut Writer {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                self.out.push_str(&format!("{k}=\"{v}\""));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(&crate::text::float_text(value));
        self.out.push('\n');
        self
    }

    /// The text written.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_types_labels_escapes_and_special_values() {
        let text = "# HELP loki_ingester_chunks_created_total The total number of chunks created in the ingester.\n\
# TYPE loki_ingester_chunks_created_total counter\n\
loki_ingester_chunks_created_total 7\n\
# TYPE req histogram\n\
req_bucket{le=\"0.5\",path=\"/a \\\"b\\\"\\n\"} 3\n\
req_bucket{le=\"+Inf\",path=\"/x\"} 4 1700000000000\n\
g NaN\n\
h -Inf\n";
        let e = parse(text).unwrap();
        assert_eq!(e.types["loki_ingester_chunks_created_total"], "counter");
        assert_eq!(e.sum("loki_ingester_chunks_created_total", &[]), Some(7.0));
        assert_eq!(e.samples[1].labels[1].1, "/a \"b\"\n");
        assert_eq!(e.sum("req_bucket", &[]), Some(7.0));
        assert_eq!(e.sum("req_bucket", &[("le".into(), "+Inf".into())]), Some(4.0));
        assert!(e.samples[3].value.is_nan());
        assert_eq!(e.samples[4].value, f64::NEG_INFINITY);
        assert_eq!(e.sum("absent", &[]), None);
    }

    #[test]
    fn real_captures_parse() {
        for path in ["loki-3.4.6/metrics-excerpt.txt", "prometheus-2.42/metrics-head.txt"] {
            let full = format!("{}/tests/fixtures/wire/{path}", concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
            let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
            let e = parse(&text).unwrap_or_else(|err| panic!("{path}: {err}"));
            assert!(!e.samples.is_empty(), "{path}");
        }
    }

    #[test]
    fn written_text_reads_back_and_matches_the_capture() {
        let mut w = Writer::new();
        w.family(
            "loki_ingester_chunks_created_total",
            "counter",
            "The total number of chunks created in the ingester.",
        )
        .sample("loki_ingester_chunks_created_total", &[], 1.0);
        let text = w.finish();
        let capture = std::fs::read_to_string(format!(
            "{}/tests/fixtures/wire/loki-3.4.6/metrics-excerpt.txt",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ))
        .unwrap();
        assert!(capture.ends_with(&text), "{text}");
        let mut w = Writer::new();
        w.family("x", "gauge", "a\\b\nc").sample("x", &[("p", "/a \"b\"\n"), ("le", "+Inf")], f64::NEG_INFINITY);
        let e = parse(&w.finish()).unwrap();
        assert_eq!(e.help["x"], "a\\\\b\\nc");
        assert_eq!(e.samples[0].labels, vec![("p".into(), "/a \"b\"\n".into()), ("le".into(), "+Inf".into())]);
        assert_eq!(e.samples[0].value, f64::NEG_INFINITY);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert_eq!(
            parse("<html><body>502 Bad Gateway</body></html>").unwrap_err(),
            "line 1: expected a metric name, found `<html><body>502 Bad Gateway</body></html…`"
        );
        assert_eq!(parse("x{a=\"1\" 2").unwrap_err(), "line 1: expected `,` or `}` after a label");
        assert_eq!(parse("x{a=1} 2").unwrap_err(), "line 1: expected a quoted label value");
        assert_eq!(parse("x abc").unwrap_err(), "line 1: `abc` is not a number");
        for s in ["{", "x{", "x{\"", "x{a", "x{a=", "x{a=\"\\", "#", "# TYPE", "é{}"] {
            let _ = parse(s);
        }
        // Arbitrary text from the exposition's own alphabet: never a panic.
        let alphabet: Vec<char> = "ab_:{}=\",\\ \n#0123456789.+-eInfNaé".chars().collect();
        let mut seed = 0x9e3779b97f4a7c15u64;
        for _ in 0..20000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 48) as usize;
            let text: String =
                (0..len).map(|i| alphabet[((seed >> (i % 48)) as usize + i * 7) % alphabet.len()]).collect();
            let _ = parse(&text);
        }
    }
}
