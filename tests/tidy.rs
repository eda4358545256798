//! The invariants of ARCHITECTURE.md, as tests (after rust-analyzer's tidy tests): each reads
//! the source and fails, naming the file and line, when an invariant breaks. ARCHITECTURE.md
//! names the test beside each invariant (`every_invariant_names_its_test` holds that).

mod faces;
mod layering;
mod planted;
mod reading;
mod stdlib_names;

use std::path::{Path, PathBuf};

use reading::Source;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The Rust sources under `root/dir` as the rules read them: whole, comments and test-only
/// code left out (`reading.rs`).
fn rust_sources(root: &Path, dir: &str) -> Vec<(PathBuf, Source)> {
    reading::rust_sources(&root.join(dir))
}

/// The `src` folder of each crate under `root/crates`, and the command line's `src`.
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(root.join("crates")).unwrap().flatten().map(|e| e.path().join("src")).collect();
    dirs.sort();
    dirs.push(root.join("src"));
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// Fails naming each violation when there is any.
fn assert_none(found: Vec<String>, what: &str) {
    assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
}

/// Whether `code` calls `name!` itself (not `opsbook_base::name!`, not `writeln!` for `println!`).
fn calls_macro(code: &str, name: &str) -> bool {
    let needle = format!("{name}!");
    code.match_indices(&needle).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    })
}

/// Whether `code` holds `role` as a value of a script's text: `"log-store"`, a pattern's part
/// (`"metrics-agent,log-shipper"`, `` `${env}:&log-shipper` ``), not a word of a sentence.
fn names_in_a_literal(code: &str, role: &str) -> bool {
    code.match_indices(role).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + role.len()..].chars().next();
        matches!(before, Some('"' | ',' | '&' | '`' | '!' | '[')) && matches!(after, Some('"' | ',' | '`' | ']'))
    })
}

/// Invariant: the verbs reach the machine only through the world's traits — no file system,
/// process, network or libc call in `crates/engine/src/verbs`.
#[test]
fn verbs_reach_the_machine_only_through_the_world() {
    assert_none(verbs_touching_the_machine(Path::new(ROOT)), "verbs touching the machine themselves");
}

fn verbs_touching_the_machine(root: &Path) -> Vec<String> {
    // (`std::net`'s address types are data; its sockets are not.)
    let forbidden = [
        "std::fs",
        "std::process",
        "std::net::Tcp",
        "std::net::Udp",
        "libc::",
        "tokio::fs",
        "tokio::process",
        "tokio::net",
    ];
    let mut found = Vec::new();
    for (path, source) in rust_sources(root, "crates/engine/src/verbs") {
        for (n, code) in &source.lines {
            for word in forbidden.iter().filter(|w| code.contains(**w)) {
                found.push(format!("{}:{n}: `{word}` (go through opsbook_world's traits)", shown(root, &path)));
            }
        }
    }
    found
}

/// Invariant: opsbook prints only through the redacting output layer (`opsbook_base::say!`,
/// `tell!`, `say_part!`); clippy refuses the print macros too (`clippy.toml`). The twin, which
/// imitates the vendors' command lines, and the build script are the exceptions they declare.
#[test]
fn only_the_output_layer_prints() {
    let clippy = std::fs::read_to_string(Path::new(ROOT).join("clippy.toml")).unwrap();
    for name in ["std::println", "std::print", "std::eprintln", "std::eprint", "std::dbg"] {
        assert!(clippy.contains(&format!("path = \"{name}\"")), "clippy.toml no longer refuses {name}");
    }
    assert_none(printing_beside_the_output_layer(Path::new(ROOT)), "printing beside the output layer");
}

fn printing_beside_the_output_layer(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for dir in crate_sources(root).into_iter().filter(|d| !d.starts_with(root.join("crates/twin"))) {
        for (path, source) in reading::rust_sources(&dir) {
            for (n, code) in &source.lines {
                for name in ["println", "print", "eprintln", "eprint", "dbg"] {
                    if calls_macro(code, name) {
                        let at = shown(root, &path);
                        found.push(format!("{at}:{n}: `{name}!` (print through opsbook_base::say!/tell!)"));
                    }
                }
            }
        }
    }
    found
}

/// Invariant: each crate depends only on the layers below it (ARCHITECTURE.md's code map, in
/// order): wire on none, base on none, the twin never reached by the engine, … Read from each
/// crate's `[dependencies]` (its tests may use more).
#[test]
fn each_crate_depends_only_on_the_layers_below() {
    assert_none(crates_depending_upward(Path::new(ROOT)), "a crate depending upward or sideways");
}

fn crates_depending_upward(root: &Path) -> Vec<String> {
    let allowed: [(&str, &[&str]); 8] = [
        ("wire", &[]),
        ("base", &[]),
        ("world", &["wire", "base"]),
        ("twin", &["wire", "base", "world"]),
        ("sandbox", &["base", "world", "twin"]),
        ("inventory", &["base"]),
        ("engine", &["wire", "base", "world", "inventory"]),
        ("fleet", &["base", "world", "inventory", "engine", "sandbox"]),
    ];
    let mut found = Vec::new();
    for (krate, below) in allowed {
        let Ok(manifest) = std::fs::read_to_string(root.join(format!("crates/{krate}/Cargo.toml"))) else {
            continue;
        };
        let dependencies = manifest.split("[dependencies]").nth(1).unwrap_or("").split("\n[").next().unwrap_or("");
        for line in dependencies.lines().filter(|l| l.starts_with("opsbook-")) {
            let name = line.trim_start_matches("opsbook-").split([' ', '=', '.']).next().unwrap_or("");
            if !below.contains(&name) {
                found.push(format!("crates/{krate}/Cargo.toml: depends on opsbook-{name}"));
            }
        }
        if krate == "base" && dependencies.lines().any(|l| l.starts_with("rhai")) {
            found.push("crates/base/Cargo.toml: depends on rhai".to_string());
        }
    }
    found
}

/// Invariant: base knows nothing of the fleet — no fleet, rollout or runner in its code (their
/// reports are the fleet crate's: `hosts_report.rs`, `rollout_report.rs`).
#[test]
fn base_knows_no_fleet() {
    assert_none(fleet_in_base(Path::new(ROOT)), "fleet types in base");
}

fn fleet_in_base(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (path, source) in rust_sources(root, "crates/base/src") {
        for (n, code) in &source.lines {
            for word in ["opsbook_fleet", "HostRun", "Rollout", "Batch"] {
                if code.contains(word) {
                    found.push(format!("{}:{n}: `{word}`", shown(root, &path)));
                }
            }
        }
    }
    found
}

/// Invariant: base reaches the machine only in the modules named for it: children are started
/// by the one process runner (`process.rs` and `process/`; base's own use of it is the
/// configured `token_command`), files are read and written by `atomic.rs`, `input.rs`,
/// `components/file.rs` (components.toml) and `secret/token.rs` (the token file), signals
/// are `cancel.rs`'s; no D-Bus or network anywhere in base (the journal and ssh are
/// programs the world runs).
#[test]
fn base_reaches_the_machine_only_in_its_named_modules() {
    assert_none(base_reaching_the_machine(Path::new(ROOT)), "base reaching the machine outside its named modules");
}

fn base_reaching_the_machine(root: &Path) -> Vec<String> {
    let spawning = ["Command::new", "process::Command", "tokio::process", "libc::fork", "libc::exec", "libc::kill"];
    let files = ["std::fs", "tokio::fs"];
    let talking =
        ["std::net::Tcp", "std::net::Udp", "tokio::net", "zbus", "reqwest", "hyper", "UnixStream", "UnixListener"];
    let rules: [(&[&str], &[&str]); 4] = [
        (&spawning, &["process.rs", "process/"]),
        (&files, &["atomic.rs", "input.rs", "components/file.rs", "secret/token.rs", "process/"]),
        (&["libc::sigaction", "libc::signal"], &["cancel.rs"]),
        (&talking, &[]),
    ];
    let mut found = Vec::new();
    for (path, source) in rust_sources(root, "crates/base/src") {
        let inside = shown(&root.join("crates/base/src"), &path);
        for (words, allowed) in rules {
            if allowed.iter().any(|a| inside == *a || (a.ends_with('/') && inside.starts_with(a))) {
                continue;
            }
            for (n, code) in &source.lines {
                for word in words.iter().filter(|w| code.contains(**w)) {
                    found.push(format!("{}:{n}: `{word}`", shown(root, &path)));
                }
            }
        }
    }
    found
}

/// Invariant: every whole file opsbook writes is written by one atomic writer
/// (`opsbook_base::write_atomically`, `Atomic`): no `File::create`, `fs::write` or truncating open elsewhere.
/// Appending to a log, and the writer itself, are not whole-file writes.
#[test]
fn one_atomic_writer_for_every_file() {
    assert_none(whole_file_writes_beside_the_writer(Path::new(ROOT)), "whole files written beside the atomic writer");
}

fn whole_file_writes_beside_the_writer(root: &Path) -> Vec<String> {
    let writer = root.join("crates/base/src/atomic.rs");
    let mut found = Vec::new();
    for dir in crate_sources(root) {
        for (path, source) in reading::rust_sources(&dir).into_iter().filter(|(p, _)| *p != writer) {
            for (n, code) in &source.lines {
                for word in ["File::create", "fs::write(", ".truncate(true)", "create_new(true)"] {
                    if code.contains(word) {
                        found.push(format!(
                            "{}:{n}: `{word}` (write through opsbook_base::write_atomically)",
                            shown(root, &path)
                        ));
                    }
                }
            }
        }
    }
    found
}

/// The component table (`opsbook_base::components`) is the one place a role's name is written:
/// Rust derives its lists from it; stdlib modules and the runbooks dispatch through it
/// (`stack::component`, `verify::component`, the table's functions) instead of naming a role
/// or its alias (`"alloy"` is the log shipper too). A runbook about one component (its name
/// says which) names it; `benign.rhai` is the operators' list of forgiven lines, keyed by
/// component. (In Rust the aliases are also the products' own names — a program, a file
/// extension — so only the roles' names are looked for there.)
#[test]
fn role_names_only_in_the_table() {
    assert_none(role_names_outside_the_table(Path::new(ROOT)), "role names written outside the component table");
}

fn role_names_outside_the_table(root: &Path) -> Vec<String> {
    let built_in = &opsbook_base::components::BUILT_IN;
    let roles: Vec<&str> = built_in.iter().map(|c| c.name).collect();
    let aliases: Vec<&str> = built_in.iter().map(|c| c.alias).collect();
    let about_one = [
        "verify-metrics-db",
        "verify-log-store",
        "verify-metrics-agent",
        "verify-log-shipper",
        "reload-agent",
        "reload-shipper",
        "e2e-logs",
        "e2e-metrics",
        "logs",
    ];
    let mut found = Vec::new();
    for folder in ["stdlib", "runbooks"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else { continue };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if (folder == "runbooks" && about_one.contains(&stem.as_str())) || stem == "benign" {
                continue;
            }
            let source = reading::read(&std::fs::read_to_string(&path).unwrap());
            for (n, code) in &source.lines {
                for role in roles.iter().chain(&aliases).filter(|r| names_in_a_literal(code, r)) {
                    found.push(format!("{}:{n}: \"{role}\"", shown(root, &path)));
                }
            }
        }
    }
    // In Rust: the table itself, and the stand-ins that simulate each component one by one (the
    // twin and the sandbox's faults and boot of each twin) are the only places.
    let table = root.join("crates/base/src/components/built_in.rs");
    let simulations = [root.join("crates/twin"), root.join("crates/sandbox")];
    for dir in crate_sources(root).into_iter().filter(|d| !simulations.iter().any(|s| d.starts_with(s))) {
        for (path, source) in reading::rust_sources(&dir).into_iter().filter(|(p, _)| *p != table) {
            for (n, code) in &source.lines {
                for role in roles.iter().filter(|r| code.contains(&format!("\"{r}\""))) {
                    found.push(format!("{}:{n}: \"{role}\"", shown(root, &path)));
                }
            }
        }
    }
    found
}

/// Each invariant ARCHITECTURE.md states names the test that holds it (`MODULE::test`, a test
/// of `tests/MODULE.rs`, or `MODULE::PART::test` of `tests/MODULE/PART.rs`), and that test exists. An invariant is a paragraph starting with
/// "Architecture invariant"; its tests are named in a line "Held by …" within it.
#[test]
fn every_invariant_names_its_test() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap();
    let invariants = text.to_lowercase().matches("architecture invariant").count();
    assert!(invariants >= 10, "only {invariants} invariants found in ARCHITECTURE.md");
    assert_none(invariants_without_their_test(Path::new(ROOT)), "invariants not held by a test");
}

fn invariants_without_their_test(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    for paragraph in text.split("\n- ").flat_map(|p| p.split("\n\n")).flat_map(|p| p.split("\n**")) {
        let first = paragraph.lines().next().unwrap_or("");
        if !first.to_lowercase().contains("architecture invariant") {
            continue;
        }
        let named: Vec<&str> = paragraph
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| (2..=3).contains(&w.split("::").count()) && !w.contains(' '))
            .collect();
        // `module::test` is a test of tests/module.rs, `module::part::test` of tests/module/part.rs.
        let file_of = |test: &str| {
            let (path, _) = test.rsplit_once("::").unwrap();
            root.join(format!("tests/{}.rs", path.replace("::", "/")))
        };
        let tests: Vec<&str> = named.into_iter().filter(|w| file_of(w).is_file()).collect();
        if tests.is_empty() {
            missing.push(format!("names no test: {first}"));
        }
        for test in tests {
            let (_, name) = test.rsplit_once("::").unwrap();
            let source = std::fs::read_to_string(file_of(test)).unwrap();
            if !source.contains(&format!("fn {name}(")) {
                missing.push(format!("no test `{test}`: {first}"));
            }
        }
    }
    missing
}

/// Every Rust file opens with a `//!` block saying what it is for, and none is longer than
/// 600 lines (a file a reader can hold whole).
#[test]
fn every_file_says_what_it_is_for_and_stays_short() {
    assert_none(files_without_a_doc_block_or_too_long(Path::new(ROOT)), "files to split or to document");
}

fn files_without_a_doc_block_or_too_long(root: &Path) -> Vec<String> {
    let mut files = vec![root.join("build.rs")];
    for dir in ["src", "crates", "tests", "benches"].map(|d| root.join(d)).into_iter().filter(|d| d.is_dir()) {
        files.extend(every_rust_file(&dir));
    }
    let mut found = Vec::new();
    for path in files.into_iter().filter(|p| p.is_file()) {
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.starts_with("//!") {
            found.push(format!("{}: does not open with a `//!` block", shown(root, &path)));
        }
        let lines = text.lines().count();
        if lines > 600 {
            found.push(format!("{}: {lines} lines (at most 600)", shown(root, &path)));
        }
    }
    found
}

/// Every `.rs` file under `dir`, tests and fixtures included.
fn every_rust_file(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            found.extend(every_rust_file(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}
