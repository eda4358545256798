//! Throughput of the stack twin over real HTTP on loopback: 1,000,000 points of line
//! protocol written to the metrics db (200 requests of 5,000 lines, as a busy agent fleet
//! would), the three queries the metrics verification makes over them, 100,000 log lines
//! pushed to the log store (100 JSON pushes of 1,000), and a selector query. Prints medians
//! and the process's peak memory. Run with `cargo bench --bench twin`.

// Tests and benchmarks report to the developer running them (`skipped: why`).
#![allow(clippy::disallowed_macros)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use opsbook_twin::{log_store, logger, metrics_db};
use opsbook_wire::loki;

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

/// Peak resident memory of this process (VmHWM), in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = reqwest::Client::new();
    let options = metrics_db::Options { max_points: 2_000_000, ..Default::default() };
    let db = metrics_db::MetricsDb::new(options, opsbook_base::secret::Secret::new("bench"), logger::discard());
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let db_url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(db.clone(), Some(listener), std::future::pending()));

    // 1,000,000 points: 100 hosts × 10 cpu series (cpu-total + 9 cores) × 1,000 timestamps a
    // second apart ending now, one usage_system field each.
    let now_s = opsbook_twin::now_ns() / 1_000_000_000;
    let mut bodies = Vec::new();
    let mut body = String::new();
    let mut lines = 0;
    for t in 0..1000i64 {
        for host in 0..100 {
            for cpu in 0..10 {
                let name = if cpu == 0 { "cpu-total".to_string() } else { format!("cpu{}", cpu - 1) };
                let value = ((t * 7 + host * 3 + cpu) % 1000) as f64 / 10.0;
                body.push_str(&format!("cpu,cpu={name},host=host{host:03} usage_system={value} {}\n", now_s - 999 + t));
                lines += 1;
                if lines % 5000 == 0 {
                    bodies.push(std::mem::take(&mut body));
                }
            }
        }
    }
    let bytes: usize = bodies.iter().map(String::len).sum();
    let started = Instant::now();
    rt.block_on(async {
        for b in bodies {
            let r = client
                .post(format!("{db_url}/api/v2/write?org=opsbook&bucket=telegraf&precision=s"))
                .header("authorization", "Token bench")
                .body(b)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 204);
        }
    });
    let took = started.elapsed();
    println!(
        "metrics-db write: {lines} points ({:.1} MB) in {:.2?} = {:.0} points/s; held {}",
        bytes as f64 / 1e6,
        took,
        lines as f64 / took.as_secs_f64(),
        db.point_count()
    );

    let queries = [
        ("any recent data", r#"from(bucket: "telegraf") |> range(start: -5m) |> limit(n: 1)"#),
        (
            "agent output check",
            r#"from(bucket: "telegraf") |> range(start: -5m) |> filter(fn: (r) => r._measurement == "cpu") |> count()"#,
        ),
        (
            "load check",
            r#"from(bucket: "telegraf") |> range(start: -1m) |> filter(fn: (r) => r._measurement == "cpu") |> filter(fn: (r) => r._field == "usage_system") |> filter(fn: (r) => r.cpu == "cpu-total") |> max()"#,
        ),
    ];
    for (name, flux) in queries {
        let mut runs = Vec::new();
        let mut size = 0;
        for _ in 0..7 {
            let started = Instant::now();
            let text = rt.block_on(async {
                let r = client
                    .post(format!("{db_url}/api/v2/query?org=opsbook"))
                    .header("authorization", "Token bench")
                    .header("content-type", "application/json")
                    .body(serde_json::json!({"query": flux, "dialect": {"annotations": ["datatype", "group", "default"]}}).to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                r.text().await.unwrap()
            });
            runs.push(started.elapsed());
            size = text.len();
        }
        println!("metrics-db query `{name}`: median {:.2?} ({size} bytes of CSV)", median(runs));
    }
    println!("peak memory after the metrics db: {:.0} MiB", peak_mib());

    let store = log_store::LogStore::new(
        log_store::Options { ready_delay: Duration::ZERO, ..Default::default() },
        logger::discard(),
    );
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let store_url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(Arc::clone(&store), Some(listener), std::future::pending()));
    let now = opsbook_twin::now_ns();
    let pushes: Vec<Vec<u8>> = (0..100)
        .map(|batch| {
            let streams: Vec<loki::PushStream> = (0..10)
                .map(|unit| loki::PushStream {
                    labels: vec![
                        ("hostname".into(), format!("host{:02}", batch % 20)),
                        ("service_type".into(), "bench".into()),
                        ("unit".into(), format!("unit{unit}.service")),
                    ],
                    entries: (0..100)
                        .map(|i| loki::PushEntry {
                            ts: now - 600_000_000_000 + (batch * 1000 + unit * 100 + i) as i64 * 1_000_000,
                            line: format!("level=info msg=\"request {i} served\" batch={batch} unit={unit} took=12ms"),
                            metadata: vec![],
                        })
                        .collect(),
                })
                .collect();
            loki::encode_json(&streams)
        })
        .collect();
    let started = Instant::now();
    rt.block_on(async {
        for p in pushes {
            let r = client
                .post(format!("{store_url}/loki/api/v1/push"))
                .header("content-type", "application/json")
                .body(p)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 204);
        }
    });
    let took = started.elapsed();
    println!(
        "log-store push: {} lines in {:.2?} = {:.0} lines/s",
        store.entry_count(),
        took,
        store.entry_count() as f64 / took.as_secs_f64()
    );
    for (name, q) in [
        ("selector, limit 5", r#"{hostname="host07"}"#),
        ("selector + line filter, limit 5", r#"{service_type="bench", unit=~"unit[0-4].service"} |= "request 42""#),
    ] {
        let mut runs = Vec::new();
        for _ in 0..7 {
            let started = Instant::now();
            rt.block_on(async {
                let r = client
                    .get(format!("{store_url}/loki/api/v1/query_range"))
                    .query(&[("query", q), ("limit", "5")])
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                r.text().await.unwrap()
            });
            runs.push(started.elapsed());
        }
        println!("log-store query `{name}`: median {:.2?}", median(runs));
    }
    println!("peak memory overall: {:.0} MiB", peak_mib());
}
