//! The metrics-db twin against InfluxDB's facts: health, ping headers, the token, writes,
//! Flux answers in CSV (plain and annotated) read by the wire parser and by InfluxDB's own
//! Python client, empty and error answers, and the fault knobs.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{capture, client, header, runtime, skip, start_metrics_db};

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

    let now = opsbook_twin::now_ns();
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
    let rows = opsbook_wire::flux_csv::parse(&annotated).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].contains(&("_value".to_string(), opsbook_wire::flux_csv::Value::Double(42.5))));

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
    // InfluxDB v2.7.12: an unknown org on a query is a 400 `invalid` (see influx_tenancy).
    assert_eq!(r.status(), 400);

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
            r#"{"code":"invalid","message":"failed to decode request body: Please provide either orgID or org"}"#
                .into()
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
    // No bucket of that name: InfluxDB v2.7.12 finds it by name, so a 404 (docs/upstream-checked.md §7).
    let r = c.get(format!("{url}/api/v2/buckets")).query(&[("name", "nope")]).header(auth.0, auth.1).send().unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.text().unwrap(), "{\n\t\"code\": \"not found\",\n\t\"message\": \"bucket \\\"nope\\\" not found\"\n}");
}
