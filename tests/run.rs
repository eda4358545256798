//! `opsbook run`: report formats, exit codes, parameters, script errors with spans,
//! runaway scripts and interruption.

use std::time::Duration;

use crate::support::Test;

const MIXED: &str = r#"//! A bit of everything.
section("first");
check("passes", true, "all good");
check("compares", #{ok: false, expected: "active", actual: "inactive", detail: "loki.service"});
warn("careful", "disk 91% full");
skip("not here", "no tunnel configured");
log("a log line");
print("a printed line");
"#;

#[test]
fn human_report_streams_checks_and_ends_with_the_counts() {
    // No colour when stdout is not a terminal: the comparison would see the escapes.
    Test::new().runbook("mixed", MIXED).args(["run", "mixed"]).run().code(1).stdout_is(
        "mixed (runbooks/mixed.rhai)

== first
  ok    passes — all good
  FAIL  compares — loki.service
          expected: active
          actual:   inactive
  WARN  careful — disk 91% full
  skip  not here — no tunnel configured
  a log line
  a printed line

1 passed, 1 failed, 1 skipped, 1 warning  ([DUR])
",
    );
}

/// A JSON report with its times (which vary from run to run) replaced by their kind.
fn timeless(mut doc: serde_json::Value) -> serde_json::Value {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    match k.as_str() {
                        "duration_s" | "at_s" if v.is_number() => *v = "[seconds]".into(),
                        "started_at" if v.as_str().is_some_and(|t| t.ends_with('Z')) => *v = "[RFC 3339 UTC]".into(),
                        _ => walk(v),
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut doc);
    doc
}

#[test]
fn json_report_has_the_documented_fields() {
    let out = Test::new().runbook("mixed", MIXED).args(["run", "mixed", "--format", "json"]).run().code(1);
    let check = |name: &str, outcome: &str, detail: &str, expected: Option<&str>, actual: Option<&str>| {
        serde_json::json!({"host": null, "section": "first", "name": name, "outcome": outcome, "detail": detail,
            "expected": expected, "actual": actual, "duration_s": "[seconds]", "at_s": "[seconds]"})
    };
    let log = |message: &str| serde_json::json!({"host": null, "section": "first", "level": "info", "message": message, "at_s": "[seconds]"});
    assert_eq!(
        timeless(out.json()),
        serde_json::json!({
            "schema": 2, "opsbook": env!("CARGO_PKG_VERSION"), "host": null, "runbook": "mixed",
            "source": "runbooks/mixed.rhai", "params": {}, "dry_run": false, "sandbox": false, "faults": [],
            "started_at": "[RFC 3339 UTC]", "duration_s": "[seconds]", "outcome": "failed", "exit_code": 1,
            "summary": {"passed": 1, "failed": 1, "warnings": 1, "skipped": 1},
            "checks": [
                check("passes", "pass", "all good", None, None),
                check("compares", "fail", "loki.service", Some("active"), Some("inactive")),
                check("careful", "warn", "disk 91% full", None, None),
                check("not here", "skip", "no tunnel configured", None, None),
            ],
            "log": [log("a log line"), log("a printed line")],
            "error": null,
        })
    );
    // Log lines go to stderr too, so stdout stays one JSON document.
    out.stderr_is("a log line\na printed line\n");
}

#[test]
fn junit_report_is_valid_xml_with_counts() {
    let out = Test::new().runbook("mixed", MIXED).args(["run", "mixed", "--format", "junit"]).run().code(1);
    let xml = roxmltree::Document::parse(&out.stdout).expect("valid XML");
    let suite = xml.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!(suite.attribute("name"), Some("mixed"));
    assert_eq!(suite.attribute("tests"), Some("4"));
    assert_eq!(suite.attribute("failures"), Some("1"));
    assert_eq!(suite.attribute("skipped"), Some("1"));
    let failure = xml.descendants().find(|n| n.has_tag_name("failure")).unwrap();
    assert!(failure.text().unwrap().contains("expected: active"));
    let cases: Vec<_> = xml.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases[0].attribute("classname"), Some("mixed.first"));
}

#[test]
fn junit_escapes_markup_in_names_and_details() {
    let out = Test::new()
        .runbook("x", "check(\"<&>\\\"'\", false, \"a < b & c\\u0001\");")
        .args(["run", "x", "--format", "junit"])
        .run()
        .code(1);
    roxmltree::Document::parse(&out.stdout).expect("valid XML despite markup and control characters");
}

#[test]
fn tap_report_follows_version_13() {
    let out = Test::new().runbook("mixed", MIXED).args(["run", "mixed", "--format", "tap"]).run().code(1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "TAP version 13");
    assert!(lines.contains(&"ok 1 - passes"));
    assert!(lines.contains(&"not ok 2 - compares"));
    assert!(lines.iter().any(|l| l.starts_with("ok 4 - not here # SKIP")));
    assert!(lines.contains(&"1..4"));
    assert!(out.stdout.contains("  expected: \"active\""));
}

#[test]
fn exit_codes() {
    Test::new()
        .runbook("pass", "check(\"a\", true); warn(\"w\", \"x\"); skip(\"s\", \"y\");")
        .args(["run", "pass"])
        .run()
        .code(0);
    Test::new().runbook("fail", "check(\"a\", false);").args(["run", "fail"]).run().code(1);
    Test::new()
        .runbook("abort", "check(\"a\", true);\nthrow \"the log store is on fire\";")
        .args(["run", "abort"])
        .run()
        .code(1)
        .stdout_has("aborted: the log store is on fire (at runbooks/abort.rhai:2:1)");
    Test::new()
        .runbook("typo", "chek(\"a\", true);")
        .args(["run", "typo"])
        .run()
        .code(2)
        .stderr_has("--> runbooks/typo.rhai:1:1")
        .stderr_has("opsbook fns");
    Test::new()
        .runbook("syntax", "let x = ;")
        .args(["run", "syntax"])
        .run()
        .code(2)
        .stderr_has("runbooks/syntax.rhai:1:");
}

#[test]
fn script_errors_in_modules_point_into_the_module() {
    let out = Test::new()
        .module("helpers", "fn broken() {\n    let m = #{};\n    m.nope.more\n}\n")
        .runbook("uses", "import \"helpers\" as h;\nh::broken();\n")
        .args(["run", "uses"])
        .run()
        .code(2);
    assert!(out.stderr.contains("stdlib/helpers.rhai:3:"), "{}", out.stderr);
    assert!(out.stderr.contains("called at runbooks/uses.rhai:2:"), "{}", out.stderr);
    Test::new()
        .runbook("missing", "import \"stak\" as s;")
        .module("stack", "fn x() { 1 }")
        .args(["run", "missing"])
        .run()
        .code(2)
        .stderr_has("did you mean `stack`?");
    // A stdlib module used without its import: the remedy, not a suggestion of its own name.
    Test::new()
        .runbook("unimported", "//! Uses a module it did not import.\nlet up = stack::up();")
        .module("stack", "fn up() { true }")
        .args(["run", "unimported"])
        .run()
        .code(2)
        .stderr_is(
            "error: module `stack` is not imported here: add `import \"stack\" as stack;` at the top\n \
             --> runbooks/unimported.rhai:2:10\n  |\n2 | let up = stack::up();\n  |          ^\n",
        );
}

#[test]
fn params_are_declared_in_the_script_and_checked() {
    let src = "let wait = param(\"wait\", \"5s\");\nlet n = param(\"n\", 3);\nlet on = param(\"on\", false);\nlet units = param(\"units\", [\"a\"]);\ncheck(`${wait} ${n} ${on} ${units.len()}`, true);";
    Test::new().runbook("p", src).args(["run", "p"]).run().code(0).stdout_has("5s 3 false 1");
    Test::new()
        .runbook("p", src)
        .args(["run", "p", "--set", "wait=2m", "--set", "n=7", "--set", "on=yes", "--set", "units=x,y,z"])
        .run()
        .code(0)
        .stdout_has("2m 7 true 3");
    Test::new()
        .runbook("p", src)
        .args(["run", "p", "--set", "nn=1"])
        .run()
        .code(2)
        .stderr_has("has no parameter `nn`")
        .stderr_has("did you mean `n`?");
    Test::new()
        .runbook("p", src)
        .args(["run", "p", "--set", "n=many"])
        .run()
        .code(2)
        .stderr_has("`n` expects an integer");
    Test::new()
        .runbook("p", src)
        .args(["run", "p", "--set", "wait=soon"])
        .run()
        .code(2)
        .stderr_has("expects a duration");
    Test::new()
        .runbook("req", "let c = param(\"component\", ());\ncheck(c, true);")
        .args(["run", "req"])
        .run()
        .code(2)
        .stderr_has("needs `--set component=…`");
    let doc = Test::new().runbook("p", src).args(["run", "p", "--set", "n=9", "--format", "json"]).run().code(0).json();
    assert_eq!(doc["params"]["n"], "9");
    assert_eq!(doc["params"]["wait"], "5s");
}

#[test]
fn config_is_readable_from_scripts_and_modules() {
    Test::new()
        .config("[log_store]\nurl = \"http://10.0.0.9:3100\"\n")
        .module("m", "fn url() { config.log_store.url }")
        .runbook("c", "import \"m\" as m;\ncheck(m::url(), config.log_store.url == \"http://10.0.0.9:3100\");\ncheck(\"bucket\", config.metrics_db.bucket == \"telegraf\");")
        .args(["run", "c"])
        .run()
        .code(0)
        .stdout_has("http://10.0.0.9:3100");
}

#[test]
fn runaway_script_is_stopped_by_the_operation_limit() {
    Test::new()
        .config("[limits]\nmax_operations = 100000\n")
        .runbook("spin", "check(\"before\", true);\nlet i = 0;\nloop { i += 1; }")
        .args(["run", "spin", "--format", "json"])
        .run()
        .code(2)
        .stderr_has("exceeded 100000 operations");
}

/// Runs `source` and presses Ctrl-C once it has printed `long part next` (it must, just before
/// what takes long): the run must end within a second, with the exit status of an interruption.
#[track_caller]
fn interrupted_within_a_second(source: &str, format: &str) -> crate::support::Output {
    let running = Test::new().runbook("slow", source).args(["run", "slow", "--format", format]).spawn();
    // Printed on stdout or stderr (JSON keeps stdout for the report), as the runbook goes.
    running.wait_for_output("long part next", Duration::from_secs(20));
    running.signal(libc::SIGINT);
    let (out, took) = running.wait(Duration::from_secs(10));
    assert!(took < Duration::from_secs(1), "took {took:?} to stop\n{}\n{}", out.stdout, out.stderr);
    out.code(130)
}

#[test]
fn ctrl_c_ends_a_sleeping_run_with_the_partial_report() {
    let out = interrupted_within_a_second(
        "check(\"before\", true);\nprint(\"long part next\");\nsleep(\"1m\");\ncheck(\"after\", true);",
        "human",
    );
    assert!(out.stdout.contains("before") && !out.stdout.contains("after"), "{}", out.stdout);
    assert!(out.stdout.contains("interrupted"), "{}", out.stdout);
    let out =
        interrupted_within_a_second("check(\"before\", true);\nprint(\"long part next\");\nsleep(\"1m\");", "json");
    let doc = out.json();
    assert_eq!(doc["outcome"], "interrupted");
    assert_eq!(doc["summary"]["passed"], 1);
}

#[test]
fn ctrl_c_ends_a_busy_loop_and_a_wait() {
    interrupted_within_a_second("let i = 0;\nprint(\"long part next\");\nloop { i += 1; }", "human");
    interrupted_within_a_second(
        "print(\"long part next\");\nwait::until(|| false, #{timeout: \"1m\", every: \"30s\"});",
        "tap",
    );
}

#[test]
fn dry_run_is_announced() {
    Test::new().runbook("x", "check(\"a\", true);").args(["run", "x", "--dry-run"]).run().code(0).stdout_has("dry run");
}

#[test]
fn wait_until_polls_with_a_deadline() {
    let src = r#"
let n = 0;
let r = wait::until(|| { n += 1; n >= 3 }, #{timeout: "5s", every: "10ms"});
check("reached", r.ok, r.attempts);
let r2 = wait::until(|| #{ok: false, reason: "not yet"}, #{timeout: "100ms", every: "20ms"});
check("deadline passes", !r2.ok && r2.waited >= 0.1 && r2.last.reason == "not yet", r2.waited);
let r3 = wait::until(|| { throw "boom" }, #{timeout: "50ms", every: "10ms"});
check("a throwing probe is not yet", !r3.ok && r3.last.contains("boom"), r3.last);
"#;
    Test::new().runbook("w", src).args(["run", "w"]).run().code(0).stdout_has("3 passed, 0 failed");
    Test::new()
        .runbook("w", "wait::until(|| true, #{timeout: \"1s\", evry: \"1s\"});")
        .args(["run", "w"])
        .run()
        .code(1)
        .stdout_has("unknown option `evry`");
}
