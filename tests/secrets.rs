//! The canary: a token that must never appear in any output, log line, error or report.

use crate::support::Test;

const CANARY: &str = "CANARY-t0ken-7f3a9c";

#[track_caller]
fn assert_clean(out: &crate::support::Output, what: &str) {
    assert!(!out.stdout.contains(CANARY), "{what}: token in stdout\n{}", out.stdout);
    assert!(!out.stderr.contains(CANARY), "{what}: token in stderr\n{}", out.stderr);
}

const NOSY: &str = r#"
log(config);
print(config.metrics_db);
check("config", true, config);
let t = env("INFLUX_TOKEN");
"#;

#[test]
fn the_token_never_appears_anywhere() {
    for format in ["human", "json", "junit", "tap"] {
        let out = Test::new()
            .runbook("nosy", NOSY)
            .env("INFLUX_TOKEN", CANARY)
            .env("RUST_LOG", "trace")
            .args(["run", "nosy", "-vv", "--format", format])
            .run();
        assert_eq!(out.code, 1, "env(\"INFLUX_TOKEN\") aborts the run\n{}", out.stdout);
        assert!(out.stdout.contains("holds a secret"), "{}", out.stdout);
        assert_clean(&out, format);
    }
    for args in [vec!["config"], vec!["config", "--format", "json"], vec!["list"], vec!["fns"], vec!["check"]] {
        let out =
            Test::new().runbook("nosy", NOSY).env("INFLUX_TOKEN", CANARY).env("RUST_LOG", "trace").args(&args).run();
        assert_clean(&out, &args.join(" "));
    }
    // In a config file too.
    let out = Test::new()
        .config(&format!("[metrics_db]\ntoken = \"{CANARY}\"\n"))
        .runbook("nosy", NOSY)
        .args(["run", "nosy", "--format", "json"])
        .run();
    assert_clean(&out, "token in config file");
    let out = Test::new().config(&format!("[metrics_db]\ntoken = \"{CANARY}\"\n")).args(["config"]).run().code(0);
    assert!(out.stdout.contains("<redacted>"), "{}", out.stdout);
    assert_clean(&out, "config with token");
}

#[test]
fn a_thrown_token_is_redacted_from_reports() {
    // Even if a script somehow held the text, everything leaving the process is scrubbed.
    for format in ["human", "json"] {
        let out = Test::new()
            .runbook("echo", &format!("log(\"log {CANARY}\");\nthrow \"server said {CANARY}\";"))
            .env("INFLUX_TOKEN", CANARY)
            .args(["run", "echo", "--format", format])
            .run()
            .code(1)
            .stdout_has("server said <redacted>");
        assert_clean(&out, format);
    }
}
