//! The stack twin against real wire facts: every capture of a real server in tests/fixtures/wire
//! reproduced (status, content type, body shape), the official InfluxDB Python client reading
//! the twin's CSV, the twin shipper's pushes accepted by the twin log store (JSON and
//! protobuf), and the `opsbook twin …` processes themselves (serving, --test, validate,
//! SIGHUP, SIGTERM).

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opsbook::twin::{self, Shutdown, log_store, logger, metrics_db, shipper};
use opsbook::wire::loki_push;
use opsbook::world::BoxFuture;
use opsbook::world::journal::{Entry, Feed, Journal, Query};
use regex::Regex;
use serde_json::{Value, json};

use crate::support::wire::capture;
use crate::support::{Test, skip};

/// A tokio runtime on its own threads, serving twins while the test thread makes requests.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn client() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

/// The structure of a JSON value: keys and types, not values.
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::Number(_) => json!(0),
        Value::String(_) => json!(""),
        Value::Bool(_) => json!(false),
        Value::Null => Value::Null,
    }
}

fn start_log_store(
    rt: &tokio::runtime::Runtime,
    options: log_store::Options,
) -> (String, Arc<log_store::LogStore>, Shutdown) {
    let store = log_store::LogStore::new(options, logger::discard());
    let stop = Shutdown::new();
    let listener = rt.block_on(twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(twin::serve(store.clone(), Some(listener), stop.signal()));
    (url, store, stop)
}

fn start_metrics_db(rt: &tokio::runtime::Runtime, token: &str) -> (String, Arc<metrics_db::MetricsDb>) {
    let db = metrics_db::MetricsDb::new(
        metrics_db::Options::default(),
        opsbook::secret::Secret::new(token),
        logger::discard(),
    );
    let listener = rt.block_on(twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(twin::serve(db.clone(), Some(listener), std::future::pending()));
    (url, db)
}

fn header(r: &reqwest::blocking::Response, name: &str) -> String {
    r.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// The raw body of a captured response (after the blank line), or the file when it is a body.
fn captured_body(path: &str) -> String {
    let text = capture(path);
    match text.split_once("\r\n\r\n") {
        Some((_, body)) if path.ends_with(".txt") => body.to_string(),
        _ => text,
    }
}

#[test]
fn loki_captures_are_reproduced() {
    let push_body = capture("loki-3.4.6/push-body.json");
    let rt = runtime();
    let (url, store, stop) =
        start_log_store(&rt, log_store::Options { ready_delay: Duration::from_millis(600), ..Default::default() });
    let c = client();

    // /ready: 503 with Loki's reason while starting, then `ready`; HEAD is 405.
    let r = c.get(format!("{url}/ready")).send().unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "content-type"), "text/plain; charset=utf-8");
    assert_eq!(r.text().unwrap(), captured_body("loki-3.4.6/ready-starting.txt"));
    assert_eq!(c.head(format!("{url}/ready")).send().unwrap().status(), 405);
    std::thread::sleep(Duration::from_millis(700));
    let r = c.get(format!("{url}/ready")).send().unwrap();
    assert_eq!((r.status().as_u16(), header(&r, "x-content-type-options")), (200, "nosniff".to_string()));
    assert_eq!(r.text().unwrap(), captured_body("loki-3.4.6/ready.txt"));

    // The captured push (its timestamp is within Loki's one-week window): 204, no body.
    let r = c
        .post(format!("{url}/loki/api/v1/push"))
        .header("content-type", "application/json")
        .body(push_body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(r.text().unwrap().is_empty());
    let ts = 1_795_338_824_104_597_505i64;
    let window = [("start", (ts - 60_000_000_000).to_string()), ("end", (ts + 60_000_000_000).to_string())];

    let r = c
        .get(format!("{url}/loki/api/v1/query_range"))
        .query(&[("query", "{hostname=\"h1\"}"), ("limit", "5")])
        .query(&window)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let ours: Value = r.json().unwrap();
    let theirs: Value = serde_json::from_str(&capture("loki-3.4.6/query-range-streams.json")).unwrap();
    assert_eq!(shape(&ours), shape(&theirs), "query_range streams body shape");
    assert_eq!(
        ours["data"]["result"][0]["stream"], theirs["data"]["result"][0]["stream"],
        "labels incl. service_name, detected_level"
    );
    assert_eq!(ours["data"]["result"][0]["values"], theirs["data"]["result"][0]["values"]);

    // A log selector on the instant endpoint: Loki 3's 400, byte for byte.
    let r = c
        .get(format!("{url}/loki/api/v1/query"))
        .query(&[("query", "{hostname=\"h1\"}"), ("limit", "1")])
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(header(&r, "content-type"), "text/plain; charset=utf-8");
    assert_eq!(r.text().unwrap(), captured_body("loki-3.4.6/query-instant-logquery-400.txt"));

    let r = c
        .get(format!("{url}/loki/api/v1/query"))
        .query(&[("query", "count_over_time({hostname=\"h1\"}[5m])"), ("time", &(ts + 8_000_000_000).to_string())])
        .send()
        .unwrap();
    let ours: Value = r.json().unwrap();
    let theirs: Value = serde_json::from_str(&capture("loki-3.4.6/query-instant-metric.json")).unwrap();
    assert_eq!(shape(&ours), shape(&theirs), "instant metric body shape");
    assert_eq!(ours["data"]["result"][0]["metric"], theirs["data"]["result"][0]["metric"]);
    assert_eq!(ours["data"]["result"][0]["value"][1], "1");

    let r = c
        .get(format!("{url}/loki/api/v1/query_range"))
        .query(&[("query", "count_over_time({hostname=\"h1\"}[1m])"), ("step", "60")])
        .query(&window)
        .send()
        .unwrap();
    let ours: Value = r.json().unwrap();
    let theirs: Value = serde_json::from_str(&capture("loki-3.4.6/query-range-matrix.json")).unwrap();
    assert_eq!(shape(&ours), shape(&theirs), "matrix body shape");
    assert_eq!(ours["data"]["result"][0]["values"][0], theirs["data"]["result"][0]["values"][0], "step-aligned sample");

    let since = [("start", (ts - 60_000_000_000).to_string())];
    for (path, file) in [
        ("/loki/api/v1/labels", "labels.json"),
        ("/loki/api/v1/label/hostname/values", "label-hostname-values.json"),
        ("/loki/api/v1/series?match[]=%7Bhostname%3D%22h1%22%7D", "series.json"),
    ] {
        let r = c.get(format!("{url}{path}")).query(&since).send().unwrap();
        assert_eq!(header(&r, "content-type"), "application/json; charset=UTF-8");
        let ours: Value = r.json().unwrap();
        let theirs: Value = serde_json::from_str(&capture(&format!("loki-3.4.6/{file}"))).unwrap();
        assert_eq!(ours, theirs, "{path}");
    }
    let ours: Value = c.get(format!("{url}/loki/api/v1/status/buildinfo")).send().unwrap().json().unwrap();
    let theirs: Value = serde_json::from_str(&capture("loki-3.4.6/buildinfo.json")).unwrap();
    assert_eq!(shape(&ours), shape(&theirs));

    // /metrics: the captured families, with the same label names, and the chunk counter.
    let metrics = c.get(format!("{url}/metrics")).send().unwrap().text().unwrap();
    let ours = opsbook::wire::exposition::parse(&metrics).unwrap();
    let excerpt = capture("loki-3.4.6/metrics-excerpt.txt");
    for line in excerpt.lines().filter(|l| l.starts_with("# TYPE")) {
        assert!(metrics.contains(line), "missing `{line}`");
    }
    for line in excerpt.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap();
        let labels: Vec<&str> = line.split('{').nth(1).map_or(vec![], |l| {
            l.split('}').next().unwrap().split(',').map(|kv| kv.split('=').next().unwrap()).collect()
        });
        let ours_line = metrics.lines().find(|l| l.starts_with(name) && !l.starts_with('#')).unwrap();
        for label in labels {
            assert!(ours_line.contains(&format!("{label}=")), "{name} lacks label {label}: {ours_line}");
        }
    }
    assert_eq!(ours.sum("loki_ingester_chunks_created_total", &[]), Some(1.0));
    assert_eq!(store.chunks_created(), 1);

    // /config: YAML naming the backend as Loki's does.
    let yaml = c.get(format!("{url}/config")).send().unwrap().text().unwrap();
    assert_eq!(opsbook::wire::loki_config::object_stores(&yaml), vec!["filesystem".to_string()]);
    let real = capture("loki-3.4.6/config.yaml");
    assert_eq!(opsbook::wire::loki_config::object_stores(&real), vec!["filesystem".to_string()]);
    stop.trigger();
}

#[test]
fn log_store_pushes_in_every_encoding_and_selects_like_loki() {
    let rt = runtime();
    let (url, _store, _stop) =
        start_log_store(&rt, log_store::Options { ready_delay: Duration::ZERO, ..Default::default() });
    let c = client();
    let now = twin::now_ns();
    let stream = |unit: &str, lines: &[&str], at: i64| loki_push::PushStream {
        labels: vec![("hostname".into(), "h1".into()), ("unit".into(), unit.into())],
        entries: lines
            .iter()
            .enumerate()
            .map(|(i, l)| loki_push::PushEntry {
                ts: now - 1000 + at + i as i64,
                line: l.to_string(),
                metadata: vec![],
            })
            .collect(),
    };
    let json = loki_push::encode_json(&[stream("a.service", &["json one", "json two error"], 0)]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &loki_push::encode_json(&[stream("b.service", &["gzip line"], 10)])).unwrap();
    let proto = loki_push::encode_protobuf(&[stream("c.service", &["protobuf line"], 20)]);
    for (body, ctype, encoding) in [
        (json, "application/json", ""),
        (gz.finish().unwrap(), "application/json", "gzip"),
        (proto, "application/x-protobuf", ""),
    ] {
        let mut r = c.post(format!("{url}/loki/api/v1/push")).header("content-type", ctype).body(body);
        if !encoding.is_empty() {
            r = r.header("content-encoding", encoding);
        }
        assert_eq!(r.send().unwrap().status(), 204, "{ctype} {encoding}");
    }
    let lines = |q: &str, extra: &[(&str, &str)]| -> Vec<String> {
        let v: Value = c
            .get(format!("{url}/loki/api/v1/query_range"))
            .query(&[("query", q)])
            .query(extra)
            .send()
            .unwrap()
            .json()
            .unwrap();
        let mut out: Vec<String> = v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["values"].as_array().unwrap().iter().map(|p| p[1].as_str().unwrap().to_string()))
            .collect();
        out.sort();
        out
    };
    assert_eq!(lines("{hostname=\"h1\"}", &[]).len(), 4);
    assert_eq!(lines("{unit=~\"(a|c)\\\\.service\"}", &[]), vec!["json one", "json two error", "protobuf line"]);
    assert_eq!(lines("{unit!=\"a.service\", hostname=\"h1\"}", &[]), vec!["gzip line", "protobuf line"]);
    assert_eq!(lines("{unit!~\"a.*\", hostname=\"h1\"} |~ \"pro.*\"", &[]), vec!["protobuf line"]);
    assert_eq!(lines("{hostname=\"h1\"} |= \"json\" != \"error\"", &[]), vec!["json one"]);
    assert_eq!(lines("{hostname=\"h1\"}", &[("limit", "1"), ("direction", "forward")]), vec!["json one"]);
    // POSTed, the parameters come as a form (percent-encoded, `+` for a space), and a form
    // value wins over the query string's, as in Go's ParseForm.
    let posted = |path: &str, form: &str| -> Value {
        let r = c
            .post(format!("{url}/loki/api/v1/{path}?limit=100&query=nonsense"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_string())
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        r.json().unwrap()
    };
    let v = posted("query_range", "query=%7Bhostname%3D%22h1%22%7D+%7C%3D+%22gzip%22&limit=5");
    let values: Vec<&Value> =
        v["data"]["result"].as_array().unwrap().iter().flat_map(|s| s["values"].as_array().unwrap()).collect();
    assert_eq!(values.iter().map(|p| p[1].as_str().unwrap()).collect::<Vec<_>>(), ["gzip line"]);
    let v = posted("series", "match%5B%5D=%7Bunit%3D%22c.service%22%7D");
    assert_eq!(v["data"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["data"][0]["unit"], "c.service");
    // Garbage is refused with Loki's plain-text 400s.
    let r = c
        .post(format!("{url}/loki/api/v1/push"))
        .header("content-type", "application/x-protobuf")
        .body("nonsense")
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let r =
        c.get(format!("{url}/loki/api/v1/query_range")).query(&[("query", "{hostname=\"h1\"} | json")]).send().unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().unwrap().contains("unsupported by the twin: pipeline stage `| json`"));
}

#[test]
fn influx_captures_and_api_answers() {
    let rt = runtime();
    let (url, db) = start_metrics_db(&rt, "s3cret");
    let c = client();
    let r = c.head(format!("{url}/ping")).send().unwrap();
    assert_eq!(r.status(), 204);
    let ping = capture("influxdb-1.6/ping-headers.txt");
    for name in ["X-Influxdb-Build", "X-Influxdb-Version"] {
        assert!(ping.contains(name));
        assert!(!header(&r, name).is_empty(), "{name}");
    }
    let health: Value = c.get(format!("{url}/health")).send().unwrap().json().unwrap();
    assert_eq!((health["name"].as_str(), health["status"].as_str()), (Some("influxdb"), Some("pass")));
    assert_eq!(health["message"], "ready for queries and writes");

    let r = c.get(format!("{url}/api/v2/buckets")).send().unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.json::<Value>().unwrap(), json!({"code": "unauthorized", "message": "unauthorized access"}));
    let r = c.get(format!("{url}/api/v2/buckets")).header("authorization", "Token wrong").send().unwrap();
    assert_eq!(r.status(), 401);
    let auth = ("authorization", "Token s3cret");
    let buckets: Value = c.get(format!("{url}/api/v2/buckets")).header(auth.0, auth.1).send().unwrap().json().unwrap();
    assert!(buckets["buckets"].as_array().unwrap().iter().any(|b| b["name"] == "telegraf" && b["type"] == "user"));
    let config: Value = c.get(format!("{url}/api/v2/config")).header(auth.0, auth.1).send().unwrap().json().unwrap();
    assert_eq!(config["config"]["engine-path"], "/var/lib/influxdb2/engine");

    let now = twin::now_ns();
    let body = format!(
        "cpu,cpu=cpu-total,host=h1 usage_system=42.5,usage_idle=50 {now}\ncpu,cpu=cpu0,host=h1 usage_system=7 {now}\n"
    );
    let r = c
        .post(format!("{url}/api/v2/write?org=opsbook&bucket=telegraf"))
        .header(auth.0, auth.1)
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = c
        .post(format!("{url}/api/v2/write?org=opsbook&bucket=telegraf"))
        .header(auth.0, auth.1)
        .body("cpu usage=")
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().unwrap()["code"], "invalid");
    assert_eq!(db.point_count(), 3);

    let flux = "from(bucket: \"telegraf\") |> range(start: -1m) |> filter(fn: (r) => r._measurement == \"cpu\") |> filter(fn: (r) => r._field == \"usage_system\") |> filter(fn: (r) => r.cpu == \"cpu-total\") |> max()";
    let raw = c
        .post(format!("{url}/api/v2/query?org=opsbook"))
        .header(auth.0, auth.1)
        .header("content-type", "application/vnd.flux")
        .body(flux)
        .send()
        .unwrap();
    assert_eq!(header(&raw, "content-type"), "text/csv; charset=utf-8");
    let raw = raw.text().unwrap();
    assert!(raw.starts_with(",result,table,_start,_stop,_time,_value,_field,_measurement,cpu,host\r\n"), "{raw}");
    assert!(raw.ends_with("\r\n\r\n"));
    let annotated = c
        .post(format!("{url}/api/v2/query?org=opsbook"))
        .header(auth.0, auth.1)
        .header("content-type", "application/json")
        .body(
            json!({"query": flux, "type": "flux", "dialect": {"annotations": ["datatype", "group", "default"]}})
                .to_string(),
        )
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(annotated.starts_with("#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string,string,string\r\n#group,false,false,true,true,false,false,true,true,true,true\r\n#default,_result,"), "{annotated}");
    let rows = opsbook::wire::flux_csv::parse(&annotated).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].contains(&("_value".to_string(), opsbook::wire::flux_csv::Value::Double(42.5))));

    let r = c
        .post(format!("{url}/api/v2/query?org=opsbook"))
        .header(auth.0, auth.1)
        .header("content-type", "application/vnd.flux")
        .body("from(bucket: \"telegraf\") |> range(start: -1m) |> pivot(rowKey: [\"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")")
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().unwrap();
    assert_eq!(e["code"], "invalid");
    assert!(e["message"].as_str().unwrap().contains("pivot()"), "{e}");
    let r = c
        .post(format!("{url}/api/v2/query?org=nope"))
        .header(auth.0, auth.1)
        .header("content-type", "application/vnd.flux")
        .body(flux)
        .send()
        .unwrap();
    assert_eq!(r.status(), 404);

    // Faults: a refused token, a slow server, garbage.
    db.faults.set_refuse_token(true);
    assert_eq!(c.get(format!("{url}/api/v2/buckets")).header(auth.0, auth.1).send().unwrap().status(), 401);
    db.faults.clear();
    db.faults.set_garbage(true);
    let r = c.get(format!("{url}/health")).send().unwrap();
    assert!(header(&r, "content-type").starts_with("text/html"));
    db.faults.clear();
    db.faults.set_delay(Duration::from_millis(300));
    let started = Instant::now();
    c.get(format!("{url}/health")).send().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    db.faults.clear();
    db.faults.set_fail_status(500);
    assert_eq!(c.get(format!("{url}/health")).send().unwrap().status(), 500);
}

#[test]
fn the_official_influxdb_python_client_reads_the_twin() {
    let probe = std::process::Command::new("python3").args(["-c", "import influxdb_client"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return skip("python3 with PyPI influxdb-client is not installed (pip install influxdb-client)");
    }
    let rt = runtime();
    let (url, _db) = start_metrics_db(&rt, "py-token");
    // The client writes with its own line-protocol writer, then queries and parses the CSV.
    let script = r#"
import json, sys
from influxdb_client import InfluxDBClient, Point
from influxdb_client.client.write_api import SYNCHRONOUS
url = sys.argv[1]
with InfluxDBClient(url=url, token="py-token", org="opsbook", timeout=10000) as client:
    write = client.write_api(write_options=SYNCHRONOUS)
    write.write(bucket="telegraf", record=[
        Point("cpu").tag("cpu", "cpu-total").tag("host", "py").field("usage_system", 12.5),
        Point("cpu").tag("cpu", "cpu0").tag("host", "py").field("usage_system", 3.0),
        Point("mem").tag("host", "py").field("used", 1024),
        Point("log").tag("host", "py").field("msg", 'comma, "quotes"'),
    ])
    q = client.query_api()
    out = {}
    tables = q.query('from(bucket: "telegraf") |> range(start: -5m) |> filter(fn: (r) => r._measurement == "cpu") |> count()')
    out["count"] = sorted([[r.values["cpu"], r.get_value()] for t in tables for r in t.records])
    tables = q.query('from(bucket: "telegraf") |> range(start: -1m) |> filter(fn: (r) => r._measurement == "cpu" and r._field == "usage_system" and r.cpu == "cpu-total") |> max()')
    out["max"] = [[r.get_measurement(), r.get_field(), r.get_value(), str(type(r.get_time()).__name__)] for t in tables for r in t.records]
    tables = q.query('from(bucket: "telegraf") |> range(start: -5m) |> limit(n: 1)')
    out["any"] = len(tables)
    tables = q.query('from(bucket: "telegraf") |> range(start: -5m) |> filter(fn: (r) => r._measurement == "mem" or r._measurement == "log") |> last()')
    out["last"] = sorted([[r.get_field(), r.get_value()] for t in tables for r in t.records], key=str)
    out["group"] = [[t.get_group_key()[0].label if t.get_group_key() else None, len(t.records)] for t in q.query('from(bucket: "telegraf") |> range(start: -5m) |> filter(fn: (r) => r._measurement == "cpu") |> group() |> mean()')]
    out["csv_rows"] = len(list(q.query_csv('from(bucket: "telegraf") |> range(start: -5m) |> filter(fn: (r) => r._measurement == "cpu")')))
    try:
        q.query('from(bucket: "telegraf") |> range(start: -5m) |> sort()')
        out["error"] = None
    except Exception as e:
        out["error"] = [getattr(e, "status", None), str(getattr(e, "message", e))]
    print(json.dumps(out))
"#;
    let out = std::process::Command::new("python3").args(["-c", script, &url]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "python failed: {}\n{}", stdout, String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["count"], json!([["cpu-total", 1], ["cpu0", 1]]));
    assert_eq!(v["max"], json!([["cpu", "usage_system", 12.5, "datetime"]]));
    assert_eq!(v["any"], json!(4));
    assert_eq!(v["last"], json!([["msg", "comma, \"quotes\""], ["used", 1024]]));
    assert_eq!(v["group"], json!([[null, 1]]));
    assert!(v["csv_rows"].as_i64().unwrap() > 2, "{v}");
    assert_eq!(v["error"][0], json!(400));
    assert!(v["error"][1].as_str().unwrap().contains("sort()"), "{v}");
}

/// A journal fed by the test: what the sandbox's in-process journal will be.
struct FedJournal {
    feed: std::sync::Mutex<Option<Feed>>,
}

impl Journal for FedJournal {
    fn read<'a>(&'a self, _query: &'a Query) -> BoxFuture<'a, Result<Vec<Entry>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn follow<'a>(&'a self, _query: &'a Query) -> BoxFuture<'a, Result<Feed, String>> {
        Box::pin(async move { self.feed.lock().unwrap().take().ok_or_else(|| "already followed".to_string()) })
    }
    fn emit<'a>(&'a self, _identifier: &'a str, _message: &'a str, _priority: u8) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

#[test]
fn shipper_pushes_are_accepted_by_the_log_store_in_json_and_protobuf() {
    let rt = runtime();
    let (store_url, store, _stop) =
        start_log_store(&rt, log_store::Options { ready_delay: Duration::ZERO, ..Default::default() });
    let c = client();
    for format in ["protobuf", "json"] {
        let config = shipper::config::parse(
            "s.toml",
            &format!(
                "[journal]\nunits = [\"loki.service\", \"telegraf.service\"]\n[labels]\nservice_type = \"{format}-test\"\nhostname = \"h1\"\n\
                 [write]\nurl = \"{store_url}/loki/api/v1/push\"\nformat = \"{format}\"\nbatch_wait = \"100ms\"\n"
            ),
        )
        .unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let journal = Arc::new(FedJournal { feed: std::sync::Mutex::new(Some(rx)) });
        let (sink, logged) = logger::memory();
        let s = shipper::Shipper::new(config, None, journal, sink);
        let listener = rt.block_on(twin::loopback()).unwrap();
        let shipper_url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Shutdown::new();
        let server = rt.spawn(twin::serve(s.clone(), Some(listener), stop.signal()));
        let now_us = (twin::now_ns() / 1000) as u64;
        for (i, unit) in ["loki.service", "sshd.service", "telegraf.service"].iter().enumerate() {
            let entry = Entry {
                realtime_us: now_us + i as u64,
                priority: 6,
                unit: unit.to_string(),
                identifier: "x".into(),
                pid: 1,
                message: format!("{format} line {i} level=info"),
            };
            rt.block_on(tx.send(Ok(entry))).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.sent_entries() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(s.sent_entries(), 2, "sshd.service is not followed; logs: {:?}", logged.lock().unwrap());
        let q = format!("{{service_type=\"{format}-test\"}}");
        let v: Value = c
            .get(format!("{store_url}/loki/api/v1/query_range"))
            .query(&[("query", q.as_str())])
            .send()
            .unwrap()
            .json()
            .unwrap();
        let streams = v["data"]["result"].as_array().unwrap();
        assert_eq!(streams.len(), 2, "{v}");
        let units: Vec<&str> = streams.iter().map(|s| s["stream"]["unit"].as_str().unwrap()).collect();
        assert!(units.contains(&"loki.service") && units.contains(&"telegraf.service"));
        assert!(streams.iter().all(|s| s["stream"]["hostname"] == "h1"));
        let metrics = c.get(format!("{shipper_url}/metrics")).send().unwrap().text().unwrap();
        let parsed = opsbook::wire::exposition::parse(&metrics).unwrap();
        assert_eq!(parsed.sum("loki_write_sent_entries_total", &[]), Some(2.0), "{metrics}");
        assert!(metrics.contains("loki_write_request_duration_seconds_count{"));
        assert_eq!(c.get(format!("{shipper_url}/-/ready")).send().unwrap().text().unwrap(), "Alloy is ready.\n");
        let r = c.post(format!("{shipper_url}/-/reload")).send().unwrap();
        assert_eq!(r.status(), 400, "no config file to reload");
        assert!(metrics_after(&c, &shipper_url).contains("alloy_config_last_load_successful 0"));
        stop.trigger();
        rt.block_on(server).unwrap().unwrap();
    }
    assert!(store.entry_count() >= 4);
}

/// The phases of the captured Loki life (`log-levels-one-life.txt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Queries,
    Stop,
}

/// Each warn/error line Loki 3.4.6 logged over one life, as a regex over the whole line with
/// its timestamp and trace ID masked, and the phase it belongs to (from the capture's times:
/// start at :00, two `limit=1` queries at :20, SIGTERM at :25).
fn loki_life() -> Vec<(Phase, Regex)> {
    let ts = Regex::new(r"ts=2026-11-23T14:46:(\d\d)\.\d+Z").unwrap();
    capture("loki-3.4.6/log-levels-one-life.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let second = &ts.captures(line).expect("a timestamp in each captured line")[1];
            let phase = match second {
                "00" => Phase::Start,
                "20" => Phase::Queries,
                _ => Phase::Stop,
            };
            // Mask the timestamp and trace ID first, then escape the rest of the line.
            let masked = ts.replace_all(line, "ts=TIMESTAMP");
            let masked = Regex::new(r"traceID=[0-9a-f]{16}").unwrap().replace_all(&masked, "traceID=TRACE").to_string();
            let pattern = regex::escape(&masked)
                .replace("TIMESTAMP", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z")
                .replace("TRACE", "[0-9a-f]{16}");
            (phase, Regex::new(&format!("^{pattern}$")).unwrap())
        })
        .collect()
}

/// The lines, one for one, each matching its pattern as a whole.
fn assert_lines_match(lines: &[&str], patterns: &[&Regex]) {
    assert_eq!(lines.len(), patterns.len(), "lines: {lines:#?}\nexpected: {patterns:#?}");
    for (line, pattern) in lines.iter().zip(patterns) {
        assert!(pattern.is_match(line), "`{line}`\ndoes not match\n`{pattern}`");
    }
}

#[test]
fn log_store_logs_over_one_life_what_loki_3_4_6_logs() {
    let rt = runtime();
    let (sink, kept) = logger::memory();
    let store =
        log_store::LogStore::new(log_store::Options { ready_delay: Duration::ZERO, ..Default::default() }, sink);
    let stop = Shutdown::new();
    let listener = rt.block_on(twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = rt.spawn(twin::serve(store.clone(), Some(listener), stop.signal()));
    let c = client();
    // What the store said at warn or error level, so far.
    let said = || -> Vec<String> {
        let lines = kept.lock().unwrap().clone();
        lines
            .into_iter()
            .filter(|(level, _)| matches!(level, logger::Level::Error | logger::Level::Warn))
            .map(|(_, l)| l)
            .collect()
    };
    let life = loki_life();
    let phase = |p: Phase| -> Vec<&Regex> { life.iter().filter(|(q, _)| *q == p).map(|(_, r)| r).collect() };

    // Start: nothing at once, then `empty ring` while the ring forms.
    assert!(said().is_empty(), "{:?}", said());
    std::thread::sleep(Duration::from_millis(1200));
    let start = phase(Phase::Start);
    assert_lines_match(&said().iter().map(String::as_str).collect::<Vec<_>>(), &start);

    // Two range queries whose limit=1 is met, as in the capture: the querier's cancellations.
    let now = twin::now_ns();
    let body = loki_push::encode_json(&[loki_push::PushStream {
        labels: vec![("hostname".into(), "h1".into()), ("service_type".into(), "test".into())],
        entries: (0..3)
            .map(|i| loki_push::PushEntry { ts: now - 3000 + i, line: format!("line {i}"), metadata: vec![] })
            .collect(),
    }]);
    let r =
        c.post(format!("{url}/loki/api/v1/push")).header("content-type", "application/json").body(body).send().unwrap();
    assert_eq!(r.status(), 204);
    for _ in 0..2 {
        let r = c
            .get(format!("{url}/loki/api/v1/query_range"))
            .query(&[("query", "{service_type=~\".+\"}"), ("limit", "1")])
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // A query whose limit is not met cancels nothing.
    let r = c
        .get(format!("{url}/loki/api/v1/query_range"))
        .query(&[("query", "{service_type=\"none\"}"), ("limit", "1")])
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let queries: Vec<&Regex> = phase(Phase::Start).into_iter().chain(phase(Phase::Queries)).collect();
    assert_lines_match(&said().iter().map(String::as_str).collect::<Vec<_>>(), &queries);

    // Stop (the in-process shutdown, as the sandbox stops it): Loki's shutdown lines.
    stop.trigger();
    rt.block_on(server).unwrap().unwrap();
    let all: Vec<&Regex> = life.iter().map(|(_, r)| r).collect();
    assert_lines_match(&said().iter().map(String::as_str).collect::<Vec<_>>(), &all);
}

#[test]
fn log_store_empty_answers_are_loki_3_4s() {
    let rt = runtime();
    let (url, _store, stop) =
        start_log_store(&rt, log_store::Options { ready_delay: Duration::ZERO, ..Default::default() });
    let c = client();
    // No line received yet: the label endpoints answer success with no `data` at all.
    let captured = capture("loki-3.4.6/labels-empty.txt");
    let empty_body = captured.lines().nth(1).unwrap();
    for path in ["/loki/api/v1/labels", "/loki/api/v1/label/hostname/values"] {
        let r = c.get(format!("{url}{path}")).send().unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(header(&r, "content-type"), "application/json; charset=UTF-8", "{path}");
        assert_eq!(r.text().unwrap(), empty_body, "{path}");
    }
    // Loki's documented empty forms where no capture exists: series `data: []`, query results
    // `result: []` (with the stats block as the captured answers carry it).
    let r = c.get(format!("{url}/loki/api/v1/series")).query(&[("match[]", "{hostname=\"h1\"}")]).send().unwrap();
    assert_eq!(r.text().unwrap(), r#"{"status":"success","data":[]}"#);
    for (path, query, kind, file) in [
        ("query_range", "{hostname=\"h1\"}", "streams", "query-range-streams.json"),
        ("query_range", "count_over_time({hostname=\"h1\"}[1m])", "matrix", "query-range-matrix.json"),
        ("query", "count_over_time({hostname=\"h1\"}[1m])", "vector", "query-instant-metric.json"),
    ] {
        let mut ours: Value =
            c.get(format!("{url}/loki/api/v1/{path}")).query(&[("query", query)]).send().unwrap().json().unwrap();
        let theirs: Value = serde_json::from_str(&capture(&format!("loki-3.4.6/{file}"))).unwrap();
        let stats = ours["data"].as_object_mut().unwrap().remove("stats").unwrap();
        assert_eq!(shape(&stats), shape(&theirs["data"]["stats"]), "{kind} stats");
        assert_eq!(ours, json!({"status": "success", "data": {"resultType": kind, "result": []}}), "{kind}");
    }
    // The chunk counter is 0 until the first push creates a chunk: the captured family,
    // with 0, then with the captured 1.
    let excerpt = capture("loki-3.4.6/metrics-excerpt.txt");
    let family: Vec<&str> = excerpt.lines().skip_while(|l| !l.contains("loki_ingester_chunks_created_total")).collect();
    let metrics = |c: &reqwest::blocking::Client| c.get(format!("{url}/metrics")).send().unwrap().text().unwrap();
    let before =
        family.join("\n").replace("loki_ingester_chunks_created_total 1", "loki_ingester_chunks_created_total 0");
    assert!(metrics(&c).contains(&format!("{before}\n")), "{}", metrics(&c));
    let r = c
        .post(format!("{url}/loki/api/v1/push"))
        .header("content-type", "application/json")
        .body(capture("loki-3.4.6/push-body.json"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(metrics(&c).contains(&format!("{}\n", family.join("\n"))), "{}", metrics(&c));
    // With a line received, the labels are a list again (the capture's, for its window).
    let ts = 1_795_338_824_104_597_505i64;
    let r = c
        .get(format!("{url}/loki/api/v1/labels"))
        .query(&[("start", (ts - 60_000_000_000).to_string())])
        .send()
        .unwrap();
    assert_eq!(r.text().unwrap(), capture("loki-3.4.6/labels.json").trim_end());
    stop.trigger();
}

#[test]
fn metrics_db_empty_and_error_answers_are_influxdb_2s() {
    let rt = runtime();
    let (url, _db) = start_metrics_db(&rt, "s3cret");
    let c = client();
    let auth = ("authorization", "Token s3cret");
    // Errors: exactly {"code","message"}, compact, the code in X-Platform-Error-Code (InfluxDB
    // 2's error handler; no capture of a 2.x server is at hand).
    let error = |r: reqwest::blocking::Response| -> (u16, String, String, String) {
        (r.status().as_u16(), header(&r, "content-type"), header(&r, "x-platform-error-code"), r.text().unwrap())
    };
    let json_type = "application/json; charset=utf-8".to_string();
    assert_eq!(
        error(c.get(format!("{url}/api/v2/buckets")).send().unwrap()),
        (
            401,
            json_type.clone(),
            "unauthorized".into(),
            r#"{"code":"unauthorized","message":"unauthorized access"}"#.into()
        )
    );
    assert_eq!(
        error(
            c.post(format!("{url}/api/v2/write?org=opsbook&bucket=nope"))
                .header(auth.0, auth.1)
                .body("m f=1")
                .send()
                .unwrap()
        ),
        (
            404,
            json_type.clone(),
            "not found".into(),
            r#"{"code":"not found","message":"bucket \"nope\" not found"}"#.into()
        )
    );
    assert_eq!(
        error(
            c.post(format!("{url}/api/v2/query"))
                .header(auth.0, auth.1)
                .header("content-type", "application/vnd.flux")
                .body("from(bucket: \"telegraf\")")
                .send()
                .unwrap()
        ),
        (
            400,
            json_type.clone(),
            "invalid".into(),
            r#"{"code":"invalid","message":"Please provide either orgID or org"}"#.into()
        )
    );
    assert_eq!(
        error(c.get(format!("{url}/api/v2/nothing")).header(auth.0, auth.1).send().unwrap()),
        (404, json_type.clone(), "not found".into(), r#"{"code":"not found","message":"path not found"}"#.into())
    );
    let (status, _, code, body) = error(
        c.post(format!("{url}/api/v2/write?org=opsbook&bucket=telegraf"))
            .header(auth.0, auth.1)
            .body("cpu usage=")
            .send()
            .unwrap(),
    );
    assert_eq!((status, code.as_str()), (400, "invalid"));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body.as_object().unwrap().keys().collect::<Vec<_>>(), ["code", "message"]);
    // No rows: InfluxDB 2's CSV of an empty result is a lone CRLF, with or without annotations.
    let flux = "from(bucket: \"telegraf\") |> range(start: -1m) |> filter(fn: (r) => r._measurement == \"none\")";
    let raw = c
        .post(format!("{url}/api/v2/query?org=opsbook"))
        .header(auth.0, auth.1)
        .header("content-type", "application/vnd.flux")
        .body(flux)
        .send()
        .unwrap();
    assert_eq!((raw.status().as_u16(), header(&raw, "content-type")), (200, "text/csv; charset=utf-8".to_string()));
    assert_eq!(raw.text().unwrap(), "\r\n");
    let annotated = c
        .post(format!("{url}/api/v2/query?org=opsbook"))
        .header(auth.0, auth.1)
        .header("content-type", "application/json")
        .body(
            json!({"query": flux, "type": "flux", "dialect": {"annotations": ["datatype", "group", "default"]}})
                .to_string(),
        )
        .send()
        .unwrap();
    assert_eq!(annotated.text().unwrap(), "\r\n");
    // No bucket of that name: the list is empty, not an error.
    let r = c.get(format!("{url}/api/v2/buckets")).query(&[("name", "nope")]).header(auth.0, auth.1).send().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.text().unwrap(),
        "{\n\t\"links\": {\n\t\t\"self\": \"/api/v2/buckets?descending=false&limit=20&offset=0\"\n\t},\n\t\"buckets\": []\n}\n"
    );
}

fn metrics_after(c: &reqwest::blocking::Client, url: &str) -> String {
    c.get(format!("{url}/metrics")).send().unwrap().text().unwrap()
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_http(url: &str) {
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if c.get(url).send().is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{url} did not answer");
}

#[test]
fn twin_processes_serve_log_to_stdout_and_stop_on_sigterm() {
    let port = free_port();
    let running = Test::new()
        .args(["twin", "log-store", "--listen", &format!("127.0.0.1:{port}"), "--ready-delay", "0s"])
        .spawn();
    wait_http(&format!("http://127.0.0.1:{port}/ready"));
    assert_eq!(client().get(format!("http://127.0.0.1:{port}/ready")).send().unwrap().text().unwrap(), "ready\n");
    // Past the ring's forming, so the process has said all a starting Loki says.
    std::thread::sleep(Duration::from_millis(1200));
    running.signal(libc::SIGTERM);
    let (out, _) = running.wait(Duration::from_secs(10));
    let out = out.code(0).stdout_has("msg=\"Starting Loki\"").stdout_has("msg=\"Loki stopped\"");
    // Its errors and warnings over this life are the real one's at start and at stop.
    let said: Vec<&str> =
        out.stdout.lines().filter(|l| l.contains("level=error") || l.contains("level=warn")).collect();
    let captured = loki_life();
    let expected: Vec<&Regex> = captured.iter().filter(|(phase, _)| *phase != Phase::Queries).map(|(_, r)| r).collect();
    assert_lines_match(&said, &expected);

    let port = free_port();
    let running = Test::new()
        .args(["twin", "metrics-db", "--listen", &format!("127.0.0.1:{port}")])
        .env("INFLUX_TOKEN", "process-token")
        .spawn();
    wait_http(&format!("http://127.0.0.1:{port}/health"));
    let r = client()
        .get(format!("http://127.0.0.1:{port}/api/v2/buckets"))
        .header("authorization", "Token process-token")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    running.signal(libc::SIGINT);
    let (out, _) = running.wait(Duration::from_secs(10));
    out.code(0).stdout_has("Listening").stdout_lacks("process-token");

    Test::new().args(["twin", "metrics-db"]).run().code(2).stderr_has("needs an API token");
}

const AGENT_CONFIG: &str = r#"[agent]
  interval = "1s"
  hostname = "twin-host"
[[outputs.influxdb_v2]]
  urls = ["URL"]
  token = "$AGENT_TOKEN"
  organization = "opsbook"
  bucket = "telegraf"
[[inputs.cpu]]
[[inputs.mem]]
[[inputs.disk]]
"#;

#[test]
fn agent_test_mode_prints_line_protocol_like_telegraf() {
    let t = Test::new().file("telegraf.conf", &AGENT_CONFIG.replace("URL", "http://127.0.0.1:9"));
    let conf = t.path().join("telegraf.conf").display().to_string();
    let out = t.args(["twin", "metrics-agent", &conf, "--test"]).run().code(0);
    let mut measurements = std::collections::BTreeSet::new();
    for line in out.stdout.lines() {
        let lp = line.strip_prefix("> ").unwrap_or_else(|| panic!("not `> ` + line protocol: {line}"));
        for p in opsbook::wire::line_protocol::parse(lp).unwrap() {
            assert!(p.tags.contains(&("host".into(), "twin-host".into())));
            if p.measurement == "cpu" && p.tags.contains(&("cpu".into(), "cpu-total".into())) {
                assert!(p.fields.iter().any(|(k, _)| k == "usage_system"));
                assert!(p.fields.windows(2).all(|w| w[0].0 < w[1].0), "fields sorted");
            }
            measurements.insert(p.measurement);
        }
    }
    assert_eq!(measurements.into_iter().collect::<Vec<_>>(), ["cpu", "disk", "mem"]);

    let t = Test::new().file(
        "bad.conf",
        "[agent]\n  interval = \"soon\"\n[[inputs.cpu]]\n[[outputs.influxdb_v2]]\n  bucket = \"b\"\n",
    );
    let conf = t.path().join("bad.conf").display().to_string();
    t.args(["twin", "metrics-agent", &conf, "--test"])
        .run()
        .code(1)
        .stderr_has(&format!("{conf}:2:14"))
        .stderr_has("`interval` must be a duration");
}

#[test]
fn agent_process_writes_to_the_db_and_reloads_on_sighup() {
    let rt = runtime();
    let (url, db) = start_metrics_db(&rt, "agent-token");
    let t = Test::new().file("telegraf.conf", &AGENT_CONFIG.replace("URL", &url));
    let conf = t.path().join("telegraf.conf");
    let running =
        t.env("AGENT_TOKEN", "agent-token").args(["twin", "metrics-agent", &conf.display().to_string()]).spawn();
    let count = |flux: &str| -> usize {
        let csv = db.query(flux, &Default::default()).unwrap();
        opsbook::wire::flux_csv::parse(&csv).unwrap().len()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while count(
        r#"from(bucket:"telegraf")|>range(start:-1m)|>filter(fn:(r)=>r._measurement=="cpu" and r.cpu=="cpu-total")"#,
    ) == 0
    {
        assert!(Instant::now() < deadline, "no cpu points written");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A changed config takes effect on SIGHUP: the global tag shows on later points.
    std::fs::write(&conf, format!("[global_tags]\n  reloaded = \"yes\"\n{}", AGENT_CONFIG.replace("URL", &url)))
        .unwrap();
    running.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(15);
    while count(r#"from(bucket:"telegraf")|>range(start:-1m)|>filter(fn:(r)=>r.reloaded=="yes")"#) == 0 {
        assert!(Instant::now() < deadline, "reloaded config not in effect");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A broken config on SIGHUP stops the agent with exit 1, as Telegraf does.
    std::fs::write(&conf, "[agent\n").unwrap();
    running.signal(libc::SIGHUP);
    let (out, _) = running.wait(Duration::from_secs(10));
    out.code(1)
        .stdout_has("I! Loaded inputs: cpu disk mem")
        .stdout_has("[outputs.influxdb_v2] Wrote batch of")
        .stdout_has("I! Reloading Telegraf config")
        .stdout_has("E! [telegraf] Error running agent")
        .stdout_lacks("agent-token");
}

#[test]
fn shipper_validate_is_silent_on_success_and_locates_problems() {
    let t = Test::new()
        .file("ok.toml", "[labels]\nservice_type = \"x\"\n")
        .file("bad.toml", "[server]\nlisten = \"nowhere\"\n[write]\nformat = \"xml\"\n");
    let ok = t.path().join("ok.toml").display().to_string();
    let bad = t.path().join("bad.toml").display().to_string();
    let out = Test::new().args(["twin", "log-shipper", "validate", &ok]).run().code(0);
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    Test::new()
        .args(["twin", "log-shipper", "validate", &bad])
        .run()
        .code(1)
        .stderr_has(&format!("{bad}:2:10"))
        .stderr_has(&format!("{bad}:4:10"))
        .stderr_has("is invalid (2 problems)");
    // A process refuses to start on an invalid config.
    Test::new().args(["twin", "log-shipper", &bad]).run().code(1).stderr_has("`listen` must be an address");
}
