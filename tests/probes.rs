//! Probes and queries against real HTTP servers on loopback: scripted answers built from
//! captures of real Loki and InfluxDB servers, broken servers (HTML, silence, refusal), and
//! real Debian `prometheus` and `influxdb` where installed.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::Test;
use crate::support::ports::free_port;
use crate::support::wire::{WireServer, capture};

const TOKEN: &str = "CANARY-probe-token-51d2";

fn loki_routes() -> serde_json::Value {
    json!({
        "GET /ready": {"status": 200, "headers": {"Content-Type": "text/plain; charset=utf-8"}, "body": "ready\n"},
        "GET /loki/api/v1/labels": {"headers": {"Content-Type": "application/json"}, "body": capture("loki-3.4.6/labels.json")},
        "GET /loki/api/v1/label/hostname/values": {"headers": {"Content-Type": "application/json"}, "body": capture("loki-3.4.6/label-hostname-values.json")},
        "GET /loki/api/v1/query_range": {"headers": {"Content-Type": "application/json"}, "body": capture("loki-3.4.6/query-range-streams.json")},
        "GET /loki/api/v1/query": {"headers": {"Content-Type": "application/json"}, "body": capture("loki-3.4.6/query-instant-metric.json")},
        "GET /metrics": {"headers": {"Content-Type": "text/plain; version=0.0.4"}, "body": capture("loki-3.4.6/metrics-excerpt.txt")},
        "GET /config": {"headers": {"Content-Type": "text/plain"}, "body": capture("loki-3.4.6/config.yaml")},
        "POST /loki/api/v1/push": {"status": 204},
    })
}

const ANNOTATED: &str = "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string,string\r\n#group,false,false,true,true,false,false,true,true,true\r\n#default,_result,,,,,,,,\r\n,result,table,_start,_stop,_time,_value,_field,_measurement,cpu\r\n,,0,2026-11-22T09:00:00Z,2026-11-22T09:01:00Z,2026-11-22T09:00:10Z,12.5,usage_system,cpu,cpu-total\r\n\r\n";

fn influx_routes() -> serde_json::Value {
    json!({
        "GET /health": {"headers": {"Content-Type": "application/json; charset=utf-8"},
            "body": "{\"name\":\"influxdb\",\"message\":\"ready for queries and writes\",\"status\":\"pass\",\"checks\":[],\"version\":\"v2.7.11\",\"commit\":\"fbf5d4ab5e\"}"},
        "HEAD /ping": {"status": 204, "headers": {"X-Influxdb-Version": "v2.7.11", "X-Influxdb-Build": "OSS"}},
        "GET /api/v2/buckets": {"require_token": TOKEN, "headers": {"Content-Type": "application/json"},
            "body": "{\"buckets\":[{\"id\":\"b1\",\"name\":\"telegraf\",\"type\":\"user\",\"retentionRules\":[{\"type\":\"expire\",\"everySeconds\":604800}]},{\"id\":\"b2\",\"name\":\"_monitoring\",\"type\":\"system\",\"retentionRules\":[]}]}"},
        "POST /api/v2/query": {"require_token": TOKEN, "headers": {"Content-Type": "text/csv; charset=utf-8"}, "body": ANNOTATED},
        "GET /api/v2/config": {"require_token": TOKEN, "headers": {"Content-Type": "application/json"},
            "body": "{\"config\":{\"engine-path\":\"/var/lib/influxdb2/engine\",\"bolt-path\":\"/var/lib/influxdb2/influxd.bolt\"}}"},
    })
}

fn config_for(db: &str, logs: &str) -> String {
    format!("[metrics_db]\nurl = \"{db}\"\norg = \"my org\"\n[log_store]\nurl = \"{logs}\"\n")
}

#[test]
fn log_store_probes_and_queries_read_real_loki_answers() {
    let routes = loki_routes();
    let Some(loki) = WireServer::start(routes) else { return };
    let src = r#"
let r = loki::ready();
check("ready", r.ok, r.detail);
let labels = loki::labels();
check("labels", labels.contains("service_type") && labels.contains("hostname"), labels);
check("values", loki::label_values("hostname").len() > 0);
let e = loki::query(`{service_type="test"} |= "hello"`, #{ limit: 5, since: "5m" });
check("entries", e.len() == 1 && e[0].line.contains("hello loki") && e[0].labels.hostname == "h1", e);
check("time", e[0].time.starts_with("2026-"), e[0].time);
let m = loki::query(`count_over_time({service_type="test"}[5m])`);
check("metric", m.len() > 0 && type_of(m[0].value) == "f64", m);
let s = prom::scrape(config.log_store.url + "/metrics");
check("scrape", s.ok && s.status == 200 && s.detail == "HTTP 200, 4 samples", s.to_map());
check("counter", s.value("loki_ingester_chunks_created_total") == 1.0 && s.has("loki_ingester_chunks_created_total"), s.value("loki_ingester_chunks_created_total"));
check("absent is not zero", s.value("loki_no_such_metric_total") == () && !s.has("loki_no_such_metric_total"));
check("namespaced", prom::value(s, "loki_ingester_chunks_created_total") == 1.0);
let st = loki::storage();
check("storage", st.ok && st.backend == "filesystem" && !st.object_storage, st.detail);
check("push", loki::push(#{ service_type: "x" }, "a line").ok);
"#;
    Test::new()
        .config(&config_for("http://127.0.0.1:1", &loki.url()))
        .runbook("p", src)
        .args(["run", "p"])
        .run()
        .code(0)
        .stdout_has("12 passed, 0 failed");
    let requests = loki.requests();
    let range = requests.iter().find(|r| r["path"].as_str().unwrap().starts_with("/loki/api/v1/query_range")).unwrap();
    let path = range["path"].as_str().unwrap();
    assert!(path.contains("query=%7Bservice_type%3D%22test%22%7D%20%7C%3D%20%22hello%22"), "{path}");
    assert!(path.contains("limit=5") && path.contains("direction=backward"), "{path}");
    let push = requests.iter().find(|r| r["method"] == "POST").unwrap();
    let body: serde_json::Value = serde_json::from_str(push["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["streams"][0]["stream"]["service_type"], "x");
}

#[test]
fn loki_starting_up_is_not_ready_with_its_reason() {
    let text = capture("loki-3.4.6/ready-starting.txt");
    let body = text.split("\r\n\r\n").nth(1).or_else(|| text.split("\n\n").nth(1)).unwrap().to_string();
    let Some(loki) = WireServer::start(
        json!({"GET /ready": {"status": 503, "headers": {"Content-Type": "text/plain"}, "body": body}}),
    ) else {
        return;
    };
    Test::new()
        .config(&config_for("http://127.0.0.1:1", &loki.url()))
        .runbook("p", "let r = loki::ready(); check(\"ready\", r.ok, r.detail);")
        .args(["run", "p"])
        .run()
        .code(1)
        .stdout_has("not ready yet: Ingester not ready: waiting for 15s after being ready");
}

#[test]
fn metrics_database_probes_and_typed_queries() {
    let Some(db) = WireServer::start(influx_routes()) else { return };
    let src = r#"
let h = influx::health();
check("health", h.ok && h.version == "v2.7.11", h.detail);
let p = influx::ping();
check("ping", p.ok && p.version == "v2.7.11" && p.build == "OSS", p.detail);
let b = influx::buckets();
check("buckets", b.len() == 2 && b[0].name == "telegraf" && b[0].retention == 604800, b);
let rows = influx::query(`from(bucket: "telegraf") |> range(start: -1m)`);
check("rows", rows.len() == 1 && rows[0]._value == 12.5 && rows[0].cpu == "cpu-total" && rows[0].table == 0, rows);
let st = influx::storage();
check("storage", st.ok && st.path == "/var/lib/influxdb2/engine", st.detail);
"#;
    let out = Test::new()
        .config(&config_for(&db.url(), "http://127.0.0.1:1"))
        .env("INFLUX_TOKEN", TOKEN)
        .env("RUST_LOG", "trace")
        .runbook("p", src)
        .args(["run", "p", "-vv"])
        .run()
        .code(0)
        .stdout_has("5 passed, 0 failed");
    assert!(!out.stdout.contains(TOKEN) && !out.stderr.contains(TOKEN), "token leaked\n{}\n{}", out.stdout, out.stderr);
    let query = db.requests().into_iter().find(|r| r["method"] == "POST").unwrap();
    assert!(query["path"].as_str().unwrap().contains("org=my%20org"));
    assert_eq!(query["headers"]["authorization"], format!("Token {TOKEN}"));
    let body: serde_json::Value = serde_json::from_str(query["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["dialect"]["annotations"], json!(["datatype", "group", "default"]));
}

#[test]
fn a_refused_token_says_so_without_showing_it() {
    let Some(db) = WireServer::start(influx_routes()) else { return };
    let out = Test::new()
        .config(&config_for(&db.url(), "http://127.0.0.1:1"))
        .env("INFLUX_TOKEN", "CANARY-wrong-token-9931")
        .runbook("p", "influx::buckets();")
        .args(["run", "p", "--format", "json"])
        .run()
        .code(1);
    let doc = out.json();
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("refused the API token (HTTP 401 unauthorized: unauthorized access)"), "{message}");
    assert!(!out.stdout.contains("CANARY-wrong-token") && !out.stderr.contains("CANARY-wrong-token"));
    Test::new()
        .config(&config_for(&db.url(), "http://127.0.0.1:1"))
        .runbook("p", "influx::buckets();")
        .args(["run", "p"])
        .run()
        .code(1)
        .stdout_has("no API token configured");
}

#[test]
fn broken_servers_give_failed_checks_quoting_what_came_back() {
    let html = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
    let Some(bad) = WireServer::start(json!({
        "GET /health": {"status": 502, "headers": {"Content-Type": "text/html"}, "body": html},
        "GET /ready": {"status": 200, "headers": {"Content-Type": "text/html"}, "body": html},
        "GET /metrics": {"status": 200, "headers": {"Content-Type": "text/html"}, "body": html},
        "GET /slow": {"hang": true},
    })) else {
        return;
    };
    let src = r#"
let h = influx::health();
check("health", h.ok, h.detail);
let r = loki::ready();
check("ready", r.ok, r.detail);
let s = prom::scrape(config.log_store.url + "/metrics");
check("scrape", s.ok, s.detail);
let t = http::probe(config.log_store.url + "/slow", #{ timeout: "300ms" });
check("slow", t.ok, t.detail);
let c = http::probe("http://127.0.0.1:1/");
check("refused", c.ok, c.detail);
"#;
    let started = Instant::now();
    let out =
        Test::new().config(&config_for(&bad.url(), &bad.url())).runbook("p", src).args(["run", "p"]).run().code(1);
    assert!(started.elapsed() < Duration::from_secs(5), "a silent server cost {:?}", started.elapsed());
    out.stdout_has("0 passed, 5 failed")
        .stdout_has("HTTP 502: <html><head><title>502 Bad Gateway")
        .stdout_has("expected `ready`, got HTTP 200: <html>")
        .stdout_has("not exposition text")
        .stdout_has("timed out after 300ms")
        .stdout_has("connection refused");
}

#[test]
fn http_requests_return_the_whole_response() {
    let Some(s) = WireServer::start(json!({
        "POST /echo": {"status": 201, "headers": {"Content-Type": "application/json", "X-Thing": "yes"}, "body": "{\"a\": [1, 2]}"},
        "GET /moved": {"status": 301, "headers": {"Location": "/elsewhere"}},
    })) else {
        return;
    };
    let src = format!(
        r#"
let r = http::post("{u}/echo", #{{ body: "hi", headers: #{{ "X-Req": "1" }} }});
check("status", r.status == 201 && r.ok && r.headers["x-thing"] == "yes", r);
check("json", parse_json(r.text).a[1] == 2);
let m = http::probe("{u}/moved");
check("redirects are not followed", !m.ok && m.status == 301, m.detail);
"#,
        u = s.url()
    );
    Test::new().runbook("p", &src).args(["run", "p"]).run().code(0).stdout_has("3 passed");
    let req = s.requests().into_iter().find(|r| r["method"] == "POST").unwrap();
    assert_eq!(req["body"], "hi");
    assert_eq!(req["headers"]["x-req"], "1");
    Test::new()
        .runbook("p", "http::get(\"http://127.0.0.1:1/\");")
        .args(["run", "p"])
        .run()
        .code(1)
        .stdout_has("connection refused");
}

/// Waits until `what` accepts connections at `url` (an `http://` one), for at most 20 s.
#[track_caller]
fn wait_for(what: &str, url: &str) {
    let addr = url.strip_prefix("http://").expect("an http:// URL");
    crate::support::wait_until(&format!("{what} listening on {addr}"), Duration::from_secs(20), || {
        std::net::TcpStream::connect(addr).map(drop)
    });
}

struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

#[test]
fn real_prometheus_exposition_parses() {
    let Ok(bin) = which("prometheus") else { return crate::support::skip("Debian's prometheus is not installed") };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(dir.path().join("p.yml"), "global:\n  scrape_interval: 1h\n").unwrap();
    let child = std::process::Command::new(bin)
        .arg(format!("--config.file={}", dir.path().join("p.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Daemon(child);
    let addr = format!("http://127.0.0.1:{port}");
    wait_for("prometheus", &addr);
    let src = format!(
        r#"
let ready = wait::until(|| http::probe("{addr}/-/ready"), "20s");
check("ready", ready.ok);
let s = prom::scrape("{addr}/metrics");
check("parsed", s.ok, s.detail);
check("build info", s.value("prometheus_build_info") == 1.0);
check("histogram buckets", s.samples("prometheus_http_request_duration_seconds_bucket").len() > 0);
"#
    );
    Test::new().runbook("p", &src).args(["run", "p"]).run().code(0).stdout_has("4 passed");
}

#[test]
fn real_influxdb_answers_ping() {
    let Ok(bin) = which("influxd") else { return crate::support::skip("Debian's influxdb is not installed") };
    let dir = tempfile::tempdir().unwrap();
    let (port, bind) = (free_port(), free_port());
    let d = dir.path().display();
    let conf = format!(
        "reporting-disabled = true\nbind-address = \"127.0.0.1:{bind}\"\n[meta]\n  dir = \"{d}/meta\"\n[data]\n  dir = \"{d}/data\"\n  wal-dir = \"{d}/wal\"\n[http]\n  bind-address = \"127.0.0.1:{port}\"\n"
    );
    std::fs::write(dir.path().join("influxdb.conf"), conf).unwrap();
    let child = std::process::Command::new(bin)
        .args(["-config", &dir.path().join("influxdb.conf").display().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Daemon(child);
    let addr = format!("http://127.0.0.1:{port}");
    wait_for("influxd", &addr);
    let src = "let p = wait::until(|| influx::ping(), \"20s\").last;\ncheck(\"ping\", p.ok && p.status == 204 && p.version.starts_with(\"1.\"), p);\nlet h = influx::health();\ncheck(\"1.x has no /health\", !h.ok, h.detail);";
    Test::new()
        .config(&config_for(&addr, "http://127.0.0.1:1"))
        .runbook("p", src)
        .args(["run", "p"])
        .run()
        .code(0)
        .stdout_has("2 passed");
}

fn which(name: &str) -> Result<String, ()> {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/sbin", "/usr/bin"]) {
        let p = format!("{dir}/{name}");
        if std::path::Path::new(&p).is_file() {
            return Ok(p);
        }
    }
    Err(())
}

#[test]
fn the_flux_builder_emits_the_three_spec_shapes() {
    let src = r#"
import "flux" as flux;
let r = flux::recent("telegraf", "5m");
check("recent", r.contains(`from(bucket: "telegraf")`) && r.contains("range(start: -5m)") && r.contains("last()"), r);
let c = flux::cpu_count("telegraf");
check("count", c.contains(`r._measurement == "cpu"`) && c.contains("count()") && c.contains("-5m"), c);
let m = flux::cpu_system_max("telegraf");
check("max", m.contains(`r._field == "usage_system"`) && m.contains(`r.cpu == "cpu-total"`) && m.contains("max()") && m.contains("-1m"), m);
let n = flux::cpu_newest_of("telegraf", "c1", "5m");
check("newest", n.contains(`r.host == "c1"`) && n.contains(`r._field == "usage_idle"`) && n.contains("last()") && n.contains("-5m"), n);
"#;
    Test::new().runbook("f", src).args(["run", "f"]).run().code(0).stdout_has("4 passed");
}

#[test]
fn the_token_comes_from_a_file_or_a_command_and_is_never_shown() {
    let Some(db) = WireServer::start(influx_routes()) else { return };
    let src = "let b = influx::buckets();\ncheck(\"listed\", b.len() == 2);";
    // A token file readable by others is refused, naming the remedy.
    let t = Test::new().file("token", TOKEN);
    let path = t.path().join("token");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let toml = format!("[metrics_db]\nurl = \"{}\"\norg = \"o\"\ntoken_file = \"{}\"\n", db.url(), path.display());
    let out = t
        .config(&toml)
        .runbook("t", src)
        .args(["run", "t"])
        .run()
        .code(1)
        .stdout_has("readable by group or others (mode 0644)")
        .stdout_has("chmod 600");
    assert!(!out.stdout.contains(TOKEN));
    // With mode 600 it is used.
    let t = Test::new().file("token", &format!("{TOKEN}\n"));
    let path = t.path().join("token");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let toml = format!("[metrics_db]\nurl = \"{}\"\norg = \"o\"\ntoken_file = \"{}\"\n", db.url(), path.display());
    let out = t
        .config(&toml)
        .runbook("t", src)
        .args(["run", "t", "--format", "json", "-vv"])
        .env("RUST_LOG", "trace")
        .run()
        .code(0);
    assert!(!out.stdout.contains(TOKEN) && !out.stderr.contains(TOKEN));
    // A token command's output is used; when it fails only its stderr is quoted.
    let toml = format!(
        "[metrics_db]\nurl = \"{}\"\norg = \"o\"\ntoken_command = [\"sh\", \"-c\", \"echo {TOKEN}\"]\n",
        db.url()
    );
    let out = Test::new().config(&toml).runbook("t", src).args(["run", "t"]).run().code(0);
    assert!(!out.stdout.contains(TOKEN) && !out.stderr.contains(TOKEN));
    let toml = format!(
        "[metrics_db]\nurl = \"{}\"\norg = \"o\"\ntoken_command = [\"sh\", \"-c\", \"echo {TOKEN}; echo vault is sealed >&2; exit 2\"]\n",
        db.url()
    );
    let out = Test::new()
        .config(&toml)
        .runbook("t", src)
        .args(["run", "t"])
        .run()
        .code(1)
        .stdout_has("exited with status 2: vault is sealed");
    assert!(!out.stdout.contains(TOKEN) && !out.stderr.contains(TOKEN));
}

#[test]
fn tls_problems_are_named() {
    let Some(plain) = WireServer::start(json!({"GET /": {"body": "hello"}})) else { return };
    let src = format!("let p = http::probe(\"https://127.0.0.1:{}/\");\ncheck(\"tls\", p.ok, p.detail);", plain.port);
    let out = Test::new().runbook("t", &src).args(["run", "t"]).run().code(1);
    assert!(out.stdout.contains("TLS:") || out.stdout.contains("tls") || out.stdout.contains("SSL"), "{}", out.stdout);
    Test::new()
        .config("[http]\nca_file = \"/nonexistent/ca.pem\"\n")
        .runbook("t", "let p = http::probe(\"https://127.0.0.1:1/\");\ncheck(\"tls\", p.ok, p.detail);")
        .args(["run", "t"])
        .run()
        .code(1)
        .stdout_has("FAIL  tls — cannot read http.ca_file `/nonexistent/ca.pem`: No such file or directory");
}

#[test]
fn a_truncated_answer_is_a_failure_quoting_it() {
    let Some(loki) = WireServer::start(json!({
        "GET /loki/api/v1/query_range": {"headers": {"Content-Type": "application/json"}, "body": "{\"status\":\"success\",\"data\":{\"resultType\":\"streams\",\"res"},
    })) else {
        return;
    };
    Test::new()
        .config(&config_for("http://127.0.0.1:1", &loki.url()))
        .runbook("t", "loki::query(`{a=\"b\"}`);")
        .args(["run", "t"])
        .run()
        .code(1)
        .stdout_has("log store: not JSON")
        .stdout_has("{\"status\":\"success\",\"data\":{\"resultType\":\"streams\",\"res");
}

/// Right after a start the chunk counter is 0; the verification waits for it, and when no
/// chunk comes it says whether any push reached the log store, from the shipper's metrics.
#[test]
fn no_chunk_created_says_whether_any_push_reached_the_log_store() {
    let metrics =
        |body: &str| json!({"GET /metrics": {"headers": {"Content-Type": "text/plain; version=0.0.4"}, "body": body}});
    let Some(loki) = WireServer::start(metrics(
        "# TYPE loki_ingester_chunks_created_total counter\nloki_ingester_chunks_created_total 0\n",
    )) else {
        return;
    };
    let Some(idle) = WireServer::start(metrics(
        "loki_write_sent_entries_total{endpoint=\"default\"} 0\nloki_write_request_duration_seconds_count{status_code=\"204\"} 0\n",
    )) else {
        return;
    };
    let Some(busy) = WireServer::start(metrics(
        "loki_write_sent_entries_total{endpoint=\"default\"} 12\nloki_write_request_duration_seconds_count{status_code=\"204\"} 3\n",
    )) else {
        return;
    };
    let Some(bare) = WireServer::start(metrics("alloy_build_info 1\n")) else { return };
    let src = "import \"verify\" as verify;\nverify::chunks_created(\"1s\", \"0s\");";
    let run = |shipper: &str| {
        let config = format!("[log_store]\nurl = \"{}\"\n[log_shipper]\nurl = \"{shipper}\"\n", loki.url());
        let out = Test::new().config(&config).runbook("c", src).args(["run", "c"]).run().code(1);
        // Durations masked: a check that took a while shows its time, a quick one does not.
        regex::Regex::new(r"(?m)  \((\d+ms|\d+\.\d+s)\)$").unwrap().replace_all(&out.stdout, "").into_owned()
    };
    let expected = |detail: &str| {
        format!(
            "c (runbooks/c.rhai)\n  FAIL  loki_ingester_chunks_created_total non-zero — {detail}\n          expected: > 0 within 1s\n          actual:   0.0\n\n0 passed, 1 failed\n"
        )
    };
    assert_eq!(
        run(&idle.url()),
        expected("no chunk created: no push reached the log store (the shipper sent 0 entries, 0 push request(s))")
    );
    assert_eq!(
        run(&busy.url()),
        expected(
            "no chunk created although the shipper sent 12 entries in 3 push request(s): the log store received them but cut no chunk"
        )
    );
    assert_eq!(
        run(&bare.url()),
        expected(
            "no chunk created; the shipper exposes no loki_write_* metrics, so whether any push was sent is unknown"
        )
    );
    assert_eq!(
        run("http://127.0.0.1:1"),
        expected("no chunk created; the shipper's metrics cannot tell whether any push was sent (connection refused)")
    );
}

/// A Loki that has received no line yet answers the label endpoints with `{"status":"success"}`
/// and no `data` (captured from Loki 3.4.6): empty lists, not errors.
#[test]
fn a_log_store_with_no_line_yet_has_no_labels() {
    let capture = capture("loki-3.4.6/labels-empty.txt");
    let body = capture.lines().last().unwrap().to_string();
    let answer = json!({"headers": {"Content-Type": "application/json; charset=UTF-8"}, "body": body});
    let Some(loki) = WireServer::start(json!({
        "GET /loki/api/v1/labels": answer,
        "GET /loki/api/v1/label/hostname/values": answer,
    })) else {
        return;
    };
    let src = "print(loki::labels());\nprint(loki::label_values(\"hostname\"));";
    let out = Test::new()
        .config(&config_for("http://127.0.0.1:1", &loki.url()))
        .runbook("p", src)
        .args(["run", "p"])
        .run()
        .code(0);
    let shown = regex::Regex::new(r"(?m)  \((\d+ms|\d+\.\d+s)\)$").unwrap().replace_all(&out.stdout, "");
    assert_eq!(shown, "p (runbooks/p.rhai)\n  []\n  []\n\n0 passed, 0 failed\n");
}
