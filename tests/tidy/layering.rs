//! Layering inside each crate, read from its paths: no module imports one that stands above it,
//! and no modules import each other in a loop.
//!
//! A crate's modules form a tree: the crate root (`lib.rs`, `main.rs`) holds the modules it
//! declares, a folder's `mod.rs` (or the file `name.rs` beside the folder `name/`) the modules
//! of that folder. A module **stands above** another when it is one of its ancestors in that
//! tree: the crate root stands above every module, `verbs/mod.rs` above `verbs/unit.rs` and
//! `verbs/unit/start.rs`. Siblings, and their descendants, do not stand above each other.
//!
//! - **Nothing points up.** A path written in a module — in a `use` declaration or in code,
//!   starting `crate::` or `super::` — may name its ancestors only on the way down to another
//!   module: `use crate::error::Error` and `use super::manager::Manager` are fine, `use
//!   super::Manager` (an item of the parent) and `use crate::World` (an item of the root) point
//!   up. An ancestor's façade (`pub use` lines) is for other crates; inside the crate, modules
//!   name the module an item lives in. Macros exported at the root (`crate::say!`) are the
//!   exception Rust makes: `#[macro_export]` puts them there.
//! - **No loops.** Under each module, its children import each other (a child's files naming
//!   another child's, at any depth) without a loop: `a → b → c → a` among siblings fails, be
//!   they files or folders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{ROOT, assert_none, crate_sources, reading, shown};

/// A module's place in its crate: the names from the crate root down (`[]` is the root).
type ModulePath = Vec<String>;

/// Invariant: inside each crate no module imports one that stands above it, and no modules
/// import each other in a loop (the definitions: this file's top, ARCHITECTURE.md).
#[test]
fn no_module_imports_one_above_it_nor_in_a_loop() {
    let found = imports_upward_or_in_a_loop(Path::new(ROOT));
    assert_none(found, "imports pointing up or in a loop");
}

/// Where one module names another: the file and line that does, and what it names.
struct Import {
    file: PathBuf,
    line: usize,
    from: ModulePath,
    path: Vec<String>,
}

pub(super) fn imports_upward_or_in_a_loop(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for src in crate_sources(root) {
        let sources = reading::rust_sources(&src);
        let modules: BTreeSet<ModulePath> = sources.iter().map(|(path, _)| module_of(&src, path)).collect();
        let macros: BTreeSet<String> = sources.iter().flat_map(|(_, s)| macros_defined(&s.code)).collect();
        let mut edges: BTreeMap<(ModulePath, String, String), &Import> = BTreeMap::new();
        let imports: Vec<Import> = sources
            .iter()
            .flat_map(|(path, source)| {
                let from = module_of(&src, path);
                paths_named(&source.code).into_iter().map(move |(line, path_named)| Import {
                    file: path.clone(),
                    line,
                    from: from.clone(),
                    path: path_named,
                })
            })
            .collect();
        for import in &imports {
            let (module, item) = resolve(&import.from, &import.path, &modules);
            let above = module.len() < import.from.len() && import.from.starts_with(&module);
            if above && !item.as_ref().is_some_and(|i| macros.contains(i)) {
                let what = item.map_or_else(|| "the module itself".to_string(), |i| format!("`{i}`"));
                found.push(format!(
                    "{}:{}: imports {what} from `{}`, which stands above it",
                    shown(root, &import.file),
                    import.line,
                    shown_module(&module)
                ));
            }
            let common = import.from.iter().zip(&module).take_while(|(a, b)| a == b).count();
            if import.from.len() > common && module.len() > common {
                let parent = import.from[..common].to_vec();
                let key = (parent, import.from[common].clone(), module[common].clone());
                edges.entry(key).or_insert(import);
            }
        }
        found.extend(loops(root, &edges));
    }
    found
}

/// The module a file holds: `lib.rs`/`main.rs` the root, `a/mod.rs` and `a.rs` the module `a`.
fn module_of(src: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut names: ModulePath = relative.iter().map(|n| n.to_string_lossy().into_owned()).collect();
    if names.len() == 1 && (names[0] == "lib" || names[0] == "main") || names.last().is_some_and(|n| n == "mod") {
        names.pop();
    }
    names
}

fn shown_module(module: &[String]) -> String {
    if module.is_empty() { "crate (the crate root)".to_string() } else { format!("crate::{}", module.join("::")) }
}

/// The names of the `macro_rules!` a file defines.
fn macros_defined(code: &[(usize, String)]) -> Vec<String> {
    code.iter()
        .filter_map(|(_, line)| line.split("macro_rules!").nth(1))
        .filter_map(|rest| rest.split(|c: char| !is_identifier(c)).find(|w| !w.is_empty()))
        .map(str::to_string)
        .collect()
}

fn is_identifier(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Each path starting `crate::` or `super::` the code names, with its line: those of the `use`
/// declarations (their braces expanded) and those written in code.
fn paths_named(code: &[(usize, String)]) -> Vec<(usize, Vec<String>)> {
    let mut text = String::new();
    let mut starts = Vec::new();
    for (number, line) in code {
        starts.push((text.len(), *number));
        text.push_str(line);
        text.push('\n');
    }
    let line_at = |at: usize| starts[starts.partition_point(|(start, _)| *start <= at) - 1].1;
    let mut found = Vec::new();
    let mut in_use = vec![false; text.len()];
    for at in word_positions(&text, "use") {
        let Some(end) = text[at..].find(';').map(|e| at + e) else { continue };
        in_use[at..end].fill(true);
        let mut paths = Vec::new();
        expand(&text[at + 3..end], &[], &mut paths);
        found.extend(paths.into_iter().filter(|p| starts_up_or_at_root(p)).map(|p| (line_at(at), p)));
    }
    for word in ["crate", "super"] {
        for at in word_positions(&text, word).filter(|&at| !in_use[at] && text[at + word.len()..].starts_with("::")) {
            if text[..at].ends_with('$') {
                continue;
            }
            let segments: Vec<String> = text[at..]
                .split("::")
                .map(|s| s.trim_start())
                .map_while(|s| {
                    let name: String = s.chars().take_while(|&c| is_identifier(c)).collect();
                    (!name.is_empty()).then_some(name)
                })
                .collect();
            found.push((line_at(at), segments));
        }
    }
    found
}

fn starts_up_or_at_root(path: &[String]) -> bool {
    path.first().is_some_and(|first| first == "crate" || first == "super")
}

/// Where `word` stands alone in `text` (not part of a longer name, not after `::`).
fn word_positions<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(word).map(|(at, _)| at).filter(move |&at| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_identifier)
            && !text[..at].ends_with("::")
            && !after.is_some_and(is_identifier)
            && (word != "use" || after.is_some_and(char::is_whitespace))
    })
}

/// The paths a `use` tree names, its braces expanded and `as` renamings dropped.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let close = tree.rfind('}').unwrap_or(tree.len());
        let mut inner_prefix = prefix.to_vec();
        inner_prefix.extend(segments(&tree[..open]));
        for part in top_level_parts(&tree[open + 1..close]) {
            expand(part, &inner_prefix, out);
        }
    } else if !tree.is_empty() {
        let tree = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix.to_vec();
        path.extend(segments(tree).into_iter().filter(|s| s != "self"));
        out.push(path);
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// The comma-separated parts of a brace's content, nested braces kept whole.
fn top_level_parts(inner: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// The module `path` reaches from `from`, and the first name past it (`None`: the module
/// itself).
fn resolve(from: &[String], path: &[String], modules: &BTreeSet<ModulePath>) -> (ModulePath, Option<String>) {
    let mut at: ModulePath = from.to_vec();
    for (i, segment) in path.iter().enumerate() {
        match segment.as_str() {
            "crate" if i == 0 => at.clear(),
            "super" => {
                at.pop();
            }
            "self" => {}
            name => {
                let mut child = at.clone();
                child.push(name.to_string());
                if !modules.contains(&child) {
                    return (at, Some(name.to_string()));
                }
                at = child;
            }
        }
    }
    (at, None)
}

/// The loops among siblings: each once, with where each of its arrows is written.
fn loops(root: &Path, edges: &BTreeMap<(ModulePath, String, String), &Import>) -> Vec<String> {
    let mut found = Vec::new();
    let parents: BTreeSet<&ModulePath> = edges.keys().map(|(p, _, _)| p).collect();
    for parent in parents {
        let next: BTreeMap<&str, Vec<&str>> =
            edges.keys().filter(|(p, _, _)| p == parent).fold(BTreeMap::new(), |mut map, (_, a, b)| {
                map.entry(a.as_str()).or_insert_with(Vec::new).push(b.as_str());
                map
            });
        let mut seen_loops: BTreeSet<Vec<&str>> = BTreeSet::new();
        for &start in next.keys() {
            let Some(cycle) = loop_through(start, &next) else { continue };
            let mut key = cycle.clone();
            key.sort();
            if !seen_loops.insert(key) {
                continue;
            }
            let arrows: Vec<String> = cycle
                .iter()
                .zip(cycle.iter().skip(1).chain(std::iter::once(&cycle[0])))
                .map(|(a, b)| {
                    let import = edges[&(parent.clone(), a.to_string(), b.to_string())];
                    format!("{a} → {b} ({}:{})", shown(root, &import.file), import.line)
                })
                .collect();
            found.push(format!(
                "`{}`: its modules import each other in a loop: {}",
                shown_module(parent),
                arrows.join(", ")
            ));
        }
    }
    found
}

/// The shortest loop from `start` back to it, if any (a breadth-first walk).
fn loop_through<'a>(start: &'a str, next: &BTreeMap<&'a str, Vec<&'a str>>) -> Option<Vec<&'a str>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for &to in next.get(at).into_iter().flatten() {
            if to == start {
                let mut cycle = vec![at];
                while let Some(&prev) = came_from.get(cycle.last().unwrap()) {
                    cycle.push(prev);
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !came_from.contains_key(to) && to != start {
                came_from.insert(to, at);
                queue.push_back(to);
            }
        }
    }
    None
}
