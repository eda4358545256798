//! opsbook with Prometheus' own tools, as an operator's monitoring would use it: the alerting
//! rules of prometheus/ checked and unit-tested by `promtool`, the Alertmanager example by
//! `amtool`, `opsbook hosts --format prometheus` (whole outputs, and the file read by
//! `promtool check config` through the example's `file_sd_configs`), runs refusing that
//! format, and a real Prometheus scraping `opsbook serve` until its alert fires. Each tool is
//! Debian's (prometheus, prometheus-alertmanager); a missing one skips, saying which.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::serve::until;
use crate::support::ports::free_port;
use crate::support::{Test, repo_dir, skip};

/// Debian's path of a tool, if it is installed.
fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/local/bin", "/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.exists())
}

/// Runs `tool ARGS` in `dir`: its exit status and stdout and stderr, together.
fn run_tool(tool: &Path, args: &[&str], dir: &Path) -> (bool, String) {
    let out: Output = Command::new(tool).args(args).current_dir(dir).stdin(Stdio::null()).output().expect("run a tool");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn promtool_checks_the_alerting_rules_and_passes_their_unit_tests() {
    let Some(promtool) = tool("promtool") else { return skip("promtool is missing (apt-get install prometheus)") };
    let dir = repo_dir().join("prometheus");
    let (ok, said) = run_tool(&promtool, &["check", "rules", "opsbook.rules.yml"], &dir);
    assert!(ok, "{said}");
    assert_eq!(said, "Checking opsbook.rules.yml\n  SUCCESS: 10 rules found\n\n");
    let (ok, said) = run_tool(&promtool, &["test", "rules", "opsbook.rules.test.yml"], &dir);
    assert!(ok, "{said}");
    assert_eq!(said, "Unit Testing:  opsbook.rules.test.yml\n  SUCCESS\n\n");
}

#[test]
fn amtool_accepts_the_alertmanager_example() {
    let Some(amtool) = tool("amtool") else {
        return skip("amtool is missing (apt-get install prometheus-alertmanager)");
    };
    let (ok, said) = run_tool(&amtool, &["check-config", "alertmanager.example.yml"], &repo_dir().join("prometheus"));
    assert!(ok, "{said}");
    assert_eq!(
        said,
        "Checking 'alertmanager.example.yml'  SUCCESS\nFound:\n - global config\n - route\n - 2 inhibit rules\n \
         - 2 receivers\n - 0 templates\n\n"
    );
}

/// A fleet written in opsbook.toml: addresses of each kind, this machine (no address), and a
/// `serve.listen` on every address with its own port.
const FLEET: &str = r#"
[serve]
listen = "0.0.0.0:9500"

[hosts.monitor1]
address = "10.0.0.1"
roles = ["metrics-db", "log-store"]

[hosts.web1]
address = "web1.example.net"
roles = ["telegraf", "alloy"]

[hosts.v6]
address = "fd00::3"
roles = ["metrics-agent"]

[hosts.here]
roles = []
"#;

/// The file_sd targets `FLEET` gives, in the inventory's order (by name).
const FLEET_TARGETS: &str = r#"[
  {
    "targets": [
      "127.0.0.1:9500"
    ],
    "labels": {
      "host": "here",
      "roles": ""
    }
  },
  {
    "targets": [
      "10.0.0.1:9500"
    ],
    "labels": {
      "host": "monitor1",
      "roles": "metrics-db,log-store"
    }
  },
  {
    "targets": [
      "[fd00::3]:9500"
    ],
    "labels": {
      "host": "v6",
      "roles": "metrics-agent"
    }
  },
  {
    "targets": [
      "web1.example.net:9500"
    ],
    "labels": {
      "host": "web1",
      "roles": "metrics-agent,log-shipper"
    }
  }
]
"#;

#[test]
fn hosts_format_prometheus_prints_a_file_sd_target_per_host_that_promtool_accepts() {
    let t = Test::new().config(FLEET);
    let dir = t.path().to_path_buf();
    let out = t.args(["hosts", "--format", "prometheus"]).run().code(0).stderr_is("");
    assert_eq!(out.stdout, FLEET_TARGETS, "whole output");
    // The pattern selects as for the table.
    Test::new().config(FLEET).args(["hosts", "monitor1", "--format", "prometheus"]).run().code(0).stdout_is(
        "[\n  {\n    \"targets\": [\n      \"10.0.0.1:9500\"\n    ],\n    \"labels\": {\n      \"host\": \"monitor1\",\n      \
         \"roles\": \"metrics-db,log-store\"\n    }\n  }\n]\n",
    );

    // The shipped Prometheus example reading the file, its rules beside it, as installed.
    let Some(promtool) = tool("promtool") else { return skip("promtool is missing (apt-get install prometheus)") };
    let targets = dir.join("opsbook-targets.json");
    std::fs::write(&targets, &out.stdout).unwrap();
    let example = std::fs::read_to_string(repo_dir().join("prometheus/prometheus.example.yml")).unwrap();
    assert!(example.contains("/etc/prometheus/opsbook-targets.json"), "the example's file_sd path moved");
    let config = example.replace("/etc/prometheus/opsbook-targets.json", &targets.display().to_string());
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    std::fs::copy(repo_dir().join("prometheus/opsbook.rules.yml"), dir.join("opsbook.rules.yml")).unwrap();
    let (ok, said) = run_tool(&promtool, &["check", "config", "prometheus.yml"], &dir);
    assert!(ok, "{said}");
    assert_eq!(
        said,
        "Checking prometheus.yml\n  SUCCESS: 1 rule files found\n SUCCESS: prometheus.yml is valid prometheus config \
         file syntax\n\nChecking opsbook.rules.yml\n  SUCCESS: 10 rules found\n\n"
    );
    // promtool reads the targets file too (saying so only when it is wrong): a target
    // group it cannot take fails the same check.
    std::fs::write(&targets, out.stdout.replace("\"host\"", "\"0host\"")).unwrap();
    let (ok, said) = run_tool(&promtool, &["check", "config", "prometheus.yml"], &dir);
    assert!(!ok && said.contains("\"0host\" is not a valid label name"), "{said}");
}

#[test]
fn hosts_format_prometheus_leaves_out_a_host_without_an_address_or_a_port() {
    let inventory = "all:\n  hosts:\n    monitor1:\n      ansible_host: 10.0.0.1\n    monitor12:\n      \
                     ansible_host: \"{{ monitor12_ip }}\"\n";
    Test::new()
        .file("inventory.yml", inventory)
        .args(["hosts", "--inventory", "inventory.yml", "--format", "prometheus"])
        .run()
        .code(1)
        .stdout_is(
            "[\n  {\n    \"targets\": [\n      \"10.0.0.1:9464\"\n    ],\n    \"labels\": {\n      \"host\": \"monitor1\",\n      \
             \"roles\": \"\"\n    }\n  }\n]\n",
        )
        .stderr_is("left out monitor12: its address could not be resolved (`opsbook hosts` says why)\n");
    // Nor is there a target where serve listens on no port.
    Test::new()
        .config("[serve]\nlisten = \"localhost\"\n")
        .args(["hosts", "--format", "prometheus"])
        .run()
        .code(1)
        .stdout_is("[]\n")
        .stderr_is("left out localhost: `serve.listen` is `localhost`, which names no port\n");
}

#[test]
fn runs_and_other_subcommands_refuse_format_prometheus() {
    let refused = |sub: &str| {
        format!(
            "error: `--format prometheus` is only for `opsbook hosts` (its Prometheus file_sd targets), not for \
             `opsbook {sub}`: the other formats are human, json, junit and tap\n  help: `opsbook hosts --format \
             prometheus > targets.json`\n"
        )
    };
    let out = Test::new().args(["run", "quick-check", "--sandbox", "--format", "prometheus"]).run();
    out.code(2).stdout_is("").stderr_is(&refused("run"));
    Test::new().args(["--format", "prometheus", "list"]).run().code(2).stdout_is("").stderr_is(&refused("list"));
    // Not offered where report formats are listed.
    Test::new().args(["run", "--help"]).run().code(0).stdout_lacks("prometheus");
}

/// A process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// Debian's Prometheus on `port` with `dir`/prometheus.yml, its data in `dir`/data and its
/// log in `dir`/prometheus.log.
fn start_prometheus(prometheus: &Path, dir: &Path, port: u16) -> Killed {
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    Killed(child)
}

/// opsbook.rules.yml with every `for:` shortened to 2s. The rules' durations (5m to 15m) are
/// what an operator wants and are proven by promtool's unit tests (opsbook.rules.test.yml,
/// on synthetic series); here the expressions, labels and annotations are the real ones and
/// the series are serve's own, and the alert still goes through `pending` to `firing`, but
/// within seconds instead of ten minutes.
fn rules_with_short_for() -> String {
    let rules = std::fs::read_to_string(repo_dir().join("prometheus/opsbook.rules.yml")).unwrap();
    let re = regex::Regex::new(r"(?m)^(\s+for:) \d+[smh]$").unwrap();
    let short = re.replace_all(&rules, "$1 2s").into_owned();
    assert_eq!(short.matches("for: 2s").count(), 10, "every rule has a `for:`");
    short
}

#[test]
fn a_real_prometheus_scraping_serve_fires_check_failing_for_the_failing_checks() {
    let Some(prometheus) = tool("prometheus") else {
        return skip("prometheus is missing (apt-get install prometheus)");
    };
    let t = Test::new();
    let dir = t.path().to_path_buf();
    let (serve_port, prom_port) = (free_port(), free_port());
    let listen = format!("127.0.0.1:{serve_port}");
    // The metrics database down: quick-check's unit and health checks of it fail every run.
    let state = dir.join("state").display().to_string();
    let args = ["serve", "--sandbox", "--fault", "metrics-db:down", "quick-check@1s", "--listen", &listen];
    let _serve = Test::new().args(args).args(["--state-dir", &state]).spawn();
    until(&format!("http://{listen}/readyz"), 200, Duration::from_secs(30));

    // The targets as an operator writes them: from `opsbook hosts`, with serve's listen.
    let out = Test::new()
        .config(&format!("[serve]\nlisten = \"{listen}\"\n"))
        .args(["hosts", "--format", "prometheus"])
        .run()
        .code(0);
    std::fs::write(dir.join("targets.json"), &out.stdout).unwrap();
    std::fs::write(dir.join("opsbook.rules.yml"), rules_with_short_for()).unwrap();
    // The scrape job of prometheus.example.yml, scraping and evaluating every second.
    std::fs::write(
        dir.join("prometheus.yml"),
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - opsbook.rules.yml\n\
         scrape_configs:\n  - job_name: opsbook\n    honor_labels: true\n    file_sd_configs:\n      - files:\n          \
         - targets.json\n",
    )
    .unwrap();
    let _prometheus = start_prometheus(&prometheus, &dir, prom_port);
    let base = format!("http://127.0.0.1:{prom_port}");
    until(&format!("{base}/-/ready"), 200, Duration::from_secs(60));

    // A rehearsal's host name says so.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string() + " (sandbox)";
    // Sorted as `firing` sorts them.
    let expected: Vec<String> =
        [("units", "influxdb.service active"), ("servers", "metrics database /health answers 200")]
            .iter()
            .map(|(section, check)| {
                format!(
                    "alertname=OpsbookCheckFailing check={check} host={host} instance={listen} job=quick-check \
                 roles=metrics-db,log-store,metrics-agent,log-shipper runbook=quick-check section={section} \
                 severity=warning"
                )
            })
            .collect();
    let started = Instant::now();
    let limit = Duration::from_secs(90);
    loop {
        let firing = firing(&base, "OpsbookCheckFailing");
        if firing == expected {
            eprintln!("OpsbookCheckFailing firing after {:?}", started.elapsed());
            break;
        }
        if started.elapsed() > limit {
            let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
            let (targets, alerts) = (fetch(&format!("{base}/api/v1/targets")), fetch(&format!("{base}/api/v1/alerts")));
            panic!(
                "OpsbookCheckFailing not firing within {limit:?}\nexpected {expected:#?}\nfiring {firing:#?}\n\
                 targets: {targets}\nalerts: {alerts}\n{log}"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// GET `url` with a real HTTP client: Prometheus' API answers in chunks once an answer is
/// longer than a few kilobytes. The body, empty when nothing answered.
fn fetch(url: &str) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    client.get(url).send().and_then(|r| r.error_for_status()).and_then(|r| r.text()).unwrap_or_default()
}

/// The firing alerts called `name` on Prometheus at `base`, each as its labels
/// `k=v` sorted by name, the alerts sorted.
fn firing(base: &str, name: &str) -> Vec<String> {
    let answer: serde_json::Value = serde_json::from_str(&fetch(&format!("{base}/api/v1/alerts"))).unwrap_or_default();
    let mut alerts: Vec<String> = answer["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing" && a["labels"]["alertname"] == name)
        .map(|a| {
            let labels = a["labels"].as_object().cloned().unwrap_or_default();
            let mut pairs: Vec<String> =
                labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
            pairs.sort();
            pairs.join(" ")
        })
        .collect();
    alerts.sort();
    alerts
}
