//! A deadline for a run (#36, item 6): `opsbook run --timeout DURATION`, or
//! `limits.run_timeout`, stops a run that sleeps for ever or waits on something that never
//! comes (neither counts as operations, so `limits.max_operations` never trips on them): the
//! partial report names where the run was, exit 124 — on one host, and on every host of a
//! fleet run (`--hosts`); a rollout refuses it in words.

use std::time::{Duration, Instant};

use crate::support::Test;

#[test]
fn a_loop_of_sleeps_is_stopped_at_the_time_limit_with_its_partial_report() {
    let started = Instant::now();
    Test::new()
        .runbook("r", "check(\"before\", true);\nloop { sleep(\"1s\"); }\n")
        .args(["run", "r", "--timeout", "1500ms"])
        .run()
        .code(124)
        .stdout_is(
            "r (runbooks/r.rhai)
  ok    before

timed out: the run's time limit of [DUR] [DUR] passed while it was at runbooks/r.rhai:2:8: `loop { sleep(\"[DUR]\"); }`

1 passed, 0 failed  ([DUR])
",
        );
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn the_configured_limit_stops_a_wait_that_never_ends_inside_a_module() {
    Test::new()
        .config("[limits]\nrun_timeout = \"1s\"\n")
        .module("waits", "fn forever() {\n  wait::until(|| false, #{ timeout: \"100000d\" });\n}\n")
        .runbook("r", "import \"waits\" as waits;\nwaits::forever();\n")
        .args(["run", "r", "--format", "json"])
        .run()
        .code(124)
        .stdout_has("\"outcome\": \"timed out\"")
        .stdout_has(
            "\"error\": {\n    \"kind\": \"timed_out\",\n    \"message\": \"the run's time limit of 1s passed while it was at runbooks/r.rhai:2:8: `waits::forever();`\"\n  }",
        );
}

#[test]
fn a_time_limit_that_is_not_one_is_refused() {
    let out = Test::new().args(["run", "quick-check", "--timeout", "0s"]).run().code(2);
    assert_eq!(
        out.stderr,
        "error: invalid value '0s' for '--timeout <DURATION>': the time limit must be more than zero\n\nFor more information, try '--help'.\n"
    );
    let out = Test::new().args(["run", "quick-check", "--timeout", "soon"]).run().code(2);
    assert_eq!(
        out.stderr,
        "error: invalid value 'soon' for '--timeout <DURATION>': `soon` is not a duration like `30s` or `10m`\n\nFor more information, try '--help'.\n"
    );
}

/// What each host of a sandbox fleet says when the limit stops its loop of sleeps.
fn stopped_on(host: &str) -> String {
    format!(
        "r on {host} (runbooks/r.rhai)  [sandbox: in-process stack]
  ok    before

timed out: the run's time limit of [DUR] [DUR] passed while it was at runbooks/r.rhai:2:8: `loop {{ sleep(\"[DUR]\"); }}`

1 passed, 0 failed  ([DUR])

"
    )
}

#[test]
fn a_fleet_run_stops_every_host_at_the_time_limit_and_a_rollout_refuses_one() {
    let t = || Test::new().runbook("r", "check(\"before\", true);\nloop { sleep(\"1s\"); }\n");
    let started = Instant::now();
    let fleet = ["run", "r", "--sandbox", "--fleet", "2", "--hosts", "all", "--timeout", "1500ms"];
    let out = t().args(fleet).run().code(124);
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let table = "HOST    ROLES                       PASSED  FAILED        TIME
server  metrics-db, log-store       1       0, timed out  [DUR]
c1      metrics-agent, log-shipper  1       0, timed out  [DUR]
c2      metrics-agent, log-shipper  1       0, timed out  [DUR]

3 host(s): 3 failed (server, c1, c2)  ([DUR])
";
    let expected = format!("{}{}{}{table}", stopped_on("server"), stopped_on("c1"), stopped_on("c2"));
    assert_eq!(crate::support::mask(&out.stdout), expected);
    let out = t().args(fleet).args(["--serial", "1"]).run().code(2);
    assert_eq!(
        out.stderr,
        "error: --timeout stops a run where it stands, and a rollout stops only between batches (Ctrl-C), each host \
         bounded by its gate's own deadlines: leave --timeout out of a rollout\n"
    );
}
