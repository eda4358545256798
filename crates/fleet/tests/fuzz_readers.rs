//! The fuzz target of the readers (#28): the configuration (with its `[hosts]`, `[groups]`
//! and `[[serve.job]]`), the inventory (YAML and INI), templates and runbooks are fed
//! arbitrary text — valid files cut, spliced and salted with the characters their syntax
//! turns on, and random bytes — and must never panic: each reads, or refuses with an error
//! naming the file (a syntax error with its line and column).
//!
//! Runs in-process through the libraries (no process per case), with a bounded number of
//! cases and no failure files written: a few seconds in all. A failure prints the input
//! proptest shrank it to. It lives in the fleet crate, the top of the crates it reads through
//! (base's configuration, the inventory, engine's templates and catalog, the fleet session's
//! compiler): `cargo test -p opsbook-fleet --test fuzz_readers`.

// Tests report to the developer running them (`skipped: why`).
#![allow(clippy::disallowed_macros)]

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config as Cases, TestRunner};

use opsbook_base::config::{Config, Sources};
use opsbook_engine::catalog::{Catalog, Kind};
use opsbook_inventory::Inventory;

/// Cases per reader: enough to reach every branch the seeds open, few enough for CI
/// (`OPSBOOK_FUZZ_CASES=N` runs more, to fuzz for longer by hand).
const CASES: u32 = 96;

const CONFIG_SEEDS: &[&str] = &[
    "[metrics_db]\nurl = \"http://127.0.0.1:8086\"\ntoken = \"abc\"\norg = \"o\"\n[http]\ntimeout = \"5s\"\n",
    "[serve]\nlisten = \"127.0.0.1:9464\"\n[[serve.job]]\nrunbook = \"quick-check\"\nevery = \"1m\"\nparams = { a = 1 }\nhosts = [\"web*\"]\n",
    "[hosts.web1]\naddress = \"10.0.0.1\"\nroles = [\"log-store\"]\nconfig.log_store.url = \"http://10.0.0.1:3100\"\n[groups.web]\nhosts = [\"web1\"]\nroles = [\"metrics-agent\"]\n",
    "[limits]\nmax_operations = 1000\n[ssh]\npersist = \"0s\"\noptions = \"StrictHostKeyChecking=no\"\n",
];

const YAML_SEEDS: &[&str] = &[
    "all:\n  hosts:\n    h1:\n      ansible_host: 10.0.0.1\n      ansible_port: 2222\n  children:\n    web:\n      hosts:\n        h2:\n      vars:\n        opsbook_roles: [log-store]\n",
    "all:\n  children:\n    a:\n      children:\n        b:\n          hosts:\n            h1: { ansible_user: ops }\n",
    "web:\n  hosts:\n    w[01:03].example.com:\n  vars:\n    x: \"{{ lookup('env', 'HOME') }}\"\n",
];

const INI_SEEDS: &[&str] = &[
    "h1 ansible_host=10.0.0.1\n[web]\nw1 ansible_port=2222\nw[1:3]\n[web:vars]\nopsbook_roles=log-store\n[all:children]\nweb\n",
    "[a:children]\nb\n[b]\nh1 ansible_user=ops x=\"{{ 1 + 1 }}\"\n",
];

const TEMPLATE_SEEDS: &[&str] = &[
    "[agent]\n  interval = \"{{ interval }}\"\n{% for u in urls %}\n  url = \"{{ u }}\"\n{% endfor %}\n",
    "{% if x %}{{ x | upper }}{% else %}{# none #}{% endif %}\n{% set y = [1, 2] %}{{ y | length }}\n",
    "{% include \"other.j2\" %}\n{{ range(3) | list }}\n",
];

const RUNBOOK_SEEDS: &[&str] = &[
    "//! A runbook.\nlet window = param(\"window\", \"5m\");\nimport \"checks\" as checks;\nsection(\"units\");\ncheck(\"ok\", true, `window ${window}`);\n",
    "fn f(x) { if x > 1 { x * f(x - 1) } else { 1 } }\nlet m = #{ a: [1, 2, #{ b: \"c\" }] };\nfor i in 0..3 { print(f(i)); }\n",
    "let r = http::probe(\"http://127.0.0.1:1/\", #{ timeout: \"1s\" });\nswitch r.ok { true => check(\"x\", true), _ => throw \"no\" }\n",
];

/// What syntax turns on: quotes, brackets, separators, template and Rhai delimiters, deep
/// nesting, control characters, long and non-ASCII text.
const SALT: &[&str] = &[
    "\"",
    "'",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "(",
    ")",
    "=",
    ":",
    ",",
    "\n",
    "\t",
    "\r\n",
    "\0",
    "#",
    "\\",
    "`",
    "${",
    "::",
    "..",
    "- ",
    "  ",
    "é",
    "\u{feff}",
    "\u{202e}",
    "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    "{{{{{{{{{{{{{{{{{{{{{{{{",
    "99999999999999999999999",
    "-1",
    "0s",
    "[a:b]",
    "[1:999999999]",
    "&a",
    "*a",
    "!!",
    "%YAML 1.2\n---\n",
];

/// An edit of a seed: at a fraction of its length, insert salt, delete some characters, or
/// cut the rest.
#[derive(Debug, Clone)]
enum Edit {
    Insert(u16, usize),
    Delete(u16, u8),
    Cut(u16),
    Repeat(u16, u8),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        4 => (any::<u16>(), 0..SALT.len()).prop_map(|(at, s)| Edit::Insert(at, s)),
        2 => (any::<u16>(), 1u8..40).prop_map(|(at, n)| Edit::Delete(at, n)),
        1 => any::<u16>().prop_map(Edit::Cut),
        1 => (any::<u16>(), 2u8..50).prop_map(|(at, n)| Edit::Repeat(at, n)),
    ];
    prop::collection::vec(edit, 1..8)
}

/// `seed` with `edits` applied (positions scaled to its length, kept on character bounds).
fn edited(seed: &str, edits: &[Edit]) -> String {
    let mut text: Vec<char> = seed.chars().collect();
    let at = |text: &Vec<char>, p: u16| (p as usize * (text.len() + 1)) / (u16::MAX as usize + 1);
    for e in edits {
        match *e {
            Edit::Insert(p, s) => {
                let i = at(&text, p);
                text.splice(i..i, SALT[s].chars());
            }
            Edit::Delete(p, n) => {
                let i = at(&text, p);
                let end = (i + n as usize).min(text.len());
                text.drain(i..end);
            }
            Edit::Cut(p) => {
                let i = at(&text, p);
                text.truncate(i);
            }
            Edit::Repeat(p, n) => {
                let i = at(&text, p);
                let piece: Vec<char> = text[i..(i + 8).min(text.len())].to_vec();
                for _ in 0..n {
                    text.splice(i..i, piece.iter().copied());
                }
            }
        }
    }
    text.into_iter().collect()
}

/// Inputs for a reader: edited seeds mostly, and now and then raw bytes.
fn inputs(seeds: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => (0..seeds.len(), edits()).prop_map(move |(i, e)| edited(seeds[i], &e).into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..300),
    ]
}

fn runner() -> TestRunner {
    let cases = std::env::var("OPSBOOK_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(CASES);
    TestRunner::new(Cases { cases, failure_persistence: None, ..Cases::default() })
}

/// An error that names `file` (the reader said which file; a syntax error says where in it).
fn names_the_file(message: &str, file: &Path) -> Result<(), TestCaseError> {
    let name = file.file_name().unwrap().to_string_lossy();
    prop_assert!(message.contains(name.as_ref()), "the error does not name `{name}`:\n{message}");
    Ok(())
}

#[test]
fn the_configuration_reader_reads_or_refuses_arbitrary_text_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz.toml");
    runner()
        .run(&inputs(CONFIG_SEEDS), |bytes| {
            std::fs::write(&path, &bytes).unwrap();
            let sources = Sources { explicit: Some(path.clone()), user_scope: false };
            match Config::load(&sources) {
                Ok(config) => {
                    // Its [hosts] and [groups] are the TOML inventory.
                    if let Err(e) = Inventory::load(&config, None) {
                        names_the_file(&e.to_string(), &path)?;
                    }
                }
                Err(e) => names_the_file(&e.to_string(), &path)?,
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_inventory_readers_read_or_refuse_arbitrary_yaml_and_ini_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::defaults();
    for (name, seeds) in [("hosts.yml", YAML_SEEDS), ("hosts.ini", INI_SEEDS)] {
        let path = dir.path().join(name);
        runner()
            .run(&inputs(seeds), |bytes| {
                std::fs::write(&path, &bytes).unwrap();
                if let Err(e) = Inventory::load(&config, Some(&path)) {
                    names_the_file(&e.to_string(), &path)?;
                }
                Ok(())
            })
            .unwrap();
    }
}

#[test]
fn the_template_reader_renders_or_refuses_arbitrary_text_naming_the_template() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("runbooks")).unwrap();
    std::fs::create_dir_all(dir.path().join("templates")).unwrap();
    std::fs::write(dir.path().join("templates/other.j2"), "other {{ x }}\n").unwrap();
    let path = dir.path().join("templates/fuzz.j2");
    let catalog = Arc::new(Catalog::new(&[dir.path().join("runbooks")]));
    let mut vars = rhai::Map::new();
    vars.insert("x".into(), "value".into());
    vars.insert("interval".into(), "10s".into());
    vars.insert("urls".into(), rhai::Dynamic::from_array(vec!["http://a".into(), "http://b".into()]));
    runner()
        .run(&inputs(TEMPLATE_SEEDS), |bytes| {
            std::fs::write(&path, &bytes).unwrap();
            if let Err(e) = opsbook_engine::verbs::template::render(&catalog, "fuzz.j2", &vars) {
                prop_assert!(e.contains("fuzz.j2") || e.contains("other.j2"), "the error names no template:\n{e}");
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_runbook_reader_compiles_or_refuses_arbitrary_text_naming_the_runbook() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("runbooks")).unwrap();
    let path = dir.path().join("runbooks/fuzz.rhai");
    let catalog = Arc::new(Catalog::new(&[dir.path().join("runbooks")]));
    let config = Config::defaults();
    let world = opsbook_world::World::real(&config);
    let mode = opsbook_base::report::Mode { dry_run: true, ..Default::default() };
    let session = opsbook_fleet::Session::new(config, world, catalog.clone(), mode);
    runner()
        .run(&inputs(RUNBOOK_SEEDS), |bytes| {
            std::fs::write(&path, &bytes).unwrap();
            let compiled = catalog.find(Kind::Runbook, "fuzz").and_then(|entry| session.compile_entry(entry));
            if let Err(e) = compiled {
                names_the_file(&e.to_string(), &path)?;
            }
            Ok(())
        })
        .unwrap();
}
