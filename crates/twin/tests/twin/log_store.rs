//! The log-store twin against Loki 3.4.6's captures: answers (bodies, headers, empty forms),
//! pushes in every encoding, selection, the lines it logs over one life, and the tenant it wants
//! when the deploy runbook's config file (this crate's tests/fixtures/loki.yaml) enables auth.

use std::time::Duration;

use opsbook_twin::{Shutdown, log_store, logger};
use opsbook_wire::loki;
use regex::Regex;
use serde_json::{Value, json};

use super::loki_life::{Phase, assert_lines_match, loki_life};
use super::{capture, captured_body, client, header, runtime, shape, start_log_store, wait_until};

/// A log store that takes the captured push (stamped 22 Nov 2026): Loki's
/// `reject_old_samples_max_age` (one week by default) widened, as a Loki configured so would,
/// so the captures stay replayable whatever the date.
fn taking_the_capture(ready_delay: Duration) -> log_store::Options {
    log_store::Options {
        ready_delay,
        reject_older_than: Duration::from_secs(100 * 365 * 24 * 3600),
        ..Default::default()
    }
}

#[test]
fn loki_captures_are_reproduced() {
    let push_body = capture("loki-3.4.6/push-body.json");
    let rt = runtime();
    let (url, store, stop) = start_log_store(&rt, taking_the_capture(Duration::from_millis(600)));
    let c = client();

    // /ready: 503 with Loki's reason while starting, then `ready`; HEAD is 405.
    let r = c.get(format!("{url}/ready")).send().unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "content-type"), "text/plain; charset=utf-8");
    assert_eq!(r.text().unwrap(), captured_body("loki-3.4.6/ready-starting.txt"));
    assert_eq!(c.head(format!("{url}/ready")).send().unwrap().status(), 405);
    let r = wait_until("/ready answering 200", Duration::from_secs(10), || {
        let r = c.get(format!("{url}/ready")).send().unwrap();
        if r.status() == 200 { Ok(r) } else { Err(r.status()) }
    });
    assert_eq!(header(&r, "x-content-type-options"), "nosniff");
    assert_eq!(r.text().unwrap(), captured_body("loki-3.4.6/ready.txt"));

    // The captured push (within the widened window: `taking_the_capture`): 204, no body.
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
    let ours = opsbook_wire::exposition::parse(&metrics).unwrap();
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
    assert_eq!(opsbook_wire::loki::object_stores(&yaml), vec!["filesystem".to_string()]);
    let real = capture("loki-3.4.6/config.yaml");
    assert_eq!(opsbook_wire::loki::object_stores(&real), vec!["filesystem".to_string()]);
    stop.trigger();
}

#[test]
fn log_store_pushes_in_every_encoding_and_selects_like_loki() {
    let rt = runtime();
    let (url, _store, _stop) =
        start_log_store(&rt, log_store::Options { ready_delay: Duration::ZERO, ..Default::default() });
    let c = client();
    let now = opsbook_twin::now_ns();
    let stream = |unit: &str, lines: &[&str], at: i64| loki::PushStream {
        labels: vec![("hostname".into(), "h1".into()), ("unit".into(), unit.into())],
        entries: lines
            .iter()
            .enumerate()
            .map(|(i, l)| loki::PushEntry { ts: now - 1000 + at + i as i64, line: l.to_string(), metadata: vec![] })
            .collect(),
    };
    let json = loki::encode_json(&[stream("a.service", &["json one", "json two error"], 0)]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &loki::encode_json(&[stream("b.service", &["gzip line"], 10)])).unwrap();
    let proto = loki::encode_protobuf(&[stream("c.service", &["protobuf line"], 20)]);
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
fn log_store_logs_over_one_life_what_loki_3_4_6_logs() {
    let rt = runtime();
    let (sink, kept) = logger::memory();
    let store =
        log_store::LogStore::new(log_store::Options { ready_delay: Duration::ZERO, ..Default::default() }, sink);
    let stop = Shutdown::new();
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = rt.spawn(opsbook_twin::serve(store.clone(), Some(listener), stop.signal()));
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
    let life = loki_life(&capture("loki-3.4.6/log-levels-one-life.txt"));
    let phase = |p: Phase| -> Vec<&Regex> { life.iter().filter(|(q, _)| *q == p).map(|(_, r)| r).collect() };

    // Start: nothing at once, then `empty ring` while the ring forms.
    assert!(said().is_empty(), "{:?}", said());
    let start = phase(Phase::Start);
    wait_until("the lines of the ring's forming", Duration::from_secs(10), || {
        let so_far = said();
        if so_far.len() >= start.len() { Ok(()) } else { Err(format!("{so_far:?}")) }
    });
    assert_lines_match(&said().iter().map(String::as_str).collect::<Vec<_>>(), &start);

    // Two range queries whose limit=1 is met, as in the capture: the querier's cancellations.
    let now = opsbook_twin::now_ns();
    let body = loki::encode_json(&[loki::PushStream {
        labels: vec![("hostname".into(), "h1".into()), ("service_type".into(), "test".into())],
        entries: (0..3)
            .map(|i| loki::PushEntry { ts: now - 3000 + i, line: format!("line {i}"), metadata: vec![] })
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
    let (url, _store, stop) = start_log_store(&rt, taking_the_capture(Duration::ZERO));
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
fn a_loki_twin_with_auth_enabled_wants_a_tenant() {
    let rt = runtime();
    let file = opsbook_twin::log_store::loki_file::parse(
        "loki.yaml",
        &include_str!("../fixtures/loki.yaml").replace("auth_enabled: false", "auth_enabled: true"),
        false,
    )
    .unwrap();
    let options = opsbook_twin::log_store::Options { ready_delay: Duration::ZERO, file, ..Default::default() };
    let (url, _store, stop) = start_log_store(&rt, options);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let body = format!(r#"{{"streams":[{{"stream":{{"job":"t"}},"values":[["{now}","hello"]]}}]}}"#);
    let push = |tenant: Option<&str>| {
        let mut r = client().post(format!("{url}/loki/api/v1/push")).header("content-type", "application/json");
        if let Some(t) = tenant {
            r = r.header("X-Scope-OrgID", t);
        }
        let r = r.body(body.clone()).send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    assert_eq!(push(None), (401, "no org id\n".to_string()));
    assert_eq!(push(Some("tenant-1")), (204, String::new()));
    // What is not the API answers without one, as Loki's do.
    assert_eq!(client().get(format!("{url}/ready")).send().unwrap().status(), 200);
    stop.trigger();
}
