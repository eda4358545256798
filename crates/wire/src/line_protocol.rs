//! InfluxDB line protocol: `measurement,tag=v field=1.5,n=3i,s="x",ok=t 1700000000000000000`.
//!
//! A complete parser (escapes in measurement, tag keys/values and field keys; quoted string
//! fields with `\"` and `\\`; floats, `i` integers, `u` unsigned integers, booleans in all
//! their spellings; optional timestamp; comments and blank lines) and the matching writer.
//! Errors name the line and column. What the metrics agent's `--test` prints and what the
//! twin database accepts on `/api/v2/write`.

use std::fmt::Write as _;

/// A field value.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A float (`1.5`, `1`).
    Float(f64),
    /// A signed integer (`1i`).
    Int(i64),
    /// An unsigned integer (`1u`).
    UInt(u64),
    /// A boolean (`t`, `true`, `F`, …).
    Bool(bool),
    /// A string (`"text"`).
    Str(String),
}

/// One point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The measurement's name.
    pub measurement: String,
    /// The tags, in the order written.
    pub tags: Vec<(String, String)>,
    /// The fields, in the order written (at least one).
    pub fields: Vec<(String, FieldValue)>,
    /// Nanoseconds since the epoch (or the precision the writer declared).
    pub timestamp: Option<i64>,
}

/// Where and why a line did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
    /// What is wrong there.
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

struct Cursor<'a> {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    _text: &'a str,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError { line: self.line, column: self.pos + 1, message: message.into() }
    }

    /// Reads up to an unescaped stop character; `\` escapes the stop characters and itself.
    fn escaped_until(&mut self, stops: &[char], what: &str) -> Result<String, ParseError> {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if stops.contains(&c) {
                break;
            }
            if c == '\\' {
                match self.chars.get(self.pos + 1) {
                    Some(&n) if stops.contains(&n) || n == '\\' || n == '=' || n == ',' || n == ' ' => {
                        out.push(n);
                        self.pos += 2;
                        continue;
                    }
                    _ => {}
                }
            }
            out.push(c);
            self.pos += 1;
        }
        if out.is_empty() {
            return Err(self.err(format!("expected {what}")));
        }
        Ok(out)
    }

    fn expect(&mut self, c: char, context: &str) -> Result<(), ParseError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(format!("expected `{c}` {context}")))
        }
    }
}

fn field_value(c: &mut Cursor<'_>) -> Result<FieldValue, ParseError> {
    if c.peek() == Some('"') {
        c.pos += 1;
        let mut s = String::new();
        loop {
            match c.peek() {
                None => return Err(c.err("unterminated string field")),
                Some('"') => {
                    c.pos += 1;
                    return Ok(FieldValue::Str(s));
                }
                Some('\\') if matches!(c.chars.get(c.pos + 1), Some('"') | Some('\\')) => {
                    s.push(c.chars[c.pos + 1]);
                    c.pos += 2;
                }
                Some(ch) => {
                    s.push(ch);
                    c.pos += 1;
                }
            }
        }
    }
    let start = c.pos;
    while let Some(ch) = c.peek() {
        if ch == ',' || ch == ' ' {
            break;
        }
        c.pos += 1;
    }
    let raw: String = c.chars[start..c.pos].iter().collect();
    let bad = |c: &Cursor<'_>| ParseError {
        line: c.line,
        column: start + 1,
        message: format!("invalid field value `{raw}`"),
    };
    match raw.as_str() {
        "t" | "T" | "true" | "True" | "TRUE" => return Ok(FieldValue::Bool(true)),
        "f" | "F" | "false" | "False" | "FALSE" => return Ok(FieldValue::Bool(false)),
        "" => return Err(c.err("expected a field value")),
        _ => {}
    }
    if let Some(i) = raw.strip_suffix('i') {
        return i.parse().map(FieldValue::Int).map_err(|_| bad(c));
    }
    if let Some(u) = raw.strip_suffix('u') {
        return u.parse().map(FieldValue::UInt).map_err(|_| bad(c));
    }
    // Floats: digits, sign, dot, exponent; no inf/nan (line protocol has none).
    if raw.chars().all(|ch| ch.is_ascii_digit() || matches!(ch, '.' | '-' | '+' | 'e' | 'E'))
        && let Ok(f) = raw.parse::<f64>()
        && f.is_finite()
    {
        return Ok(FieldValue::Float(f));
    }
    Err(bad(c))
}

fn parse_line(text: &str, line: usize) -> Result<Point, ParseError> {
    let mut c = Cursor { chars: text.chars().collect(), pos: 0, line, _text: text };
    let measurement = c.escaped_until(&[',', ' '], "a measurement name")?;
    let mut tags = Vec::new();
    while c.peek() == Some(',') {
        c.pos += 1;
        let key = c.escaped_until(&['=', ',', ' '], "a tag key")?;
        c.expect('=', "after a tag key")?;
        let value = c.escaped_until(&[',', ' ', '='], "a tag value")?;
        tags.push((key, value));
    }
    c.expect(' ', "before the fields")?;
    let mut fields = Vec::new();
    loop {
        let key = c.escaped_until(&['=', ',', ' '], "a field key")?;
        c.expect('=', "after a field key")?;
        fields.push((key, field_value(&mut c)?));
        if c.peek() == Some(',') {
            c.pos += 1;
        } else {
            break;
        }
    }
    let mut timestamp = None;
    if c.peek() == Some(' ') {
        c.pos += 1;
        let start = c.pos;
        let raw: String = c.chars[start..].iter().collect();
        let raw = raw.trim_end();
        timestamp = Some(raw.parse::<i64>().map_err(|_| ParseError {
            line,
            column: start + 1,
            message: format!("invalid timestamp `{raw}`"),
        })?);
        c.pos = c.chars.len();
    }
    if c.pos < c.chars.len() {
        return Err(c.err("unexpected text after the point"));
    }
    Ok(Point { measurement, tags, fields, timestamp })
}

/// Parses every point of a text; blank lines and `#` comments are skipped.
pub fn parse(text: &str) -> Result<Vec<Point>, ParseError> {
    let mut points = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        points.push(parse_line(line.trim_start(), i + 1)?);
    }
    Ok(points)
}

fn escape(out: &mut String, text: &str, specials: &[char]) {
    for ch in text.chars() {
        if specials.contains(&ch) {
            out.push('\\');
        }
        out.push(ch);
    }
}

impl Point {
    /// The point as one line of line protocol (no newline).
    pub fn to_line(&self) -> String {
        let mut out = String::new();
        escape(&mut out, &self.measurement, &[',', ' ', '\\']);
        for (k, v) in &self.tags {
            out.push(',');
            escape(&mut out, k, &[',', '=', ' ', '\\']);
            out.push('=');
            escape(&mut out, v, &[',', '=', ' ', '\\']);
        }
        out.push(' ');
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            escape(&mut out, k, &[',', '=', ' ', '\\']);
            out.push('=');
            match v {
                FieldValue::Float(f) => {
                    let _ = write!(out, "{f:?}");
                }
                FieldValue::Int(n) => {
                    let _ = write!(out, "{n}i");
                }
                FieldValue::UInt(n) => {
                    let _ = write!(out, "{n}u");
                }
                FieldValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                FieldValue::Str(s) => {
                    out.push('"');
                    escape(&mut out, s, &['"', '\\']);
                    out.push('"');
                }
            }
        }
        if let Some(ts) = self.timestamp {
            let _ = write!(out, " {ts}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_from_the_influxdb_and_telegraf_docs() {
        let p = parse("myMeasurement,tag1=value1,tag2=value2 fieldKey=\"fieldValue\" 1556813561098000000").unwrap();
        assert_eq!(p[0].measurement, "myMeasurement");
        assert_eq!(p[0].tags, vec![("tag1".into(), "value1".into()), ("tag2".into(), "value2".into())]);
        assert_eq!(p[0].fields, vec![("fieldKey".into(), FieldValue::Str("fieldValue".into()))]);
        assert_eq!(p[0].timestamp, Some(1556813561098000000));
        let p = parse("cpu,cpu=cpu-total,host=h1 usage_idle=98.5,usage_system=0.7,usage_user=0.8 1700000000000000000")
            .unwrap();
        assert_eq!(p[0].fields[1], ("usage_system".into(), FieldValue::Float(0.7)));
        let p = parse("mem,host=h1 active=123i,available_percent=77.1,total=8u").unwrap();
        assert_eq!(p[0].fields[0].1, FieldValue::Int(123));
        assert_eq!(p[0].fields[2].1, FieldValue::UInt(8));
        assert_eq!(p[0].timestamp, None);
        // Escapes, from the line protocol reference.
        let p = parse("my\\ Measurement,tag\\ Key=tag\\,Value field\\=Key=\"string \\\"quoted\\\" \\\\ value\",b=T,c=FALSE,e=-1.2e3").unwrap();
        assert_eq!(p[0].measurement, "my Measurement");
        assert_eq!(p[0].tags[0], ("tag Key".into(), "tag,Value".into()));
        assert_eq!(p[0].fields[0], ("field=Key".into(), FieldValue::Str("string \"quoted\" \\ value".into())));
        assert_eq!(p[0].fields[1].1, FieldValue::Bool(true));
        assert_eq!(p[0].fields[2].1, FieldValue::Bool(false));
        assert_eq!(p[0].fields[3].1, FieldValue::Float(-1200.0));
        let p = parse("# comment\n\ndisk,path=/ used_percent=42\n").unwrap();
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn errors_say_where() {
        let e = parse("cpu usage=1\ncpu,host usage=1").unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (2, "expected `=` after a tag key"));
        for (text, column, message) in [
            ("cpu", 4, "expected ` ` before the fields"),
            ("cpu x=1.5.5", 7, "invalid field value `1.5.5`"),
            ("cpu x=\"open", 12, "unterminated string field"),
            ("cpu x=1 12ab", 9, "invalid timestamp `12ab`"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.column, e.message.as_str()), (1, column, message), "{text}");
        }
        let e = parse("cpu x=1i2").unwrap_err();
        assert_eq!((e.line, e.column, e.message.as_str()), (1, 7, "invalid field value `1i2`"));
    }

    /// A small deterministic generator (xorshift) for property tests without a dependency.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn text(&mut self, alphabet: &[char], max: usize) -> String {
            let n = 1 + (self.next() as usize % max);
            (0..n).map(|_| alphabet[self.next() as usize % alphabet.len()]).collect()
        }
    }

    #[test]
    fn write_then_parse_round_trips() {
        let alphabet: Vec<char> = "abcXYZ09 ,=\"\\_-.é".chars().collect();
        let mut g = Gen(0x2545F4914F6CDD1D);
        for _ in 0..3000 {
            let point = Point {
                measurement: g.text(&alphabet, 8),
                tags: (0..g.next() % 3).map(|_| (g.text(&alphabet, 6), g.text(&alphabet, 6))).collect(),
                fields: (0..1 + g.next() % 4)
                    .map(|i| {
                        let v = match g.next() % 5 {
                            0 => FieldValue::Float((g.next() % 100000) as f64 / 7.0 - 5000.0),
                            1 => FieldValue::Int(g.next() as i64),
                            2 => FieldValue::UInt(g.next()),
                            3 => FieldValue::Bool(g.next().is_multiple_of(2)),
                            _ => FieldValue::Str(g.text(&alphabet, 10)),
                        };
                        (format!("{}{i}", g.text(&alphabet, 5)), v)
                    })
                    .collect(),
                timestamp: if g.next().is_multiple_of(2) { Some(g.next() as i64 >> 1) } else { None },
            };
            // A measurement starting with `#` reads as a comment, and leading spaces are trimmed.
            let ambiguous = std::iter::once(&point.measurement)
                .chain(point.tags.iter().flat_map(|(k, v)| [k, v]))
                .chain(point.fields.iter().map(|(k, _)| k))
                .any(|t| t.starts_with(' '));
            if ambiguous || point.measurement.starts_with('#') {
                continue;
            }
            let line = point.to_line();
            let parsed = parse(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(parsed, vec![point], "{line}");
        }
    }

    #[test]
    fn arbitrary_input_never_panics() {
        let alphabet: Vec<char> = "ab ,=\"\\\n0123456789.-+eEiutTfF#é".chars().collect();
        let mut g = Gen(0x9E3779B97F4A7C15);
        for _ in 0..20000 {
            let _ = parse(&g.text(&alphabet, 40));
        }
    }
}
