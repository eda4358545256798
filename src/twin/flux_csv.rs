//! Writes Flux results as InfluxDB 2 writes them: CSV with CRLF line ends, a `result` and a
//! `table` column first, one table per group key, a blank line wherever the schema changes
//! (and between results), and a blank line at the end. Annotation rows (`#datatype`,
//! `#group`, `#default`) appear only when the request's dialect asks for them, in the order
//! asked; with `#default`, data rows leave the `result` column empty as InfluxDB does.

use super::flux::{Results, Schema, Value};

/// What the client asked for (`dialect` of the JSON query body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialect {
    pub header: bool,
    /// Any of "datatype", "group", "default", in the order to write them.
    pub annotations: Vec<String>,
}

impl Default for Dialect {
    /// A raw `application/vnd.flux` query: header row, no annotations.
    fn default() -> Self {
        Dialect { header: true, annotations: Vec::new() }
    }
}

/// Go's `encoding/csv` quoting rule.
fn field(out: &mut String, text: &str) {
    let needs = !text.is_empty()
        && (text == "\\." || text.contains([',', '"', '\r', '\n']) || text.starts_with(|c: char| c.is_whitespace()));
    if needs {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`, plus InfluxDB's spelling of infinities.
pub fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{f}")
    }
}

/// RFC 3339 with nanoseconds, trailing zeros trimmed (Go's `time.RFC3339Nano`).
pub fn time_text(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let base = if secs >= 0 {
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64))
            .to_string()
    } else {
        "1970-01-01T00:00:00Z".to_string()
    };
    if frac == 0 {
        return base;
    }
    let digits = format!("{frac:09}");
    format!("{}.{}Z", base.trim_end_matches('Z'), digits.trim_end_matches('0'))
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Str(s) => s.clone(),
        Value::Float(f) => float_text(*f),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Time(t) => time_text(*t),
    }
}

/// Encodes every result. Errors (a schema collision) surface before anything is written.
pub fn encode(results: &Results<'_>, dialect: &Dialect) -> Result<String, String> {
    let mut out = String::new();
    let defaults = dialect.annotations.iter().any(|a| a == "default");
    for (name, tables) in results {
        let mut previous: Option<(Schema, Vec<bool>)> = None;
        for (index, table) in tables.iter().enumerate() {
            let columns = table.columns()?;
            let group: Vec<bool> = columns.iter().map(|(n, _)| table.key().contains(n)).collect();
            let schema = (columns.clone(), group.clone());
            if previous.as_ref() != Some(&schema) {
                if !out.is_empty() {
                    out.push_str("\r\n");
                }
                for a in &dialect.annotations {
                    let mut line = format!("#{a}");
                    match a.as_str() {
                        "datatype" => {
                            line.push_str(",string,long");
                            for (_, t) in &columns {
                                line.push(',');
                                line.push_str(t.datatype());
                            }
                        }
                        "group" => {
                            line.push_str(",false,false");
                            for g in &group {
                                line.push_str(if *g { ",true" } else { ",false" });
                            }
                        }
                        _ => {
                            line.push(',');
                            field(&mut line, name);
                            line.push(',');
                            line.push_str(&",".repeat(columns.len()));
                        }
                    }
                    out.push_str(&line);
                    out.push_str("\r\n");
                }
                if dialect.header {
                    out.push_str(",result,table");
                    for (n, _) in &columns {
                        out.push(',');
                        field(&mut out, n);
                    }
                    out.push_str("\r\n");
                }
                previous = Some(schema);
            }
            for row in table.rows(&columns) {
                out.push(',');
                if !defaults {
                    field(&mut out, name);
                }
                out.push(',');
                out.push_str(&index.to_string());
                for v in &row {
                    out.push(',');
                    field(&mut out, &cell(v));
                }
                out.push_str("\r\n");
            }
        }
    }
    out.push_str("\r\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineproto;
    use crate::twin::flux;
    use crate::twin::points::Bucket;

    const NOW: i64 = 1_795_338_900_000_000_000;

    fn run(src: &str, dialect: &Dialect) -> String {
        let mut b = Bucket::new("telegraf", "1".into());
        let t = NOW - 10_500_000_000;
        b.write(
            lineproto::parse(&format!(
                "cpu,cpu=cpu-total,host=h1 usage_system=12.5 {t}\ncpu,cpu=cpu0,host=h1 usage_system=3 {t}\nlog,host=h1 msg=\"a, \\\"b\\\"\" {t}"
            ))
            .unwrap(),
            100,
        )
        .unwrap();
        let program = flux::compile(src, NOW).unwrap();
        let results = flux::run(&program, &|_| Some(&b)).unwrap();
        encode(&results, dialect).unwrap()
    }

    #[test]
    fn plain_csv_has_a_header_and_one_table_per_series() {
        let csv = run(
            r#"from(bucket:"telegraf") |> range(start: -1m) |> filter(fn: (r) => r._measurement == "cpu")"#,
            &Dialect::default(),
        );
        assert_eq!(
            csv,
            ",result,table,_start,_stop,_time,_value,_field,_measurement,cpu,host\r\n\
             ,_result,0,2026-11-22T09:14:00Z,2026-11-22T09:15:00Z,2026-11-22T09:14:49.5Z,12.5,usage_system,cpu,cpu-total,h1\r\n\
             ,_result,1,2026-11-22T09:14:00Z,2026-11-22T09:15:00Z,2026-11-22T09:14:49.5Z,3,usage_system,cpu,cpu0,h1\r\n\r\n"
        );
    }

    #[test]
    fn annotations_in_the_order_asked_and_schema_changes_restart_them() {
        let dialect = Dialect { header: true, annotations: vec!["datatype".into(), "group".into(), "default".into()] };
        let csv = run(r#"from(bucket:"telegraf") |> range(start: -1m) |> count()"#, &dialect);
        let expected = "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,string,string,string,string,long\r\n\
             #group,false,false,true,true,true,true,true,true,false\r\n\
             #default,_result,,,,,,,,\r\n\
             ,result,table,_start,_stop,_field,_measurement,cpu,host,_value\r\n\
             ,,0,2026-11-22T09:14:00Z,2026-11-22T09:15:00Z,usage_system,cpu,cpu-total,h1,1\r\n\
             ,,1,2026-11-22T09:14:00Z,2026-11-22T09:15:00Z,usage_system,cpu,cpu0,h1,1\r\n\
             \r\n\
             #datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,string,string,string,long\r\n\
             #group,false,false,true,true,true,true,true,false\r\n\
             #default,_result,,,,,,,\r\n\
             ,result,table,_start,_stop,_field,_measurement,host,_value\r\n\
             ,,2,2026-11-22T09:14:00Z,2026-11-22T09:15:00Z,msg,log,h1,1\r\n\r\n";
        assert_eq!(csv, expected);
    }

    #[test]
    fn strings_are_quoted_as_go_quotes_them_and_parse_back() {
        let csv = run(
            r#"from(bucket:"telegraf") |> range(start: -1m) |> filter(fn: (r) => r._measurement == "log")"#,
            &Dialect::default(),
        );
        assert!(csv.contains(",\"a, \"\"b\"\"\",msg,"), "{csv}");
        let rows = crate::wire::flux_csv::parse(&csv).unwrap();
        assert_eq!(rows.len(), 1);
        assert!(
            rows[0].iter().any(|(k, v)| k == "_value" && *v == crate::wire::flux_csv::Value::Str("a, \"b\"".into()))
        );
    }

    #[test]
    fn numbers_and_times_as_go_formats_them() {
        assert_eq!(float_text(100.0), "100");
        assert_eq!(float_text(0.1), "0.1");
        assert_eq!(float_text(f64::INFINITY), "+Inf");
        assert_eq!(time_text(1_795_338_824_104_597_505), "2026-11-22T09:13:44.104597505Z");
        assert_eq!(time_text(1_795_338_824_100_000_000), "2026-11-22T09:13:44.1Z");
        assert_eq!(time_text(1_795_338_824_000_000_000), "2026-11-22T09:13:44Z");
    }
}
