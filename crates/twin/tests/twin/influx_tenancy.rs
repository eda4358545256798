//! The metrics-db twin's tenancy against what InfluxDB v2.7.12's source shows
//! (docs/upstream-checked.md §5–§8): a fresh server is not set up until `POST /api/v2/setup`,
//! the operator token from setup differs from an all-access token at `/api/v2/config`, buckets
//! and orgs come in pages, and `/ready` and a query's unknown org answer as influxd does.
//! Bodies are compared whole. (influxd's `--log-level`, a flag of the process, is tested with
//! the binary in the root tests/twin_processes.rs.)

use serde_json::{Value, json};

use super::{client, header, mask_line, runtime, start_fresh_metrics_db, start_metrics_db, upstream_lines};
use opsbook_twin::logger::Kept;

const UNAUTHORIZED: &str = r#"{"code":"unauthorized","message":"unauthorized access"}"#;

/// The error lines the twin logged, masked, and the same lines of the upstream fixture.
fn logged_like_upstream(kept: &Kept, text: &str) -> (Vec<String>, Vec<String>) {
    let seen: Vec<String> =
        kept.lock().unwrap().iter().filter(|(_, l)| l.contains(text)).map(|(_, l)| mask_line(l)).collect();
    let expected: Vec<String> = upstream_lines("influxdb", text).iter().map(|l| mask_line(l)).collect();
    (seen, expected)
}

#[test]
fn a_fresh_influxdb_is_not_set_up_until_onboarding() {
    let rt = runtime();
    let (url, db, kept) = start_fresh_metrics_db(&rt);
    let c = client();
    let r = c.get(format!("{url}/api/v2/setup")).send().unwrap();
    assert_eq!((r.status().as_u16(), r.text().unwrap()), (200, "{\n\t\"allowed\": true\n}".to_string()));
    // Any token, or none, is refused exactly as a wrong token on a set-up server.
    for (method, path) in
        [("GET", "/api/v2/buckets"), ("POST", "/api/v2/write?org=o&bucket=b"), ("POST", "/api/v2/query?org=o")]
    {
        for token in [None, Some("Token anything")] {
            let mut req = c.request(method.parse().unwrap(), format!("{url}{path}"));
            if let Some(t) = token {
                req = req.header("authorization", t);
            }
            let r = req.send().unwrap();
            assert_eq!(header(&r, "x-platform-error-code"), "unauthorized");
            assert_eq!((r.status().as_u16(), r.text().unwrap()), (401, UNAUTHORIZED.to_string()), "{method} {path}");
        }
    }
    let r = c.post(format!("{url}/api/v2/setup")).body(r#"{"username":"admin"}"#).send().unwrap();
    let missing = "{\n\t\"code\": \"unprocessable entity\",\n\t\"message\": \"onboarding failed: missing required fields [org,bucket]\"\n}";
    assert_eq!((r.status().as_u16(), r.text().unwrap()), (422, missing.to_string()));
    assert!(db.onboarding_allowed());

    let body = json!({"username": "admin", "password": "sup3rsecret", "org": "acme", "bucket": "metrics",
        "retentionPeriodSeconds": 86400});
    let r = c.post(format!("{url}/api/v2/setup")).json(&body).send().unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&v), ["user", "bucket", "org", "auth"]);
    let mut auth_keys = keys(&v["auth"]);
    auth_keys.sort();
    assert_eq!(
        auth_keys,
        ["createdAt", "description", "id", "links", "orgID", "permissions", "status", "token", "updatedAt", "userID"]
    );
    assert_eq!((v["auth"]["description"].as_str(), v["user"]["name"].as_str()), (Some("admin's Token"), Some("admin")));
    assert_eq!(
        v["bucket"]["retentionRules"],
        json!([{"type": "expire", "everySeconds": 86400, "shardGroupDurationSeconds": 3600}])
    );
    // The operator's permissions: read and write on every type but instance, with no org.
    let perms = v["auth"]["permissions"].as_array().unwrap();
    assert_eq!(perms.len(), 44);
    assert!(perms.iter().all(|p| p["resource"].get("orgID").is_none()));
    assert_eq!(perms[0], json!({"action": "read", "resource": {"type": "authorizations"}}));
    let token = format!("Token {}", v["auth"]["token"].as_str().unwrap());

    let r = c.get(format!("{url}/api/v2/setup")).send().unwrap();
    assert_eq!(r.text().unwrap(), "{\n\t\"allowed\": false\n}");
    let r = c.post(format!("{url}/api/v2/setup")).json(&body).send().unwrap();
    assert_eq!(header(&r, "x-platform-error-code"), "conflict");
    let done = "{\n\t\"code\": \"conflict\",\n\t\"message\": \"onboarding has already been completed\"\n}";
    assert_eq!((r.status().as_u16(), r.text().unwrap()), (422, done.to_string()));
    let (seen, expected) = logged_like_upstream(&kept, "onboarding has already been completed");
    assert_eq!(seen, expected[..1].to_vec());

    // The token setup returned works everywhere.
    let r = c
        .post(format!("{url}/api/v2/write?org=acme&bucket=metrics"))
        .header("authorization", &token)
        .body("m f=1")
        .send()
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = c.get(format!("{url}/api/v2/config")).header("authorization", &token).send().unwrap();
    assert_eq!(r.status(), 200);
}

/// A token made through `/api/v2/authorizations` with every resource type of one org.
fn all_access_token(url: &str, operator: &str, org_id: &str) -> String {
    let kinds: Vec<&str> = opsbook_twin_resource_types();
    let permissions: Vec<Value> = kinds
        .iter()
        .flat_map(|k| ["read", "write"].map(|a| json!({"action": a, "resource": {"type": k, "orgID": org_id}})))
        .collect();
    let r = client()
        .post(format!("{url}/api/v2/authorizations"))
        .header("authorization", format!("Token {operator}"))
        .json(&json!({"orgID": org_id, "description": "all access", "permissions": permissions}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().unwrap();
    assert_eq!((v["org"].as_str(), v["user"].as_str()), (Some("opsbook"), Some("admin")));
    v["token"].as_str().unwrap().to_string()
}

/// The resource types `influx auth create --all-access` grants (InfluxDB v2.7.12, all but instance).
fn opsbook_twin_resource_types() -> Vec<&'static str> {
    vec![
        "authorizations",
        "buckets",
        "dashboards",
        "orgs",
        "sources",
        "tasks",
        "telegrafs",
        "users",
        "variables",
        "scrapers",
        "secrets",
        "labels",
        "views",
        "documents",
        "notificationRules",
        "notificationEndpoints",
        "checks",
        "dbrp",
        "notebooks",
        "annotations",
        "remotes",
        "replications",
    ]
}

fn org_id(url: &str, token: &str) -> String {
    let v: Value = client()
        .get(format!("{url}/api/v2/orgs"))
        .header("authorization", format!("Token {token}"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(v["links"], json!({"self": "/api/v2/orgs"}));
    v["orgs"][0]["id"].as_str().unwrap().to_string()
}

#[test]
fn config_takes_the_operator_token_and_refuses_an_all_access_one() {
    let rt = runtime();
    let (sink, kept) = opsbook_twin::logger::memory();
    let db = opsbook_twin::metrics_db::MetricsDb::new(
        Default::default(),
        opsbook_base::secret::Secret::new("op-token"),
        sink,
    );
    let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(opsbook_twin::serve(db.clone(), Some(listener), std::future::pending()));
    let c = client();
    let all = all_access_token(&url, "op-token", &org_id(&url, "op-token"));
    let config = |token: &str| {
        c.get(format!("{url}/api/v2/config")).header("authorization", format!("Token {token}")).send().unwrap()
    };
    assert_eq!(config("op-token").status(), 200);
    let r = config(&all);
    assert_eq!(header(&r, "x-platform-error-code"), "unauthorized");
    let refused = "{\n\t\"code\": \"unauthorized\",\n\t\"message\": \"access to /api/v2/config requires operator permissions\"\n}";
    assert_eq!((r.status().as_u16(), r.text().unwrap()), (401, refused.to_string()));
    let (seen, expected) = logged_like_upstream(&kept, "requires operator permissions");
    assert_eq!(seen, expected);
    // The all-access token reads the org's buckets.
    let r = c
        .get(format!("{url}/api/v2/buckets?org=opsbook"))
        .header("authorization", format!("Token {all}"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    // The `all-access-token` fault makes the configured token an all-access one.
    db.faults.set_all_access_token(true);
    assert_eq!(config("op-token").status(), 401);
    assert_eq!(
        c.get(format!("{url}/api/v2/buckets")).header("authorization", "Token op-token").send().unwrap().status(),
        200
    );
}

fn get(url: &str, path: &str) -> (u16, Value) {
    let r = client().get(format!("{url}{path}")).header("authorization", "Token op").send().unwrap();
    let status = r.status().as_u16();
    (status, serde_json::from_str(&r.text().unwrap()).unwrap())
}

fn names(v: &Value) -> Vec<String> {
    v["buckets"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn buckets_come_in_pages_and_are_created_by_org_id() {
    let rt = runtime();
    let (url, _db) = start_metrics_db(&rt, "op");
    let c = client();
    let org = org_id(&url, "op");
    for i in 0..25 {
        let body = json!({"orgID": org, "name": format!("b{i:02}"), "retentionRules": [{"type": "expire", "everySeconds": 3600}]});
        let r = c.post(format!("{url}/api/v2/buckets")).header("authorization", "Token op").json(&body).send().unwrap();
        assert_eq!(r.status(), 201);
    }
    // 2 system buckets, telegraf, then the 25: 28 in all.
    let (status, first) = get(&url, "/api/v2/buckets");
    assert_eq!((status, names(&first).len()), (200, 20));
    assert_eq!(
        first["links"],
        json!({"self": "/api/v2/buckets?descending=false&limit=20&offset=0", "next": "/api/v2/buckets?descending=false&limit=20&offset=20"})
    );
    let (_, second) = get(&url, "/api/v2/buckets?offset=20");
    assert_eq!(names(&second), (17..25).map(|i| format!("b{i:02}")).collect::<Vec<_>>());
    assert_eq!(
        second["links"],
        json!({"prev": "/api/v2/buckets?descending=false&limit=20&offset=0", "self": "/api/v2/buckets?descending=false&limit=20&offset=20"})
    );
    let (_, one) = get(&url, "/api/v2/buckets?org=opsbook&name=b07");
    assert_eq!(names(&one), ["b07"]);
    assert_eq!(
        one["links"],
        json!({"self": "/api/v2/buckets?bucket=b07&descending=false&limit=20&offset=0&org=opsbook"})
    );
    assert_eq!(get(&url, "/api/v2/buckets?limit=100").1["buckets"].as_array().unwrap().len(), 28);

    let errors = [
        ("/api/v2/buckets?limit=101", 400, "invalid", "limit must be between 1 and 100"),
        ("/api/v2/buckets?org=opsbook&name=nope", 404, "not found", "bucket \"nope\" not found"),
        ("/api/v2/buckets?org=nope", 404, "not found", "organization name \"nope\" not found"),
    ];
    for (path, status, code, message) in errors {
        let r = c.get(format!("{url}{path}")).header("authorization", "Token op").send().unwrap();
        let expected = format!("{{\n\t\"code\": \"{code}\",\n\t\"message\": {}\n}}", Value::from(message));
        assert_eq!((r.status().as_u16(), r.text().unwrap()), (status, expected), "{path}");
    }
    let post = |body: Value| {
        let r = c.post(format!("{url}/api/v2/buckets")).header("authorization", "Token op").json(&body).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    assert_eq!(
        post(json!({"orgID": org, "name": "b01"})),
        (422, json!({"code": "conflict", "message": "bucket with name b01 already exists"}))
    );
    assert_eq!(
        post(json!({"name": "x"})),
        (400, json!({"code": "invalid", "message": "organization id must be provided"}))
    );
    let (status, made) = post(json!({"orgID": org, "name": "forever", "retentionRules": []}));
    assert_eq!((status, made["retentionRules"].clone(), made["type"].clone()), (201, json!([]), json!("user")));
    assert_eq!(made["links"]["write"], format!("/api/v2/write?org={org}&bucket={}", made["id"].as_str().unwrap()));
}

#[test]
fn a_token_for_one_bucket_gets_a_short_page_without_next() {
    let rt = runtime();
    let (url, _db) = start_metrics_db(&rt, "op");
    let org = org_id(&url, "op");
    let (_, all) = get(&url, "/api/v2/buckets?limit=2");
    assert!(all["links"].get("next").is_some());
    let telegraf = get(&url, "/api/v2/buckets?name=telegraf").1["buckets"][0]["id"].as_str().unwrap().to_string();
    let body = json!({"orgID": org, "permissions": [{"action": "read", "resource": {"type": "buckets", "orgID": org, "id": telegraf}}]});
    let r = client()
        .post(format!("{url}/api/v2/authorizations"))
        .header("authorization", "Token op")
        .json(&body)
        .send()
        .unwrap();
    let token = r.json::<Value>().unwrap()["token"].as_str().unwrap().to_string();
    // Paging happens before the permission filter: the first page (system buckets, telegraf)
    // shows telegraf only, and no `next`.
    let r = client()
        .get(format!("{url}/api/v2/buckets?limit=2"))
        .header("authorization", format!("Token {token}"))
        .send()
        .unwrap();
    let v: Value = r.json().unwrap();
    assert_eq!((names(&v), v["links"].get("next")), (Vec::<String>::new(), None));
    let r =
        client().get(format!("{url}/api/v2/buckets")).header("authorization", format!("Token {token}")).send().unwrap();
    assert_eq!(names(&r.json::<Value>().unwrap()), ["telegraf"]);
}

#[test]
fn ready_and_an_unknown_org_on_query_answer_as_influxd() {
    let rt = runtime();
    let (url, _db) = start_metrics_db(&rt, "op");
    let c = client();
    let r = c.get(format!("{url}/ready")).send().unwrap();
    assert_eq!(header(&r, "content-type"), "application/json; charset=utf-8");
    let ready = regex::Regex::new(
        r#"^\{\n    "status": "ready",\n    "started": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z",\n    "up": "[0-9.]+(ns|µs|ms|s)"\n\}\n$"#,
    )
    .unwrap();
    let body = r.text().unwrap();
    assert!(ready.is_match(&body), "{body}");
    for (query, message) in [
        ("org=nope", r#"failed to decode request body: organization name \"nope\" not found"#),
        ("orgID=0000000000000001", "failed to decode request body: organization not found"),
        ("", "failed to decode request body: Please provide either orgID or org"),
    ] {
        let r = c
            .post(format!("{url}/api/v2/query?{query}"))
            .header("authorization", "Token op")
            .header("content-type", "application/vnd.flux")
            .body("from(bucket: \"telegraf\") |> range(start: -1m)")
            .send()
            .unwrap();
        let expected = format!(r#"{{"code":"invalid","message":"{message}"}}"#);
        assert_eq!((r.status().as_u16(), r.text().unwrap()), (400, expected), "{query}");
    }
}
