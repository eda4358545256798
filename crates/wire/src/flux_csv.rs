//! InfluxDB 2's query response, both ways: CSV, annotated (`#datatype`, `#group`, `#default`
//! rows before each table's header) or plain.
//!
//! Reading (`parse`, what the host's `influx::` verbs do): tables are separated by a blank
//! line and each starts with a header row; every data row becomes a `Row` of typed values. An
//! error table (columns `error`, `reference`) becomes an `Err` quoting the server's message.
//!
//! Writing (`Writer`, what the metrics-db twin answers), as InfluxDB 2 writes it: CRLF line
//! ends, a `result` and a `table` column first, a blank line wherever the schema changes (and
//! between results), and a blank line at the end, so a query with no rows is a lone CRLF.
//! Annotation rows appear only when the request's dialect asks for them, in the order asked;
//! with `#default`, data rows leave the `result` column empty as InfluxDB does.

/// A typed value from the response.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An empty cell.
    Null,
    /// A `string` cell.
    Str(String),
    /// A `long` cell.
    Long(i64),
    /// An `unsignedLong` cell.
    ULong(u64),
    /// A `double` cell.
    Double(f64),
    /// A `boolean` cell.
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

/// What the client asked for (`dialect` of the JSON query body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialect {
    /// Whether the first row of each table names its columns.
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

/// One column of a table to write: its name, its `#datatype` (`double`, `long`,
/// `dateTime:RFC3339`, …) and whether it is part of the group key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Its `#datatype` annotation.
    pub datatype: &'static str,
    /// Whether it is part of the group key (`#group`).
    pub group: bool,
}

/// Writes results table by table: `result` at each new result, `table` at each table, `row`
/// for its rows, `finish` for the text.
pub struct Writer<'d> {
    dialect: &'d Dialect,
    out: String,
    result: String,
    table: usize,
    previous: Option<Vec<Column>>,
}

impl<'d> Writer<'d> {
    /// A writer of the tables `dialect` asks for.
    pub fn new(dialect: &'d Dialect) -> Writer<'d> {
        Writer { dialect, out: String::new(), result: "_result".into(), table: 0, previous: None }
    }

    /// Starts the tables of the result named `name` (`_result`, or a `yield`'s name).
    pub fn result(&mut self, name: &str) {
        self.result = name.to_string();
        self.previous = None;
    }

    /// Starts table number `index`; annotations and a header are written when its schema
    /// differs from the previous table's.
    pub fn table(&mut self, index: usize, columns: &[Column]) {
        self.table = index;
        if self.previous.as_deref() == Some(columns) {
            return;
        }
        if !self.out.is_empty() {
            self.out.push_str("\r\n");
        }
        for a in &self.dialect.annotations {
            let mut line = format!("#{a}");
            match a.as_str() {
                "datatype" => {
                    line.push_str(",string,long");
                    for c in columns {
                        line.push(',');
                        line.push_str(c.datatype);
                    }
                }
                "group" => {
                    line.push_str(",false,false");
                    for c in columns {
                        line.push_str(if c.group { ",true" } else { ",false" });
                    }
                }
                _ => {
                    line.push(',');
                    field(&mut line, &self.result);
                    line.push(',');
                    line.push_str(&",".repeat(columns.len()));
                }
            }
            self.out.push_str(&line);
            self.out.push_str("\r\n");
        }
        if self.dialect.header {
            self.out.push_str(",result,table");
            for c in columns {
                self.out.push(',');
                field(&mut self.out, &c.name);
            }
            self.out.push_str("\r\n");
        }
        self.previous = Some(columns.to_vec());
    }

    /// One data row of the current table, its cells in the columns' order.
    pub fn row(&mut self, cells: &[Value]) {
        self.out.push(',');
        if !self.dialect.annotations.iter().any(|a| a == "default") {
            field(&mut self.out, &self.result);
        }
        self.out.push(',');
        self.out.push_str(&self.table.to_string());
        for v in cells {
            self.out.push(',');
            field(&mut self.out, &cell(v));
        }
        self.out.push_str("\r\n");
    }

    /// The whole answer: what was written and the final blank line.
    pub fn finish(mut self) -> String {
        self.out.push_str("\r\n");
        self.out
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
        Value::Str(s) | Value::Time(s) => s.clone(),
        Value::Double(f) => crate::text::float_text(*f),
        Value::Long(i) => i.to_string(),
        Value::ULong(u) => u.to_string(),
        Value::Bool(b) => b.to_string(),
    }
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
    fn written_tables_read_back() {
        let dialect = Dialect { header: true, annotations: vec!["datatype".into(), "group".into(), "default".into()] };
        let mut w = Writer::new(&dialect);
        let columns = vec![
            Column { name: "_measurement".into(), datatype: "string", group: true },
            Column { name: "_value".into(), datatype: "double", group: false },
        ];
        w.result("_result");
        w.table(0, &columns);
        w.row(&[Value::Str("mem, \"used\"".into()), Value::Double(f64::INFINITY)]);
        w.table(1, &columns);
        w.row(&[Value::Str("cpu".into()), Value::Double(0.5)]);
        let text = w.finish();
        assert_eq!(
            text,
            "#datatype,string,long,string,double\r\n#group,false,false,true,false\r\n#default,_result,,,\r\n\
             ,result,table,_measurement,_value\r\n,,0,\"mem, \"\"used\"\"\",+Inf\r\n,,1,cpu,0.5\r\n\r\n"
        );
        let rows = parse(&text).unwrap();
        assert_eq!(rows[0][2].1, Value::Str("mem, \"used\"".into()));
        assert_eq!(rows[1][3].1, Value::Double(0.5));
        // No table at all: InfluxDB 2 answers a lone CRLF, which reads as no rows.
        let empty = Writer::new(&Dialect::default()).finish();
        assert_eq!(empty, "\r\n");
        assert_eq!(parse(&empty).unwrap(), Vec::<Row>::new());
    }

    #[test]
    fn numbers_and_times_as_go_formats_them() {
        assert_eq!(crate::text::float_text(100.0), "100");
        assert_eq!(crate::text::float_text(0.1), "0.1");
        assert_eq!(crate::text::float_text(f64::INFINITY), "+Inf");
        assert_eq!(time_text(1_795_338_824_104_597_505), "2026-11-22T09:13:44.104597505Z");
        assert_eq!(time_text(1_795_338_824_100_000_000), "2026-11-22T09:13:44.1Z");
        assert_eq!(time_text(1_795_338_824_000_000_000), "2026-11-22T09:13:44Z");
    }

    #[test]
    fn empty_and_malformed_input_never_panic() {
        assert_eq!(parse("").unwrap(), Vec::<Row>::new());
        assert_eq!(parse("\"open").unwrap_err(), "unterminated quoted field (line 1)");
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
