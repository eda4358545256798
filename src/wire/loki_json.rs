//! Loki's JSON answers: `query_range`/`query` results (streams, matrix, vector), and the
//! `{"status":"success","data":[…]}` of the label endpoints.

use serde_json::Value;

/// One log line from a streams result.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Nanoseconds since the epoch, as Loki sends it (a string of digits).
    pub time_ns: i128,
    pub line: String,
    pub labels: Vec<(String, String)>,
}

/// One sample of a matrix or vector result.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSample {
    pub time_s: f64,
    pub value: f64,
    pub labels: Vec<(String, String)>,
}

/// A query result.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    Streams(Vec<LogEntry>),
    Metric(Vec<MetricSample>),
}

fn labels_of(v: Option<&Value>) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = v
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default();
    labels.sort();
    labels
}

fn data(body: &str) -> Result<Value, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("not JSON ({e}): {}", super::excerpt(body, 120)))?;
    match v.get("status").and_then(Value::as_str) {
        Some("success") => v.get("data").cloned().ok_or_else(|| "answer has no `data`".to_string()),
        Some(other) => Err(format!("status `{other}`: {}", v.get("error").and_then(Value::as_str).unwrap_or(""))),
        None => Err(format!("answer has no `status`: {}", super::excerpt(body, 120))),
    }
}

/// Parses a `query_range` or `query` answer. Streams are flattened, newest first.
pub fn parse_query(body: &str) -> Result<QueryResult, String> {
    let data = data(body)?;
    let kind = data.get("resultType").and_then(Value::as_str).unwrap_or("");
    let result = data.get("result").and_then(Value::as_array).ok_or("answer has no `data.result` array")?;
    match kind {
        "streams" => {
            let mut entries = Vec::new();
            for stream in result {
                let labels = labels_of(stream.get("stream"));
                for pair in stream.get("values").and_then(Value::as_array).into_iter().flatten() {
                    let ts = pair.get(0).and_then(Value::as_str).and_then(|t| t.parse::<i128>().ok());
                    let line = pair.get(1).and_then(Value::as_str);
                    if let (Some(time_ns), Some(line)) = (ts, line) {
                        entries.push(LogEntry { time_ns, line: line.to_string(), labels: labels.clone() });
                    } else {
                        return Err(format!("malformed stream value `{pair}`"));
                    }
                }
            }
            entries.sort_by_key(|e| std::cmp::Reverse(e.time_ns));
            Ok(QueryResult::Streams(entries))
        }
        "matrix" | "vector" => {
            let mut samples = Vec::new();
            for series in result {
                let labels = labels_of(series.get("metric"));
                let points: Vec<&Value> = match kind {
                    "matrix" => {
                        series.get("values").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
                    }
                    _ => series.get("value").into_iter().collect(),
                };
                for p in points {
                    let time_s = p.get(0).and_then(Value::as_f64).unwrap_or(0.0);
                    let value = p.get(1).and_then(Value::as_str).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
                    samples.push(MetricSample { time_s, value, labels: labels.clone() });
                }
            }
            Ok(QueryResult::Metric(samples))
        }
        other => Err(format!("unknown resultType `{other}`")),
    }
}

/// Parses a label-list answer: `{"status":"success","data":["a","b"]}`.
pub fn parse_strings(body: &str) -> Result<Vec<String>, String> {
    let data = data(body)?;
    Ok(data.as_array().ok_or("`data` is not a list")?.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(name: &str) -> Option<String> {
        std::fs::read_to_string(format!("{}/../shared/wire/loki-3.4.6/{name}", env!("CARGO_MANIFEST_DIR"))).ok()
    }

    #[test]
    fn captured_answers_parse() {
        let Some(streams) = wire("query-range-streams.json") else {
            println!("skipped: ../shared/wire not present");
            return;
        };
        let QueryResult::Streams(entries) = parse_query(&streams).unwrap() else { panic!("streams") };
        assert!(entries[0].line.contains("hello loki"));
        assert!(entries[0].labels.contains(&("hostname".into(), "h1".into())));
        let QueryResult::Metric(m) = parse_query(&wire("query-range-matrix.json").unwrap()).unwrap() else { panic!() };
        assert!(!m.is_empty());
        let QueryResult::Metric(v) = parse_query(&wire("query-instant-metric.json").unwrap()).unwrap() else {
            panic!()
        };
        assert!(!v.is_empty());
        assert!(parse_strings(&wire("labels.json").unwrap()).unwrap().contains(&"service_type".to_string()));
    }

    #[test]
    fn wrong_answers_are_errors() {
        assert!(parse_query("<html>").unwrap_err().starts_with("not JSON"));
        assert!(parse_query("{\"status\":\"error\",\"error\":\"boom\"}").unwrap_err().contains("boom"));
        assert!(
            parse_query(
                "{\"status\":\"success\",\"data\":{\"resultType\":\"streams\",\"result\":[{\"values\":[[1,2]]}]}}"
            )
            .is_err()
        );
        assert!(parse_strings("{\"status\":\"success\",\"data\":{}}").is_err());
    }

    #[test]
    fn every_prefix_of_a_real_answer_is_handled() {
        let Some(body) = wire("query-range-streams.json") else {
            return println!("skipped: ../shared/wire not present");
        };
        // Truncated answers, as a dropped connection leaves them: errors, never panics.
        for cut in 0..body.len() {
            if body.is_char_boundary(cut) {
                let _ = parse_query(&body[..cut]);
                let _ = parse_strings(&body[..cut]);
            }
        }
    }
}
