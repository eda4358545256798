//! SIGHUP during `opsbook run` (#36, item 7): the terminal the run was started from closed
//! (an ssh session dropped). The run ends as Ctrl-C ends it — with its partial report, on
//! whatever stdout still reaches (here a file, as with `> report.txt`), exit 130 — not killed
//! reportless by the signal's default action.

use std::time::Duration;

use crate::support::Test;

#[test]
fn sighup_ends_a_run_with_its_partial_report() {
    let running = Test::new()
        .runbook(
            "slow",
            "check(\"before\", true);\nprint(\"long part next\");\nsleep(\"1m\");\ncheck(\"after\", true);\n",
        )
        .args(["run", "slow"])
        .spawn();
    running.wait_for_output("long part next", Duration::from_secs(20));
    running.signal(libc::SIGHUP);
    let (out, took) = running.wait(Duration::from_secs(10));
    assert!(took < Duration::from_secs(2), "took {took:?} to stop");
    out.code(130)
        .stdout_is(
            "slow (runbooks/slow.rhai)
  ok    before
  long part next

interrupted

1 passed, 0 failed  ([DUR])
",
        )
        .stderr_is(
            "\ninterrupted by SIGHUP (the terminal closed): stopping the runbook (Ctrl-C again to quit at once)\n",
        );
}
