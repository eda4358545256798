//! Throughput of the wire parsers: a 100,000-row annotated CSV query answer and a
//! 10,000-series exposition. Run with `cargo bench --bench parsers`; prints medians.

// Tests and benchmarks report to the developer running them (`skipped: why`).
#![allow(clippy::disallowed_macros)]

use std::time::{Duration, Instant};

use opsbook_wire::{exposition, flux_csv};

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(f());
                started.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let mut csv = String::from(
        "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string,string,string\r\n\
         #group,false,false,true,true,false,false,true,true,true,true\r\n#default,_result,,,,,,,,,\r\n\
         ,result,table,_start,_stop,_time,_value,_field,_measurement,cpu,host\r\n",
    );
    for i in 0..100_000 {
        csv.push_str(&format!(
            ",,{},2026-11-22T09:00:00Z,2026-11-22T09:05:00Z,2026-11-22T09:0{}:{:02}.{:06}Z,{}.{},usage_system,cpu,cpu{},host-{}\r\n",
            i / 1000,
            i % 5,
            i % 60,
            i,
            i % 100,
            i % 7,
            i % 16,
            i % 4
        ));
    }
    let d = time(7, || flux_csv::parse(&csv).unwrap().len());
    let rows = flux_csv::parse(&csv).unwrap().len();
    println!(
        "annotated CSV: {rows} rows, {:.1} MB: median {:.1} ms = {:.0} rows/s",
        csv.len() as f64 / 1e6,
        d.as_secs_f64() * 1e3,
        rows as f64 / d.as_secs_f64()
    );

    let mut text = String::from("# HELP http_requests_total Requests.\n# TYPE http_requests_total counter\n");
    for i in 0..10_000 {
        text.push_str(&format!(
            "http_requests_total{{code=\"{}\",handler=\"/api/v{}/item\",instance=\"host-{}:9100\",path=\"a\\\"b\\\\c\"}} {}\n",
            200 + i % 5,
            i % 3,
            i,
            i * 3
        ));
    }
    let d = time(11, || exposition::parse(&text).unwrap().samples.len());
    println!(
        "exposition: 10000 series, {:.1} MB: median {:.2} ms = {:.0} series/s",
        text.len() as f64 / 1e6,
        d.as_secs_f64() * 1e3,
        10_000.0 / d.as_secs_f64()
    );
}
