//! Loki's push format, both ways: decoding what `POST /loki/api/v1/push` receives (JSON;
//! protobuf `logproto.PushRequest` in a raw snappy block, as Promtail and Alloy send it; a
//! gzip or deflate `Content-Encoding` is undone first by `content_encoding`) and encoding
//! what the shipper twin sends.
//!
//! The protobuf messages are small, so they are read and written by hand here instead of
//! generating code:
//!
//! ```text
//! PushRequest   { repeated StreamAdapter streams = 1; }
//! StreamAdapter { string labels = 1; repeated EntryAdapter entries = 2; uint64 hash = 3; }
//! EntryAdapter  { Timestamp timestamp = 1; string line = 2; repeated LabelPair structuredMetadata = 3; }
//! LabelPair     { string name = 1; string value = 2; }
//! Timestamp     { int64 seconds = 1; int32 nanos = 2; }
//! ```

use serde_json::Value;

/// One pushed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushEntry {
    /// Nanoseconds since the epoch.
    pub ts: i64,
    /// The log line.
    pub line: String,
    /// Structured metadata (`[ts, line, {k: v}]` in JSON).
    pub metadata: Vec<(String, String)>,
}

/// One pushed stream: its labels (sorted by name) and entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushStream {
    /// The stream's labels, sorted by name.
    pub labels: Vec<(String, String)>,
    /// Its entries, in the order pushed.
    pub entries: Vec<PushEntry>,
}

/// How a push body is encoded, from its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON (`Content-Type: application/json`).
    Json,
    /// Protobuf in a snappy block: any other content type, as Loki reads it.
    Protobuf,
}

/// The body's format from `Content-Type` (Loki treats anything but JSON as protobuf).
pub fn encoding_of(content_type: &str) -> Encoding {
    let base = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if base == "application/json" { Encoding::Json } else { Encoding::Protobuf }
}

/// Decodes a (decompressed) body.
pub fn decode(encoding: Encoding, body: &[u8]) -> Result<Vec<PushStream>, String> {
    match encoding {
        Encoding::Json => decode_json(body),
        Encoding::Protobuf => {
            // snap's messages start with `snappy: ` already, as Go's snappy package's do.
            let raw = snap::raw::Decoder::new().decompress_vec(body).map_err(|e| e.to_string())?;
            decode_protobuf(&raw)
        }
    }
}

fn decode_json(body: &[u8]) -> Result<Vec<PushStream>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("loghttp.PushRequest: {e}"))?;
    let streams =
        v.get("streams").and_then(Value::as_array).ok_or("loghttp.PushRequest.Streams: expected an array `streams`")?;
    let mut out = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        let obj = s.get("stream").and_then(Value::as_object).ok_or(format!("streams[{i}]: no `stream` object"))?;
        let mut labels = Vec::new();
        for (k, v) in obj {
            let v = v.as_str().ok_or(format!("streams[{i}].stream.{k}: label values must be strings"))?;
            labels.push((k.clone(), v.to_string()));
        }
        labels.sort();
        let values = s.get("values").and_then(Value::as_array).ok_or(format!("streams[{i}]: no `values` array"))?;
        let mut entries = Vec::with_capacity(values.len());
        for (j, e) in values.iter().enumerate() {
            let at = || format!("streams[{i}].values[{j}]");
            let parts = e.as_array().ok_or_else(|| format!("{}: expected [timestamp, line]", at()))?;
            if parts.len() < 2 || parts.len() > 3 {
                return Err(format!("{}: expected [timestamp, line] or [timestamp, line, metadata]", at()));
            }
            let ts = parts[0]
                .as_str()
                .and_then(|t| t.parse::<i64>().ok())
                .ok_or_else(|| format!("{}: timestamp must be a string of nanoseconds", at()))?;
            let line = parts[1].as_str().ok_or_else(|| format!("{}: line must be a string", at()))?.to_string();
            let mut metadata = Vec::new();
            if let Some(meta) = parts.get(2) {
                let meta = meta.as_object().ok_or_else(|| format!("{}: metadata must be an object", at()))?;
                for (k, v) in meta {
                    metadata.push((k.clone(), v.as_str().unwrap_or_default().to_string()));
                }
            }
            entries.push(PushEntry { ts, line, metadata });
        }
        out.push(PushStream { labels, entries });
    }
    Ok(out)
}

/// Protobuf wire reading: a cursor over one message's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.pos).ok_or("protobuf: truncated varint")?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err("protobuf: varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.varint()? as usize;
        let end = self.pos.checked_add(len).filter(|e| *e <= self.bytes.len()).ok_or("protobuf: truncated field")?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    /// The next field's number and wire type.
    fn key(&mut self) -> Result<(u64, u8), String> {
        let key = self.varint()?;
        Ok((key >> 3, (key & 7) as u8))
    }

    fn skip(&mut self, wire_type: u8) -> Result<(), String> {
        match wire_type {
            0 => self.varint().map(drop),
            1 => self.advance(8),
            2 => self.bytes().map(drop),
            5 => self.advance(4),
            t => Err(format!("protobuf: unsupported wire type {t}")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), String> {
        if self.pos + n > self.bytes.len() {
            return Err("protobuf: truncated field".into());
        }
        self.pos += n;
        Ok(())
    }
}

fn utf8(bytes: &[u8], what: &str) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| format!("protobuf: {what} is not valid UTF-8"))
}

fn decode_protobuf(raw: &[u8]) -> Result<Vec<PushStream>, String> {
    let mut r = Reader { bytes: raw, pos: 0 };
    let mut out = Vec::new();
    while !r.done() {
        match r.key()? {
            (1, 2) => out.push(decode_stream(r.bytes()?)?),
            (_, t) => r.skip(t)?,
        }
    }
    Ok(out)
}

fn decode_stream(bytes: &[u8]) -> Result<PushStream, String> {
    let mut r = Reader { bytes, pos: 0 };
    let mut labels_text = String::new();
    let mut entries = Vec::new();
    while !r.done() {
        match r.key()? {
            (1, 2) => labels_text = utf8(r.bytes()?, "stream labels")?,
            (2, 2) => entries.push(decode_entry(r.bytes()?)?),
            (_, t) => r.skip(t)?,
        }
    }
    let labels = parse_labels(&labels_text).map_err(|e| format!("stream labels {labels_text:?}: {e}"))?;
    Ok(PushStream { labels, entries })
}

fn decode_entry(bytes: &[u8]) -> Result<PushEntry, String> {
    let mut r = Reader { bytes, pos: 0 };
    let (mut seconds, mut nanos) = (0i64, 0i64);
    let mut line = String::new();
    let mut metadata = Vec::new();
    while !r.done() {
        match r.key()? {
            (1, 2) => {
                let mut t = Reader { bytes: r.bytes()?, pos: 0 };
                while !t.done() {
                    match t.key()? {
                        (1, 0) => seconds = t.varint()? as i64,
                        (2, 0) => nanos = t.varint()? as i32 as i64,
                        (_, w) => t.skip(w)?,
                    }
                }
            }
            (2, 2) => line = utf8(r.bytes()?, "line")?,
            (3, 2) => {
                let mut p = Reader { bytes: r.bytes()?, pos: 0 };
                let (mut name, mut value) = (String::new(), String::new());
                while !p.done() {
                    match p.key()? {
                        (1, 2) => name = utf8(p.bytes()?, "metadata name")?,
                        (2, 2) => value = utf8(p.bytes()?, "metadata value")?,
                        (_, w) => p.skip(w)?,
                    }
                }
                metadata.push((name, value));
            }
            (_, t) => r.skip(t)?,
        }
    }
    Ok(PushEntry { ts: seconds.saturating_mul(1_000_000_000).saturating_add(nanos), line, metadata })
}

/// Whether a label name is valid (`[a-zA-Z_][a-zA-Z0-9_]*`).
pub fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A label set as a protobuf push names it, `{a="b", c="d"}` with Go-quoted values
/// (Promtail and Alloy write it with `labels.String()`); returned sorted by name.
pub(crate) fn parse_labels(text: &str) -> Result<Vec<(String, String)>, String> {
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or("a label set is written `{name=\"value\", …}`")?;
    let mut labels = Vec::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let name_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let name = &rest[..name_end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("expected a label name at `{}`", crate::text::excerpt(rest, 20)));
        }
        rest = rest[name_end..].trim_start();
        rest = rest.strip_prefix('=').ok_or_else(|| format!("label `{name}` must use `=`"))?.trim_start();
        let (value, after) = quoted(rest).ok_or_else(|| format!("label `{name}`: expected a quoted value"))?;
        labels.push((name.to_string(), value));
        rest = after.trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None if rest.is_empty() => {}
            None => return Err(format!("unexpected `{}` after label `{name}`", crate::text::excerpt(rest, 20))),
        }
    }
    labels.sort();
    Ok(labels)
}

/// A Go-quoted string at the start of `text`: its value and what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut value = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &body[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'r' => value.push('\r'),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

/// Protobuf wire writing.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_varint(out, (field << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A label set as Loki writes it in protobuf pushes: `{a="b", c="d"}`, Go-quoted.
pub fn labels_text(labels: &[(String, String)]) -> String {
    let parts: Vec<String> =
        labels.iter().map(|(k, v)| format!("{k}={}", serde_json::Value::String(v.clone()))).collect();
    format!("{{{}}}", parts.join(", "))
}

/// Encodes streams as a snappy-compressed `PushRequest`, the body real shippers send with
/// `Content-Type: application/x-protobuf`.
pub fn encode_protobuf(streams: &[PushStream]) -> Vec<u8> {
    let mut request = Vec::new();
    for s in streams {
        let mut stream = Vec::new();
        put_bytes(&mut stream, 1, labels_text(&s.labels).as_bytes());
        for e in &s.entries {
            let mut entry = Vec::new();
            let mut ts = Vec::new();
            let (secs, nanos) = (e.ts.div_euclid(1_000_000_000), e.ts.rem_euclid(1_000_000_000));
            if secs != 0 {
                put_varint(&mut ts, 1 << 3);
                put_varint(&mut ts, secs as u64);
            }
            if nanos != 0 {
                put_varint(&mut ts, 2 << 3);
                put_varint(&mut ts, nanos as u64);
            }
            put_bytes(&mut entry, 1, &ts);
            put_bytes(&mut entry, 2, e.line.as_bytes());
            for (k, v) in &e.metadata {
                let mut pair = Vec::new();
                put_bytes(&mut pair, 1, k.as_bytes());
                put_bytes(&mut pair, 2, v.as_bytes());
                put_bytes(&mut entry, 3, &pair);
            }
            put_bytes(&mut stream, 2, &entry);
        }
        put_bytes(&mut request, 1, &stream);
    }
    snap::raw::Encoder::new().compress_vec(&request).unwrap_or_default()
}

/// Encodes streams as Loki's JSON push body.
pub fn encode_json(streams: &[PushStream]) -> Vec<u8> {
    let streams: Vec<Value> = streams
        .iter()
        .map(|s| {
            let labels: serde_json::Map<String, Value> =
                s.labels.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
            let values: Vec<Value> = s
                .entries
                .iter()
                .map(|e| {
                    let mut v = vec![Value::String(e.ts.to_string()), Value::String(e.line.clone())];
                    if !e.metadata.is_empty() {
                        v.push(Value::Object(
                            e.metadata.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect(),
                        ));
                    }
                    Value::Array(v)
                })
                .collect();
            serde_json::json!({"stream": labels, "values": values})
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({ "streams": streams })).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<PushStream> {
        vec![PushStream {
            labels: vec![("hostname".into(), "h1".into()), ("service_type".into(), "test \"q\"".into())],
            entries: vec![
                PushEntry { ts: 1_795_338_824_104_597_505, line: "hello loki".into(), metadata: vec![] },
                PushEntry {
                    ts: 1_795_338_825_000_000_000,
                    line: "second ✓".into(),
                    metadata: vec![("trace".into(), "abc".into())],
                },
            ],
        }]
    }

    #[test]
    fn protobuf_round_trips() {
        let body = encode_protobuf(&sample());
        assert_eq!(decode(Encoding::Protobuf, &body).unwrap(), sample());
    }

    #[test]
    fn json_round_trips_and_reads_the_capture() {
        let body = encode_json(&sample());
        assert_eq!(decode(Encoding::Json, &body).unwrap(), sample());
        let captured = r#"{"streams":[{"stream":{"service_type":"test","hostname":"h1"},"values":[["1795338824104597505","ceo-tools test line level=info msg=\"hello loki\""]]}]}"#;
        let s = decode(Encoding::Json, captured.as_bytes()).unwrap();
        assert_eq!(s[0].labels[0], ("hostname".to_string(), "h1".to_string()));
        assert_eq!(s[0].entries[0].ts, 1_795_338_824_104_597_505);
    }

    #[test]
    fn label_sets_read_back_as_written() {
        let labels = vec![("a".to_string(), "x \"y\"\\z\n".to_string()), ("b_2".to_string(), String::new())];
        assert_eq!(parse_labels(&labels_text(&labels)).unwrap(), labels);
        assert_eq!(parse_labels("{ }").unwrap(), vec![]);
        let sorted = parse_labels(r#"{job="x", a="1"}"#).unwrap();
        assert_eq!(sorted, vec![("a".to_string(), "1".to_string()), ("job".to_string(), "x".to_string())]);
        assert_eq!(parse_labels("job").unwrap_err(), "a label set is written `{name=\"value\", …}`");
        assert_eq!(parse_labels("{a=~\"x\"}").unwrap_err(), "label `a`: expected a quoted value");
        assert_eq!(parse_labels("{a=\"x\" b=\"y\"}").unwrap_err(), "unexpected `b=\"y\"` after label `a`");
        assert_eq!(parse_labels("{a=\"open}").unwrap_err(), "label `a`: expected a quoted value");
        assert_eq!(parse_labels("a=\"x\"").unwrap_err(), "a label set is written `{name=\"value\", …}`");
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        assert_eq!(
            decode(Encoding::Json, b"{").unwrap_err(),
            "loghttp.PushRequest: EOF while parsing an object at line 1 column 1"
        );
        assert_eq!(
            decode(Encoding::Json, br#"{"streams":[{"stream":{},"values":[["x","y"]]}]}"#).unwrap_err(),
            "streams[0].values[0]: timestamp must be a string of nanoseconds"
        );
        assert_eq!(
            decode(Encoding::Protobuf, b"garbage").unwrap_err(),
            "snappy: corrupt input (expected valid offset but got offset 882; dst position: 0)"
        );
        let truncated = snap::raw::Encoder::new().compress_vec(&[0x0a, 0x05, 0x0a]).unwrap();
        assert_eq!(decode(Encoding::Protobuf, &truncated).unwrap_err(), "protobuf: truncated field");
        assert_eq!(encoding_of("application/json; charset=utf-8"), Encoding::Json);
        assert_eq!(encoding_of("application/x-protobuf"), Encoding::Protobuf);
    }
}
