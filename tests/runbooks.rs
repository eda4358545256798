//! The built-in runbooks on a real systemd: a private host with the four components installed
//! as real units under the spec's names and ports, each one the twin (`opsbook twin …` as
//! `ExecStart`, with `ExecReload` where the real unit has one), configured from files in the
//! test's directory, and opsbook's configuration pointed at their config files and tools.
//! Without systemd: the runbooks' parameters take the defaults their stdlib modules declare.

use std::time::Duration;

use crate::support::private_host::PrivateHost;
use crate::support::{Test, wait_until};

#[track_caller]
fn boot() -> Option<PrivateHost> {
    PrivateHost::boot().map_err(crate::support::skip).ok()
}

const TOKEN: &str = "runbook-test-token-1f2e3d";

/// The twin units and their config files, written into the test's directory.
#[track_caller]
fn install_twins(t: &Test, host: &PrivateHost, loki_ready_delay: &str) {
    let bin = crate::support::opsbook();
    let dir = t.path().display();
    let write = |name: &str, text: String| std::fs::write(t.path().join(name), text).unwrap();
    write(
        "telegraf.conf",
        format!(
            "[agent]\n  interval = \"1s\"\n  flush_interval = \"1s\"\n[[outputs.influxdb_v2]]\n  urls = [\"http://127.0.0.1:8086\"]\n  token = \"{TOKEN}\"\n  organization = \"opsbook\"\n  bucket = \"telegraf\"\n[[inputs.cpu]]\n  percpu = false\n  totalcpu = true\n[[inputs.mem]]\n[[inputs.disk]]\n"
        ),
    );
    write(
        "alloy.toml",
        "[server]\nlisten = \"127.0.0.1:12345\"\n[labels]\nservice_type = \"journal\"\n[write]\nurl = \"http://127.0.0.1:3100/loki/api/v1/push\"\nbatch_wait = \"200ms\"\n".to_string(),
    );
    // A private, empty container store: the real podman, and no containers.
    write("podman", format!("#!/bin/sh\nexec podman --root {dir}/containers --runroot {dir}/containers-run \"$@\"\n"));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(t.path().join("podman"), std::fs::Permissions::from_mode(0o755)).unwrap();
    write(
        "opsbook.toml",
        format!(
            "[metrics_db]\ntoken = \"{TOKEN}\"\norg = \"opsbook\"\n\
[metrics_agent]\nconfig = \"{dir}/telegraf.conf\"\ntest_command = [\"{bin}\", \"twin\", \"metrics-agent\", \"{{config}}\", \"--test\"]\n\
[log_shipper]\nconfig = \"{dir}/alloy.toml\"\nvalidate_command = [\"{bin}\", \"twin\", \"log-shipper\", \"validate\", \"{{config}}\"]\n\
[container]\nruntime = \"{dir}/podman\"\n"
        ),
    );
    let unit = |description: &str, exec: String, reload: bool| {
        let reload = if reload { "ExecReload=/bin/kill -HUP $MAINPID\n" } else { "" };
        format!(
            "[Unit]\nDescription={description}\n[Service]\nExecStart={exec}\n{reload}Restart=no\n[Install]\nWantedBy=default.target\n"
        )
    };
    host.install_unit(
        "influxdb.service",
        &unit("InfluxDB (twin)", format!("{bin} twin metrics-db --token {TOKEN} --org opsbook"), false),
    );
    // The log store starts as Loki 3.4.6 does, logging `empty ring` at level error while its
    // ring forms (tests/fixtures/wire/loki-3.4.6/log-levels-one-life.txt), and echoes every line
    // a test appends to `loki-says` as a line of its own run (same unit, same invocation). Its
    // `tail` ends with the twin (`--pid`, the shell's pid, which the twin takes over), so
    // after a restart no tail of the run before echoes a line a second time.
    write(
        "loki-run.sh",
        format!(
            "#!/bin/sh\n\
echo 'level=error ts=2026-11-23T14:46:00.689980692Z caller=ratestore.go:109 msg=\"error getting ingester clients\" err=\"empty ring\"'\n\
: > {dir}/loki-says\n\
tail --pid=$$ -n0 -F {dir}/loki-says &\n\
exec {bin} twin log-store --ready-delay {loki_ready_delay}\n"
        ),
    );
    host.install_unit("loki.service", &unit("Loki (twin)", format!("/bin/sh {dir}/loki-run.sh"), false));
    host.install_unit(
        "telegraf.service",
        &unit("Telegraf (twin)", format!("{bin} twin metrics-agent {dir}/telegraf.conf"), true),
    );
    host.install_unit("alloy.service", &unit("Alloy (twin)", format!("{bin} twin log-shipper {dir}/alloy.toml"), true));
    host.systemctl(&["enable", "influxdb", "loki", "telegraf", "alloy"]);
}

/// Waits (inside the host) until the ports accept connections; panics with the units' state.
#[track_caller]
fn wait_for_ports(host: &PrivateHost, ports: &[u16]) {
    let probe: Vec<String> = ports.iter().map(|p| format!("(echo > /dev/tcp/127.0.0.1/{p}) 2>/dev/null")).collect();
    let probe = probe.join(" && ");
    let up = crate::support::poll(Duration::from_secs(30), || {
        if host.exec(&["bash", "-c", &probe]).status.success() { Ok(()) } else { Err(()) }
    });
    if up.is_err() {
        let why = host.exec(&[
            "sh",
            "-c",
            "systemctl --user status --no-pager influxdb loki telegraf alloy; journalctl --no-pager -n 40",
        ]);
        panic!("the twin servers did not listen on {ports:?} within 30 s:\n{}", String::from_utf8_lossy(&why.stdout));
    }
}

/// A private host running the four twins, started in the safe order: servers, then (once they
/// listen and the log store is ready) the clients. `loki_ready_delay` is the log store's
/// not-ready window after each start (Loki's is 15 s).
#[track_caller]
fn stack(t: &Test, loki_ready_delay: &str) -> Option<PrivateHost> {
    let host = boot()?;
    install_twins(t, &host, loki_ready_delay);
    host.systemctl(&["start", "influxdb", "loki"]);
    wait_for_ports(&host, &[8086, 3100]);
    Some(host)
}

/// `stack`, with the clients started once the log store is ready, and the first metrics and
/// log lines arrived (so "recent data" checks have something to find).
#[track_caller]
fn running_stack(t: &Test) -> Option<PrivateHost> {
    let host = stack(t, "1s")?;
    opsbook(&host, t, &["run", "--runbooks", "probe", "ready"]).code(0);
    host.systemctl(&["start", "telegraf", "alloy"]);
    opsbook(&host, t, &["run", "--runbooks", "probe", "data"]).code(0);
    Some(host)
}

/// Runbooks the setup uses, in the test directory's `probe/` folder.
fn probes(t: Test) -> Test {
    t.file("probe/names.rhai", "print(container::of_unit(config.log_store.unit));")
        .file("probe/ready.rhai", "check(\"log store ready\", wait::until(|| loki::ready().ok, \"20s\").ok);")
        .file(
            "probe/data.rhai",
            "import \"flux\" as flux;\n\
let cpu = wait::until(|| influx::query(flux::cpu_count(config.metrics_db.bucket)).len() > 0, \"20s\");\n\
check(\"cpu points arrived\", cpu.ok);\n\
let logs = wait::until(|| loki::query(`{hostname=\"${hostname()}\"}`, #{ limit: 1, since: \"5m\" }).len() > 0, \"20s\");\n\
check(\"log lines arrived\", logs.ok);\n",
        )
}

#[track_caller]
fn opsbook(host: &PrivateHost, t: &Test, args: &[&str]) -> crate::support::Output {
    host.opsbook(t.path(), args)
}

/// Runs each runbook and expects it to pass: exit 0 and no failed check.
#[track_caller]
fn all_pass(host: &PrivateHost, t: &Test, runs: &[&[&str]]) {
    for args in runs {
        opsbook(host, t, &[&["run"], *args].concat())
            .passed(&format!("`opsbook run {}` on the twin stack", args.join(" ")));
    }
}

/// Whether the real `podman` is installed (the containers runbook asks it, through a wrapper
/// that points it at an empty store in the test's directory).
fn podman_installed() -> bool {
    std::process::Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn reading_and_verifying_runbooks_pass_on_the_twin_stack() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
    all_pass(
        &host,
        &t,
        &[
            &["quick-check"],
            &["verify-metrics-db"],
            &["verify-log-store"],
            &["verify-metrics-agent"],
            &["verify-log-shipper"],
            &["verify"],
            &["checklist"],
            &["e2e-logs"],
            &["logs", "--set", "unit=metrics-agent", "--set", "since=10 min ago"],
        ],
    );
    // The four units are active and enabled at boot: no warning either.
    opsbook(&host, &t, &["run", "status"]).code(0).stdout_has("8 passed, 0 failed").stdout_lacks("WARN");
    opsbook(&host, &t, &["run", "quick-check"]).code(0).stdout_has("6 passed, 0 failed").stdout_has("stack healthy");
    // The agent's own lines, from the real journal.
    opsbook(&host, &t, &["run", "logs", "--set", "unit=telegraf"]).code(0).stdout_has("I! Loaded inputs: cpu");
    // The servers run natively here, so the real podman (on an empty store of the test's own)
    // lists no containers: the runbook records one skip, fails nothing and exits 0.
    if podman_installed() {
        opsbook(&host, &t, &["run", "containers"])
            .code(0)
            .stdout_has("skip  server containers — no containers on this host")
            .stdout_has("0 passed, 0 failed, 1 skipped");
    } else {
        crate::support::skip("podman is not installed (apt-get install podman): the containers runbook was not run");
    }
}

#[test]
fn mutating_runbooks_and_the_metrics_flow_pass_on_the_twin_stack() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
    let pid = host.systemctl(&["show", "telegraf", "-p", "MainPID"]);
    let (agent_reloads, shipper_reloads) = (
        journal_count(&host, "telegraf", "Reloading Telegraf config"),
        journal_count(&host, "alloy", "config reloaded"),
    );
    all_pass(&host, &t, &[&["reload-agent"], &["reload-shipper"]]);
    // Both reloaded for real (systemd's ExecReload sent the agent SIGHUP; the shipper took
    // its /-/reload), and neither was restarted.
    assert_eq!(host.systemctl(&["show", "telegraf", "-p", "MainPID"]), pid, "a reload must not restart");
    assert_eq!(
        journal_count(&host, "telegraf", "Reloading Telegraf config"),
        agent_reloads + 1,
        "the agent did not reload"
    );
    assert_eq!(journal_count(&host, "alloy", "config reloaded"), shipper_reloads + 1, "the shipper did not reload");
    // One component: only its unit restarts.
    let (db, logs) = (times(&host, "influxdb"), times(&host, "loki"));
    all_pass(&host, &t, &[&["restart", "--set", "component=log-store"]]);
    assert_eq!(times(&host, "influxdb"), db, "restarting the log store touched the metrics database");
    assert!(times(&host, "loki").0 > logs.0, "the log store was not restarted");
    all_pass(
        &host,
        &t,
        &[
            &["restart-all", "--set", "settle=200ms"],
            // As built in: 2 workers for 10 s, then metrics must show it within 15 s.
            &["e2e-metrics"],
            &["stop"],
            &["start"],
            &["quick-check"],
        ],
    );
}

#[test]
fn a_stopped_log_store_fails_the_quick_check_naming_it() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
    host.systemctl(&["stop", "loki"]);
    opsbook(&host, &t, &["run", "quick-check"])
        .code(1)
        .stdout_has("FAIL  loki.service active")
        .stdout_has("FAIL  log store /ready says ready — connection refused")
        .stdout_has("stack NOT healthy");
}

/// How many of `unit`'s journal lines contain `text`.
#[track_caller]
fn journal_count(host: &PrivateHost, unit: &str, text: &str) -> usize {
    let unit = format!("{unit}.service");
    let out = host.exec(&[
        "journalctl",
        "--no-pager",
        "-o",
        "cat",
        &format!("_SYSTEMD_UNIT={unit}"),
        "+",
        &format!("_SYSTEMD_USER_UNIT={unit}"),
    ]);
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(text)).count()
}

/// The shipper's log lines about reloads (it logs every one, failed or not).
#[track_caller]
fn shipper_reload_lines(host: &PrivateHost) -> usize {
    journal_count(host, "alloy", "reload")
}

#[test]
fn a_broken_shipper_config_stops_reload_shipper_before_the_reload() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
    // A good reload shows in the shipper's log (a moment after the shipper wrote it)…
    opsbook(&host, &t, &["run", "reload-shipper"]).code(0);
    let after_good =
        wait_until("the shipper's reload line in the journal", Duration::from_secs(10), || match shipper_reload_lines(
            &host,
        ) {
            0 => Err("none"),
            n => Ok(n),
        });
    // …a broken file stops the runbook before it asks.
    std::fs::write(t.path().join("alloy.toml"), "[write]\nurl = \"loki:3100\"\nbatchwait = \"1s\"\n").unwrap();
    opsbook(&host, &t, &["run", "reload-shipper"])
        .code(1)
        .stdout_has("FAIL  configuration validates")
        .stdout_has("alloy.toml:3:1: unknown key `batchwait`")
        .stdout_has("not reloading: fix the configuration first");
    assert_eq!(shipper_reload_lines(&host), after_good, "the shipper was asked to reload a broken config");
    assert_eq!(host.systemctl(&["is-active", "alloy"]), "active");
}

/// `ActiveEnterTimestampMonotonic` / `InactiveEnterTimestampMonotonic` of a unit, in µs.
#[track_caller]
fn times(host: &PrivateHost, unit: &str) -> (u64, u64) {
    let out =
        host.systemctl(&["show", unit, "-p", "ActiveEnterTimestampMonotonic", "-p", "InactiveEnterTimestampMonotonic"]);
    let get =
        |k: &str| out.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).and_then(|v| v.parse().ok()).unwrap_or(0);
    (get("ActiveEnterTimestampMonotonic"), get("InactiveEnterTimestampMonotonic"))
}

#[test]
fn restart_all_keeps_the_safe_order() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
    let started = std::time::Instant::now();
    let out = opsbook(&host, &t, &["run", "restart-all", "--set", "settle=200ms", "--format", "json"]).code(0);
    let (db, logs) = (times(&host, "influxdb"), times(&host, "loki"));
    let (agent, shipper) = (times(&host, "telegraf"), times(&host, "alloy"));
    // Clients went down before the servers came back up…
    for client in [agent, shipper] {
        assert!(
            client.1 < db.0 && client.1 < logs.0,
            "a client stopped after a server restarted: {client:?} {db:?} {logs:?}"
        );
        // …and came back only after the servers were up again…
        assert!(
            client.0 > db.0 && client.0 > logs.0,
            "a client started before the servers: {client:?} {db:?} {logs:?}"
        );
        // …and after the log store's 1 s not-ready window, which the runbook waits out.
        assert!(client.0 >= logs.0 + 1_000_000, "a client started before the log store was ready: {client:?} {logs:?}");
    }
    assert!(db.1 > 0 && logs.1 > 0, "the servers were not restarted");
    let report = out.json();
    assert_eq!(report["summary"]["failed"], 0, "{report}");
    assert!(started.elapsed().as_secs() < 60);
}

#[test]
fn start_holds_the_clients_back_while_the_log_store_is_not_ready() {
    let t = probes(Test::new());
    let Some(host) = stack(&t, "1h") else { return };
    opsbook(&host, &t, &["run", "start", "--set", "deadline=2s"])
        .code(1)
        .stdout_has("Ingester not ready")
        .stdout_has("clients NOT started");
    assert_eq!(host.systemctl(&["is-active", "telegraf"]), "inactive");
    assert_eq!(host.systemctl(&["is-active", "alloy"]), "inactive");
}

#[test]
fn stop_stops_the_clients_before_the_servers() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
    opsbook(&host, &t, &["run", "stop"]).code(0).stdout_has("4 passed, 0 failed");
    let (agent, shipper, db, logs) =
        (times(&host, "telegraf"), times(&host, "alloy"), times(&host, "influxdb"), times(&host, "loki"));
    for client in [agent, shipper] {
        for server in [db, logs] {
            assert!(client.1 < server.1, "a client stopped after a server: {client:?} {server:?}");
        }
    }
}

#[test]
fn dry_run_prints_the_plan_in_order_and_changes_nothing() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
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

/// The agent's errors, as Telegraf writes them: `E!` lines on stderr, which journald files at
/// its default priority (info), not err. The verification must find them all the same.
#[test]
fn an_agent_that_cannot_write_fails_its_verification_quoting_its_errors() {
    let t = probes(Test::new());
    let Some(host) = running_stack(&t) else { return };
    opsbook(&host, &t, &["run", "verify-metrics-agent"]).passed("verify-metrics-agent before the fault");
    host.systemctl(&["stop", "influxdb"]);
    wait_until("an E! line of the agent's, its output down", Duration::from_secs(10), || {
        match journal_count(&host, "telegraf", " E! ") {
            0 => Err("none in the journal"),
            _ => Ok(()),
        }
    });
    // As the real agent's, its error lines carry no priority of their own.
    let by_priority =
        host.exec(&["journalctl", "--no-pager", "-o", "cat", "-p", "err", "_SYSTEMD_UNIT=telegraf.service"]);
    assert_eq!(
        String::from_utf8_lossy(&by_priority.stdout).trim(),
        "",
        "the twin's errors are filed at priority err, the real agent's are not"
    );
    // The agent's run is only seconds old: a 1 s startup window makes its errors failures.
    opsbook(&host, &t, &["run", "verify-metrics-agent", "--set", "startup=1s"])
        .code(1)
        .stdout_has("FAIL  telegraf.service logged no errors since 1 hour ago")
        .stdout_has("E! [outputs.influxdb_v2]");
}

/// Makes the log store's current run log `line` (as its own process would) and waits until
/// the journal holds it.
#[track_caller]
fn loki_says(host: &PrivateHost, t: &Test, line: &str) {
    use std::io::Write;
    let before = journal_count(host, "loki", line);
    let mut says = std::fs::OpenOptions::new().append(true).open(t.path().join("loki-says")).unwrap();
    writeln!(says, "{line}").unwrap();
    wait_until(
        &format!("the log store's line in the journal: {line}"),
        Duration::from_secs(10),
        || match journal_count(host, "loki", line) {
            n if n > before => Ok(()),
            n => Err(format!("{n} such line(s), as before")),
        },
    );
}

/// What a healthy Loki logs after a limited query (captured from Loki 3.4.6).
const CONTEXT_CANCELED: &str = "level=error ts=2026-11-23T14:46:20.221028744Z caller=scheduler_processor.go:111 component=querier msg=\"error processing requests from scheduler\" err=\"rpc error: code = Canceled desc = context canceled\" addr=127.0.0.1:9096";

/// A log store error that is neither startup-transient nor known-benign.
const DISK_FULL: &str = "level=error ts=2026-11-23T14:47:00.1Z caller=flush.go:261 msg=\"failed to flush chunks\" err=\"write /loki/chunks: no space left on device\"";

#[test]
fn a_healthy_stack_passes_right_after_start_and_an_unknown_log_store_error_fails_naming_it() {
    let t = probes(Test::new());
    let Some(host) = boot() else { return };
    install_twins(&t, &host, "1s");
    all_pass(&host, &t, &[&["start"]]);
    // The log store's own `empty ring` (at start) and the querier's `context canceled` (after a
    // limited query, as opsbook's own queries provoke it) are known-benign: ignored, counted.
    loki_says(&host, &t, CONTEXT_CANCELED);
    all_pass(&host, &t, &[&["verify"], &["checklist"], &["e2e-logs"], &["restart-all", "--set", "settle=200ms"]]);
    let out = opsbook(&host, &t, &["run", "checklist", "--set", "startup=1s"]).code(0);
    let line = out.stdout.lines().find(|l| l.contains("loki.service logged no errors")).unwrap_or_default();
    let shown = regex::Regex::new(r"\d+ known-benign").unwrap().replace(line, "N known-benign");
    // A slow journal read shows its time, `  (109ms)`: what took long is not what is checked here.
    let shown = regex::Regex::new(r"  \(\d+(?:\.\d+)?m?s\)$").unwrap().replace(&shown, "");
    assert_eq!(
        shown,
        "  ok    loki.service logged no errors since 1 hour ago — ignored N known-benign line(s) (stdlib/benign.rhai)",
        "{}",
        out.stdout
    );
    // A line that is none of those fails the check, quoted: here after a 1 s startup window.
    loki_says(&host, &t, DISK_FULL);
    let out = opsbook(&host, &t, &["run", "checklist", "--set", "startup=1s"]).code(1);
    // The one failed check, whole: its line, what was expected and what was seen.
    let lines: Vec<&str> = out.stdout.lines().collect();
    let at = lines.iter().position(|l| l.contains("FAIL")).unwrap_or(lines.len());
    let failed = lines[at.min(lines.len())..(at + 3).min(lines.len())].join("\n");
    let failed = regex::Regex::new(r"ignored \d+ known-benign").unwrap().replace(&failed, "ignored N known-benign");
    assert_eq!(
        failed,
        format!(
            "  FAIL  loki.service logged no errors since 1 hour ago — {DISK_FULL}; ignored N known-benign line(s) (stdlib/benign.rhai)\n\
\x20         expected: no error lines in the current run\n\
\x20         actual:   1 line(s)"
        ),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.matches("FAIL").count(), 1, "{}", out.stdout);
}

/// `logs --set container=true` reads the container podman labelled with the unit
/// (`PODMAN_SYSTEMD_UNIT`, set as Quadlet sets it), not one named after a piece of the unit's
/// name. The container is started by a real unit through the real podman, from an image made
/// locally of one static binary (no registry).
#[test]
fn logs_of_a_units_container_through_the_real_podman() {
    if !podman_installed() {
        return crate::support::skip("podman is not installed (apt-get install podman)");
    }
    let t = probes(Test::new());
    let Some(host) = boot() else { return };
    install_twins(&t, &host, "1s");
    let dir = t.path().display().to_string();
    std::fs::create_dir_all(t.path().join("rootfs")).unwrap();
    std::fs::copy("/sbin/ldconfig", t.path().join("rootfs/ldconfig")).unwrap();
    let image = "localhost/opsbook-ldconfig:test";
    let made = host.exec(&[
        "sh",
        "-c",
        &format!("tar -C {dir}/rootfs -cf {dir}/rootfs.tar ldconfig && {dir}/podman import {dir}/rootfs.tar {image}"),
    ]);
    if !made.status.success() {
        return crate::support::skip(format!(
            "podman cannot import images here: {}",
            String::from_utf8_lossy(&made.stderr)
        ));
    }
    // crun refuses hybrid cgroup hierarchies and raised limits here; runc with lowered ones runs.
    let runtime = if std::path::Path::new("/usr/bin/runc").exists() { "--runtime runc " } else { "" };
    host.install_unit(
        "logstore.service",
        &format!(
            "[Service]\nEnvironment=PODMAN_SYSTEMD_UNIT=%n\nType=oneshot\nExecStart={dir}/podman {runtime}run --name the-log-store --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 {image} /ldconfig --version\n"
        ),
    );
    host.systemctl(&["start", "logstore"]);
    std::fs::write(
        t.path().join("opsbook.toml"),
        std::fs::read_to_string(t.path().join("opsbook.toml")).unwrap() + "[log_store]\nunit = \"logstore.service\"\n",
    )
    .unwrap();
    let ran = opsbook(&host, &t, &["run", "--runbooks", "probe", "names"]);
    if !ran.stdout.contains("the-log-store") {
        return crate::support::skip(format!("podman cannot run a container here:\n{}", ran.stdout));
    }
    let out = opsbook(&host, &t, &["run", "logs", "--set", "unit=log-store", "--set", "container=true"]).code(0);
    // What the same binary prints outside the container, one report line per line.
    let version = std::process::Command::new("/sbin/ldconfig").arg("--version").output().unwrap();
    let lines: String =
        String::from_utf8_lossy(&version.stdout).lines().map(|l| format!("  {l}\n").replace("  \n", "\n")).collect();
    let masked = regex::Regex::new(r"(?m)  \((\d+ms|\d+\.\d+s)\)$").unwrap().replace_all(&out.stdout, "");
    assert_eq!(
        masked,
        format!("logs (<built-in>/runbooks/logs.rhai)\n\n== logstore.service\n{lines}\n0 passed, 0 failed\n"),
        "{}",
        out.stdout
    );
}

/// Parameters whose defaults a stdlib module declares once (`verify::DEFAULTS`, …) are listed
/// with those values and take `--set` as a literal default would; a stdlib function given an
/// option it does not take names the ones it does.
#[test]
fn parameters_take_the_stdlib_defaults_and_an_unknown_option_is_named() {
    let t = Test::new().runbook(
        "typo",
        "//! An option misspelt.\nimport \"verify\" as verify;\nverify::metrics_db(#{ windw: \"5m\" });\n",
    );
    crate::support::run_in(t.path(), &["show", "restart-all"], None).code(0).stdout_has(
        "Parameters (set with --set NAME=VALUE):\n  settle    5s    a duration like 5s or 2m\n  deadline  60s   a duration \
         like 5s or 2m\n  startup   20s   a duration like 5s or 2m\n  verify    true  true or false\n",
    );
    crate::support::run_in(t.path(), &["run", "verify-metrics-db", "--sandbox", "--set", "window=soon"], None)
        .code(2)
        .stderr_has("error: parameter `window` expects a duration like 5s or 2m, got `soon`\n");
    crate::support::run_in(t.path(), &["run", "typo", "--sandbox"], None).code(1).stdout_has(
        "aborted: verify::metrics_db: unknown option `windw` (options: chunk_deadline, data_deadline, recent, scrape_gap, \
         since, startup, stream, window)",
    );
}
