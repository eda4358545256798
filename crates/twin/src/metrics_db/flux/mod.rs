//! The Flux subset the metrics-db twin evaluates: the pipelines runbooks use.
//!
//! ```text
//! from(bucket: "b") |> range(start: -5m[, stop: now() | -1m | 2026-11-22T09:00:00Z])
//!   |> filter(fn: (r) => r._measurement == "cpu" and (r["cpu"] == "cpu-total" or r.host != "x"))
//!   |> count() | sum() | mean() | max() | min() | first() | last()
//!   |> limit(n: 1[, offset: 0]) |> group([columns: ["host"][, mode: "by"|"except"]]) |> yield([name: "x"])
//! ```
//!
//! Filters compare columns with `==`, `!=`, `<`, `<=`, `>`, `>=`, `=~`, `!~` and combine with
//! `and`, `or`, `not`, `exists`. Anything else — another function, an import, an assignment,
//! a parameter this file does not know — is an error naming the unsupported part, which the
//! server answers with InfluxDB's `400 {"code":"invalid",…}`.
//!
//! Tables stay views over the stored series (`Segment`s: a series and a row range) until an
//! aggregate or selector makes rows, so a count over a million points reads the columns
//! without building a row for each point.

mod eval;
mod lexer;
mod parser;
mod planner;
mod table;
mod value;

use eval::{apply_agg, apply_filter, apply_group, apply_limit};
use lexer::lex;
use parser::Parser;
use planner::{Plan, Stage, plan};
pub(super) use table::Table;
use table::{Body, Rows, Segment};
pub(super) use value::Value;

use super::store::Bucket;

/// Named results, in the order they were yielded.
pub(super) type Results<'a> = Vec<(String, Vec<Table<'a>>)>;

/// A compiled query: its pipelines, checked, with `now` fixed.
#[derive(Debug)]
pub(super) struct Program {
    plans: Vec<Plan>,
    now: i64,
}

impl Program {
    /// The buckets the program reads.
    pub(super) fn buckets(&self) -> Vec<&str> {
        self.plans.iter().map(|p| p.bucket.as_str()).collect()
    }
}

/// Parses and checks a query at time `now` (ns).
pub(super) fn compile(src: &str, now: i64) -> Result<Program, String> {
    let toks = lex(src).map_err(|e| format!("compilation failed: {e}"))?;
    let pipelines = Parser { toks, pos: 0 }.program().map_err(|e| format!("compilation failed: {e}"))?;
    if pipelines.is_empty() {
        return Err("error in query specification while starting program: this Flux script returns no streaming data. \
                    Consider adding a \"yield\" or invoking streaming functions directly, without performing an assignment"
            .into());
    }
    let plans = pipelines.into_iter().map(|p| plan(p, now)).collect::<Result<Vec<_>, _>>()?;
    let mut names: Vec<String> = Vec::new();
    for p in &plans {
        let mut yielded: Vec<String> =
            p.stages.iter().filter_map(|s| if let Stage::Yield(n) = s { Some(n.clone()) } else { None }).collect();
        if !matches!(p.stages.last(), Some(Stage::Yield(_))) {
            yielded.push("_result".into());
        }
        for n in yielded {
            if names.contains(&n) {
                return Err(format!("found duplicate yield name \"{n}\""));
            }
            names.push(n);
        }
    }
    Ok(Program { plans, now })
}

/// Runs a compiled program against the buckets (looked up by name).
pub(super) fn run<'a>(program: &Program, buckets: &dyn Fn(&str) -> Option<&'a Bucket>) -> Result<Results<'a>, String> {
    let mut results = Vec::new();
    for p in &program.plans {
        let bucket = buckets(&p.bucket)
            .ok_or_else(|| format!("failed to initialize execute state: could not find bucket \"{}\"", p.bucket))?;
        let key: Vec<String> = Vec::new();
        let mut tables: Vec<Table<'a>> = Vec::new();
        for series in bucket.sorted_series() {
            let (lo, hi) = series.window(p.start, p.stop);
            if lo < hi {
                let mut k = key.clone();
                k.extend(["_start", "_stop", "_field", "_measurement"].map(String::from));
                k.extend(series.tags.iter().map(|(t, _)| t.clone()));
                tables.push(Table {
                    key: k,
                    start: p.start,
                    stop: p.stop,
                    body: Body::Segments(vec![Segment { series, rows: Rows::Range(lo, hi) }]),
                });
            }
        }
        let mut ended_with_yield = false;
        for stage in &p.stages {
            ended_with_yield = false;
            tables = match stage {
                Stage::Filter { body, keep_empty, .. } => apply_filter(tables, body, *keep_empty, program.now),
                Stage::Agg(a) => apply_agg(tables, *a)?,
                Stage::Limit { n, offset } => apply_limit(tables, *n, *offset),
                Stage::Group { columns, except } => apply_group(tables, columns, *except)?,
                Stage::Yield(name) => {
                    results.push((name.clone(), tables.clone()));
                    ended_with_yield = true;
                    tables
                }
            };
        }
        if !ended_with_yield {
            results.push(("_result".to_string(), tables));
        }
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::lexer::{Tok, number_literal};
    use super::*;
    use opsbook_wire::line_protocol;

    const NOW: i64 = 1_795_338_900_000_000_000;

    fn bucket() -> Bucket {
        let mut b = Bucket::new("telegraf", "1".into());
        let s = NOW - 30_000_000_000;
        let text = format!(
            "cpu,cpu=cpu-total,host=h1 usage_system=10,usage_idle=80 {s}\n\
             cpu,cpu=cpu-total,host=h1 usage_system=30,usage_idle=60 {}\n\
             cpu,cpu=cpu0,host=h1 usage_system=5,usage_idle=90 {s}\n\
             mem,host=h1 used=100i {s}\n\
             cpu,cpu=cpu-total,host=h1 usage_system=99 {}\n",
            s + 10_000_000_000,
            NOW - 600_000_000_000
        );
        b.write(line_protocol::parse(&text).unwrap(), 1000).unwrap();
        b
    }

    fn query<'a>(b: &'a Bucket, src: &str) -> Result<Results<'a>, String> {
        let p = compile(src, NOW)?;
        run(&p, &|name| (name == "telegraf").then_some(b))
    }

    fn rows(t: &Table<'_>) -> Vec<Vec<Value>> {
        let c = t.columns().unwrap();
        t.rows(&c).collect()
    }

    #[test]
    fn the_three_spec_queries() {
        let b = bucket();
        let r = query(&b, r#"from(bucket: "telegraf") |> range(start: -5m) |> limit(n: 1)"#).unwrap();
        assert_eq!(r[0].0, "_result");
        assert_eq!(r[0].1.len(), 5, "one table per series in range");
        assert!(r[0].1.iter().all(|t| t.len() == 1));

        let r = query(
            &b,
            r#"from(bucket: "telegraf") |> range(start: -5m) |> filter(fn: (r) => r._measurement == "cpu") |> count()"#,
        )
        .unwrap();
        let tables = &r[0].1;
        assert_eq!(tables.len(), 4);
        let cols: Vec<String> = tables[0].columns().unwrap().into_iter().map(|c| c.0).collect();
        assert_eq!(cols, ["_start", "_stop", "_field", "_measurement", "cpu", "host", "_value"]);
        let total: i64 = tables
            .iter()
            .map(|t| match rows(t)[0][6] {
                Value::Int(n) => n,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 6);

        let r = query(
            &b,
            r#"from(bucket: "telegraf")
                 |> range(start: -1m)
                 |> filter(fn: (r) => r._measurement == "cpu")
                 |> filter(fn: (r) => r._field == "usage_system")
                 |> filter(fn: (r) => r.cpu == "cpu-total")
                 |> max()"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 1);
        let row = &rows(&r[0].1[0])[0];
        assert_eq!(row[3], Value::Float(30.0));
        assert_eq!(row[2], Value::Time(NOW - 20_000_000_000));
    }

    #[test]
    fn filters_with_or_not_brackets_and_values() {
        let b = bucket();
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r["cpu"]=="cpu0" or r._measurement=="mem")"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 3);
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="usage_system" and r._value > 8.0)"#,
        )
        .unwrap();
        assert_eq!(r[0].1.iter().map(Table::len).sum::<usize>(), 2);
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>not (r.host != "h1") and r.cpu =~ /^cpu-/)"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 2);
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>exists r.cpu)"#).unwrap();
        assert_eq!(r[0].1.len(), 4, "mem has no cpu tag");
    }

    #[test]
    fn group_mean_last_first_and_absolute_ranges() {
        let b = bucket();
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="usage_system")|>group()|>mean()"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 1);
        assert_eq!(rows(&r[0].1[0]), vec![vec![Value::Float(15.0)]]);
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="usage_system")|>group(columns:["cpu"])|>count()|>yield(name:"n")"#).unwrap();
        assert_eq!(r[0].0, "n");
        assert_eq!(r[0].1.len(), 2);
        assert_eq!(r[0].1[0].key(), ["cpu"]);
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:2026-11-22T09:00:00Z, stop: now())|>filter(fn:(r)=>r.cpu=="cpu-total" and r._field=="usage_system")|>first()"#).unwrap();
        assert_eq!(rows(&r[0].1[0])[0][3], Value::Float(99.0));
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:-1h, stop:-1m)|>filter(fn:(r)=>r.cpu=="cpu-total" and r._field=="usage_system")|>last()"#).unwrap();
        assert_eq!(rows(&r[0].1[0])[0][3], Value::Float(99.0));
        let r =
            query(&b, r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="used")|>sum()"#).unwrap();
        assert_eq!(rows(&r[0].1[0])[0].last(), Some(&Value::Int(100)));
    }

    #[test]
    fn unsupported_flux_is_named() {
        let b = bucket();
        for (src, want) in [
            (
                r#"from(bucket:"telegraf")|>range(start:-5m)|>aggregateWindow(every: 1m, fn: mean)"#,
                "error at @1:44: unsupported by the twin: function aggregateWindow() (supported: from, range, filter, count, sum, mean, max, min, first, last, limit, group, yield)",
            ),
            (
                r#"import "strings" from(bucket:"telegraf")|>range(start:-5m)"#,
                "compilation failed: error at @1:1: unsupported by the twin: `import` statements",
            ),
            (
                r#"x = from(bucket:"telegraf")"#,
                "compilation failed: error at @1:1: unsupported by the twin: variable assignment `x = …` (write one \
                 pipeline)",
            ),
            (
                r#"from(bucket:"telegraf")|>range(start:-5m, stop: -1m, foo: 1)"#,
                "error at @1:26: unsupported by the twin: parameter `foo` of range()",
            ),
            (
                r#"from(bucket:"telegraf")|>limit(n:1)"#,
                "error in building plan while starting program: cannot submit unbounded read to \"telegraf\"; try \
                 bounding 'from' with a call to 'range'",
            ),
            (
                r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>strings.hasPrefix(v: r.cpu, prefix:"c"))"#,
                "compilation failed: error at @1:59: unsupported by the twin: function `strings.hasPrefix`",
            ),
            (
                r#"from(bucket:"telegraf")|>range(start:-5m"#,
                "compilation failed: error at @1:41: expected `)`, got EOF",
            ),
            (
                r#"from(bucket:"nope")|>range(start:-5m)"#,
                "failed to initialize execute state: could not find bucket \"nope\"",
            ),
            (
                r#"from(bucket:"telegraf")|>range(start:-5m)|>yield()|>yield()"#,
                "found duplicate yield name \"_result\"",
            ),
        ] {
            assert_eq!(query(&b, src).unwrap_err(), want, "{src}");
        }
        assert!(
            query(
                &b,
                r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._measurement=="cpu")|>group()|>max()"#
            )
            .is_ok()
        );
    }

    #[test]
    fn literals() {
        assert_eq!(number_literal("1h30m").unwrap(), Tok::Dur(5_400_000_000_000));
        assert_eq!(number_literal("2026-11-22T09:13:44Z").unwrap(), Tok::Time(1_795_338_824_000_000_000));
        assert_eq!(number_literal("2026-11-22T10:13:44+01:00").unwrap(), Tok::Time(1_795_338_824_000_000_000));
        assert_eq!(number_literal("2026-11-22").unwrap(), Tok::Time(1_795_305_600_000_000_000));
        assert_eq!(number_literal("5x").unwrap_err(), "invalid duration unit \"x\" in \"5x\"");
    }
}
