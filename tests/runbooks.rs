//! The built-in runbooks on a real systemd: a private host with the four units under the
//! spec's names and ports. The servers are stand-ins answering like InfluxDB and Loki
//! (tests/support/wire_server.py with captured answers); the clients are plain long-running
//! processes, the agent's unit with an `ExecReload` like Telegraf's.

use serde_json::json;

use crate::support::Test;
use crate::support::private_host::PrivateHost;

fn boot() -> Option<PrivateHost> {
    PrivateHost::boot().map_err(crate::support::skip).ok()
}

const HEALTH: &str = "{\"name\":\"influxdb\",\"message\":\"ready for queries and writes\",\"status\":\"pass\",\"checks\":[],\"version\":\"v2.7.11\",\"commit\":\"x\"}";

fn server_unit(t: &Test, name: &str, port: u16, routes: serde_json::Value) -> String {
    let path = t.path().join(format!("{name}.json"));
    std::fs::write(&path, routes.to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/wire_server.py");
    format!(
        "[Unit]\nDescription={name} stand-in\n[Service]\nExecStart=/usr/bin/python3 {script} {} {port}\n[Install]\nWantedBy=default.target\n",
        path.display()
    )
}

const CLIENT: &str = "[Unit]\nDescription=client stand-in\n[Service]\nExecStart=/bin/sh -c 'trap \"\" HUP; exec sleep infinity'\nExecReload=/bin/kill -HUP $MAINPID\n[Install]\nWantedBy=default.target\n";

/// A private host with the four units installed, enabled and started.
fn stack(t: &Test, loki_ready: bool) -> Option<PrivateHost> {
    let host = boot()?;
    let ready = if loki_ready {
        json!({"status": 200, "headers": {"Content-Type": "text/plain"}, "body": "ready\n"})
    } else {
        json!({"status": 503, "headers": {"Content-Type": "text/plain"}, "body": "Ingester not ready: waiting for 15s after being ready\n"})
    };
    host.install_unit(
        "influxdb.service",
        &server_unit(
            t,
            "influxdb",
            8086,
            json!({"GET /health": {"headers": {"Content-Type": "application/json"}, "body": HEALTH}}),
        ),
    );
    host.install_unit("loki.service", &server_unit(t, "loki", 3100, json!({"GET /ready": ready})));
    host.install_unit("telegraf.service", CLIENT);
    host.install_unit("alloy.service", CLIENT);
    host.systemctl(&["enable", "influxdb", "loki", "telegraf", "alloy"]);
    host.systemctl(&["start", "influxdb", "loki", "telegraf", "alloy"]);
    // The stand-in servers take a moment to listen (longer on a loaded machine).
    let wait = "for p in 8086 3100; do for i in $(seq 300); do (echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done; (echo > /dev/tcp/127.0.0.1/3100) 2>/dev/null && (echo > /dev/tcp/127.0.0.1/8086) 2>/dev/null";
    let up = host.exec(&["bash", "-c", wait]);
    if !up.status.success() {
        let why =
            host.exec(&["sh", "-c", "systemctl --user status influxdb loki --no-pager; journalctl --no-pager -n 30"]);
        panic!("stand-in servers did not come up:\n{}", String::from_utf8_lossy(&why.stdout));
    }
    Some(host)
}

fn opsbook(host: &PrivateHost, t: &Test, args: &[&str]) -> crate::support::Output {
    host.opsbook(t.path(), args)
}

#[test]
fn quick_check_and_status_pass_on_a_healthy_stack() {
    let wait =
        "let ok = wait::until(|| influx::health().ok && loki::ready().ok, \"10s\").ok;\ncheck(\"servers up\", ok);";
    let t = Test::new().runbook("wait", wait);
    let Some(host) = stack(&t, true) else { return };
    opsbook(&host, &t, &["run", "wait"]).code(0);
    opsbook(&host, &t, &["run", "quick-check"]).code(0).stdout_has("6 passed, 0 failed").stdout_has("stack healthy");
    opsbook(&host, &t, &["run", "status"]).code(0).stdout_has("8 passed, 0 failed");
}

#[test]
fn a_stopped_log_store_fails_the_quick_check_naming_it() {
    let t = Test::new();
    let Some(host) = stack(&t, true) else { return };
    host.systemctl(&["stop", "loki"]);
    opsbook(&host, &t, &["run", "quick-check"])
        .code(1)
        .stdout_has("FAIL  loki.service active")
        .stdout_has("FAIL  log store /ready says ready — connection refused")
        .stdout_has("stack NOT healthy");
}

/// `ActiveEnterTimestampMonotonic` / `InactiveEnterTimestampMonotonic` of a unit, in µs.
fn times(host: &PrivateHost, unit: &str) -> (u64, u64) {
    let out =
        host.systemctl(&["show", unit, "-p", "ActiveEnterTimestampMonotonic", "-p", "InactiveEnterTimestampMonotonic"]);
    let get =
        |k: &str| out.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).and_then(|v| v.parse().ok()).unwrap_or(0);
    (get("ActiveEnterTimestampMonotonic"), get("InactiveEnterTimestampMonotonic"))
}

#[test]
fn restart_all_keeps_the_safe_order() {
    let t = Test::new();
    let Some(host) = stack(&t, true) else { return };
    opsbook(&host, &t, &["run", "restart-all", "--set", "settle=200ms"]).code(0).stdout_has("0 failed");
    let (db, logs) = (times(&host, "influxdb"), times(&host, "loki"));
    let (agent, shipper) = (times(&host, "telegraf"), times(&host, "alloy"));
    // Clients went down before the servers came back up…
    for client in [agent, shipper] {
        assert!(
            client.1 < db.0 && client.1 < logs.0,
            "a client stopped after a server restarted: {client:?} {db:?} {logs:?}"
        );
        // …and came back only after the servers were up again.
        assert!(
            client.0 > db.0 && client.0 > logs.0,
            "a client started before the servers: {client:?} {db:?} {logs:?}"
        );
    }
    // The servers were restarted, not left alone.
    assert!(db.1 > 0 && logs.1 > 0);
}

#[test]
fn start_holds_the_clients_back_while_the_log_store_is_not_ready() {
    let t = Test::new();
    let Some(host) = stack(&t, false) else { return };
    host.systemctl(&["stop", "telegraf", "alloy"]);
    opsbook(&host, &t, &["run", "start", "--set", "deadline=2s"])
        .code(1)
        .stdout_has("not ready yet: Ingester not ready")
        .stdout_has("clients NOT started");
    assert_eq!(host.systemctl(&["is-active", "telegraf"]), "inactive");
    assert_eq!(host.systemctl(&["is-active", "alloy"]), "inactive");
}

#[test]
fn reload_agent_reloads_and_stop_stops_in_order() {
    let t = executable_agent(Test::new());
    let Some(host) = stack(&t, true) else { return };
    let pid = host.systemctl(&["show", "telegraf", "-p", "MainPID"]);
    opsbook(&host, &t, &["run", "reload-agent"]).code(0).stdout_has("telegraf.service: reloaded");
    assert_eq!(host.systemctl(&["show", "telegraf", "-p", "MainPID"]), pid, "a reload must not restart");
    opsbook(&host, &t, &["run", "stop"]).code(0).stdout_has("4 passed, 0 failed");
    let (agent, db) = (times(&host, "telegraf"), times(&host, "influxdb"));
    assert!(agent.1 < db.1, "the agent must stop before the database");
}

fn executable_agent(t: Test) -> Test {
    let t = t.file(
        "bin/telegraf",
        "#!/bin/sh\necho '> cpu,cpu=cpu-total,host=h usage_system=1 1'\necho '> mem,host=h used=1i 1'\necho '> disk,host=h used=1i 1'\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(t.path().join("bin/telegraf"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = t.path().join("bin/telegraf");
    t.config(&format!("[metrics_agent]\ntest_command = [\"{}\"]\n", bin.display()))
}

#[test]
fn dry_run_prints_the_plan_in_order_and_changes_nothing() {
    let t = Test::new();
    let Some(host) = stack(&t, true) else { return };
    let before: Vec<_> = ["influxdb", "loki", "telegraf", "alloy"].iter().map(|u| times(&host, u)).collect();
    let out = opsbook(&host, &t, &["run", "restart-all", "--dry-run", "--set", "settle=0s"]).code(0);
    let plan: Vec<&str> = out.stdout.lines().filter(|l| l.contains("would ")).collect();
    let order: Vec<&str> = plan.iter().map(|l| l.split("would ").nth(1).unwrap()).collect();
    assert_eq!(
        order,
        [
            "stop telegraf.service",
            "stop alloy.service",
            "restart influxdb.service",
            "restart loki.service",
            "start telegraf.service",
            "start alloy.service"
        ],
        "{}",
        out.stdout
    );
    let after: Vec<_> = ["influxdb", "loki", "telegraf", "alloy"].iter().map(|u| times(&host, u)).collect();
    assert_eq!(before, after);
}
