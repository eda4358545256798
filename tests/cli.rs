//! Every subcommand driven through the real binary: help, version, completions, list, show,
//! check, fns, config, and the catalog's search order.

use crate::support::Test;

const DOCUMENTED: &str = "//! Restart one thing, carefully.\n//! Second line of the doc.\nlet settle = param(\"settle\", \"5s\");\nlet count = param(\"count\", 3);\nlet names = param(\"names\", [\"a\", \"b\"]);\ncheck(\"ok\", true);\n";

#[test]
fn help_and_version() {
    let out = Test::new().args(["--help"]).run().code(0);
    for sub in ["run", "list", "show", "check", "fns", "config", "completions"] {
        assert!(out.stdout.contains(sub), "--help lacks {sub}");
    }
    for sub in ["run", "list", "show", "check", "fns", "config", "completions"] {
        Test::new().args([sub, "--help"]).run().code(0).stdout_has("Usage: opsbook");
    }
    Test::new().args(["--version"]).run().code(0).stdout_has(env!("CARGO_PKG_VERSION"));
}

#[test]
fn usage_errors_exit_2() {
    Test::new().args(["frobnicate"]).run().code(2).stderr_has("unrecognized subcommand");
    Test::new().args(["run"]).run().code(2).stderr_has("NAME");
    Test::new().args(["run", "x", "--set", "novalue"]).run().code(2).stderr_has("expected KEY=VALUE");
}

#[test]
fn completions_for_shells() {
    Test::new().args(["completions", "bash"]).run().code(0).stdout_has("_opsbook");
    Test::new().args(["completions", "zsh"]).run().code(0).stdout_has("#compdef opsbook");
}

#[test]
fn global_options_go_before_or_after_the_subcommand() {
    let t = Test::new().runbook("r", "check(\"a\", true);");
    let before = t.args(["--format", "json", "run", "r"]).run().code(0);
    let after = Test::new().runbook("r", "check(\"a\", true);").args(["run", "r", "--format", "json"]).run().code(0);
    assert_eq!(before.json()["summary"], after.json()["summary"]);
}

#[test]
fn list_shows_name_summary_and_origin() {
    let out = Test::new().runbook("restart-thing", DOCUMENTED).args(["list"]).run().code(0);
    let line = out.stdout.lines().find(|l| l.starts_with("restart-thing")).expect("listed");
    assert!(line.contains("Restart one thing, carefully."), "{line}");
    assert!(!line.contains("Second line"), "{line}");
    assert!(line.trim_end().ends_with("runbooks"), "{line}");
    // Built-in runbooks come along from the binary wherever it runs.
    let json = Test::new().args(["list", "--format", "json"]).run().code(0).json();
    assert!(json.as_array().unwrap().iter().all(|e| e["from"] == "built-in"));
}

#[test]
fn show_prints_doc_params_and_source() {
    Test::new()
        .runbook("restart-thing", DOCUMENTED)
        .args(["show", "restart-thing"])
        .run()
        .code(0)
        .stdout_has("runbooks/restart-thing.rhai")
        .stdout_has("Second line of the doc.")
        .stdout_has("settle")
        .stdout_has("5s")
        .stdout_has("a duration")
        .stdout_has("count")
        .stdout_has("an integer")
        .stdout_has("a,b");
}

#[test]
fn unknown_runbook_suggests_close_names() {
    Test::new()
        .runbook("restart-all", "check(\"x\", true);")
        .args(["run", "restart-al"])
        .run()
        .code(2)
        .stderr_has("no runbook named `restart-al`")
        .stderr_has("did you mean one of `restart-all`");
    Test::new().args(["show", "zzzz-nothing"]).run().code(2).stderr_has("no runbook named `zzzz-nothing`");
}

#[test]
fn check_compiles_everything_and_points_at_errors() {
    Test::new()
        .runbook("good", "import \"lib\" as lib;\ncheck(\"a\", lib::yes());")
        .module("lib", "fn yes() { true }")
        .args(["check"])
        .run()
        .code(0)
        .stdout_has("no errors");
    let out = Test::new()
        .runbook("good", "check(\"a\", true);")
        .runbook("bad", "let a = 1;\nlet b = (a + ;\ncheck(\"x\", true);\n")
        .args(["check"])
        .run()
        .code(2)
        .stderr_has("--> runbooks/bad.rhai:2:");
    assert!(out.stderr.contains("2 | let b = (a + ;"), "{}", out.stderr);
    assert!(out.stderr.lines().any(|l| l.trim_start().starts_with("| ") && l.contains('^')), "{}", out.stderr);
    Test::new()
        .runbook("imp", "import \"stak\" as s;")
        .module("stack2", "fn x() { 1 }")
        .args(["check", "imp"])
        .run()
        .code(2)
        .stderr_has("imports `stak`, which is not a stdlib module");
    Test::new().module("broken", "fn x( {").args(["check"]).run().code(2).stderr_has("stdlib/broken.rhai:1:");
}

#[test]
fn fns_lists_documented_host_functions() {
    let out = Test::new().args(["fns"]).run().code(0);
    assert!(out.stdout.contains("check(name: &str, ok: bool) -> bool"), "{}", out.stdout);
    assert!(out.stdout.contains("wait::until("), "{}", out.stdout);
    assert!(out.stdout.contains("Records a check"), "{}", out.stdout);
    let json = Test::new().args(["fns", "sleep", "--json"]).run().code(0).json();
    let fns = json.as_array().unwrap();
    assert!(
        !fns.is_empty()
            && fns.iter().all(|f| f["signature"].as_str().unwrap().contains("sleep")
                || f["doc"].as_str().unwrap().to_lowercase().contains("sleep"))
    );
    let t = Test::new();
    let dir = t.path().join("defs");
    let out = t.args(["fns", "--definitions", dir.to_str().unwrap()]).run().code(0);
    let defs: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!defs.is_empty(), "{}", out.stdout);
    let all: String = defs.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    assert!(all.contains("fn check(name: string, ok: bool) -> bool;"), "{all}");
    assert!(!all.contains("EvalAltResult>>"), "broken signatures in definitions");
}

#[test]
fn runbooks_dir_overrides_cwd_and_builtins() {
    let t = Test::new()
        .runbook("dup", "//! from cwd\ncheck(\"cwd\", true);")
        .file("other/runbooks/dup.rhai", "//! from other\ncheck(\"other\", true);")
        .file("other/stdlib/m.rhai", "fn where_() { \"other\" }")
        .module("m", "fn where_() { \"cwd\" }");
    let other = t.path().join("other/runbooks");
    let out = t.args(["--runbooks", other.to_str().unwrap(), "run", "dup"]).run().code(0);
    assert!(out.stdout.contains("other"), "{}", out.stdout);
    // OPSBOOK_PATH sits between --runbooks and ./runbooks.
    let t = Test::new()
        .runbook("dup", "check(\"cwd\", true);")
        .file("p/runbooks/dup.rhai", "import \"m\" as m;\ncheck(m::where_(), true);")
        .file("p/stdlib/m.rhai", "fn where_() { \"from-path\" }");
    let p = t.path().join("p/runbooks");
    t.env("OPSBOOK_PATH", p.to_str().unwrap()).args(["run", "dup"]).run().code(0).stdout_has("from-path");
    // $XDG_CONFIG_HOME/opsbook/runbooks is below ./runbooks.
    Test::new()
        .runbook("dup", "check(\"cwd wins\", true);")
        .file(".config/opsbook/runbooks/dup.rhai", "check(\"xdg\", true);")
        .file(".config/opsbook/runbooks/only-xdg.rhai", "check(\"xdg only\", true);")
        .args(["run", "dup"])
        .run()
        .code(0)
        .stdout_has("cwd wins");
}

#[test]
fn run_accepts_a_path_to_a_script() {
    Test::new()
        .file("scratch/try.rhai", "check(\"scratch\", true);")
        .args(["run", "scratch/try.rhai"])
        .run()
        .code(0)
        .stdout_has("scratch");
}
