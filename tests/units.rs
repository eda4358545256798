//! `unit::` against a real systemd: a private host (real `systemd --user`, real journald)
//! with real unit files. Skipped, saying why, where namespaces or systemd are unavailable.

use crate::support::Test;
use crate::support::private_host::PrivateHost;

#[track_caller]
fn boot() -> Option<PrivateHost> {
    match PrivateHost::boot() {
        Ok(h) => Some(h),
        Err(why) => {
            crate::support::skip(why);
            None
        }
    }
}

const SLEEPER: &str = "[Unit]\nDescription=Sleeper for tests\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=default.target\n";
const RELOADABLE: &str =
    "[Unit]\nDescription=Reloadable\n[Service]\nExecStart=/bin/sleep infinity\nExecReload=/bin/true\n";
const BROKEN: &str = "[Unit]\nDescription=Broken on purpose\n[Service]\nExecStart=/bin/false\n";

#[track_caller]
fn run(host: &PrivateHost, src: &str, extra: &[&str]) -> crate::support::Output {
    let t = Test::new().runbook("t", src);
    let mut args = vec!["run", "t"];
    args.extend_from_slice(extra);
    let out = host.opsbook(t.path(), &args);
    drop(t);
    out
}

#[test]
fn start_stop_restart_and_status() {
    let Some(host) = boot() else { return };
    host.install_unit("sleeper.service", SLEEPER);
    let src = r#"
let s = unit::status("sleeper");
check("inactive at first", s.active_state == "inactive" && s.load_state == "loaded", s);
let o = unit::start("sleeper");
check("start done", o[0].result == "done" && o[0].unit == "sleeper.service", o);
let s = unit::status("sleeper.service");
check("running", s.active_state == "active" && s.sub_state == "running" && s.main_pid > 0, s);
check("since", s.since.starts_with("20"), s.since);
check("is_active", unit::is_active("sleeper"));
check("prints like systemctl", `${s}`.contains("active (running) since"), `${s}`);
let pid = s.main_pid;
unit::restart(["sleeper"]);
check("restarted", unit::status("sleeper").main_pid != pid);
let l = unit::list("sleep*");
check("list", l.len() == 1 && l[0].name == "sleeper.service" && l[0].active_state == "active", l);
unit::stop("sleeper");
check("stopped", !unit::is_active("sleeper"));
"#;
    run(&host, src, &[]).code(0).stdout_has("9 passed, 0 failed");
}

#[test]
fn reload_with_and_without_exec_reload() {
    let Some(host) = boot() else { return };
    host.install_unit("reloadable.service", RELOADABLE);
    host.install_unit("sleeper.service", SLEEPER);
    let src = r#"
unit::start(["reloadable", "sleeper"]);
let r = unit::reload("reloadable");
check("reload done", r[0].result == "done", r);
let t = unit::try_reload("sleeper");
check("reload refused", !t[0].ok && t[0].result == "not-applicable" && t[0].error.contains("does not support reload"), t);
let pid = unit::status("sleeper").main_pid;
let o = unit::reload_or_restart("sleeper");
check("fell back to restart", o.action == "restarted" && unit::status("sleeper").main_pid != pid, o);
let o = unit::reload_or_restart("reloadable");
check("reloaded in place", o.action == "reloaded", o);
"#;
    run(&host, src, &[]).code(0).stdout_has("4 passed, 0 failed");
}

#[test]
fn enable_and_disable() {
    let Some(host) = boot() else { return };
    host.install_unit("sleeper.service", SLEEPER);
    let src = r#"
check("disabled at first", !unit::is_enabled("sleeper"), unit::status("sleeper").unit_file_state);
unit::enable("sleeper");
check("enabled", unit::is_enabled("sleeper") && unit::status("sleeper").unit_file_state == "enabled");
unit::disable(["sleeper"]);
check("disabled again", unit::status("sleeper").unit_file_state == "disabled");
"#;
    run(&host, src, &[]).code(0).stdout_has("3 passed, 0 failed");
    assert_eq!(host.systemctl(&["is-enabled", "sleeper"]), "disabled");
}

#[test]
fn a_failing_start_is_reported_clearly() {
    let Some(host) = boot() else { return };
    host.install_unit("broken.service", BROKEN);
    run(&host, "unit::start(\"broken\");", &[])
        .code(1)
        .stdout_has("start of `broken.service` failed")
        .stdout_has("result exit-code, exit status 1")
        .stdout_has("journalctl -u broken.service");
    let src = "let t = unit::try_start(\"broken\");\ncheck(\"failed outcome\", !t[0].ok && t[0].result == \"failed\", t);\nlet s = unit::status(\"broken\");\ncheck(\"failed state\", s.active_state == \"failed\" && s.result == \"exit-code\", s);";
    run(&host, src, &[]).code(0).stdout_has("2 passed");
}

#[test]
fn an_unknown_unit_is_named() {
    let Some(host) = boot() else { return };
    run(
        &host,
        "check(\"not-found\", unit::status(\"loki\").load_state == \"not-found\");\nunit::start(\"loki\");",
        &[],
    )
    .code(1)
    .stdout_has("1 passed")
    .stdout_has("unit `loki.service` is not installed on this host");
}

#[test]
fn dry_run_sends_nothing_mutating() {
    let Some(host) = boot() else { return };
    host.install_unit("sleeper.service", SLEEPER);
    host.install_unit("other.service", SLEEPER);
    host.systemctl(&["start", "sleeper"]);
    let before = host.systemctl(&["show", "sleeper", "-p", "MainPID", "-p", "ActiveEnterTimestampMonotonic"]);
    let src = r#"
unit::restart("sleeper");
unit::stop("sleeper");
unit::start("other");
unit::enable("other");
unit::reload_or_restart("sleeper");
unit::daemon_reload();
check("reads still run", unit::status("sleeper").active_state == "active");
"#;
    run(&host, src, &["--dry-run"])
        .code(0)
        .stdout_has("would restart sleeper.service")
        .stdout_has("would stop sleeper.service")
        .stdout_has("would start other.service")
        .stdout_has("would enable other.service")
        .stdout_has("1 passed");
    assert_eq!(host.systemctl(&["show", "sleeper", "-p", "MainPID", "-p", "ActiveEnterTimestampMonotonic"]), before);
    assert_eq!(host.systemctl(&["is-active", "other"]), "inactive");
    assert_eq!(host.systemctl(&["is-enabled", "other"]), "disabled");
}

#[test]
fn access_denied_names_the_unit_and_the_way_out() {
    // The bus daemon itself refuses, as a system bus refuses a user without the right.
    let policy = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <policy context="default">
    <deny send_destination="org.freedesktop.systemd1" send_interface="org.freedesktop.systemd1.Manager" send_member="StartUnit"/>
  </policy>
</busconfig>"#;
    let host = match PrivateHost::boot_with_bus_policy(Some(policy)) {
        Ok(h) => h,
        Err(why) => return crate::support::skip(why),
    };
    host.install_unit("sleeper.service", SLEEPER);
    let src = r#"
check("status is still allowed", unit::status("sleeper").load_state == "loaded");
let t = unit::try_start("sleeper");
check("try_start says access-denied", t[0].result == "access-denied", t);
unit::start("sleeper");
"#;
    run(&host, src, &[])
        .code(1)
        .stdout_has("2 passed")
        .stdout_has("access denied to start `sleeper.service`")
        .stdout_has("help: the system's units need root");
    assert_eq!(host.systemctl(&["is-active", "sleeper"]), "inactive");
}

#[test]
fn no_bus_names_the_address() {
    let t = Test::new().runbook("t", "unit::status(\"loki\");");
    t.env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .args(["run", "t", "--user"])
        .run()
        .code(1)
        .stdout_has("cannot reach the service manager at `unix:path=/nonexistent/bus`");
}

#[test]
fn statuses_reads_several_units_at_once_as_status_reads_each() {
    let Some(host) = boot() else { return };
    host.install_unit("sleeper.service", SLEEPER);
    host.install_unit("reloadable.service", RELOADABLE);
    let src = r#"
unit::start("sleeper");
let all = unit::statuses(["sleeper", "reloadable.service", "nothing-here"]);
for s in all {
    let one = unit::status(s.name);
    print(`${s.name}: ${s.load_state} ${s.active_state} (${s.sub_state}); same as status: ${s.active_state == one.active_state && s.main_pid == one.main_pid}`);
}
print(`command line: ${unit::status("sleeper").exec_start}`);
"#;
    run(&host, src, &[]).code(0).stdout_is(
        "t (runbooks/t.rhai)
  sleeper.service: loaded active (running); same as status: true
  reloadable.service: loaded inactive (dead); same as status: true
  nothing-here.service: not-found inactive (dead); same as status: true
  command line: [\"/bin/sleep\", \"infinity\"]

0 passed, 0 failed  ([DUR])
",
    );
}

#[test]
fn states_reads_several_units_in_one_call_and_the_checks_read_a_unit_not_active_again_whole() {
    let Some(host) = boot() else { return };
    host.install_unit("sleeper.service", SLEEPER);
    host.install_unit("broken.service", BROKEN);
    let src = r#"
import "checks" as checks;
unit::start("sleeper");
try { unit::start("broken"); } catch {}
for s in unit::states(["sleeper", "broken", "nothing-here"]) {
    let one = unit::status(s.name);
    print(`${s.name}: ${s.load_state} ${s.active_state} (${s.sub_state}); same as status: ${s.active_state == one.active_state && s.sub_state == one.sub_state && s.description == one.description}; result read: ${s.result != ""}`);
}
checks::units_active(["sleeper", "broken", "nothing-here"]);
"#;
    run(&host, src, &[]).code(1).stdout_is(
        "t (runbooks/t.rhai)
  sleeper.service: loaded active (running); same as status: true; result read: false
  broken.service: loaded failed (failed); same as status: true; result read: false
  nothing-here.service: not-found inactive (dead); same as status: true; result read: false
  ok    sleeper.service active — active (running)
  FAIL  broken.service active — failed (failed); result exit-code
          expected: active (running)
          actual:   failed (failed)
  FAIL  nothing-here.service active — inactive (dead); result success
          expected: active (running)
          actual:   inactive (dead)

1 passed, 2 failed  ([DUR])
",
    );
}
