//! Refuse rather than substitute (#36, item 7): what an operator names that is not what it
//! should be is refused saying what is wrong, never replaced by something else (the built-in
//! runbook for a missing folder) nor silently ignored (a fault's value, `NaN`).

use crate::support::Test;

fn symlink(target: &str, link: &std::path::Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[test]
fn a_runbooks_folder_that_is_not_one_is_refused_not_replaced_by_the_built_in() {
    let t = Test::new().file("afile", "x").file("locked/quick-check.rhai", "check(\"mine\", true);\n");
    symlink("loop", &t.path().join("loop"));
    let cases = [
        ("missing", "error: --runbooks `missing`: no such folder\n"),
        ("afile", "error: --runbooks `afile`: is not a folder: give the folder holding NAME.rhai files\n"),
        ("loop", "error: --runbooks `loop`: a loop of symbolic links, not a folder\n"),
    ];
    for (dir, refusal) in cases {
        let out = t.run_in_place(&["run", "quick-check", "--sandbox", "--runbooks", dir]);
        assert_eq!((out.0, out.1.as_str(), out.2.as_str()), (2, "", refusal), "{dir}");
    }
}

#[test]
fn a_runbook_or_module_that_is_a_folder_a_fifo_or_a_device_is_named_as_such() {
    let t = Test::new().file("runbooks/dir.rhai/x", "").runbook("uses", "import \"dev\" as dev;\n");
    std::fs::create_dir_all(t.path().join("stdlib")).unwrap();
    symlink("/dev/zero", &t.path().join("stdlib/dev.rhai"));
    let fifo = t.path().join("runbooks/fifo.rhai");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = t.run_in_place(&["run", "dir"]);
    assert_eq!(
        (out.0, out.2.as_str()),
        (2, "error: the runbook `runbooks/dir.rhai` is a directory, not a regular file: give the path of a file\n")
    );
    let out = t.run_in_place(&["run", "fifo"]);
    assert_eq!(
        (out.0, out.2.as_str()),
        (
            2,
            "error: the runbook `runbooks/fifo.rhai` is a FIFO (named pipe), not a regular file: give the path of a file\n"
        )
    );
    let out = t.run_in_place(&["run", "uses"]);
    assert_eq!(out.0, 2, "{out:?}");
    assert!(
        out.2.starts_with(
            "error: the module `stdlib/dev.rhai` is a character device, not a regular file: give the path of a file\n"
        ),
        "{}",
        out.2
    );
}

#[test]
fn serve_refuses_an_interval_shorter_than_a_second() {
    Test::new()
        .args(["serve", "quick-check@1ms", "--sandbox"])
        .run()
        .code(2)
        .stderr_is("error: `quick-check@[DUR]`: `[DUR]` is too often: a job runs at most once a second (`[DUR]`)\n");
    Test::new()
        .config("[[serve.job]]\nrunbook = \"quick-check\"\nevery = \"500ms\"\n")
        .args(["config"])
        .run()
        .code(2)
        .stderr_is(
            "error: `serve.job.every`: `[DUR]` is too often: a job runs at most once a second (`[DUR]`)
 --> opsbook.toml:3:1
  |
3 | every = \"[DUR]\"
  | ^
",
        );
}

#[test]
fn a_value_given_to_a_fault_that_takes_none_is_refused() {
    Test::new()
        .args(["run", "quick-check", "--sandbox", "--fault", "metrics-db:down=5"])
        .run()
        .code(2)
        .stdout_is("")
        .stderr_is("error: fault `metrics-db:down=5`: `down` takes no value (remove `=5`)\n");
}

#[test]
fn not_a_number_and_infinity_are_no_value_for_a_number_parameter() {
    let t = Test::new().runbook("m", "let margin = param(\"margin\", 0.5);\ncheck(\"margin\", true, `${margin}`);\n");
    for value in ["NaN", "inf", "-infinity"] {
        let out = t.run_in_place(&["run", "m", "--set", &format!("margin={value}")]);
        assert_eq!(out.0, 2, "{value}: {out:?}");
        assert!(out.2.contains(&format!("`{value}`")), "{value}: {}", out.2);
        assert!(out.1.is_empty(), "{value}: {}", out.1);
    }
}

#[test]
fn a_token_file_linked_to_a_device_gets_no_chmod_advice() {
    let t = Test::new()
        .config("[metrics_db]\ntoken_file = \"token\"\n")
        .runbook("t", "try { influx::buckets(); } catch (e) { check(\"token\", false, e); }");
    symlink("/dev/zero", &t.path().join("token"));
    let out = t.run_in_place(&["run", "t"]);
    assert_eq!(
        out.1.lines().nth(1).unwrap_or_default(),
        "  FAIL  token — error: API token: the token file `token` is a character device, not a regular file: give the path of a file",
        "{out:?}"
    );
    assert!(!out.1.contains("chmod") && !out.2.contains("chmod"), "{out:?}");
}
