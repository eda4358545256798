//! Modules importing each other in a circle (#36, item 4): refused with the circle named
//! (`a → b → a`) by `run`, `repl`, `serve` and `check`, never a stack overflow; a serve job
//! that cannot import its modules leaves the service and its other jobs running. A property
//! test runs random import graphs (circles, self-imports, shared modules) through the real
//! module resolver in-process and through `check`'s finder, against a reference.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config as Cases, TestRunner};

use crate::serve::{get, until};
use crate::support::Test;
use crate::support::ports::free_port;

const A_IMPORTS_B: &str = "import \"b\" as b;\nfn from_a() { 1 }\n";
const B_IMPORTS_A: &str = "import \"a\" as a;\nfn from_b() { 2 }\n";
const RUNBOOK: &str = "import \"a\" as a;\ncheck(\"imported\", true);\n";

fn circle() -> Test {
    Test::new().module("a", A_IMPORTS_B).module("b", B_IMPORTS_A).runbook("r", RUNBOOK)
}

const CIRCLE_DIAGNOSTIC: &str =
    "error: modules import each other in a circle (a → b → a): move what they share into a module of its own
 --> stdlib/b.rhai:1:8
  |
1 | import \"a\" as a;
  |        ^
  = note: importing module `a`, called at stdlib/b.rhai:1:8
  = note: importing module `b`, called at stdlib/a.rhai:1:8
  = note: importing module `a`, called at runbooks/r.rhai:1:8
";

const STOPPED: &str = "r (runbooks/r.rhai)

stopped by a script error (see stderr)

0 passed, 0 failed  ([DUR])
";

#[test]
fn run_refuses_a_circle_of_imports_naming_it() {
    circle().args(["run", "r"]).run().code(2).stderr_is(CIRCLE_DIAGNOSTIC).stdout_is(STOPPED);
}

#[test]
fn run_refuses_a_module_importing_itself() {
    Test::new()
        .module("a", "import \"a\" as me;\nfn f() { 1 }\n")
        .runbook("r", RUNBOOK)
        .args(["run", "r"])
        .run()
        .code(2)
        .stdout_is(STOPPED)
        .stderr_is(
            "error: module `a` imports itself (a → a): remove that import
 --> stdlib/a.rhai:1:8
  |
1 | import \"a\" as me;
  |        ^
  = note: importing module `a`, called at stdlib/a.rhai:1:8
  = note: importing module `a`, called at runbooks/r.rhai:1:8
",
        );
}

#[test]
fn check_finds_each_circle_once_and_a_self_import() {
    circle().module("c", "import \"c\" as c;\n").args(["check"]).run().code(2).stdout_is("").stderr_is(
        "error: modules import each other in a circle (a → b → a): move what they share into a module of its own
error: module `c` imports itself (c → c): remove that import
",
    );
}

#[test]
fn the_repl_refuses_the_import_and_goes_on() {
    let refused = CIRCLE_DIAGNOSTIC.replace("runbooks/r.rhai", "<repl>");
    circle()
        .args(["repl"])
        .stdin("import \"a\" as a;\nprint(40 + 2);\n")
        .run()
        .code(0)
        .stdout_is("")
        .stderr_is(&format!("{refused}42\n"));
}

#[test]
fn a_serve_job_with_a_circle_fails_alone_and_the_service_stays_up() {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let serve = circle()
        .runbook("fine", "check(\"fine\", true);\n")
        .args(["serve", "--sandbox", "r@1s", "fine@1s", "--listen", &format!("127.0.0.1:{port}")])
        .spawn();
    // The failing job makes the service say so (503), and it goes on answering.
    until(&format!("{base}/healthz"), 503, Duration::from_secs(20));
    // Both jobs have run twice and the service still answers.
    crate::support::wait_until("two runs of each job", Duration::from_secs(20), || {
        let runs: serde_json::Value = serde_json::from_str(&get(&format!("{base}/api/runs")).1).unwrap_or_default();
        let count =
            |name: &str| runs["runs"].as_array().map_or(0, |r| r.iter().filter(|run| run["runbook"] == name).count());
        if count("r") >= 2 && count("fine") >= 2 { Ok(runs) } else { Err(runs.to_string()) }
    });
    let runs: serde_json::Value = serde_json::from_str(&get(&format!("{base}/api/runs")).1).unwrap();
    let refused = runs["runs"].as_array().unwrap().iter().find(|run| run["runbook"] == "r").unwrap();
    assert_eq!(refused["outcome"], "error", "{refused}");
    let (status, health) = get(&format!("{base}/healthz"));
    assert_eq!(status, 503, "{health}");
    assert!(health.contains("r: error"), "{health}");
    serve.signal(libc::SIGTERM);
    assert_eq!(serve.wait(Duration::from_secs(30)).0.code, 0);
}

/// An import graph over modules `m0`…: for each module, the modules it imports in order.
fn graphs() -> impl Strategy<Value = Vec<Vec<usize>>> {
    (1usize..=5).prop_flat_map(|n| prop::collection::vec(prop::collection::vec(0..n, 0..3), n))
}

/// Whether a circle is reachable from `m0`: a module reachable from `m0` reaches itself.
fn circle_expected(graph: &[Vec<usize>]) -> bool {
    let n = graph.len();
    let mut reach = vec![vec![false; n]; n];
    for (from, to) in graph.iter().enumerate() {
        for &t in to {
            reach[from][t] = true;
        }
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                reach[i][j] |= reach[i][k] && reach[k][j];
            }
        }
    }
    (0..n).any(|v| (v == 0 || reach[0][v]) && reach[v][v])
}

/// The circle a message names is one of the graph's: consecutive modules import each other
/// and it ends where it started.
fn names_a_circle_of(message: &str, graph: &[Vec<usize>]) -> Result<(), TestCaseError> {
    let inside = message.split_once('(').and_then(|(_, rest)| rest.split_once(')')).map(|(c, _)| c);
    let names: Vec<usize> = inside
        .unwrap_or_default()
        .split(" → ")
        .map(|m| m.trim_start_matches('m').parse().unwrap_or(usize::MAX))
        .collect();
    prop_assert!(names.len() >= 2 && names.first() == names.last(), "no circle named in {message:?}");
    for pair in names.windows(2) {
        prop_assert!(graph.get(pair[0]).is_some_and(|to| to.contains(&pair[1])), "{message:?} for {graph:?}");
    }
    Ok(())
}

#[test]
fn random_import_graphs_either_import_or_name_a_real_circle() {
    use opsbook_base::report::{End, Format, Mode, Recorder, formatter};
    use opsbook_engine::catalog::{Catalog, Kind};
    let dir = tempfile::tempdir().unwrap();
    for folder in ["runbooks", "stdlib"] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    std::fs::write(dir.path().join("runbooks/r.rhai"), "import \"m0\" as m;\ncheck(\"imported\", true);\n").unwrap();
    let cases = Cases { cases: 64, failure_persistence: None, ..Cases::default() };
    TestRunner::new(cases)
        .run(&graphs(), |graph| {
            for entry in std::fs::read_dir(dir.path().join("stdlib")).unwrap() {
                std::fs::remove_file(entry.unwrap().path()).unwrap();
            }
            for (i, imports) in graph.iter().enumerate() {
                let lines: String = imports.iter().map(|j| format!("import \"m{j}\" as i{j};\n")).collect();
                std::fs::write(dir.path().join(format!("stdlib/m{i}.rhai")), format!("{lines}fn f{i}() {{ {i} }}\n"))
                    .unwrap();
            }
            let expected = circle_expected(&graph);
            // What `check` finds, without running anything.
            let static_find = opsbook_engine::find_import_cycle("m0", &mut |m: &str| {
                let i: usize = m[1..].parse().unwrap();
                graph[i].iter().map(|j| format!("m{j}")).collect()
            });
            prop_assert_eq!(static_find.is_some(), expected, "check's finder on {:?}", graph);
            if let Some(cycle) = &static_find {
                names_a_circle_of(&format!("({})", cycle.path()), &graph)?;
            }
            // What a run does: a fresh session (no module cached from the last case).
            let catalog = Arc::new(Catalog::new(&[dir.path().join("runbooks")]));
            let config = opsbook_base::config::Config::defaults();
            let world = opsbook_world::World::real(&config);
            let session = opsbook_fleet::Session::new(config, world, catalog.clone(), Mode::default());
            let compiled = catalog.find(Kind::Runbook, "r").and_then(|e| session.compile_entry(e)).unwrap();
            // What the run would show on stderr is kept, and read: the circle's diagnostic.
            let (report, shown) = opsbook_base::secret::capturing_stderr(|| {
                session.run_recorded(&compiled, &[], |name, source, shown, mode| {
                    let quiet = formatter(Format::Json, false);
                    Recorder::with_output(name, source, shown, mode, quiet, Box::new(std::io::sink()))
                })
            });
            let report = report.unwrap();
            match (&report.end, expected) {
                (End::Completed, false) => {
                    prop_assert_eq!(report.summary().passed, 1);
                    prop_assert_eq!(shown, "");
                }
                (End::ScriptError(message), true) => {
                    names_a_circle_of(message, &graph)?;
                    let headline = shown.lines().next().unwrap_or_default();
                    prop_assert_eq!(headline, format!("error: {message}"), "shown: {}", shown);
                    prop_assert!(shown.contains(" --> "), "the diagnostic points at the import: {}", shown);
                }
                (end, _) => prop_assert!(false, "{:?} for {:?} (circle expected: {})", end, graph, expected),
            }
            Ok(())
        })
        .unwrap();
}
