//! One name for one thing across the stdlib: no public function of the same name and arity in
//! two modules unless one only hands the call to the other (then they mean the same); every
//! `module::name(…)` call in the stdlib and the runbooks reaches a public function of the
//! module it imports, with that many arguments; every function the component table names
//! (`verify`, `ready`, `serving`, `evidence`, `set_up`) is in the module that calls it.
//! A name a reader meets in two modules with two meanings once gave a rollout gate a wrong
//! verdict (it called `lifecycle::component` for its own module's helper).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;

use super::{ROOT, assert_none, reading, shown};

/// A public function of a stdlib module.
struct Function {
    module: String,
    name: String,
    arity: usize,
    /// Its body, its code only (comments out, strings blanked).
    body: String,
    line: usize,
}

#[test]
fn one_name_one_meaning_across_the_stdlib() {
    assert_none(names_meaning_two_things(Path::new(ROOT)), "a stdlib name with two meanings");
}

#[test]
fn every_call_of_a_stdlib_function_reaches_it() {
    assert_none(calls_reaching_nothing(Path::new(ROOT)), "calls of stdlib functions that do not exist");
}

fn rhai_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "rhai")).collect();
    files.sort();
    files
}

fn module_name(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// How many arguments a parenthesised list holds: its top-level commas, `(` at `open`. A
/// closure's parameters (`|a, b|`) count as one argument.
fn arity_at(code: &[char], open: usize) -> (usize, usize) {
    let (mut depth, mut commas, mut empty, mut in_pipes) = (0usize, 0, true, false);
    for (i, c) in code.iter().enumerate().skip(open) {
        if i > open && depth >= 1 && !c.is_whitespace() && !(*c == ')' && depth == 1) {
            empty = false;
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return (if empty { 0 } else { commas + 1 }, i);
                }
            }
            '|' if depth == 1 => in_pipes = !in_pipes,
            ',' if depth == 1 && !in_pipes => commas += 1,
            _ => {}
        }
    }
    (if empty { 0 } else { commas + 1 }, code.len())
}

/// The public functions of the stdlib under `root`.
fn public_functions(root: &Path) -> Vec<Function> {
    let definition = Regex::new(r"(?m)^[ \t]*(private[ \t]+)?fn[ \t]+(\w+)[ \t]*\(").unwrap();
    let mut found = Vec::new();
    for path in rhai_files(&root.join("stdlib")) {
        let code = reading::code_only(&std::fs::read_to_string(&path).unwrap());
        let chars: Vec<char> = code.chars().collect();
        for m in definition.captures_iter(&code) {
            if m.get(1).is_some() {
                continue;
            }
            let open = code[..m.get(0).unwrap().end()].chars().count() - 1;
            let (arity, close) = arity_at(&chars, open);
            let body_open = chars[close..].iter().position(|&c| c == '{').map_or(chars.len(), |p| close + p);
            let (_, body_close) = arity_at(&chars, body_open);
            found.push(Function {
                module: module_name(&path),
                name: m[2].to_string(),
                arity,
                body: chars[body_open..body_close.min(chars.len())].iter().collect(),
                line: code[..m.get(0).unwrap().start()].matches('\n').count() + 1,
            });
        }
    }
    found
}

/// Whether `f`'s body only hands the call to `other` (`{ other::name(…) }`).
fn hands_to(f: &Function, other: &Function) -> bool {
    let body = f.body.trim_start_matches('{').trim_end_matches('}').trim().trim_end_matches(';');
    body.starts_with(&format!("{}::{}(", other.module, other.name)) && !body.contains(';')
}

pub(super) fn names_meaning_two_things(root: &Path) -> Vec<String> {
    let mut by_name: BTreeMap<(String, usize), Vec<Function>> = BTreeMap::new();
    for f in public_functions(root) {
        by_name.entry((f.name.clone(), f.arity)).or_default().push(f);
    }
    let mut found = Vec::new();
    for ((name, arity), functions) in by_name.into_iter().filter(|(_, fs)| fs.len() > 1) {
        let all_one = functions
            .iter()
            .all(|f| functions.iter().any(|g| g.module != f.module && (hands_to(f, g) || hands_to(g, f))));
        if !all_one {
            let places: Vec<String> =
                functions.iter().map(|f| format!("stdlib/{}.rhai:{}", f.module, f.line)).collect();
            found.push(format!("`{name}/{arity}` in {} (rename one, or have one call the other)", places.join(", ")));
        }
    }
    found
}

pub(super) fn calls_reaching_nothing(root: &Path) -> Vec<String> {
    let functions = public_functions(root);
    let exists = |module: &str, name: &str, arity: usize| {
        functions.iter().any(|f| f.module == module && f.name == name && f.arity == arity)
    };
    let import = Regex::new(r#"import\s+"(\w+)"\s+as\s+(\w+)"#).unwrap();
    let call = Regex::new(r"\b(\w+)::(\w+)[ \t]*\(").unwrap();
    let mut found = Vec::new();
    for path in rhai_files(&root.join("stdlib")).into_iter().chain(rhai_files(&root.join("runbooks"))) {
        let text = std::fs::read_to_string(&path).unwrap();
        let aliases: BTreeMap<String, String> =
            import.captures_iter(&text).map(|m| (m[2].to_string(), m[1].to_string())).collect();
        let code = reading::code_only(&text);
        let chars: Vec<char> = code.chars().collect();
        for m in call.captures_iter(&code) {
            let Some(module) = aliases.get(&m[1]) else { continue };
            if rhai_files(&root.join("stdlib")).iter().all(|p| module_name(p) != *module) {
                continue;
            }
            let open = code[..m.get(0).unwrap().end()].chars().count() - 1;
            let (arity, _) = arity_at(&chars, open);
            if !exists(module, &m[2], arity) {
                let line = code[..m.get(0).unwrap().start()].matches('\n').count() + 1;
                found.push(format!(
                    "{}:{line}: `{}::{}/{arity}` is no public function of stdlib/{module}.rhai",
                    shown(root, &path),
                    &m[1],
                    &m[2]
                ));
            }
        }
    }
    // The table's functions, called through `Fn(c.FIELD)` by the module that dispatches them.
    for c in opsbook_base::components::BUILT_IN {
        for (field, name, module, arity) in [
            ("verify", c.behaviour.verify, "verify", 1),
            ("ready", c.behaviour.ready, "stack", 1),
            ("serving", c.behaviour.serving, "evidence", 1),
            ("evidence", c.behaviour.evidence, "evidence", 2),
            ("set_up", c.behaviour.set_up, "lifecycle", 2),
        ] {
            let dispatcher = root.join(format!("stdlib/{module}.rhai"));
            if !name.is_empty() && dispatcher.is_file() && !exists(module, name, arity) {
                found.push(format!(
                    "the table's `{field}` of {}: `{name}/{arity}` is not in stdlib/{module}.rhai",
                    c.name
                ));
            }
        }
    }
    found
}
