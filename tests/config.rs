//! Configuration: precedence of files, environment and flags; malformed files located.

use crate::support::Test;

#[track_caller]
fn value(out: &crate::support::Output, key: &str) -> (String, String) {
    let doc = out.json();
    let s = &doc["settings"][key];
    (s["value"].as_str().unwrap().to_string(), s["from"].as_str().unwrap().to_string())
}

#[test]
fn defaults_come_from_the_spec() {
    let out = Test::new().args(["config", "--format", "json"]).run().code(0);
    assert_eq!(value(&out, "metrics_db.url").0, "http://127.0.0.1:8086");
    assert_eq!(value(&out, "log_store.url").0, "http://127.0.0.1:3100");
    assert_eq!(value(&out, "log_shipper.url").0, "http://127.0.0.1:12345");
    assert_eq!(value(&out, "metrics_db.bucket").0, "telegraf");
    assert_eq!(value(&out, "log_store.unit").0, "loki.service");
    assert_eq!(value(&out, "scope"), ("system".into(), "default".into()));
}

#[test]
fn precedence_xdg_then_cwd_then_explicit_then_env_then_flags() {
    let t = Test::new()
        .file(
            ".config/opsbook/config.toml",
            "scope = \"user\"\n[metrics_db]\nbucket = \"xdg\"\norg = \"xdg-org\"\nunit = \"xdg.service\"\n",
        )
        .config("[metrics_db]\nbucket = \"cwd\"\norg = \"cwd-org\"\n")
        .file("explicit.toml", "[metrics_db]\norg = \"explicit-org\"\n");
    let out = t
        .args(["config", "--config", "explicit.toml", "--format", "json"])
        .env("INFLUX_HOST", "http://db:8086")
        .run()
        .code(0);
    assert_eq!(value(&out, "metrics_db.unit").0, "xdg.service");
    assert_eq!(value(&out, "metrics_db.bucket").0, "cwd");
    assert!(value(&out, "metrics_db.bucket").1.ends_with("opsbook.toml:2"));
    assert_eq!(value(&out, "metrics_db.org").0, "explicit-org");
    assert_eq!(value(&out, "metrics_db.url"), ("http://db:8086".into(), "env INFLUX_HOST".into()));
    assert_eq!(value(&out, "scope").0, "user");
    // OPSBOOK_CONFIG is the explicit file when --config is absent; env still beats it.
    let out = Test::new()
        .file("e.toml", "[metrics_db]\norg = \"from-env-file\"\n")
        .env("OPSBOOK_CONFIG", "e.toml")
        .args(["config", "--format", "json"])
        .run()
        .code(0);
    assert_eq!(value(&out, "metrics_db.org").0, "from-env-file");
    let out = Test::new()
        .file("e.toml", "[metrics_db]\norg = \"from-env-file\"\n")
        .env("OPSBOOK_CONFIG", "e.toml")
        .env("INFLUX_ORG", "from-var")
        .args(["config", "--format", "json", "--user"])
        .run()
        .code(0);
    assert_eq!(value(&out, "metrics_db.org").0, "from-var");
    assert_eq!(value(&out, "scope"), ("user".into(), "flag --user".into()));
}

#[test]
fn human_config_lists_origins_and_search_path() {
    Test::new()
        .config("[log_store]\nunit = \"loki-container.service\"\n")
        .args(["config"])
        .run()
        .code(0)
        .stdout_has("log_store.unit")
        .stdout_has("loki-container.service")
        .stdout_has("opsbook.toml:2")
        .stdout_has("runbook search path");
}

#[test]
fn malformed_config_is_located() {
    let out = Test::new().config("[metrics_db]\nbucket = \"open\n").args(["config"]).run().code(2);
    assert!(out.stderr.contains("--> opsbook.toml:2:"), "{}", out.stderr);
    assert!(out.stderr.contains('^'), "{}", out.stderr);
    Test::new()
        .config("[metrics_db]\nbuckt = \"x\"\n")
        .args(["config"])
        .run()
        .code(2)
        .stderr_has("unknown key `metrics_db.buckt`; did you mean `metrics_db.bucket`?")
        .stderr_has("--> opsbook.toml:2:1");
    Test::new().config("[log_store]\nurl = 3100\n").args(["list"]).run().code(0);
    Test::new().config("[log_store]\nurl = 3100\n").args(["run", "x"]).run().code(2).stderr_has("expects a string");
    Test::new().config("scope = \"both\"\n").args(["config"]).run().code(2).stderr_has("not one of system, user");
    Test::new()
        .config("[limits]\nmax_operations = \"lots\"\n")
        .args(["config"])
        .run()
        .code(2)
        .stderr_has("expects an integer");
    Test::new()
        .args(["config", "--config", "nope.toml"])
        .run()
        .code(2)
        .stderr_has("cannot read config file `nope.toml`");
}
