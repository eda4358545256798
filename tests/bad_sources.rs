//! Bad input (#28), where errors point: an abort raised inside a stdlib module names the
//! runbook's own line as well; an unreadable REPL line is said and skipped (not a silent
//! exit 0); a template that is not UTF-8 is named as such, never passed over.

use std::io::Write;
use std::process::Stdio;

use crate::support::Test;

#[test]
fn a_bad_option_to_a_stdlib_call_names_the_runbook_s_line() {
    let runbook = "import \"verify\" as verify;\ncheck(\"first\", true);\nverify::metrics_agent(#{ sinse: now() });\n";
    Test::new().runbook("badopt", runbook).args(["run", "badopt"]).run().code(1).stdout_is(
        "badopt (runbooks/badopt.rhai)
  ok    first

aborted: verify::metrics_agent: unknown option `sinse` (options: chunk_deadline, data_deadline, recent, scrape_gap, since, startup, stream, window) (at runbooks/badopt.rhai:3:9; thrown at <built-in>/stdlib/options.rhai:24:13)

1 passed, 0 failed  ([DUR])
",
    );
    // Thrown by the runbook itself: its line, once.
    Test::new()
        .runbook("own", "check(\"first\", true);\nthrow \"the log store is on fire\";\n")
        .args(["run", "own"])
        .run()
        .code(1)
        .stdout_has("aborted: the log store is on fire (at runbooks/own.rhai:2:1)\n");
}

#[test]
fn a_repl_line_that_is_not_utf8_is_said_and_skipped_and_the_exit_status_says_so() {
    let test = Test::new();
    let mut cmd = test.command();
    cmd.arg("repl").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // `print` writes to stderr in the REPL, after the refusal of line 2.
    child.stdin.take().unwrap().write_all(b"let a = 1;\n\xff\xfe bad\nprint(a + 1);\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (out.status.code(), stdout.as_ref(), stderr.as_ref()),
        (Some(2), "", "error: input line 2 is not UTF-8 text: it was skipped\n2\n")
    );
}

#[test]
fn a_template_that_is_not_utf8_is_named_not_passed_over() {
    let test = Test::new();
    std::fs::create_dir_all(test.path().join("templates")).unwrap();
    std::fs::write(test.path().join("templates/bad.conf.j2"), b"hello \xff\xfe {{ x }}\n").unwrap();
    std::fs::create_dir_all(test.path().join("runbooks")).unwrap();
    let not_utf8 = "the template `templates/bad.conf.j2` is not UTF-8 text (the bytes at offset 6 are not)";
    let out = Test::run_in_place(&test, &["templates", "bad.conf.j2"]);
    assert_eq!((out.0, out.1.as_str(), out.2.clone()), (2, "", format!("error: {not_utf8}\n")));
    let out = Test::run_in_place(&test, &["templates"]);
    assert_eq!(out.0, 2);
    assert!(!out.1.contains("bad.conf.j2"), "{}", out.1);
    assert_eq!(out.2, format!("error: {not_utf8}\n"));
    std::fs::write(
        test.path().join("runbooks/render.rhai"),
        "try { template::render(\"bad.conf.j2\", #{ x: 1 }); } catch (e) { check(\"render\", false, e); }\n",
    )
    .unwrap();
    let out = Test::run_in_place(&test, &["run", "render"]);
    assert_eq!(out.1.lines().nth(1).unwrap_or(""), format!("  FAIL  render — {not_utf8}"), "{}", out.1);
}
