//! Loki's JSON answers, both ways: `query_range`/`query` results (streams, matrix, vector),
//! the `{"status":"success","data":[…]}` of the label endpoints, and series. `parse_*` read
//! them (the host's `loki::` verbs); `write_*` write them as Loki 3.4 does (the log-store
//! twin), empty forms included: an empty label list has no `data` at all.

use serde_json::{Value, json};

/// One log line from a streams result.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Nanoseconds since the epoch, as Loki sends it (a string of digits).
    pub time_ns: i128,
    /// The log line.
    pub line: String,
    /// Its stream's labels.
    pub labels: Vec<(String, String)>,
}

/// One sample of a matrix or vector result.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSample {
    /// Seconds since the epoch.
    pub time_s: f64,
    /// The sample's value.
    pub value: f64,
    /// Its series' labels.
    pub labels: Vec<(String, String)>,
}

/// A query result.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    /// Log lines (`resultType` `streams`).
    Streams(Vec<LogEntry>),
    /// Samples (`resultType` `matrix` or `vector`).
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
    let v: Value =
        serde_json::from_str(body).map_err(|e| format!("not JSON ({e}): {}", crate::text::excerpt(body, 120)))?;
    match v.get("status").and_then(Value::as_str) {
        Some("success") => v.get("data").cloned().ok_or_else(|| "answer has no `data`".to_string()),
        Some(other) => Err(format!("status `{other}`: {}", v.get("error").and_then(Value::as_str).unwrap_or(""))),
        None => Err(format!("answer has no `status`: {}", crate::text::excerpt(body, 120))),
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

/// Parses a label-list answer: `{"status":"success","data":["a","b"]}`. Loki leaves `data`
/// out when the list is empty (`{"status":"success"}`, e.g. before the first push): no labels,
/// not an error.
pub fn parse_strings(body: &str) -> Result<Vec<String>, String> {
    let v: Value =
        serde_json::from_str(body).map_err(|e| format!("not JSON ({e}): {}", crate::text::excerpt(body, 120)))?;
    if v.get("status").and_then(Value::as_str) == Some("success") && v.get("data").is_none() {
        return Ok(Vec::new());
    }
    let data = data(body)?;
    Ok(data.as_array().ok_or("`data` is not a list")?.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
}

/// Label pairs as a JSON object, in the order given.
fn label_object(labels: &[(String, String)]) -> Value {
    Value::Object(labels.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

/// Seconds as Loki writes sample times: an integer when whole, else up to milliseconds.
pub(crate) fn seconds_number(ns: i64) -> Value {
    let ms = ns.div_euclid(1_000_000);
    if ms % 1000 == 0 { json!(ms / 1000) } else { json!(ms as f64 / 1000.0) }
}

/// The answer of `/labels` and `/label/NAME/values`. Loki 3.4 marshals the list with
/// `omitempty`, so an empty one is `{"status":"success"}` (captured in `labels-empty.txt`).
pub fn write_strings(values: &[String]) -> String {
    if values.is_empty() {
        return json!({"status": "success"}).to_string();
    }
    json!({"status": "success", "data": values}).to_string()
}

/// The answer of `/series`: one label object per stream. Loki writes `data` even when no
/// stream matches (`"data":[]`, its documented form; not captured here).
pub fn write_series(sets: &[Vec<(String, String)>]) -> String {
    let data: Vec<Value> = sets.iter().map(|l| label_object(l)).collect();
    json!({"status": "success", "data": data}).to_string()
}

/// One stream of a streams result: its labels and `(time ns, line)` values.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamOut {
    /// The stream's labels.
    pub labels: Vec<(String, String)>,
    /// Its `(time ns, line)` values, oldest first.
    pub values: Vec<(i64, String)>,
}

/// One series of a metric result: its labels and `(time ns, value)` points.
pub(crate) type SeriesOut = (Vec<(String, String)>, Vec<(i64, f64)>);

fn query_answer(kind: &str, result: Vec<Value>, stats: Value) -> String {
    json!({"status": "success", "data": {"resultType": kind, "result": result, "stats": stats}}).to_string()
}

/// A log query's answer (`resultType` `streams`); no stream is `"result":[]`.
pub fn write_streams(streams: &[StreamOut], stats: Value) -> String {
    let result = streams
        .iter()
        .map(|s| {
            let values: Vec<Value> = s.values.iter().map(|(ts, line)| json!([ts.to_string(), line])).collect();
            json!({"stream": label_object(&s.labels), "values": values})
        })
        .collect();
    query_answer("streams", result, stats)
}

/// A range metric query's answer (`resultType` `matrix`).
pub fn write_matrix(series: &[SeriesOut], stats: Value) -> String {
    let result = series
        .iter()
        .map(|(labels, points)| {
            let values: Vec<Value> =
                points.iter().map(|(t, v)| json!([seconds_number(*t), crate::text::float_text(*v)])).collect();
            json!({"metric": label_object(labels), "values": values})
        })
        .collect();
    query_answer("matrix", result, stats)
}

/// An instant metric query's answer (`resultType` `vector`): each series' first point.
pub fn write_vector(series: &[SeriesOut], stats: Value) -> String {
    let result = series
        .iter()
        .filter_map(|(labels, points)| {
            let (t, v) = points.first()?;
            Some(json!({"metric": label_object(labels), "value": [seconds_number(*t), crate::text::float_text(*v)]}))
        })
        .collect();
    query_answer("vector", result, stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(name: &str) -> Option<String> {
        let path = format!("{}/tests/fixtures/wire/loki-3.4.6/{name}", concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
    }

    #[test]
    fn captured_answers_parse() {
        let streams = wire("query-range-streams.json").unwrap();
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
        let empty = wire("labels-empty.txt").unwrap();
        let body = empty.lines().nth(1).unwrap();
        assert_eq!(parse_strings(body).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn written_answers_are_the_captured_ones() {
        let labels = ["hostname", "service_name", "service_type"].map(String::from);
        assert_eq!(write_strings(&labels), wire("labels.json").unwrap().trim_end());
        assert_eq!(write_strings(&["h1".to_string()]), wire("label-hostname-values.json").unwrap().trim_end());
        assert_eq!(write_strings(&[]), wire("labels-empty.txt").unwrap().lines().nth(1).unwrap());
        let set = [("hostname", "h1"), ("service_name", "unknown_service"), ("service_type", "test")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .to_vec();
        assert_eq!(write_series(&[set]), wire("series.json").unwrap().trim_end());
        assert_eq!(write_series(&[]), r#"{"status":"success","data":[]}"#);
        let empty = write_streams(&[], json!({}));
        assert_eq!(empty, r#"{"status":"success","data":{"resultType":"streams","result":[],"stats":{}}}"#);
        let QueryResult::Metric(m) =
            parse_query(&write_matrix(&[(vec![], vec![(1_500_000_000, 2.0)])], json!({}))).unwrap()
        else {
            panic!()
        };
        assert_eq!((m[0].time_s, m[0].value), (1.5, 2.0));
        assert_eq!(seconds_number(1_795_338_840_000_000_000), json!(1795338840));
        assert_eq!(seconds_number(1_795_338_832_130_000_000), json!(1795338832.13));
    }

    #[test]
    fn wrong_answers_are_errors() {
        assert_eq!(parse_query("<html>").unwrap_err(), "not JSON (expected value at line 1 column 1): <html>");
        assert_eq!(parse_query("{\"status\":\"error\",\"error\":\"boom\"}").unwrap_err(), "status `error`: boom");
        assert_eq!(
            parse_query(
                "{\"status\":\"success\",\"data\":{\"resultType\":\"streams\",\"result\":[{\"values\":[[1,2]]}]}}"
            )
            .unwrap_err(),
            "malformed stream value `[1,2]`"
        );
        assert_eq!(parse_strings("{\"status\":\"success\",\"data\":{}}").unwrap_err(), "`data` is not a list");
    }

    #[test]
    fn every_prefix_of_a_real_answer_is_handled() {
        let body = wire("query-range-streams.json").unwrap();
        // Truncated answers, as a dropped connection leaves them: errors, never panics.
        for cut in 0..body.len() {
            if body.is_char_boundary(cut) {
                let _ = parse_query(&body[..cut]);
                let _ = parse_strings(&body[..cut]);
            }
        }
    }
}
