//! A sandbox that is one (#36, item 1): every changing verb of the registry (read back from
//! `opsbook fns --json`, not a hand list) is called in the sandbox with paths that climb out
//! of its root (`/../../../../…`), and nothing outside the root changes; a program is never
//! run (`host::exec` is refused in words) and a read cannot climb out either.

use crate::support::{Test, run_in};

/// The value given for a parameter of `kind`, aiming every text at `target` from above `/`.
fn argument(name: &str, kind: &str, target: &str) -> String {
    let climbing = format!("/../../../../../../..{target}");
    match kind {
        "i64" => "1".into(),
        "bool" => "true".into(),
        "Map" => format!("#{{ mode: \"0777\", backup: true, path: \"{climbing}\" }}"),
        "Array" if name == "argv" => format!("[\"touch\", \"{target}\"]"),
        "Array" => format!("[\"{climbing}\"]"),
        _ => format!("\"{climbing}\""),
    }
}

/// `ns::name(args)` for one signature of `opsbook fns --json` (`ns::name(p: kind, …) -> …`).
fn call(signature: &str, target: &str) -> String {
    let (name, rest) = signature.split_once('(').unwrap();
    let params = rest.split_once(')').unwrap().0;
    let args: Vec<String> = params
        .split(", ")
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, kind) = p.split_once(": ").unwrap_or((p, ""));
            argument(name, kind.trim_start_matches('&'), target)
        })
        .collect();
    format!("{name}({})", args.join(", "))
}

#[test]
fn every_changing_verb_with_hostile_paths_changes_nothing_outside_the_sandbox() {
    let outside = tempfile::Builder::new().prefix("opsbook-outside").tempdir_in("/tmp").unwrap();
    std::fs::write(outside.path().join("keep"), "kept").unwrap();
    std::fs::write(outside.path().join("unread"), "this machine's").unwrap();
    let unread = outside.path().join("unread").display().to_string();
    let target = outside.path().join("made").display().to_string();
    let keep = outside.path().join("keep").display().to_string();

    let t = Test::new();
    let fns = run_in(t.path(), &["fns", "--json"], None).code(0).json();
    let mut calls = Vec::new();
    for f in fns.as_array().unwrap() {
        let namespace = f["namespace"].as_str().unwrap_or_default();
        if f["effect"] != "changes" || namespace.is_empty() {
            continue;
        }
        for aim in [&target, &keep] {
            calls.push(call(f["signature"].as_str().unwrap(), aim));
        }
    }
    // file::, unit::, pkg::, account::, host::, firewall:: … all of them, whatever is added.
    assert!(calls.len() > 80 && calls.iter().any(|c| c.starts_with("host::exec(")), "{calls:?}");
    let mut runbook = String::new();
    for c in &calls {
        runbook.push_str(&format!("try {{ {c}; }} catch (e) {{ }}\n"));
    }
    runbook.push_str(&format!(
        "let read = file::read(\"/../../../../..{unread}\");\ncheck(\"a read stays inside\", read == (), `${{read}}`);\n\
         check(\"walked\", true, \"{} calls\");\n",
        calls.len()
    ));
    let t = t.runbook("walk", &runbook);
    let out = run_in(t.path(), &["run", "walk", "--sandbox", "--timeout", "5m", "--format", "json"], None);
    let checks: Vec<(String, String)> = out.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["outcome"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        checks,
        [("a read stays inside".to_string(), "pass".to_string()), ("walked".to_string(), "pass".to_string())],
        "{}",
        out.stdout
    );

    let mut left: Vec<String> =
        std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    left.sort();
    assert_eq!(left, ["keep", "unread"]);
    assert_eq!(std::fs::read_to_string(outside.path().join("keep")).unwrap(), "kept");
}

#[test]
fn a_program_is_refused_in_words_in_the_sandbox() {
    let outside = tempfile::Builder::new().prefix("opsbook-outside").tempdir_in("/tmp").unwrap();
    let target = outside.path().join("made");
    Test::new()
        .runbook("x", &format!("host::exec([\"sh\", \"-c\", \"touch {}\"]);\n", target.display()))
        .args(["run", "x", "--sandbox"])
        .run()
        .code(1)
        .stdout_is(
            "x (runbooks/x.rhai)  [sandbox: in-process stack]

aborted: in the sandbox, `sh` is not run: the sandbox runs no program on this machine (only the agent's and the shipper's offline configuration checks, answered in-process)
  help: rehearse with --dry-run, or run against a real host

0 passed, 0 failed  ([DUR])
",
        );
    assert!(!target.exists());
}
