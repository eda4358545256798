//! Every subcommand driven through the real binary: help, version, completions, list, show,
//! check, fns, config, and the catalog's search order.

use crate::support::Test;

const DOCUMENTED: &str = "//! Restart one thing, carefully.\n//! Second line of the doc.\nlet settle = param(\"settle\", \"5s\");\nlet count = param(\"count\", 3);\nlet names = param(\"names\", [\"a\", \"b\"]);\ncheck(\"ok\", true);\n";

#[test]
fn help_and_version() {
    // Whole texts: a subcommand dropped from the help, or a changed word, fails here.
    Test::new().args(["--help"]).run().code(0).stdout_is_fixture("cli/help.txt");
    for sub in
        ["run", "list", "show", "check", "fns", "config", "repl", "completions", "serve", "history", "twin", "scripts"]
    {
        Test::new().args([sub, "--help"]).run().code(0).stdout_is_fixture(&format!("cli/help-{sub}.txt"));
    }
    Test::new().args(["--version"]).run().code(0).stdout_is(&format!("opsbook {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn usage_errors_exit_2() {
    let more = "\nFor more information, try '--help'.\n";
    Test::new().args(["frobnicate"]).run().code(2).stderr_is(&format!(
        "error: unrecognized subcommand 'frobnicate'\n\nUsage: opsbook [OPTIONS] <COMMAND>\n{more}"
    ));
    Test::new().args(["run"]).run().code(2).stderr_is(&format!(
        "error: the following required arguments were not provided:\n  <NAME>\n\nUsage: opsbook run <NAME>\n{more}"
    ));
    Test::new().args(["run", "x", "--set", "novalue"]).run().code(2).stderr_is(&format!(
        "error: invalid value 'novalue' for '--set <KEY=VALUE>': expected KEY=VALUE, got `novalue`\n{more}"
    ));
}

#[test]
fn completions_for_shells() {
    let bash = Test::new().args(["completions", "bash"]).run().code(0).stdout_has("_opsbook");
    let zsh = Test::new().args(["completions", "zsh"]).run().code(0).stdout_has("#compdef opsbook");
    let fish = Test::new().args(["completions", "fish"]).run().code(0).stdout_has("complete -c opsbook");
    // What an operator may type: every visible subcommand, nothing hidden (`generate`, the
    // scripts' own `--role`/`--roles`).
    for out in [bash, zsh, fish] {
        out.stdout_has("completions").stdout_has("--install").stdout_lacks("generate").stdout_lacks("--role");
    }
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
    // The header, then one line per runbook; the operator's own shows the folder it came from
    // and its doc's first sentence only; the built-ins come along from the binary wherever it runs.
    Test::new()
        .runbook("restart-thing", DOCUMENTED)
        .args(["list"])
        .run()
        .code(0)
        .stdout_matches(r"NAME +FROM +SUMMARY\n(?:\S+ +built-in +.+\n)+restart-thing +runbooks +Restart one thing, carefully\.\n(?:\S+ +built-in +.+\n)+");
    let json = Test::new().args(["list", "--format", "json"]).run().code(0).json();
    let runbooks = json.as_array().unwrap();
    assert_eq!(runbooks.len(), std::fs::read_dir(crate::support::repo_dir().join("runbooks")).unwrap().count());
    assert!(runbooks.iter().all(|e| e["from"] == "built-in"), "{json}");
}

#[test]
fn show_prints_doc_params_and_source() {
    Test::new().runbook("restart-thing", DOCUMENTED).args(["show", "restart-thing"]).run().code(0).stdout_is(
        "restart-thing  (runbooks/restart-thing.rhai, runbooks)

Restart one thing, carefully.
Second line of the doc.

Parameters (set with --set NAME=VALUE):
  settle  [DUR]   a duration like [DUR] or 2m
  count   3    an integer
  names   a,b  a comma-separated list

Run: opsbook run restart-thing
",
    );
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
    // The check's name differs from the file's, so only running the file can produce it.
    Test::new()
        .file("scratch/try.rhai", "check(\"ran from the file\", true);")
        .args(["run", "scratch/try.rhai"])
        .run()
        .code(0)
        .stdout_is("try (scratch/try.rhai)\n  ok    ran from the file\n\n1 passed, 0 failed  ([DUR])\n");
}
