//! `journal::` against a real journald in a private host: read by unit, priority and time,
//! emit and read back, follow until told to stop. Skipped, saying why, where unavailable.

use std::time::Duration;

use crate::support::private_host::PrivateHost;
use crate::support::{Test, wait_until};

#[track_caller]
fn boot() -> Option<PrivateHost> {
    PrivateHost::boot().map_err(crate::support::skip).ok()
}

const TALKER: &str = "[Unit]\nDescription=Talker\n[Service]\nExecStart=/bin/sh -c 'echo hello-from-talker; echo \"<3>talker-broke-something\"; echo \"<4>talker-is-worried\"; exec sleep infinity'\n";
/// Logs `tick` every 100 ms (its sleep is its pace, not a wait): a steady stream to follow.
const TICKER: &str =
    "[Unit]\nDescription=Ticker\n[Service]\nExecStart=/bin/sh -c 'while true; do echo tick; sleep 0.1; done'\n";

#[track_caller]
fn run(host: &PrivateHost, src: &str) -> crate::support::Output {
    let t = Test::new().runbook("t", src);
    host.opsbook(t.path(), &["run", "t"])
}

/// Waits until the journal holds a line containing `text`: what a unit prints reaches the
/// journal a moment after the unit started.
#[track_caller]
fn wait_logged(host: &PrivateHost, text: &str) {
    wait_until(&format!("{text:?} in the journal"), Duration::from_secs(10), || {
        let out = host.exec(&["journalctl", "--no-pager", "-o", "cat"]);
        let journal = String::from_utf8_lossy(&out.stdout).into_owned();
        if journal.contains(text) { Ok(()) } else { Err(journal) }
    });
}

#[test]
fn read_by_unit_priority_and_time() {
    let Some(host) = boot() else { return };
    host.install_unit("talker.service", TALKER);
    host.systemctl(&["start", "talker"]);
    // Its last line: the ones before it are in the journal too.
    wait_logged(&host, "talker-is-worried");
    let src = r#"
let all = journal::read(#{ unit: "talker" });
check("by unit", all.filter(|e| e.message == "hello-from-talker").len() == 1, all.map(|e| e.message));
check("fields", all.filter(|e| e.message == "hello-from-talker")[0].unit == "talker.service");
let errs = journal::errors("talker", "1 hour ago");
check("errors only", errs.len() == 1 && errs[0].message == "talker-broke-something" && errs[0].priority_name == "err", errs);
let warns = journal::warnings("talker", "1 hour ago");
check("warnings and worse", warns.len() == 2, warns);
check("priority option", journal::read(#{ unit: "talker", priority: "warning" }).len() == 2);
check("since in the future", journal::read(#{ unit: "talker", since: "2099-01-01 00:00:00" }).is_empty());
check("lines", journal::read(#{ unit: "talker", lines: 1 }).len() == 1);
check("grep", journal::read(#{ unit: "talker", grep: "worried" }).len() == 1);
check("grep without match", journal::read(#{ unit: "talker", grep: "nothing-like-this" }).is_empty());
"#;
    run(&host, src).code(0).stdout_has("9 passed, 0 failed");
}

#[test]
fn emit_and_read_back() {
    let Some(host) = boot() else { return };
    let src = r#"
let marker = journal::emit("opsbook-test", "end-to-end check", "warning");
let found = wait::until(|| journal::read(#{ identifier: "opsbook-test", grep: marker }).len() == 1, "5s");
check("read back", found.ok);
let e = journal::read(#{ identifier: "opsbook-test" })[0];
check("fields", e.priority == 4 && e.message.contains(marker) && e.message.starts_with("end-to-end check"), e);
"#;
    run(&host, src).code(0).stdout_has("2 passed, 0 failed");
}

#[test]
fn follow_stops_on_request_and_on_timeout() {
    let Some(host) = boot() else { return };
    host.install_unit("ticker.service", TICKER);
    host.systemctl(&["start", "ticker"]);
    let src = r#"
let seen = [];
let n = journal::follow(#{ unit: "ticker", timeout: "10s" }, |e| { seen.push(e.message); seen.len() < 3 });
check("stopped after three", n == 3, n);
let started = timestamp();
let quiet = journal::follow(#{ unit: "nothing-here", timeout: "500ms" }, |e| true);
check("timeout", quiet == 0 && started.elapsed < 5.0, started.elapsed);
"#;
    run(&host, src).code(0).stdout_has("2 passed, 0 failed");
}

#[test]
fn a_failed_start_quotes_the_units_last_lines() {
    let Some(host) = boot() else { return };
    // It lives a moment after its line: journald names a line's unit from the process that
    // wrote it, and a process already gone leaves the line with no unit (journald's own race,
    // which no reader can undo; it failed this test once under CI's load).
    host.install_unit(
        "dies.service",
        "[Service]\nExecStart=/bin/sh -c 'echo config file /etc/x.conf missing >&2; sleep 0.2; exit 1'\n",
    );
    let out = run(&host, "unit::start(\"dies\");").code(1);
    if !out.stdout.contains("its last log lines:") {
        let journal = host.exec(&["journalctl", "--no-pager", "-o", "json", "--grep", "x.conf"]);
        panic!(
            "no last lines quoted:\n{}\n--- what the journal holds:\n{}",
            out.stdout,
            String::from_utf8_lossy(&journal.stdout)
        );
    }
    out.stdout_has("config file /etc/x.conf missing");
}

/// Logs an error when it starts and another when it is stopped, as Loki logs `context
/// canceled` while it shuts down (and, as Loki, takes a moment to exit after it). It says it
/// started once it is ready to be stopped (its trap set).
const RESTARTER: &str = "[Unit]\nDescription=Restarter\n[Service]\nExecStart=/bin/sh -c 'trap \"echo level=error msg=stopping; sleep 0.5; exit 0\" TERM; echo \"level=error msg=started pid=$$$$\"; while :; do sleep 0.1; done'\n";

#[test]
fn errors_are_read_for_the_units_current_run_only() {
    let Some(host) = boot() else { return };
    host.install_unit("restarter.service", RESTARTER);
    host.systemctl(&["start", "restarter"]);
    wait_logged(&host, "level=error msg=started");
    host.systemctl(&["restart", "restarter"]);
    let pid = host.systemctl(&["show", "restarter", "-p", "MainPID", "--value"]);
    let id = host.systemctl(&["show", "restarter", "-p", "InvocationID", "--value"]);
    // The previous run's start and shutdown lines are in the journal, yet not among its errors.
    let src = format!(
        r#"
let found = wait::until(|| journal::errors("restarter", "1 hour ago").len() > 0, "20s");
let run = journal::current_run("restarter");
print(`invocation ${{run.invocation == "{id}"}}, started ${{run.started_us > 0}}`);
let all = journal::read(#{{ unit: "restarter", grep: "level=error" }});
print(`in the journal: ${{all.map(|e| e.message.sub_string(0, 21))}}`);
for e in journal::errors("restarter", "1 hour ago") {{
    print(`${{e.message}} after_start ${{e.after_start >= 0.0 && e.after_start < 5.0}}`);
}}
"#
    );
    let out = run(&host, &src).code(0);
    let shown: Vec<&str> =
        out.stdout.lines().filter(|l| !l.is_empty() && !l.starts_with("t (") && !l.contains("passed")).collect();
    assert_eq!(
        shown,
        [
            "  invocation true, started true",
            "  in the journal: [\"level=error msg=start\", \"level=error msg=stopp\", \"level=error msg=start\"]",
            &format!("  level=error msg=started pid={pid} after_start true"),
        ],
        "{}",
        out.stdout
    );
}

/// A log store that logs Loki's benign lines and one real error as it starts.
const NOISY_STORE: &str = "[Unit]\nDescription=Noisy store\n[Service]\nExecStart=/bin/sh -c 'echo \"level=error caller=ratestore.go:109 msg=\\\\\"error getting ingester clients\\\\\" err=\\\\\"empty ring\\\\\"\"; echo \"level=error component=querier err=\\\\\"rpc error: code = Canceled desc = context canceled\\\\\"\"; echo \"level=error msg=boom\"; exec sleep infinity'\n";

#[test]
fn logged_no_errors_ignores_known_benign_lines_and_tolerates_startup_errors() {
    let Some(host) = boot() else { return };
    host.install_unit("noisy-store.service", NOISY_STORE);
    host.systemctl(&["start", "noisy-store"]);
    let src = r#"
import "checks" as checks;
wait::until(|| journal::errors("noisy-store", "1 hour ago").len() == 3, "20s");
checks::no_log_errors("noisy-store", "1 hour ago", "1h");
checks::no_log_errors("noisy-store", "1 hour ago", "0s");
"#;
    let t = Test::new().config("[log_store]\nunit = \"noisy-store.service\"\n").runbook("t", src);
    let out = host.opsbook(t.path(), &["run", "t"]).code(1);
    // Durations masked: a check that took a while shows its time, a quick one does not.
    let shown = regex::Regex::new(r"(?m)  \((\d+ms|\d+\.\d+s)\)$").unwrap().replace_all(&out.stdout, "");
    assert_eq!(
        shown,
        "t (runbooks/t.rhai)\n\
\x20 WARN  noisy-store logged no errors since 1 hour ago — 1 error line(s) within 1h of the start, tolerated as startup-transient: level=error msg=boom; ignored 2 known-benign line(s) (stdlib/benign.rhai)\n\
\x20 FAIL  noisy-store logged no errors since 1 hour ago — level=error caller=ratestore.go:109 msg=\"error getting ingester clients\" err=\"empty ring\" | level=error msg=boom; ignored 1 known-benign line(s) (stdlib/benign.rhai)\n\
\x20         expected: no error lines in the current run\n\
\x20         actual:   2 line(s)\n\
\n\
0 passed, 1 failed, 1 warning\n",
        "{}",
        out.stdout
    );
}
