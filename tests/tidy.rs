//! The invariants of ARCHITECTURE.md, as tests (after rust-analyzer's tidy tests): each reads
//! the source and fails, naming the file and line, when an invariant breaks. ARCHITECTURE.md
//! names the test beside each invariant (`every_invariant_names_its_test` holds that).

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The `.rs` files under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())).flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// A file's lines before its `#[cfg(test)]` module, comments left out, with their numbers.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        if !code.trim().is_empty() {
            lines.push((i + 1, code.to_string()));
        }
    }
    lines
}

fn shown(path: &Path) -> String {
    path.strip_prefix(ROOT).unwrap_or(path).display().to_string()
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
    for path in rust_files(&Path::new(ROOT).join("crates/engine/src/verbs")) {
        for (n, code) in code_lines(&path) {
            for word in forbidden.iter().filter(|w| code.contains(**w)) {
                found.push(format!("{}:{n}: `{word}` (go through opsbook_world's traits)", shown(&path)));
            }
        }
    }
    assert!(found.is_empty(), "verbs touching the machine themselves:\n{}", found.join("\n"));
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
    let mut found = Vec::new();
    let crates = std::fs::read_dir(Path::new(ROOT).join("crates")).unwrap().flatten().map(|e| e.path().join("src"));
    for dir in
        crates.chain([Path::new(ROOT).join("src")]).filter(|d| !d.starts_with(Path::new(ROOT).join("crates/twin")))
    {
        for path in rust_files(&dir) {
            for (n, code) in code_lines(&path) {
                for name in ["println", "print", "eprintln", "eprint", "dbg"] {
                    if calls_macro(&code, name) {
                        found.push(format!("{}:{n}: `{name}!` (print through opsbook_base::say!/tell!)", shown(&path)));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "printing beside the output layer:\n{}", found.join("\n"));
}

/// Invariant: each crate depends only on the layers below it (ARCHITECTURE.md's code map, in
/// order): wire on none, base on none, the twin never reached by the engine, … Read from each
/// crate's `[dependencies]` (its tests may use more).
#[test]
fn each_crate_depends_only_on_the_layers_below() {
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
        let manifest = std::fs::read_to_string(Path::new(ROOT).join(format!("crates/{krate}/Cargo.toml"))).unwrap();
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
    assert!(found.is_empty(), "a crate depending upward or sideways:\n{}", found.join("\n"));
}

/// Invariant: base knows nothing of the fleet — no fleet, rollout or runner in its code (their
/// reports are the fleet crate's: `hosts_report.rs`, `rollout_report.rs`).
#[test]
fn base_knows_no_fleet() {
    let mut found = Vec::new();
    for path in rust_files(&Path::new(ROOT).join("crates/base/src")) {
        for (n, code) in code_lines(&path) {
            for word in ["opsbook_fleet", "HostRun", "Rollout", "Batch"] {
                if code.contains(word) {
                    found.push(format!("{}:{n}: `{word}`", shown(&path)));
                }
            }
        }
    }
    assert!(found.is_empty(), "fleet types in base:\n{}", found.join("\n"));
}

/// Invariant: every whole file opsbook writes is written by one atomic writer
/// (`opsbook_base::atomic`): no `File::create`, `fs::write` or truncating open elsewhere.
/// Appending to a log, and the writer itself, are not whole-file writes.
#[test]
fn one_atomic_writer_for_every_file() {
    let writer = Path::new(ROOT).join("crates/base/src/atomic.rs");
    let mut found = Vec::new();
    let crates = std::fs::read_dir(Path::new(ROOT).join("crates")).unwrap().flatten().map(|e| e.path().join("src"));
    for dir in crates.chain([Path::new(ROOT).join("src")]) {
        for path in rust_files(&dir).into_iter().filter(|p| *p != writer) {
            for (n, code) in code_lines(&path) {
                for word in ["File::create", "fs::write(", ".truncate(true)", "create_new(true)"] {
                    if code.contains(word) {
                        found.push(format!("{}:{n}: `{word}` (write through opsbook_base::atomic)", shown(&path)));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "whole files written beside the atomic writer:\n{}", found.join("\n"));
}

/// The component table (`opsbook_base::components`) is the one place a role's name is written:
/// Rust derives its lists from it; stdlib modules and the runbooks dispatch through it (`stack::component`, `verify::component`, the table's
/// functions) instead of naming a role. A runbook about one component (its name says which)
/// names it; `benign.rhai` is the operators' list of forgiven lines, keyed by component.
#[test]
fn role_names_only_in_the_table() {
    let roles = ["\"metrics-db\"", "\"log-store\"", "\"metrics-agent\"", "\"log-shipper\""];
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
        for e in std::fs::read_dir(Path::new(ROOT).join(folder)).unwrap().flatten() {
            let path = e.path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if (folder == "runbooks" && about_one.contains(&stem.as_str())) || stem == "benign" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for role in roles.iter().filter(|r| names_in_a_literal(code, r.trim_matches('"'))) {
                    found.push(format!("{}:{}: {role}", shown(&path), i + 1));
                }
            }
        }
    }
    // In Rust: the table itself, and the stand-ins that simulate each component one by one (the
    // twin and the sandbox's faults and boot of each twin) are the only places.
    let table = Path::new(ROOT).join("crates/base/src/components/built_in.rs");
    let crates = std::fs::read_dir(Path::new(ROOT).join("crates")).unwrap().flatten().map(|e| e.path().join("src"));
    let simulations = [Path::new(ROOT).join("crates/twin"), Path::new(ROOT).join("crates/sandbox")];
    for dir in crates.chain([Path::new(ROOT).join("src")]).filter(|d| !simulations.iter().any(|s| d.starts_with(s))) {
        for path in rust_files(&dir).into_iter().filter(|p| *p != table) {
            for (n, code) in code_lines(&path) {
                for role in roles.iter().filter(|r| code.contains(**r)) {
                    found.push(format!("{}:{n}: {role}", shown(&path)));
                }
            }
        }
    }
    assert!(found.is_empty(), "role names written outside the component table:\n{}", found.join("\n"));
}

/// Each invariant ARCHITECTURE.md states names the test that holds it (`MODULE::test`, a test
/// of `tests/MODULE.rs`), and that test exists. An invariant is a paragraph starting with
/// "Architecture invariant"; its tests are named in a line "Held by …" within it.
#[test]
fn every_invariant_names_its_test() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    let mut invariants = 0;
    for paragraph in text.split("\n- ").flat_map(|p| p.split("\n\n")).flat_map(|p| p.split("\n**")) {
        let first = paragraph.lines().next().unwrap_or("");
        if !first.to_lowercase().contains("architecture invariant") {
            continue;
        }
        invariants += 1;
        let named: Vec<&str> = paragraph
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| w.split("::").count() == 2 && !w.contains(' '))
            .collect();
        let tests: Vec<&str> = named
            .into_iter()
            .filter(|w| Path::new(ROOT).join(format!("tests/{}.rs", w.split("::").next().unwrap())).is_file())
            .collect();
        if tests.is_empty() {
            missing.push(format!("names no test: {first}"));
        }
        for test in tests {
            let (module, name) = test.split_once("::").unwrap();
            let source = std::fs::read_to_string(Path::new(ROOT).join(format!("tests/{module}.rs"))).unwrap();
            if !source.contains(&format!("fn {name}(")) {
                missing.push(format!("no test `{test}`: {first}"));
            }
        }
    }
    assert!(invariants >= 10, "only {invariants} invariants found in ARCHITECTURE.md");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
