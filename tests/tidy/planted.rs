//! The tidy rules tested in turn: each is given a scratch copy of the files it reads with one
//! violation planted, and must name it — among them the ways the rules were once fooled: a
//! violation after an item marked `#[cfg(test)]` (not a test module), a `println!` and a
//! `File::create` after sandbox's `#[cfg(test)] mod fault_rehearsals;`, a violation after a
//! `"https://…"` on its line, a role named by its alias. What the rules must not count (a real
//! test module, a test module's own file, a comment) is planted too, and must pass.

use std::path::Path;

use super::{ROOT, reading};

/// A scratch tree holding copies of `files` (paths from the repository's root).
fn scratch(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("crates")).unwrap();
    for file in files {
        let to = dir.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(Path::new(ROOT).join(file), &to).unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    dir
}

/// Adds `lines` at the end of the scratch copy of `file`.
fn plant(root: &Path, file: &str, lines: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, format!("{text}\n{lines}\n")).unwrap();
}

/// That the rule found exactly one violation, in `file`, naming `word`.
fn caught(found: &[String], file: &str, word: &str) {
    assert!(
        found.len() == 1 && found[0].starts_with(file) && found[0].contains(word),
        "expected one violation in {file} naming {word}, found: {found:#?}"
    );
}

const VERBS_FILE: &str = "crates/engine/src/verbs/influx/setup.rs";

#[test]
fn the_verbs_rule_sees_past_an_item_marked_for_tests() {
    let dir = scratch(&[VERBS_FILE]);
    assert_eq!(super::verbs_touching_the_machine(dir.path()), Vec::<String>::new(), "the copy itself is clean");
    plant(
        dir.path(),
        VERBS_FILE,
        "#[cfg(test)]\npub(crate) fn for_tests(dir: &Path) -> [u8; 2] {\n    [0; 2]\n}\n\nfn after() {\n    let _ = std::fs::read(\"x\");\n}",
    );
    caught(&super::verbs_touching_the_machine(dir.path()), VERBS_FILE, "std::fs");
}

#[test]
fn the_verbs_rule_sees_past_a_url_on_the_line() {
    let dir = scratch(&[VERBS_FILE]);
    plant(
        dir.path(),
        VERBS_FILE,
        "fn fetch() {\n    let url = \"https://example.org/a//b\"; let _ = std::fs::read(url);\n}",
    );
    caught(&super::verbs_touching_the_machine(dir.path()), VERBS_FILE, "std::fs");
}

#[test]
fn test_modules_and_comments_are_not_code() {
    let dir = scratch(&[VERBS_FILE]);
    plant(
        dir.path(),
        VERBS_FILE,
        "/* std::fs in a comment /* nested */ std::fs */\n// std::process\n#[cfg(test)]\nmod more_tests {\n    fn f() { let _ = std::fs::read(\"{\"); }\n}\n#[cfg(test)]\nmod rehearsals;",
    );
    plant(dir.path(), "crates/engine/src/verbs/influx/setup/rehearsals.rs", "//! Rehearsals.\nuse std::fs;");
    assert_eq!(super::verbs_touching_the_machine(dir.path()), Vec::<String>::new());
}

#[test]
fn printing_and_writing_after_sandbox_s_test_module_are_caught() {
    let lib = "crates/sandbox/src/lib.rs";
    let dir = scratch(&[lib, "crates/sandbox/src/fault_rehearsals.rs"]);
    assert_eq!(super::printing_beside_the_output_layer(dir.path()), Vec::<String>::new());
    let text = std::fs::read_to_string(dir.path().join(lib)).unwrap();
    let declared = "mod fault_rehearsals;\n";
    assert!(text.contains(declared), "sandbox's lib.rs no longer declares its rehearsals: plant elsewhere");
    let planted = "mod fault_rehearsals;\nfn shout() {\n    println!(\"x\");\n}\nfn write() {\n    let _ = std::fs::File::create(\"y\");\n}\n";
    std::fs::write(dir.path().join(lib), text.replacen(declared, planted, 1)).unwrap();
    caught(&super::printing_beside_the_output_layer(dir.path()), lib, "println!");
    caught(&super::whole_file_writes_beside_the_writer(dir.path()), lib, "File::create");
}

#[test]
fn a_role_named_by_its_alias_is_caught() {
    let stack = "stdlib/stack.rhai";
    let dir = scratch(&[stack]);
    assert_eq!(super::role_names_outside_the_table(dir.path()), Vec::<String>::new());
    plant(dir.path(), stack, "fn shipper() { let url = \"https://x//y\"; inventory::role(\"alloy\") }");
    caught(&super::role_names_outside_the_table(dir.path()), stack, "\"alloy\"");
}

#[test]
fn a_role_named_in_rust_is_caught() {
    let file = "crates/world/src/endpoints.rs";
    let dir = scratch(&[file]);
    plant(dir.path(), file, "const SHIPPER: &str = \"log-shipper\";");
    caught(&super::role_names_outside_the_table(dir.path()), file, "\"log-shipper\"");
}

#[test]
fn base_naming_the_fleet_is_caught() {
    let file = "crates/base/src/pattern.rs";
    let dir = scratch(&[file]);
    plant(dir.path(), file, "fn batch() -> opsbook_fleet::Batch { todo() }");
    let found = super::fleet_in_base(dir.path());
    assert!(found.len() == 2 && found.iter().all(|f| f.starts_with(file)), "{found:#?}");
}

#[test]
fn base_reaching_the_machine_outside_its_modules_is_caught() {
    let file = "crates/base/src/pattern.rs";
    let dir = scratch(&[file, "crates/base/src/process.rs", "crates/base/src/atomic.rs"]);
    assert_eq!(super::base_reaching_the_machine(dir.path()), Vec::<String>::new());
    plant(dir.path(), file, "fn run() {\n    let _ = std::process::Command::new(\"ls\").status();\n}");
    let found = super::base_reaching_the_machine(dir.path());
    assert!(found.len() == 2 && found.iter().all(|f| f.starts_with(&format!("{file}:"))), "{found:#?}");
    let dir = scratch(&[file]);
    plant(dir.path(), file, "fn connect() {\n    let _ = std::net::TcpStream::connect(\"127.0.0.1:1\");\n}");
    caught(&super::base_reaching_the_machine(dir.path()), file, "std::net::Tcp");
}

#[test]
fn a_whole_file_written_beside_the_writer_is_caught() {
    let file = "crates/world/src/local_files.rs";
    let dir = scratch(&[file]);
    assert_eq!(super::whole_file_writes_beside_the_writer(dir.path()), Vec::<String>::new());
    plant(dir.path(), file, "fn save() { std::fs::write(\"x\", \"y\").unwrap() }");
    caught(&super::whole_file_writes_beside_the_writer(dir.path()), file, "fs::write(");
}

#[test]
fn a_crate_depending_upward_is_caught() {
    let manifest = "crates/engine/Cargo.toml";
    let dir = scratch(&[manifest]);
    assert_eq!(super::crates_depending_upward(dir.path()), Vec::<String>::new());
    let text = std::fs::read_to_string(dir.path().join(manifest)).unwrap();
    let planted = text.replacen("[dependencies]\n", "[dependencies]\nopsbook-twin = { path = \"../twin\" }\n", 1);
    std::fs::write(dir.path().join(manifest), planted).unwrap();
    caught(&super::crates_depending_upward(dir.path()), manifest, "opsbook-twin");
}

#[test]
fn an_invariant_naming_a_missing_test_is_caught() {
    let tests: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("tests"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .map(|name| format!("tests/{name}"))
        .collect();
    let parts = ["tests/tidy/stdlib_names.rs", "tests/tidy/layering.rs", "tests/tidy/faces.rs"];
    let files: Vec<&str> =
        std::iter::once("ARCHITECTURE.md").chain(tests.iter().map(String::as_str)).chain(parts).collect();
    let dir = scratch(&files);
    assert_eq!(super::invariants_without_their_test(dir.path()), Vec::<String>::new());
    plant(dir.path(), "ARCHITECTURE.md", "- **Architecture Invariant: planted.** Held by `tidy::no_such_test`.");
    caught(&super::invariants_without_their_test(dir.path()), "no test `tidy::no_such_test`", "planted");
}

#[test]
fn a_file_without_its_doc_block_or_too_long_is_caught() {
    let dir = scratch(&[]);
    plant(dir.path(), "crates/base/src/bare.rs", "fn f() {}");
    caught(&super::files_without_a_doc_block_or_too_long(dir.path()), "crates/base/src/bare.rs", "`//!`");
    let long = format!("//! Long.\n{}", "fn f() {}\n".repeat(600));
    std::fs::write(dir.path().join("crates/base/src/bare.rs"), long).unwrap();
    caught(&super::files_without_a_doc_block_or_too_long(dir.path()), "crates/base/src/bare.rs", "601 lines");
}

#[test]
fn the_reader_keeps_strings_and_leaves_out_comments_and_test_items() {
    let text = "let a = \"//x\"; // gone\nlet b = r#\"/* \"# ; /* gone */ let c = '\"';\n#[cfg(test)]\nuse x::{a, b};\nlet d = 1;";
    let lines = reading::read(text).lines;
    let code: Vec<(usize, String)> =
        lines.iter().map(|(n, l)| (*n, l.split_whitespace().collect::<Vec<_>>().join(" "))).collect();
    let expected = [(1, "let a = \"//x\";"), (2, "let b = r#\"/* \"# ; let c = '\"';"), (5, "let d = 1;")];
    assert_eq!(code, expected.map(|(n, l)| (n, l.to_string())));
}

#[test]
fn one_name_with_two_meanings_in_the_stdlib_is_caught() {
    let dir = scratch(&["stdlib/stack.rhai", "stdlib/checks.rhai"]);
    assert_eq!(super::stdlib_names::names_meaning_two_things(dir.path()), Vec::<String>::new());
    plant(
        dir.path(),
        "stdlib/checks.rhai",
        "/// Hands the call over: one meaning.\nfn component(name) {\n    stack::component(name)\n}",
    );
    assert_eq!(super::stdlib_names::names_meaning_two_things(dir.path()), Vec::<String>::new());
    plant(dir.path(), "stdlib/stack.rhai", "fn unit_active(c) {\n    #{ ok: unit::is_active(c.unit) }\n}");
    let found = super::stdlib_names::names_meaning_two_things(dir.path());
    assert!(found.len() == 1 && found[0].starts_with("`unit_active/1` in stdlib/checks.rhai:"), "{found:#?}");
}

#[test]
fn a_call_of_a_stdlib_function_that_is_not_there_is_caught() {
    let dir = scratch(&["stdlib/lifecycle.rhai", "stdlib/stack.rhai", "runbooks/configure.rhai"]);
    assert_eq!(super::stdlib_names::calls_reaching_nothing(dir.path()), Vec::<String>::new());
    plant(
        dir.path(),
        "runbooks/configure.rhai",
        "let old = lifecycle::component(\"x, y\", |a, b| a);\nstack::component();",
    );
    let found = super::stdlib_names::calls_reaching_nothing(dir.path());
    assert!(
        found.len() == 2 && found[0].contains("`lifecycle::component/2`") && found[1].contains("`stack::component/0`"),
        "{found:#?}"
    );
}

/// The fleet crate's sources, every one (the rule reads a crate's whole tree of modules).
fn fleet_crate() -> Vec<String> {
    let src = Path::new(ROOT).join("crates/fleet/src");
    let mut files: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .map(|name| format!("crates/fleet/src/{name}"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_module_importing_from_above_it_is_caught() {
    let files = fleet_crate();
    let dir = scratch(&files.iter().map(String::as_str).collect::<Vec<_>>());
    let layering = super::layering::imports_upward_or_in_a_loop;
    assert_eq!(layering(dir.path()), Vec::<String>::new(), "the copy itself is clean");
    // What points down or across, a test module's `use super::*` and a macro exported at the
    // root pass.
    plant(
        dir.path(),
        "crates/fleet/src/runner/pool.rs",
        "use crate::job::Job;\nuse super::super::session::{self, Session};\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::Root;\n}\nmacro_rules! said { () => {}; }\nfn f() { crate::said!(); }",
    );
    assert_eq!(layering(dir.path()), Vec::<String>::new(), "downward paths, tests and macros pass");
    // The root's own item (or one of its façade), in a `use` tree.
    plant(dir.path(), "crates/fleet/src/runner/pool.rs", "use crate::{Root as R, job};");
    caught(&layering(dir.path()), "crates/fleet/src/runner/pool.rs", "`Root` from `crate (the crate root)`");
    // The parent's, written in code.
    let dir = scratch(&files.iter().map(String::as_str).collect::<Vec<_>>());
    plant(dir.path(), "crates/fleet/src/runner/pool.rs", "fn g() -> Option<super::Pool> { None }");
    caught(&layering(dir.path()), "crates/fleet/src/runner/pool.rs", "`Pool` from `crate::runner`");
}

#[test]
fn modules_importing_each_other_in_a_loop_are_caught() {
    let files = fleet_crate();
    let dir = scratch(&files.iter().map(String::as_str).collect::<Vec<_>>());
    let layering = super::layering::imports_upward_or_in_a_loop;
    plant(dir.path(), "crates/fleet/src/liveness/beat.rs", "use crate::runner::Runner;");
    assert_eq!(layering(dir.path()), Vec::<String>::new(), "one way is no loop");
    plant(dir.path(), "crates/fleet/src/runner/pool.rs", "fn h(_: crate::liveness::beat::Beat) {}");
    let found = layering(dir.path());
    assert!(
        found.len() == 1
            && found[0].starts_with("`crate (the crate root)`: its modules import each other in a loop")
            && found[0].contains("liveness → runner (crates/fleet/src/liveness/beat.rs:")
            && found[0].contains("runner → liveness (crates/fleet/src/runner/pool.rs:"),
        "{found:#?}"
    );
}

#[test]
fn a_crate_root_with_a_sixth_public_module_is_caught() {
    let lib = "crates/wire/src/lib.rs";
    let dir = scratch(&[lib]);
    let faces = super::faces::crate_roots_with_too_many_public_modules;
    assert_eq!(faces(dir.path()), Vec::<String>::new(), "the copy itself has five");
    // A module for the crate alone, a test module and a comment are not public modules.
    plant(
        dir.path(),
        lib,
        "pub(crate) mod inner;
#[cfg(test)]
pub mod rehearsals;
// pub mod said;",
    );
    assert_eq!(faces(dir.path()), Vec::<String>::new(), "pub(crate), tests and comments pass");
    plant(dir.path(), lib, "#[doc(hidden)] pub mod sixth;");
    caught(&faces(dir.path()), lib, "6 public modules (at most 5)");
    assert!(faces(dir.path())[0].ends_with("sixth; make the others private behind `pub use`"));
}
