//! InfluxDB's query response: CSV, annotated (`#datatype`, `#group`, `#default` rows before
//! each table's header) or plain. Tables are separated by a blank line and each starts with a
//! header row; every data row becomes a `Row` of typed values. An error table (columns
//! `error`, `reference`) becomes an `Err` quoting the server's message.

/// A typed value from the response.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Str(String),
    Long(i64),
    ULong(u64),
    Double(f64),
    Bool(bool),
    /// RFC 3339 text, as InfluxDB sends it.
    Time(String),
}

/// One row: column name and value, in the response's column order (annotation column dropped).
pub type Row = Vec<(String, Value)>;

/// Splits CSV text into records, keeping blank lines as empty records (they end tables).
/// Handles quoted fields with `""` escapes and embedded newlines.
fn records(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut out = Vec::new();
    let mut record: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut in_quotes = false;
    let mut line = 1usize;
    let mut any_in_record = false;
    while let Some(c) = chars.next() {
        if in_quotes {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => in_quotes = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                in_quotes = true;
                any_in_record = true;
            }
            ',' => {
                record.push(std::mem::take(&mut field));
                any_in_record = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                line += 1;
                if any_in_record || !field.is_empty() {
                    record.push(std::mem::take(&mut field));
                }
                out.push(std::mem::take(&mut record));
                any_in_record = false;
            }
            _ => {
                field.push(c);
                any_in_record = true;
            }
        }
    }
    if in_quotes {
        return Err(format!("unterminated quoted field (line {line})"));
    }
    if any_in_record || !field.is_empty() {
        record.push(field);
        out.push(record);
    }
    Ok(out)
}

fn typed(datatype: &str, text: &str) -> Value {
    if text.is_empty() && datatype != "string" {
        return Value::Null;
    }
    match datatype {
        "long" => text.parse().map(Value::Long).unwrap_or_else(|_| Value::Str(text.to_string())),
        "unsignedLong" => text.parse().map(Value::ULong).unwrap_or_else(|_| Value::Str(text.to_string())),
        "double" => match text {
            "+Inf" | "Inf" => Value::Double(f64::INFINITY),
            "-Inf" => Value::Double(f64::NEG_INFINITY),
            "NaN" => Value::Double(f64::NAN),
            _ => text.parse().map(Value::Double).unwrap_or_else(|_| Value::Str(text.to_string())),
        },
        "boolean" => Value::Bool(text == "true"),
        d if d.starts_with("dateTime") => Value::Time(text.to_string()),
        "" => infer(text),
        _ => Value::Str(text.to_string()),
    }
}

/// Without annotations every value is text; numbers and booleans are recognised.
fn infer(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else if let Ok(i) = text.parse::<i64>() {
        Value::Long(i)
    } else if let Ok(f) = text.parse::<f64>() {
        Value::Double(f)
    } else if text == "true" || text == "false" {
        Value::Bool(text == "true")
    } else if text.len() >= 20 && text.as_bytes().get(4) == Some(&b'-') && text.contains('T') {
        Value::Time(text.to_string())
    } else {
        Value::Str(text.to_string())
    }
}

#[derive(Default)]
struct Table {
    datatypes: Vec<String>,
    defaults: Vec<String>,
    header: Option<Vec<String>>,
}

/// Parses a whole response into rows of every table.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut table = Table::default();
    for record in records(text)? {
        if record.is_empty() {
            table = Table::default();
            continue;
        }
        let first = record[0].as_str();
        match first {
            "#datatype" => {
                table = Table { datatypes: record[1..].to_vec(), ..Table::default() };
                continue;
            }
            "#group" => continue,
            "#default" => {
                table.defaults = record[1..].to_vec();
                continue;
            }
            _ => {}
        }
        let Some(header) = &table.header else {
            // The first row after annotations (or a blank line) names the columns.
            let header: Vec<String> = record[1..].to_vec();
            if header.iter().any(|h| h == "error") && header.iter().any(|h| h == "reference") {
                table.header = Some(header);
                continue;
            }
            table.header = Some(header);
            continue;
        };
        let cells = &record[1.min(record.len())..];
        if header.first().map(String::as_str) == Some("error") {
            let message = cells.first().cloned().unwrap_or_default();
            return Err(format!("query failed: {message}"));
        }
        let mut row = Row::with_capacity(header.len());
        for (i, name) in header.iter().enumerate() {
            let raw = cells.get(i).map(String::as_str).unwrap_or("");
            let raw = if raw.is_empty() { table.defaults.get(i).map(String::as_str).unwrap_or("") } else { raw };
            let datatype = table.datatypes.get(i).map(String::as_str).unwrap_or("");
            row.push((name.clone(), typed(datatype, raw)));
        }
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANNOTATED: &str = "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string,string\r\n\
#group,false,false,true,true,false,false,true,true,true\r\n\
#default,_result,,,,,,,,\r\n\
,result,table,_start,_stop,_time,_value,_field,_measurement,cpu\r\n\
,,0,2026-11-22T09:00:00Z,2026-11-22T09:01:00Z,2026-11-22T09:00:10Z,12.5,usage_system,cpu,cpu-total\r\n\
,,0,2026-11-22T09:00:00Z,2026-11-22T09:01:00Z,2026-11-22T09:00:20Z,+Inf,usage_system,cpu,cpu-total\r\n\
\r\n\
#datatype,string,long,string,long\r\n\
#group,false,false,true,false\r\n\
#default,_result,,,\r\n\
,result,table,_measurement,_value\r\n\
,,1,\"mem, \"\"used\"\"\",42\r\n\
\r\n";

    #[test]
    fn annotated_tables_give_typed_rows() {
        let rows = parse(ANNOTATED).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0][0], ("result".into(), Value::Str("_result".into())));
        assert_eq!(rows[0][1], ("table".into(), Value::Long(0)));
        assert_eq!(rows[0][5], ("_value".into(), Value::Double(12.5)));
        assert_eq!(rows[0][4].1, Value::Time("2026-11-22T09:00:10Z".into()));
        assert_eq!(rows[1][5].1, Value::Double(f64::INFINITY));
        assert_eq!(rows[2][2], ("_measurement".into(), Value::Str("mem, \"used\"".into())));
        assert_eq!(rows[2][3].1, Value::Long(42));
    }

    #[test]
    fn plain_csv_values_are_inferred() {
        let text = ",result,table,_value,_field,ok\n,_result,0,3,n,true\n,_result,0,2.5,n,false\n";
        let rows = parse(text).unwrap();
        assert_eq!(rows[0][2].1, Value::Long(3));
        assert_eq!(rows[1][2].1, Value::Double(2.5));
        assert_eq!(rows[1][4].1, Value::Bool(false));
    }

    #[test]
    fn error_tables_become_errors() {
        let text =
            "#datatype,string,string\n#group,true,true\n#default,,\n,error,reference\n,\"type error: bad\",897\n";
        assert_eq!(parse(text).unwrap_err(), "query failed: type error: bad");
    }

    #[test]
    fn empty_and_malformed_input_never_panic() {
        assert_eq!(parse("").unwrap(), Vec::<Row>::new());
        assert!(parse("\"open").is_err());
        // Arbitrary byte soup: must not panic, whatever it returns.
        let mut seed = 0x9e3779b97f4a7c15u64;
        let alphabet = b",\"\n\r#abc01 .-+:";
        for _ in 0..2000 {
            let mut s = String::new();
            for _ in 0..(seed % 64) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push(alphabet[(seed % alphabet.len() as u64) as usize] as char);
            }
            let _ = parse(&s);
            seed = seed.wrapping_add(1);
        }
    }
}
