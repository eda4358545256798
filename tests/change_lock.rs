//! A host's change lock rehearsed in the sandbox (`--fault [HOST:]lock-held[=WHO]`): a run
//! that changes the host is refused naming the holder (exit 75), or waits for it with
//! `--lock-timeout`, saying whom it waits for; a run that only reads, and a dry run, take no
//! lock; in a fleet the held host fails alone; a runbook that does not declare it changes the
//! host is stopped at its first change. (On real hosts: tests/change_lock_hosts.rs.)

use crate::support::Test;

/// What varies from run to run: the rehearsed holder's run id and time, durations.
fn masked(text: &str) -> String {
    let rules = [
        (r"at most [^)]* more", "at most [LEFT] more"),
        (r"run \d{8}T\d{6}Z-[0-9a-f]{4}", "run [RUN]"),
        (r"since \d\d:\d\d:\d\d UTC", "since [TIME] UTC"),
        (r"\d+(\.\d+)?(ms|s)\b", "[DUR]"),
    ];
    let mut text = text.to_string();
    for (pattern, with) in rules {
        text = regex::Regex::new(pattern).unwrap().replace_all(&text, with).into_owned();
    }
    text
}

#[test]
fn a_change_is_refused_naming_the_holder_and_a_read_is_not() {
    let out = Test::new()
        .args(["run", "restart", "--sandbox", "--fault", "lock-held", "--set", "component=log-store"])
        .run()
        .code(75);
    assert_eq!(
        masked(&out.stdout),
        "restart (<built-in>/runbooks/restart.rhai)  [sandbox: in-process stack, faults lock-held]\n\n\
         locked: sandbox: held by alice@laptop — run [RUN], configure, pid 4242, since [TIME] UTC; nothing was \
         changed\n  help: `--lock-timeout 10m` waits for it\n\n0 passed, 0 failed  ([DUR])\n"
    );
    // Reading takes no lock; nor does planning a change.
    Test::new().args(["run", "status", "--sandbox", "--fault", "lock-held"]).run().code(0);
    let planned = Test::new()
        .args(["run", "restart", "--sandbox", "--dry-run", "--fault", "lock-held", "--set", "component=log-store"])
        .run()
        .code(0);
    assert!(planned.stdout.contains("would restart loki.service"), "{}", planned.stdout);
}

#[test]
fn a_run_told_to_wait_says_whom_it_waits_for_and_gives_up_in_words() {
    let out = Test::new()
        .args(["run", "stop", "--sandbox", "--fault", "lock-held=bob@desk", "--lock-timeout", "1s", "--format", "tap"])
        .run()
        .code(75);
    assert_eq!(
        masked(&out.stderr),
        "waiting for sandbox: held by bob@desk — run [RUN], configure, pid 4242, since [TIME] UTC (at most [LEFT] more)\n"
    );
    assert_eq!(
        masked(&out.stdout),
        "TAP version 13\n# opsbook run stop (<built-in>/runbooks/stop.rhai)\nBail out! locked: sandbox: still held by \
         bob@desk — run [RUN], configure, pid 4242, since [TIME] UTC after waiting [DUR]; nothing was changed\n1..0\n\
         # 0 passed, 0 failed\n"
    );
}

#[test]
fn in_a_fleet_the_held_host_fails_alone_and_an_undeclared_change_stops_before_it_changes() {
    let out = Test::new()
        .runbook("touch", "journal::emit(\"t\", \"before\", \"info\");\ncheck(\"changed\", true, \"\");\n")
        .args(["run", "touch", "--sandbox", "--fleet", "1", "--fault", "c1:lock-held", "--forks", "1"])
        .run()
        .code(75);
    let held = "c1: held by alice@laptop — run [RUN], configure, pid 4242, since [TIME] UTC";
    assert_eq!(
        regex::Regex::new(r"\[opsbook-\d+-[0-9a-f]+\]").unwrap().replace_all(&masked(&out.stdout), "[MARK]"),
        format!(
            "touch on server (runbooks/touch.rhai)  [sandbox: in-process stack, faults c1:lock-held]\n  ok    changed\n\n\
             1 passed, 0 failed  ([DUR])\n\ntouch on c1 (runbooks/touch.rhai)  [sandbox: in-process stack, faults \
             c1:lock-held]\n  warning: refused to write `before [MARK]` to the journal as t: {held}\n\nlocked: {held}; \
             nothing was changed\n  help: `--lock-timeout 10m` waits for it\n\n0 passed, 0 failed  ([DUR])\n\n\
             HOST    ROLES                       PASSED  FAILED     TIME\n\
             server  metrics-db, log-store       1       0          [DUR]\n\
             c1      metrics-agent, log-shipper  0       0, locked  [DUR]\n\n2 host(s): 1 failed (c1)  ([DUR])\n"
        )
    );
}

/// A rollout waiting for a held host stops waiting at the first Ctrl-C: no batch starts,
/// nothing was changed, and the run ends at once (it used to wait for a second Ctrl-C).
#[test]
fn a_rollout_waiting_for_a_lock_stops_at_the_first_ctrl_c() {
    let args = [
        "run",
        "restart",
        "--sandbox",
        "--fleet",
        "2",
        "--hosts",
        "log-shipper",
        "--set",
        "component=log-shipper",
        "--serial",
        "1",
        "--fault",
        "c2:lock-held=bob@desk",
        "--lock-timeout",
        "10m",
    ];
    let running = Test::new().args(args).spawn();
    running.wait_for_output("waiting for c2", std::time::Duration::from_secs(30));
    running.signal(libc::SIGINT);
    let (out, took) = running.wait(std::time::Duration::from_secs(30));
    assert!(took < std::time::Duration::from_secs(5), "ended {took:?} after Ctrl-C");
    let out = out.code(130);
    assert_eq!(
        masked(&out.stderr),
        "waiting for c2: held by bob@desk — run [RUN], configure, pid 4242, since [TIME] UTC (at most [LEFT] more)\n\n\
         interrupted before the first batch: no host starts, nothing is changed\n"
    );
    assert_eq!(
        masked(&out.stdout),
        "rollout of restart: 2 host(s) in 2 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); \
         a host whose gate fails is rolled back
BATCH  HOSTS  OUTCOME        TIME
1      c1     not attempted
2      c2     not attempted

HOST  ROLES                       BATCH  OUTCOME        WHY
c1    metrics-agent, log-shipper  1      not attempted  interrupted before batch 1
c2    metrics-agent, log-shipper  2      not attempted  interrupted before batch 1

2 host(s): 2 not attempted (c1, c2); interrupted before the first batch: nothing was changed  ([DUR])
"
    );
}
