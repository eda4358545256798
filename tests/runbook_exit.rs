//! `exit(n)` in a runbook (#36, item 7): the run stops there and says so, with the code it was
//! given as its exit status — not "1 passed" and exit 0. A failed check is never hidden by
//! `exit(0)`, and a code that is no exit status is refused in words.

use crate::support::Test;

#[test]
fn exit_with_a_code_is_reported_as_a_stop_with_that_code() {
    Test::new()
        .runbook("r", "check(\"before\", true);\nexit(3);\ncheck(\"after\", true);\n")
        .args(["run", "r"])
        .run()
        .code(3)
        .stdout_is(
            "r (runbooks/r.rhai)
  ok    before

stopped: the runbook called exit(3) at runbooks/r.rhai:2:1

1 passed, 0 failed  ([DUR])
",
        );
}

#[test]
fn exit_inside_a_module_names_the_runbooks_line_and_json_carries_the_code() {
    let out = Test::new()
        .module("m", "fn give_up() {\n  exit(4);\n}\n")
        .runbook("r", "import \"m\" as m;\ncheck(\"before\", true);\nm::give_up();\n")
        .args(["run", "r", "--format", "json"])
        .run()
        .code(4);
    let doc = out.json();
    assert_eq!(doc["outcome"], "stopped");
    assert_eq!(
        doc["error"],
        serde_json::json!({
            "kind": "stopped", "code": 4,
            "message": "the runbook called exit(4) at runbooks/r.rhai:3:4"
        })
    );
    assert_eq!(doc["summary"]["passed"], 1);
}

#[test]
fn exit_zero_after_a_failed_check_still_fails_and_a_bad_code_is_refused() {
    Test::new().runbook("r", "check(\"down\", false);\nexit();\n").args(["run", "r"]).run().code(1).stdout_is(
        "r (runbooks/r.rhai)
  FAIL  down

stopped: the runbook called exit(0) at runbooks/r.rhai:2:1

0 passed, 1 failed  ([DUR])
",
    );
    Test::new().runbook("r", "exit(300);\n").args(["run", "r"]).run().code(1).stdout_is(
        "r (runbooks/r.rhai)

aborted: exit takes a whole number from 0 to 255 (the run's exit status), not 300 (at runbooks/r.rhai:1:1)

0 passed, 0 failed  ([DUR])
",
    );
}
