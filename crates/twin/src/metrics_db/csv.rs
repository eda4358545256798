//! The metrics-db twin's query answers in InfluxDB's CSV: each Flux result table handed to
//! the one CSV writer (`opsbook_wire::flux_csv::Writer`), with its columns' types and group
//! key, and its cells as the wire's typed values.

use super::flux::{Results, Value};
use opsbook_wire::flux_csv::{self, Column, Dialect, Writer};

fn cell(v: &Value) -> flux_csv::Value {
    match v {
        Value::Null => flux_csv::Value::Null,
        Value::Str(s) => flux_csv::Value::Str(s.clone()),
        Value::Float(f) => flux_csv::Value::Double(*f),
        Value::Int(i) => flux_csv::Value::Long(*i),
        Value::UInt(u) => flux_csv::Value::ULong(*u),
        Value::Bool(b) => flux_csv::Value::Bool(*b),
        Value::Time(t) => flux_csv::Value::Time(flux_csv::time_text(*t)),
    }
}

/// Encodes every result. Errors (a schema collision) surface before anything is written.
pub(super) fn encode(results: &Results<'_>, dialect: &Dialect) -> Result<String, String> {
    let mut w = Writer::new(dialect);
    for (name, tables) in results {
        w.result(name);
        for (index, table) in tables.iter().enumerate() {
            let schema = table.columns()?;
            let columns: Vec<Column> = schema
                .iter()
                .map(|(n, t)| Column { name: n.clone(), datatype: t.datatype(), group: table.key().contains(n) })
                .collect();
            w.table(index, &columns);
            for row in table.rows(&schema) {
                let cells: Vec<flux_csv::Value> = row.iter().map(cell).collect();
                w.row(&cells);
            }
        }
    }
    Ok(w.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics_db::flux;
    use crate::metrics_db::store::Bucket;
    use opsbook_wire::line_protocol;

    const NOW: i64 = 1_795_338_900_000_000_000;

    fn run(src: &str, dialect: &Dialect) -> String {
        let mut b = Bucket::new("telegraf", "1".into());
        let t = NOW - 10_500_000_000;
        b.write(
            line_protocol::parse(&format!(
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
        let rows = opsbook_wire::flux_csv::parse(&csv).unwrap();
        assert_eq!(rows.len(), 1);
        assert!(
            rows[0].iter().any(|(k, v)| k == "_value" && *v == opsbook_wire::flux_csv::Value::Str("a, \"b\"".into()))
        );
    }
}
