//! The twins started the way the real components are: Loki's `-config.file` YAML and
//! `-verify-config`, Alloy's `run`/`validate` with a `.alloy` file, Telegraf's `--config`,
//! influxd's flags and `INFLUXD_CONFIG_PATH` — with the files the deploy runbook renders, and
//! broken ones answered with the real programs' errors.

use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Value, json};

use crate::support::ports::free_port;
use crate::support::private_host::PrivateHost;
use crate::support::{Test, mask, opsbook, wait_until};
use crate::twin_processes::{client, wait_http};

/// The Loki config the deploy runbook renders (shared with the twin crate's tests).
const LOKI_YAML: &str = include_str!("../crates/twin/tests/fixtures/loki.yaml");

/// The Alloy config the deploy runbook renders.
const ALLOY: &str = r#"// Alloy
logging {
  level  = "info"
  format = "logfmt"
}

loki.source.journal "journal" {
  forward_to = [loki.write.default.receiver]
  max_age    = "12h"
  labels     = {
    service_type = "journal",
    hostname     = "c1",
  }
}

loki.write "default" {
  endpoint {
    url        = "http://10.0.0.1:3100/loki/api/v1/push"
    batch_wait = "1s"
  }
}
"#;

/// The whole masked text matches `pattern` (anchored).
fn assert_whole(pattern: &str, text: &str) {
    let seen = mask(text);
    assert!(Regex::new(&format!("^(?:{pattern})$")).unwrap().is_match(&seen), "expected /{pattern}/, got:\n{seen}");
}

const LOKI_TS: &str = r"ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z";

#[test]
fn loki_config_files_are_verified_as_loki_verifies_them() {
    let t = Test::new()
        .file("loki.yaml", LOKI_YAML)
        .file("typo.yaml", &LOKI_YAML.replace("  grpc_listen_port: 9096", "  grpc_port: 9096\n  log_levle: info"))
        .file("weekly.yaml", &LOKI_YAML.replace("period: 24h", "period: 168h"));
    let path = |name: &str| t.path().join(name).display().to_string();
    let (good, typo, weekly) = (path("loki.yaml"), path("typo.yaml"), path("weekly.yaml"));

    let out = Test::new().args(["twin", "log-store", &format!("-config.file={good}"), "-verify-config"]).run();
    let out = out.code(0).stdout_is("");
    assert_whole(&format!("level=info {LOKI_TS} caller=main\\.go:87 msg=\"config is valid\"\n"), &out.stderr);
    // Loki's flags take two dashes and a separate value as well.
    Test::new().args(["twin", "log-store", "--config.file", &good, "--verify-config"]).run().code(0);

    Test::new().args(["twin", "log-store", &format!("-config.file={typo}"), "-verify-config"]).run().code(1).stderr_is(
        "failed parsing config: [TMP]/typo.yaml: yaml: unmarshal errors:\n  \
         line 5: field grpc_port not found in type server.Config\n  \
         line 6: field log_levle not found in type server.Config. \
         Use `-config.expand-env=true` flag if you want to expand environment variables in your config file\n",
    );
    let out = Test::new().args(["twin", "log-store", &format!("-config.file={weekly}"), "-verify-config"]).run();
    let out = out.code(1);
    assert_whole(
        &format!(
            "level=error {LOKI_TS} caller=main\\.go:70 msg=\"validating config\" err=\"CONFIG ERROR: invalid schema \
             config: validating period_config: tsdb must always have periodic config for index set to 24h\"\n"
        ),
        &out.stderr,
    );
    // ${VAR} is expanded only with -config.expand-env=true, as in Loki.
    let t = t.file("env.yaml", &LOKI_YAML.replace("http_listen_port: 3100", "http_listen_port: ${LOKI_PORT}"));
    let env = t.path().join("env.yaml").display().to_string();
    Test::new()
        .args(["twin", "log-store", &format!("-config.file={env}"), "-config.expand-env=true", "-verify-config"])
        .env("LOKI_PORT", "3101")
        .run()
        .code(0);
    Test::new().args(["twin", "log-store", &format!("-config.file={env}"), "-verify-config"]).run().code(1).stderr_is(
        "failed parsing config: [TMP]/env.yaml: yaml: unmarshal errors:\n  \
         line 4: cannot unmarshal !!str `${LOKI_PORT}` into int. \
         Use `-config.expand-env=true` flag if you want to expand environment variables in your config file\n",
    );
    // Without -verify-config a broken file stops the start the same way.
    Test::new().args(["twin", "log-store", &format!("-config.file={weekly}")]).run().code(1);
    Test::new().args(["twin", "log-store", "-config.file=/nonexistent/loki.yaml"]).run().code(1).stderr_is(
        "failed parsing config: /nonexistent/loki.yaml does not exist, set config.file for custom config path\n",
    );
}

#[test]
fn loki_twin_listens_where_its_file_says_and_shows_the_file_in_config() {
    let port = free_port();
    let t = Test::new().file(
        "loki.yaml",
        &LOKI_YAML
            .replace("0.0.0.0", "127.0.0.1")
            .replace("http_listen_port: 3100", &format!("http_listen_port: {port}")),
    );
    let file = t.path().join("loki.yaml").display().to_string();
    let running = Test::new().args(["twin", "log-store", &format!("-config.file={file}"), "--ready-delay=0s"]).spawn();
    let url = format!("http://127.0.0.1:{port}");
    wait_http(&format!("{url}/ready"));
    let config = client().get(format!("{url}/config")).send().unwrap().text().unwrap();
    assert_eq!(
        config,
        format!(
            "target: all\nauth_enabled: false\nhttp_prefix: \"\"\nserver:\n  http_listen_network: tcp\n  \
             http_listen_address: 127.0.0.1\n  http_listen_port: {port}\n  grpc_listen_port: 9096\n  log_level: info\n\
             common:\n  path_prefix: /var/lib/loki\n  replication_factor: 1\n  ring:\n    kvstore:\n      store: inmemory\n\
             storage_config:\n  filesystem:\n    directory: /var/lib/loki/chunks\n  s3:\n    endpoint: \"\"\n    \
             bucketnames: \"\"\nruler_storage:\n  local:\n    directory: /var/lib/loki/rules\ningester:\n  \
             chunk_idle_period: 30m0s\n  chunk_target_size: 1572864\nlimits_config:\n  reject_old_samples: true\n  \
             reject_old_samples_max_age: 168h0m0s\n  creation_grace_period: 10m0s\n  max_line_size: 262144\n  \
             retention_period: 744h0m0s\nschema_config:\n  configs:\n  - from: \"2024-01-01\"\n    store: tsdb\n    \
             object_store: filesystem\n    schema: v13\n    index:\n      path_prefix: index/\n      prefix: index_\n      \
             period: 1d\n      tags: {{}}\n    chunks:\n      prefix: \"\"\n      period: 0s\n      tags: {{}}\n    \
             row_shards: 16\nanalytics:\n  reporting_enabled: false\n"
        )
    );
    running.signal(libc::SIGTERM);
    let (out, _) = running.wait(Duration::from_secs(10));
    out.code(0).stdout_has("msg=\"Starting Loki\"");
}

const ALLOY_BROKEN: &str = r#"logging {
  level = "info"
}

loki.source.journal "journal" {
  forward_to = [loki.write.missing.receiver]
  colour     = "red"
}

loki.source.jornal "typo" {
}
"#;

const ALLOY_BROKEN_REPORT: &str = r#"Error: [TMP]/broken.alloy:7:3: unrecognized attribute name "colour"

6 |   forward_to = [loki.write.missing.receiver]
7 |   colour     = "red"
  |   ^^^^^^^^^^^^^^^^^^
8 | }

Error: [TMP]/broken.alloy:10:1: cannot find the definition of component name "loki.source.jornal"

 9 | 
10 | loki.source.jornal "typo" {
   | ^^^^^^^^^^^^^^^^^^
11 | }

Error: [TMP]/broken.alloy:6:17: component "loki.write.missing.receiver" does not exist or is out of scope

5 | loki.source.journal "journal" {
6 |   forward_to = [loki.write.missing.receiver]
  |                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^
7 |   colour     = "red"
"#;

#[test]
fn alloy_files_are_validated_as_alloy_validates_them() {
    let t = Test::new()
        .file("config.alloy", ALLOY)
        .file("broken.alloy", ALLOY_BROKEN)
        .file("unterminated.alloy", &ALLOY.replace("push\"", "push"));
    let path = |name: &str| t.path().join(name).display().to_string();

    Test::new()
        .args(["twin", "log-shipper", "validate", &path("config.alloy")])
        .run()
        .code(0)
        .stdout_is("")
        .stderr_is("");
    Test::new()
        .args(["twin", "log-shipper", "validate", &path("broken.alloy")])
        .run()
        .code(1)
        .stdout_is("\n")
        .stderr_is(&format!("{ALLOY_BROKEN_REPORT}Error: validation failed\n"));
    Test::new().args(["twin", "log-shipper", "validate", &path("unterminated.alloy")]).run().code(1).stderr_is(
        "Error: [TMP]/unterminated.alloy:18:18: string literal not terminated\n\n\
         17 |   endpoint {\n\
         18 |     url        = \"http://10.0.0.1:3100/loki/api/v1/push\n   \
         |                  ^\n\
         19 |     batch_wait = \"[DUR]\"\n\
         Error: validation failed\n",
    );
    Test::new()
        .args(["twin", "log-shipper", "validate", "/nonexistent/config.alloy"])
        .run()
        .code(1)
        .stderr_is("Error: stat /nonexistent/config.alloy: no such file or directory\n");
    // `run` refuses to start on a broken file, as `alloy run` does.
    Test::new()
        .args(["twin", "log-shipper", "run", &format!("--server.http.listen-addr=127.0.0.1:{}", free_port())])
        .args([&path("broken.alloy")])
        .run()
        .code(1)
        .stdout_is("\n")
        .stderr_is(&format!("{ALLOY_BROKEN_REPORT}Error: could not perform the initial load successfully\n"));
}

#[test]
fn the_alloy_twin_reloads_its_file_as_alloy_does() {
    let port = free_port();
    let t = Test::new().file("config.alloy", ALLOY);
    let conf = t.path().join("config.alloy");
    let running = Test::new()
        .args(["twin", "log-shipper", "run", &format!("--server.http.listen-addr=127.0.0.1:{port}")])
        .args([format!("--storage.path={}/data", t.path().display()), conf.display().to_string()])
        .spawn();
    let url = format!("http://127.0.0.1:{port}");
    wait_http(&format!("{url}/-/ready"));
    let reload = || {
        let r = client().post(format!("{url}/-/reload")).send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    // A broken file is refused; the running config stays.
    std::fs::write(&conf, ALLOY.replace("batch_wait = \"1s\"", "batch_wait = \"1s\"\n    colour     = \"red\""))
        .unwrap();
    let expected =
        format!("error during the initial load: {}:20:5: unrecognized attribute name \"colour\"\n", conf.display());
    assert_eq!(reload(), (400, expected));
    std::fs::write(&conf, ALLOY).unwrap();
    assert_eq!(reload(), (200, "config reloaded\n".to_string()));
    assert!(t.path().join("data").is_dir(), "--storage.path is created");
    running.signal(libc::SIGTERM);
    let (out, _) = running.wait(Duration::from_secs(10));
    out.code(0).stdout_has("level=error msg=\"failed to reload config\"").stdout_has("msg=\"config reloaded\"");
}

#[test]
fn the_alloy_twin_ships_the_journal_to_the_loki_twin_as_real_units() {
    let host = match PrivateHost::boot() {
        Ok(h) => h,
        Err(e) => return crate::support::skip(e),
    };
    let t = Test::new()
        .file("loki.yaml", LOKI_YAML)
        .file("config.alloy", &ALLOY.replace("10.0.0.1", "127.0.0.1").replace("\"1s\"", "\"200ms\""));
    let (bin, dir) = (opsbook(), t.path().display());
    let unit = |description: &str, exec: String| {
        format!("[Unit]\nDescription={description}\n[Service]\nExecStart={exec}\nRestart=no\n")
    };
    host.install_unit(
        "loki.service",
        &unit("Loki", format!("{bin} twin log-store -config.file={dir}/loki.yaml --ready-delay=0s")),
    );
    host.install_unit(
        "alloy.service",
        &unit(
            "Alloy",
            // As the packaged unit runs it: `alloy run $CUSTOM_ARGS --storage.path=… $CONFIG_FILE`.
            format!(
                "{bin} twin log-shipper run --server.http.listen-addr=127.0.0.1:12345 --disable-reporting \
                 --storage.path={dir}/data {dir}/config.alloy"
            ),
        ),
    );
    host.systemctl(&["start", "loki", "alloy"]);
    let wait = "for p in 3100 12345; do for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done";
    host.exec(&["bash", "-c", wait]);
    // The line goes to the journal once the shipper follows it (its journalctl started).
    wait_until("the shipper following the journal", Duration::from_secs(20), || {
        let log = host.exec(&["journalctl", "--no-pager", "-o", "cat"]);
        let log = String::from_utf8_lossy(&log.stdout).into_owned();
        let tail = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
        if log.contains("msg=\"journal target started\"") {
            Ok(())
        } else {
            Err(format!("the journal's last lines (newest first):\n{tail}"))
        }
    });
    assert!(host.exec(&["systemd-cat", "-t", "e2e", "echo", "a line through Alloy's pipeline"]).status.success());
    let query = "curl -sS -G http://127.0.0.1:3100/loki/api/v1/query_range \
                 --data-urlencode 'query={hostname=\"c1\"} |= \"through Alloy\"' --data-urlencode 'limit=10'";
    let deadline = Instant::now() + Duration::from_secs(20);
    let streams = loop {
        let out = host.exec(&["sh", "-c", query]);
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let result = answer["data"]["result"].as_array().cloned().unwrap_or_default();
        if !result.is_empty() {
            break result;
        }
        if Instant::now() > deadline {
            let why =
                host.exec(&["sh", "-c", "systemctl --user status --no-pager loki alloy; journalctl --no-pager -n 30"]);
            panic!("the line never reached the log store:\n{}", String::from_utf8_lossy(&why.stdout));
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(streams.len(), 1, "{streams:?}");
    let mut labels = streams[0]["stream"].clone();
    // Loki 3 adds these two itself; the shipper pushed only the labels its file sets.
    let service = labels.as_object_mut().unwrap().remove("service_name");
    labels.as_object_mut().unwrap().remove("detected_level");
    assert_eq!(service, Some(json!("unknown_service")));
    assert_eq!(labels, json!({"hostname": "c1", "service_type": "journal"}));
    let lines: Vec<&str> = streams[0]["values"].as_array().unwrap().iter().map(|v| v[1].as_str().unwrap()).collect();
    assert_eq!(lines, vec!["a line through Alloy's pipeline"]);
}

/// Telegraf's config as the deploy runbook renders it.
const TELEGRAF: &str = r#"[global_tags]
  environment = "test"

[agent]
  hostname = "c1"
  interval = "10s"
  flush_interval = "10s"
  omit_hostname = false

[[outputs.influxdb_v2]]
  urls = ["http://10.0.0.1:8086"]
  token = "$INFLUX_TOKEN"
  organization = "opsbook"
  bucket = "telegraf"
  timeout = "5s"

[[inputs.cpu]]
[[inputs.mem]]
[[inputs.disk]]
[[inputs.system]]
"#;

#[test]
fn the_agent_takes_telegrafs_config_flag() {
    let t = Test::new().file("telegraf.conf", TELEGRAF);
    let conf = t.path().join("telegraf.conf").display().to_string();
    let out = Test::new().args(["twin", "metrics-agent", "--config", &conf, "--test"]).run().code(0);
    // Every line a metric of the four inputs, tagged with the global tag and the host.
    let metric = r#"> (cpu|disk|mem|system),[^\n]*\n"#;
    assert_whole(&format!("({metric})+"), &out.stdout);
    let mut measurements = std::collections::BTreeSet::new();
    for line in out.stdout.lines() {
        for p in opsbook_wire::line_protocol::parse(&line[2..]).unwrap() {
            assert!(p.tags.contains(&("environment".into(), "test".into())), "{line}");
            assert!(p.tags.contains(&("host".into(), "c1".into())), "{line}");
            measurements.insert(p.measurement);
        }
    }
    assert_eq!(measurements.into_iter().collect::<Vec<_>>(), ["cpu", "disk", "mem", "system"]);
    // `--config=PATH` as well; opsbook's own `--config` before `twin` stays opsbook's.
    Test::new().args(["twin", "metrics-agent", &format!("--config={conf}"), "--test"]).run().code(0);
}

#[test]
fn the_metrics_db_takes_influxds_flags_and_config_file() {
    let (file_port, flag_port) = (free_port(), free_port());
    let t = Test::new().file(
        "config.toml",
        &format!(
            "http-bind-address = \"127.0.0.1:{file_port}\"\nbolt-path = \"/srv/influxdb/influxd.bolt\"\n\
             engine-path = \"/srv/influxdb/engine\"\nreporting-disabled = false\nlog-level = \"error\"\n"
        ),
    );
    let config_path = t.path().join("config.toml").display().to_string();
    let keys = ["bolt-path", "engine-path", "http-bind-address", "log-level", "reporting-disabled"];
    let shown = |port: u16| -> Value {
        wait_http(&format!("http://127.0.0.1:{port}/health"));
        let r = client()
            .get(format!("http://127.0.0.1:{port}/api/v2/config"))
            .header("authorization", "Token influxd-token")
            .send()
            .unwrap();
        let config: Value = r.json().unwrap();
        keys.iter().map(|k| (k.to_string(), config["config"][k].clone())).collect::<serde_json::Map<_, _>>().into()
    };

    // The file alone.
    let running = Test::new()
        .args(["twin", "metrics-db", "--token", "influxd-token"])
        .env("INFLUXD_CONFIG_PATH", &config_path)
        .spawn();
    assert_eq!(
        shown(file_port),
        json!({"bolt-path": "/srv/influxdb/influxd.bolt", "engine-path": "/srv/influxdb/engine",
               "http-bind-address": format!("127.0.0.1:{file_port}"), "log-level": "error", "reporting-disabled": false})
    );
    running.signal(libc::SIGTERM);
    running.wait(Duration::from_secs(10)).0.code(0);

    // Flags win over the file.
    let running = Test::new()
        .args(["twin", "metrics-db", "--token", "influxd-token", &format!("--http-bind-address=127.0.0.1:{flag_port}")])
        .args(["--engine-path=/flag/engine", "--bolt-path", "/flag/influxd.bolt"])
        .env("INFLUXD_CONFIG_PATH", &config_path)
        .spawn();
    assert_eq!(
        shown(flag_port),
        json!({"bolt-path": "/flag/influxd.bolt", "engine-path": "/flag/engine",
               "http-bind-address": format!("127.0.0.1:{flag_port}"), "log-level": "error", "reporting-disabled": false})
    );
    running.signal(libc::SIGTERM);
    running.wait(Duration::from_secs(10)).0.code(0);
}
