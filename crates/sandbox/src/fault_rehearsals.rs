//! Tests: the faults that rehearse the real components' shapes (docs/upstream-checked.md)
//! show them in the sandbox — a database not set up, an all-access token, the agent's and
//! the shipper's JSON error lines, the agent's logfile, and an agent that dies a second after
//! its reload. Each polls the sandbox's journal (or file) up to a deadline.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use super::Sandbox;
use opsbook_base::config::{Config, keys};
use opsbook_world::journal::Entry;
use opsbook_world::units::full_name;

/// One sandbox at a time: a sandbox's private directory is named after the process.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The guard that keeps other sandboxes from starting meanwhile, and a sandbox with `fault`
/// (bound in this order, the guard is dropped after the sandbox).
fn start(fault: &str) -> (std::sync::MutexGuard<'static, ()>, Sandbox, Config) {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (sandbox, config) = Sandbox::start(Config::defaults(), &[fault.to_string()]).expect("the sandbox starts");
    (guard, sandbox, config)
}

/// The journal lines of `unit` (systemd's own about it too, when `manager`) once one of them
/// satisfies `done`, within 10 s.
fn lines_until(
    sandbox: &Sandbox,
    config: &Config,
    key: &opsbook_base::config::Key,
    manager: bool,
    done: impl Fn(&str) -> bool,
) -> Vec<String> {
    let unit = full_name(&config.text(key));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let entries: Vec<Entry> = sandbox.hosts[0]
            .sim
            .journal
            .select(|e| e.unit == unit && (manager || e.identifier != "systemd"), usize::MAX);
        let lines: Vec<String> = entries.into_iter().map(|e| e.message).collect();
        if lines.iter().any(|l| done(l)) {
            return lines;
        }
        assert!(Instant::now() < deadline, "{unit} never logged the awaited line: {lines:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET path` on the sandbox's database with its token: the status line.
fn db_get(config: &Config, path: &str) -> String {
    let url = config.text(keys::METRICS_DB_URL);
    let addr = url.trim_start_matches("http://");
    let token = config.token().ok().flatten().map(|t| t.expose().to_string()).unwrap_or_default();
    let mut stream = std::net::TcpStream::connect(addr).expect("the database listens");
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Token {token}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_fresh_database_refuses_the_agents_token_as_influxd_does() {
    let (_one, sandbox, config) = start("metrics-db:fresh");
    let refused = "failed to write metric to telegraf (401 Unauthorized): unauthorized: unauthorized access";
    lines_until(&sandbox, &config, keys::METRICS_AGENT_UNIT, false, |l| l.contains(refused));
    assert_eq!(db_get(&config, "/api/v2/setup"), "HTTP/1.1 200 OK");
    assert_eq!(db_get(&config, "/api/v2/buckets"), "HTTP/1.1 401 Unauthorized");
}

#[test]
fn an_all_access_token_is_refused_by_config_only() {
    let (_one, _sandbox, config) = start("metrics-db:all-access-token");
    assert_eq!(db_get(&config, "/api/v2/buckets"), "HTTP/1.1 200 OK");
    assert_eq!(db_get(&config, "/api/v2/config"), "HTTP/1.1 401 Unauthorized");
}

#[test]
fn json_errors_make_the_agent_and_the_shipper_log_json() {
    let (_one, sandbox, config) = start("metrics-agent:json-errors");
    let lines =
        lines_until(&sandbox, &config, keys::METRICS_AGENT_UNIT, false, |l| l.contains("\"msg\":\"Loaded inputs:"));
    assert!(lines.iter().any(|l| l.starts_with("{\"time\":") && l.contains("\"level\":\"INFO\"")), "{lines:#?}");
    drop(sandbox);
    drop(_one);
    let (_one, sandbox, config) = start("log-shipper:json-errors");
    let lines = lines_until(&sandbox, &config, keys::LOG_SHIPPER_UNIT, false, |l| {
        l.contains("\"msg\":\"now listening for http traffic\"")
    });
    assert!(lines.iter().all(|l| l.starts_with("{\"ts\":")), "{lines:#?}");
}

#[test]
fn with_a_logfile_the_journal_holds_only_the_agents_first_line() {
    let (_one, sandbox, config) = start("metrics-agent:logfile");
    let file = sandbox
        .dir
        .join(&sandbox.hosts[0].sim.name)
        .join("root")
        .join(super::files::AGENT_LOGFILE.trim_start_matches('/'));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&file).is_ok_and(|t| t.contains("I! Loaded inputs:")) {
        assert!(Instant::now() < deadline, "no log file at {}", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    let unit = full_name(&config.text(keys::METRICS_AGENT_UNIT));
    let agent: Vec<String> = sandbox.hosts[0]
        .sim
        .journal
        .select(|e| e.unit == unit && e.identifier == "telegraf", usize::MAX)
        .into_iter()
        .map(|e| e.message)
        .collect();
    assert_eq!(agent.len(), 1, "{agent:#?}");
    assert!(agent[0].contains(" I! Loading config: "), "{agent:#?}");
}

#[test]
fn a_reload_that_exits_later_fails_the_unit_a_second_after() {
    let (_one, sandbox, config) = start("metrics-agent:reload-exits");
    let unit = full_name(&config.text(keys::METRICS_AGENT_UNIT));
    let manager = sandbox.hosts[0].sim.manager.clone();
    let runtime = sandbox.runtime.as_ref().expect("the sandbox's runtime");
    let job = runtime.block_on(manager.reload(&unit)).expect("the reload is queued");
    assert_eq!(job, super::units::JobResult::Done, "systemctl reload returns at once");
    assert_eq!(manager.status(&unit).active_state, "active");
    let lines = lines_until(&sandbox, &config, keys::METRICS_AGENT_UNIT, true, |l| {
        l.contains("Failed with result 'exit-code'.")
    });
    let fatal = lines.iter().position(|l| l.contains("E! [telegraf] Error running agent: loading config file "));
    let stopping = lines.iter().position(|l| l.ends_with("I! [agent] Stopping running outputs"));
    assert!(stopping.is_some() && fatal > stopping, "{lines:#?}");
    assert_eq!(manager.status(&unit).active_state, "failed");
}
