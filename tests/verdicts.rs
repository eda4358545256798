//! Verdicts checked against how the real components behave (issue #24; the shapes and answers
//! come from docs/upstream-checked.md: Telegraf v1.32.0/v1.39.3, Alloy v1.9.0/v1.18.1, InfluxDB
//! OSS v2.7.12): error lines in every log shape, the agent's log file, its configuration test
//! with the unit's own flags, a reload confirmed once it settled, the load run on the host
//! under test, a fresh or all-access InfluxDB, buckets across pages.
//!
//! The agent here is a stand-in script (`FAKE_TELEGRAF`) that reads its flags, files and
//! `logfile` as Telegraf does and logs Telegraf's own lines; it runs as a real unit of a
//! private host (real systemd and journald). InfluxDB's answers come from a wire server.

use serde_json::json;

use crate::support::Test;
use crate::support::private_host::PrivateHost;
use crate::support::wire::WireServer;

fn boot() -> Option<PrivateHost> {
    PrivateHost::boot().map_err(crate::support::skip).ok()
}

/// The fixture's rows: (component, level the line carries, line).
fn fixture_rows() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/upstream/log-lines.txt"))
        .expect("the upstream log fixture");
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut cols = l.splitn(3, '\t');
            let mut next = || cols.next().expect("three columns").to_string();
            (next(), next(), next())
        })
        .collect()
}

/// The lines a runbook printed with `prefix` (print's output is indented by two spaces).
fn printed(stdout: &str, prefix: &str) -> Vec<String> {
    let mut lines: Vec<String> =
        stdout.lines().filter_map(|l| l.strip_prefix("  ")?.strip_prefix(prefix)).map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn journal_errors_and_warnings_read_every_log_shape_of_the_upstream_fixture() {
    let Some(host) = boot() else { return };
    let rows = fixture_rows();
    let lines: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
    let t = Test::new().file("lines.txt", &(lines.join("\n") + "\n"));
    // On stdout, as the components log: journald files every line at priority 6 (info).
    // Written by the unit's main process itself (shell builtins): a short-lived child's lines
    // could reach journald after it exited, attributed to no unit.
    let unit = format!(
        "[Service]\nExecStart=/bin/sh -c 'while IFS= read -r l; do printf \"%%s\\n\" \"$l\"; done < {}/lines.txt; exec sleep infinity'\n",
        t.path().display()
    );
    host.install_unit("shapes.service", &unit);
    host.systemctl(&["start", "shapes"]);
    let src = format!(
        r#"
let all = wait::until(|| journal::read(#{{ unit: "shapes", lines: 1000 }}).len() >= {}, "20s");
check("every line in the journal", all.ok);
for e in journal::errors("shapes", "1 hour ago") {{ print(`E|${{e.message}}`); }}
for e in journal::warnings("shapes", "1 hour ago") {{ print(`W|${{e.message}}`); }}
"#,
        lines.len()
    );
    let out = host.opsbook(t.runbook("t", &src).path(), &["run", "t"]).code(0);
    let want = |levels: &[&str]| {
        let mut v: Vec<String> = rows.iter().filter(|r| levels.contains(&r.1.as_str())).map(|r| r.2.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(printed(&out.stdout, "E|"), want(&["error"]), "{}", out.stdout);
    assert_eq!(printed(&out.stdout, "W|"), want(&["error", "warn"]), "{}", out.stdout);
}

/// A stand-in for Telegraf: `-config`/`--config` files, then every `*.conf` under each
/// `-config-directory`; a file holding `percpu_typo` fails to load as Telegraf words it;
/// `--test` prints line protocol; as a service it logs Telegraf's lines to stderr, or, once
/// "logging is set up", to the file `logfile` names (the `Loading config` line always goes
/// to stderr), and reloads on SIGHUP (failing a second later when `reload-fails` exists).
/// Each invocation's flags are appended to `argv.log` beside it.
const FAKE_TELEGRAF: &str = r#"#!/bin/sh
# A reload signal from the first instant on is a reload, never the shell's default (exit).
reload=0
trap 'reload=1' HUP
here=$(dirname "$0")
echo "$*" >> "$here/argv.log"
configs=""; dirs=""; test=0
while [ $# -gt 0 ]; do
  case "$1" in
    -config|--config) configs="$configs $2"; shift 2 ;;
    -config-directory|--config-directory) dirs="$dirs $2"; shift 2 ;;
    -test|--test) test=1; shift ;;
    *) shift ;;
  esac
done
files="$configs"
for d in $dirs; do files="$files $(find "$d" -name '*.conf' | sort)"; done
ts() { date -u +%Y-%m-%dT%H:%M:%SZ; }
broken() {
  for f in $files; do
    if grep -q percpu_typo "$f"; then
      echo "loading config file $f failed: plugin inputs.cpu: line 2: configuration specified the fields [\"percpu_typo\"], but they were not used. This is either a typo or this config option does not exist in this version."
      return 0
    fi
  done
  [ -f "$here/reload-fails" ] && [ "$1" = reload ] && { echo "loading config file $here/telegraf.d/late.conf failed: error parsing data: line 1: expected '.' or '=', but got 'x' instead"; return 0; }
  return 1
}
if why=$(broken start); then echo "$(ts) E! $why" >&2; exit 1; fi
if [ $test = 1 ]; then
  echo "> cpu,cpu=cpu-total,host=h usage_system=1.5 1700000000000000000"
  echo "> mem,host=h used=1i 1700000000000000000"
  echo "> disk,host=h,path=/ used=1i 1700000000000000000"
  exit 0
fi
logfile=$(sed -n 's/^ *logfile *= *"\(.*\)".*/\1/p' $files | tail -n 1)
log() { if [ -n "$logfile" ]; then echo "$(ts) $*" >> "$logfile"; else echo "$(ts) $*" >&2; fi; }
start() {
  echo "$(ts) I! Loading config: $configs" >&2
  log "I! Starting Telegraf 1.32.0 brought to you by InfluxData the makers of InfluxDB"
  log "I! Loaded inputs: cpu disk mem"
}
start
[ -f "$here/error-at-start" ] && log "E! [outputs.influxdb_v2] When writing to [http://127.0.0.1:8086/api/v2/write]: failed to write metric to telegraf (401 Unauthorized): unauthorized: unauthorized access"
while :; do
  if [ $reload = 1 ]; then
    reload=0
    log "I! Reloading Telegraf config"
    log "I! [agent] Hang on, flushing any cached metrics before shutdown"
    sleep 1
    log "I! [agent] Stopping running outputs"
    if why=$(broken reload); then log "E! [telegraf] Error running agent: $why"; exit 1; fi
    start
  fi
  sleep 0.1
done
"#;

/// A scratch directory holding the stand-in agent, its `telegraf.conf` and `telegraf.d/`
/// (`extra` files in it, `{dir}` standing for the agent's folder), and the config pointing
/// opsbook at them; the unit `telegraf.service` runs it as the packaged unit does (`-config …
/// -config-directory … $TELEGRAF_OPTS`, reload by SIGHUP).
fn agent_host(host: &PrivateHost, extra: &[(&str, &str)], runbook: &str) -> Test {
    let mut t = Test::new().file("agent/telegraf.conf", "[agent]\n  interval = \"10s\"\n[[inputs.cpu]]\n");
    let dir = t.path().join("agent");
    let d = dir.display().to_string();
    for (name, text) in extra {
        t = t.file(&format!("agent/{name}"), &text.replace("{dir}", &d));
    }
    let script = dir.join("telegraf");
    std::fs::write(&script, FAKE_TELEGRAF).unwrap();
    std::fs::create_dir_all(dir.join("telegraf.d")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let unit = format!(
        "[Service]\nExecStart={d}/telegraf -config {d}/telegraf.conf -config-directory {d}/telegraf.d $TELEGRAF_OPTS\nExecReload=/bin/kill -HUP $MAINPID\n"
    );
    host.install_unit("telegraf.service", &unit);
    t.config(&format!("[metrics_agent]\nunit = \"telegraf.service\"\nconfig = \"{d}/telegraf.conf\"\n"))
        .runbook("t", runbook)
}

/// Starts the stand-in agent and waits until it has read its files (`Loading config`, logged to
/// the journal whatever its `logfile`): `systemctl start` returns once the process is forked
/// (Type=simple), so a file changed right after could still be read by the starting agent —
/// which, broken, exits (what made these tests fail under load).
fn start_agent(host: &PrivateHost) {
    host.systemctl(&["start", "telegraf"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = host.exec(&["journalctl", "--no-pager", "-o", "cat"]);
        if String::from_utf8_lossy(&out.stdout).contains("I! Loading config") {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the stand-in agent never read its files");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Masks the durations a slow check shows.
fn masked(stdout: &str) -> String {
    regex::Regex::new(r"(?m)  \((\d+ms|\d+\.\d+s)\)$").unwrap().replace_all(stdout, "").into_owned()
}

#[test]
fn the_configuration_test_loads_the_units_config_directory() {
    let Some(host) = boot() else { return };
    let src = r#"
let t = telegraf::config_test();
check("configuration test", t.ok, t.detail);
"#;
    let broken = [("telegraf.d/cpu.conf", "[[inputs.cpu]]\n  percpu_typo = true\n")];
    let t = agent_host(&host, &broken, src);
    let out = host.opsbook(t.path(), &["run", "t"]).code(1);
    let d = t.path().join("agent").display().to_string();
    out.stdout_has("FAIL  configuration test").stdout_has(&format!(
        "E! loading config file {d}/telegraf.d/cpu.conf failed: plugin inputs.cpu: line 2: configuration specified the fields"
    ));
    let argv = std::fs::read_to_string(t.path().join("agent/argv.log")).unwrap();
    assert_eq!(argv, format!("--config {d}/telegraf.conf --config-directory {d}/telegraf.d --test\n"));
    // Without the broken file the same test passes.
    std::fs::remove_file(t.path().join("agent/telegraf.d/cpu.conf")).unwrap();
    host.opsbook(t.path(), &["run", "t"]).code(0).stdout_has("ok    configuration test — 3 points from cpu, mem, disk");
}

const LOGFILE_CHECK: &str = r#"
import "checks" as checks;
wait::until(|| journal::read(#{ unit: "telegraf", grep: "Loading config" }).len() > 0, "10s");
checks::no_log_errors("telegraf", "1 hour ago", "0s");
checks::no_agent_logfile_errors("telegraf", "1 hour ago", "0s");
"#;

#[test]
fn errors_go_to_the_file_the_agents_config_directory_names_and_are_read_there() {
    let Some(host) = boot() else { return };
    let logging = "[agent]\n  logfile = \"{dir}/telegraf.log\"\n";
    let t = agent_host(&host, &[("telegraf.d/logging.conf", logging), ("error-at-start", "")], LOGFILE_CHECK);
    let log = t.path().join("agent/telegraf.log").display().to_string();
    start_agent(&host);
    let out = host.opsbook(t.path(), &["run", "t"]).code(1);
    let shown = masked(&out.stdout);
    // The journal holds only the line logged before logging was set up: it passes, and the
    // file holds the error.
    assert!(shown.contains("ok    telegraf logged no errors since 1 hour ago"), "{shown}");
    assert!(
        shown.contains(&format!(
            "FAIL  telegraf's log file has no errors since 1 hour ago — logs to {log}: read 3 line(s);"
        )),
        "{shown}"
    );
    assert!(shown.contains("E! [outputs.influxdb_v2] When writing to [http://127.0.0.1:8086/api/v2/write]"), "{shown}");
}

#[test]
fn an_agent_log_file_that_cannot_be_read_is_a_skip_saying_why_never_a_pass() {
    let Some(host) = boot() else { return };
    let logging = "[agent]\n  logfile = \"/nonexistent/telegraf/telegraf.log\"\n";
    let t = agent_host(&host, &[("telegraf.d/logging.conf", logging)], LOGFILE_CHECK);
    start_agent(&host);
    let out = host.opsbook(t.path(), &["run", "t"]).code(0);
    out.stdout_has(
        "skip  telegraf's log file has no errors since 1 hour ago — logs to /nonexistent/telegraf/telegraf.log, which",
    );
}

#[test]
fn an_agent_logging_to_the_journal_has_no_log_file_check() {
    let Some(host) = boot() else { return };
    let t = agent_host(&host, &[], LOGFILE_CHECK);
    start_agent(&host);
    let out = host.opsbook(t.path(), &["run", "t"]).code(0);
    assert!(!out.stdout.contains("log file"), "{}", out.stdout);
    out.stdout_has("1 passed, 0 failed");
}

#[test]
fn a_reload_is_confirmed_once_it_settled_with_the_same_process() {
    let Some(host) = boot() else { return };
    let t = agent_host(&host, &[], "");
    start_agent(&host);
    let pid = host.systemctl(&["show", "telegraf", "-p", "MainPID", "--value"]);
    // The stand-in writes nowhere: the evidence after the reload is tests/delivery*.rs's; this
    // one judges the reload's settling alone.
    let out = host.opsbook(t.path(), &["run", "reload-agent", "--set", "verify=false"]).code(0);
    let shown = masked(&out.stdout);
    assert!(shown.contains("ok    configuration test passes"), "{shown}");
    assert!(shown.contains(&format!("ok    telegraf.service reloaded — main PID {pid} still running")), "{shown}");
    assert!(shown.contains("I! Reloading Telegraf config"), "{shown}");
    assert_eq!(host.systemctl(&["show", "telegraf", "-p", "MainPID", "--value"]), pid);
}

#[test]
fn a_reload_that_makes_the_agent_exit_a_moment_later_fails_quoting_its_last_lines() {
    let Some(host) = boot() else { return };
    let t = agent_host(&host, &[("reload-fails", "")], "");
    start_agent(&host);
    let out = host.opsbook(t.path(), &["run", "reload-agent"]).code(1);
    let shown = masked(&out.stdout);
    assert!(shown.contains("ok    configuration test passes"), "{shown}");
    assert!(shown.contains("FAIL  telegraf.service reloaded"), "{shown}");
    assert!(shown.contains("E! [telegraf] Error running agent: loading config file"), "{shown}");
}

#[test]
fn a_broken_file_in_the_config_directory_stops_the_reload_before_the_signal() {
    let Some(host) = boot() else { return };
    let t = agent_host(&host, &[], "");
    start_agent(&host);
    let pid = host.systemctl(&["show", "telegraf", "-p", "MainPID", "--value"]);
    std::fs::write(t.path().join("agent/telegraf.d/cpu.conf"), "[[inputs.cpu]]\n  percpu_typo = true\n").unwrap();
    let out = host.opsbook(t.path(), &["run", "reload-agent"]).code(1);
    out.stdout_has("FAIL  configuration test passes").stdout_has("not reloading: fix the configuration first");
    let argv = std::fs::read_to_string(t.path().join("agent/argv.log")).unwrap();
    assert_eq!(argv.lines().filter(|l| l.contains("--test")).count(), 1, "{argv}");
    assert_eq!(host.systemctl(&["show", "telegraf", "-p", "MainPID", "--value"]), pid);
}

const TOKEN: &str = "CANARY-verdicts-token-7f3a";

fn setup_answer(allowed: bool) -> serde_json::Value {
    json!({"headers": {"Content-Type": "application/json; charset=utf-8"},
        "body": format!("{{\n\t\"allowed\": {allowed}\n}}")})
}

fn db_test(db: &WireServer, src: &str) -> Test {
    Test::new()
        .config(&format!("[metrics_db]\nurl = \"{}\"\norg = \"my org\"\n", db.url()))
        .env("INFLUX_TOKEN", TOKEN)
        .runbook("t", src)
}

const REFUSED: &str = r#"
for name in ["buckets", "query"] {
    let said = "";
    try {
        if name == "buckets" { influx::buckets(); } else { influx::query("buckets()"); }
    } catch (err) {
        said = `${err}`;
    }
    print(`${name}|${said}`);
}
let s = influx::storage();
print(`storage|${s.ok}|${s.detail}`);
"#;

#[test]
fn a_fresh_influxdb_is_reported_as_not_set_up_not_as_a_refused_token() {
    let unauthorized = json!({"status": 401, "headers": {"Content-Type": "application/json; charset=utf-8"},
        "body": "{\"code\":\"unauthorized\",\"message\":\"unauthorized access\"}"});
    for allowed in [true, false] {
        let Some(db) = WireServer::start(json!({
            "GET /api/v2/setup": setup_answer(allowed),
            "GET /api/v2/buckets": unauthorized, "POST /api/v2/query": unauthorized, "GET /api/v2/config": unauthorized,
        })) else {
            return;
        };
        let mut out = db_test(&db, REFUSED).args(["run", "t"]).run().code(0);
        assert!(!out.stdout.contains(TOKEN), "{}", out.stdout);
        let said = if allowed {
            "the metrics database is not set up yet (run deploy, or `influx setup`): GET /api/v2/setup answers \"allowed\": true"
        } else {
            "the metrics database refused the API token (HTTP 401 unauthorized: unauthorized access)"
        };
        for name in ["buckets", "query"] {
            out = out.stdout_has(&format!("{name}|{said}"));
        }
        out.stdout_has(&format!("storage|false|{said}"));
    }
}

const OPERATOR_ONLY: &str =
    "{\n\t\"code\": \"unauthorized\",\n\t\"message\": \"access to /api/v2/config requires operator permissions\"\n}";

#[test]
fn storage_with_an_all_access_token_reads_the_servers_config_file_or_skips_saying_why() {
    let Some(db) = WireServer::start(json!({
        "GET /api/v2/setup": setup_answer(false),
        "GET /api/v2/config": {"status": 401, "headers": {"Content-Type": "application/json; charset=utf-8"}, "body": OPERATOR_ONLY},
    })) else {
        return;
    };
    let src = r#"
import "verify" as verify;
let s = influx::storage();
print(`storage|${s.ok}|${s.backend}|${s.path}|${s.skipped}|${s.detail}`);
verify::metrics_db_storage();
"#;
    // No config file to read: the check is skipped, saying why.
    let out = db_test(&db, src).args(["run", "t"]).run().code(0);
    let why = "/api/v2/config needs an operator token (the configured one is not: access to /api/v2/config requires operator permissions)";
    out.stdout_has(&format!("storage|true|||{why}; /etc/influxdb/config.toml"))
        .stdout_has(&format!("skip  storage backend — {why}; /etc/influxdb/config.toml"));
    // The server's config file names the engine: read from there.
    let t = db_test(&db, src);
    let conf = t.path().join("influxdb.toml").display().to_string();
    let t = t
        .file(
            "influxdb.toml",
            "bolt-path = \"/var/lib/influxdb/influxd.bolt\"\nengine-path = \"/var/lib/influxdb/engine\"\n",
        )
        .file(
            "opsbook.toml",
            &format!("[metrics_db]\nurl = \"{}\"\norg = \"my org\"\nconfig = \"{conf}\"\n", db.url()),
        );
    let out = t.args(["run", "t"]).run().code(0);
    out.stdout_has(&format!("storage|true|local|/var/lib/influxdb/engine||local disk: engine at /var/lib/influxdb/engine (from {conf}; {why})"))
        .stdout_has("ok    storage backend");
}

fn bucket(i: usize, name: &str) -> serde_json::Value {
    json!({"id": format!("{i:016x}"), "orgID": "0000000000000001", "type": "user", "name": name, "retentionRules": []})
}

#[test]
fn buckets_are_listed_across_pages_and_one_is_found_by_name() {
    let first: Vec<serde_json::Value> = (0..100).map(|i| bucket(i, &format!("b{i:03}"))).collect();
    let json_of = |v: serde_json::Value| json!({"require_token": TOKEN, "headers": {"Content-Type": "application/json; charset=utf-8"}, "body": v.to_string()});
    let Some(db) = WireServer::start(json!({
        "GET /api/v2/buckets?limit=100": json_of(json!({"links": {"self": "/api/v2/buckets?descending=false&limit=100&offset=0",
            "next": "/api/v2/buckets?descending=false&limit=100&offset=100"}, "buckets": first})),
        "GET /api/v2/buckets?descending=false&limit=100&offset=100": json_of(json!({"links": {
            "prev": "/api/v2/buckets?descending=false&limit=100&offset=0",
            "self": "/api/v2/buckets?descending=false&limit=100&offset=100"},
            "buckets": [bucket(100, "telegraf"), bucket(101, "_monitoring")]})),
        "GET /api/v2/buckets?org=my%20org&name=telegraf": json_of(json!({"links": {"self": "/api/v2/buckets?bucket=telegraf&descending=false&limit=20&offset=0&org=my+org"},
            "buckets": [bucket(100, "telegraf")]})),
        "GET /api/v2/buckets?org=my%20org&name=nope": {"status": 404, "headers": {"Content-Type": "application/json; charset=utf-8"},
            "body": "{\n\t\"code\": \"not found\",\n\t\"message\": \"bucket \\\"nope\\\" not found\"\n}"},
    })) else {
        return;
    };
    let src = r#"
import "verify" as verify;
let all = influx::buckets();
check("every page", all.len() == 102 && all[100].name == "telegraf", all.len());
let one = influx::bucket("telegraf");
check("by name", one.name == "telegraf" && one.id == "0000000000000064", one);
check("absent by name", influx::bucket("nope") == ());
verify::metrics_db_bucket();
"#;
    db_test(&db, src)
        .args(["run", "t"])
        .run()
        .code(0)
        .stdout_has("ok    authenticated bucket listing")
        .stdout_has("4 passed, 0 failed");
    let paths: Vec<String> = db.requests().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect();
    assert!(paths.iter().all(|p| !p.contains("limit=") || p.contains("limit=100")), "{paths:?}");
}

/// The host's commands, answered here: the load's command line is kept, and the host's CPU
/// counters are those a host would print (`getconf CLK_TCK`, then `/proc/stat`'s `cpu` line
/// before and after the load).
struct HostCommands {
    seen: std::sync::Arc<std::sync::Mutex<Vec<Vec<String>>>>,
}

impl opsbook_world::Commands for HostCommands {
    fn run<'a>(
        &'a self,
        invocation: &'a opsbook_world::Invocation,
    ) -> opsbook_world::BoxFuture<'a, Result<opsbook_world::Completed, String>> {
        self.seen.lock().unwrap().push(invocation.argv.clone());
        Box::pin(async {
            Ok(opsbook_world::Completed {
                code: Some(0),
                stdout: "100\ncpu  100 5 200 1000 0 0 0 0 0 0\ncpu  300 5 700 1200 0 0 0 0 0 0\n".into(),
                stderr: String::new(),
                duration: std::time::Duration::from_secs(1),
                timed_out: false,
            })
        })
    }
}

/// Runs `src` as a runbook in a session acting on `world`: each check's name, outcome, detail.
fn run_on(
    world: opsbook_world::World,
    config: opsbook_base::config::Config,
    src: &str,
) -> Vec<(String, opsbook_base::report::Outcome, String)> {
    use opsbook_base::report::{Format, Recorder};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("runbooks")).unwrap();
    std::fs::write(dir.path().join("runbooks/load.rhai"), src).unwrap();
    let catalog = std::sync::Arc::new(opsbook_engine::catalog::Catalog::new(&[dir.path().join("runbooks")]));
    let session = opsbook_fleet::Session::new(config, world, catalog, opsbook_base::report::Mode::default());
    let compiled = session.compile("load").unwrap();
    let report = session
        .run_recorded(&compiled, &[], |name, source, params, mode| {
            let quiet = opsbook_base::report::formatter(Format::Json, false);
            Recorder::with_output(name, source, params, mode, quiet, Box::new(std::io::sink()))
        })
        .unwrap();
    report.records().map(|r| (r.name.clone(), r.outcome, r.detail.clone())).collect()
}

#[test]
fn the_cpu_load_runs_through_the_hosts_commands_and_reports_that_hosts_usage() {
    let config = opsbook_base::config::Config::defaults();
    let seen = std::sync::Arc::default();
    let mut world = opsbook_world::World::real(&config);
    world.commands = std::sync::Arc::new(HostCommands { seen: std::sync::Arc::clone(&seen) });
    let src =
        "let r = host::cpu_load(3, \"1s\");\ncheck(\"the host's usage\", r.user == 2.0 && r.system == 5.0, `${r}`);\n";
    let records = run_on(world, config, src);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0].1, opsbook_base::report::Outcome::Pass, "{records:#?}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one round trip: {seen:?}");
    let argv = seen[0].join(" ");
    assert!(argv.starts_with("sh -c ") && argv.contains("timeout") && argv.ends_with(" 3 1"), "{argv}");
}

#[test]
fn over_ssh_the_cpu_load_runs_on_the_remote_host_and_reads_its_counters() {
    let fleet = match crate::support::fleet::Fleet::boot(&["c1"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let host = fleet.host("c1");
    let ssh = std::sync::Arc::new(
        opsbook_world::transport::Ssh::connect(host.ssh_target()).unwrap_or_else(|e| panic!("{e}")),
    );
    let mut config = opsbook_base::config::Config::defaults();
    let user = opsbook_base::config::Value::Text("user".into());
    config.set(opsbook_base::config::keys::SCOPE, user, opsbook_base::config::Origin::Flag("test")).unwrap();
    let world = opsbook_world::World::over_ssh(&config, ssh, true, Default::default()).unwrap();
    let src = "let r = host::cpu_load(2, \"3s\");\ncheck(\"the host's kernel time\", r.system > 0.5 && r.wall >= 3.0, `${r}`);\n";
    let run = std::thread::spawn(move || run_on(world, config, src));
    // The workers are processes of c1: its own PID namespace sees them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = String::new();
    while seen.lines().count() < 2 && std::time::Instant::now() < deadline && !run.is_finished() {
        seen = String::from_utf8_lossy(&host.exec(&["pgrep", "-x", "dd"]).stdout).into_owned();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let records = run.join().unwrap();
    assert_eq!(seen.lines().count(), 2, "dd workers seen in c1: {seen:?}");
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0].1, opsbook_base::report::Outcome::Pass, "{records:#?}");
}

#[test]
fn influxds_error_line_for_opsbooks_own_storage_probe_is_known_benign() {
    // InfluxDB v2.7.12 logs every refusal it answers; this one is provoked by `influx::storage()`
    // with an all-access token (the fixture's line, as influxd writes it).
    let rows = fixture_rows();
    let line = &rows.iter().find(|r| r.2.contains("requires operator permissions")).expect("the fixture line").2;
    let src = format!(
        "import \"benign\" as benign;\ncheck(\"benign\", benign::matches(benign::of_unit(config.metrics_db.unit), {line:?}, false));\n\
check(\"not for others\", !benign::matches(benign::of_unit(config.metrics_agent.unit), {line:?}, false));\n"
    );
    Test::new().runbook("t", &src).args(["run", "t"]).run().code(0).stdout_has("2 passed, 0 failed");
}
