//! Reading source the way the tidy rules need it: the whole file, its comments left out (a `//`
//! inside a string such as `"https://…"` is text, not a comment), and what `#[cfg(test)]` marks
//! left out as exactly what it marks — one item (a function, a `use`, an `impl`), a module's
//! block, or the file of a module declared `#[cfg(test)] mod name;`. Rust and Rhai alike (Rhai's
//! back-quoted strings are strings too).

use std::path::{Path, PathBuf};

/// What a character of a source text belongs to.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Code,
    Text,
    Comment,
    /// Marked `#[cfg(test)]`: compiled for tests only.
    TestOnly,
}

/// A source file as the rules read it.
pub(super) struct Source {
    /// The lines holding code or text once comments and test-only items are left out, with
    /// their numbers (from 1).
    pub(super) lines: Vec<(usize, String)>,
    /// The modules it declares `#[cfg(test)] mod name;` (their files are test code).
    pub(super) test_modules: Vec<String>,
    /// Whether the whole file is test code (`#![cfg(test)]`).
    pub(super) only_for_tests: bool,
    /// The same lines as `lines` with every string's characters made `_`: code alone, for
    /// reading paths and `use` declarations.
    pub(super) code: Vec<(usize, String)>,
}

/// Reads `text` (a Rust or Rhai source).
pub(super) fn read(text: &str) -> Source {
    let chars: Vec<char> = text.chars().collect();
    let mut kinds = kinds(&chars);
    let test_modules = leave_out_test_items(&chars, &mut kinds);
    let only_for_tests = code_contains(&chars, &kinds, "#![cfg(test)]");
    let lines = kept_lines(&chars, &kinds, |c, _| c);
    let code = kept_lines(&chars, &kinds, |c, kind| if kind == Kind::Text { '_' } else { c });
    Source { lines, test_modules, only_for_tests, code }
}

/// The lines of `chars` holding code or text, numbered from 1: comments and test-only items
/// made blank, each kept character written as `show` says.
fn kept_lines(chars: &[char], kinds: &[Kind], show: impl Fn(char, Kind) -> char) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut number = 1;
    for (c, kind) in chars.iter().zip(kinds) {
        if *c == '\n' {
            if !line.trim().is_empty() {
                lines.push((number, std::mem::take(&mut line)));
            }
            line.clear();
            number += 1;
        } else if matches!(kind, Kind::Code | Kind::Text) {
            line.push(show(*c, *kind));
        } else {
            line.push(' ');
        }
    }
    if !line.trim().is_empty() {
        lines.push((number, line));
    }
    lines
}

/// `text` with its comments made blank and its strings made `_`s (lines kept where they were):
/// code alone, for counting a call's arguments or finding its definitions.
pub(super) fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars
        .iter()
        .zip(kinds(&chars))
        .map(|(c, kind)| match kind {
            _ if *c == '\n' => '\n',
            Kind::Code => *c,
            Kind::Text => '_',
            Kind::Comment | Kind::TestOnly => ' ',
        })
        .collect()
}

/// The `.rs` files under `dir`, sorted, without the files of modules declared for tests only
/// (`#[cfg(test)] mod name;`) nor files that say `#![cfg(test)]`; each with how the rules read it.
pub(super) fn rust_sources(dir: &Path) -> Vec<(PathBuf, Source)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())).flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let source = read(&std::fs::read_to_string(&path).unwrap());
                found.push((path, source));
            }
        }
    }
    let test_files: Vec<PathBuf> = found
        .iter()
        .flat_map(|(path, source)| source.test_modules.iter().flat_map(|m| module_files(path, m)))
        .collect();
    found.retain(|(path, source)| !source.only_for_tests && !test_files.contains(path));
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Where the module `name` declared in `file` may live (`name.rs`, `name/mod.rs`).
fn module_files(file: &Path, name: &str) -> [PathBuf; 2] {
    let dir = file.parent().unwrap();
    let stem = file.file_stem().unwrap().to_string_lossy();
    let base = if ["lib", "main", "mod"].contains(&stem.as_ref()) { dir.to_path_buf() } else { dir.join(&*stem) };
    [base.join(format!("{name}.rs")), base.join(name).join("mod.rs")]
}

fn is_identifier(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Each character's kind: code, inside a string or character literal (its quotes included), or
/// inside a comment (line, block — nested — or doc comment).
fn kinds(chars: &[char]) -> Vec<Kind> {
    let mut kinds = vec![Kind::Code; chars.len()];
    let mut i = 0;
    while i < chars.len() {
        let (kind, end) = match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('/')) => (Kind::Comment, line_end(chars, i)),
            ('/', Some('*')) => (Kind::Comment, block_comment_end(chars, i)),
            ('"' | '`', _) => (Kind::Text, string_end(chars, i, chars[i])),
            ('r', Some('#' | '"')) if raw_string_may_start(chars, i) => match raw_string_end(chars, i) {
                Some(end) => (Kind::Text, end),
                None => (Kind::Code, i + 1),
            },
            ('\'', Some('\\')) => (Kind::Text, string_end(chars, i, '\'')),
            ('\'', Some(_)) if chars.get(i + 2) == Some(&'\'') => (Kind::Text, i + 3),
            _ => (Kind::Code, i + 1),
        };
        kinds[i..end].fill(kind);
        i = end;
    }
    kinds
}

fn line_end(chars: &[char], from: usize) -> usize {
    chars[from..].iter().position(|&c| c == '\n').map_or(chars.len(), |p| from + p)
}

fn block_comment_end(chars: &[char], from: usize) -> usize {
    let (mut depth, mut i) = (0, from);
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => (depth, i) = (depth + 1, i + 2),
            ('*', '/') if depth == 1 => return i + 2,
            ('*', '/') => (depth, i) = (depth - 1, i + 2),
            _ => i += 1,
        }
    }
    chars.len()
}

/// The end of a string opened by `quote` at `from` (past its closing quote), escapes skipped.
fn string_end(chars: &[char], from: usize, quote: char) -> usize {
    let mut i = from + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// Whether the `r` at `at` starts a word (`r"…"`, `br#"…"#`), not ends an identifier.
fn raw_string_may_start(chars: &[char], at: usize) -> bool {
    let before = |n: usize| at.checked_sub(n).map(|i| chars[i]);
    match before(1) {
        Some('b') => !before(2).is_some_and(is_identifier),
        Some(c) => !is_identifier(c),
        None => true,
    }
}

/// The end of a raw string starting at `from` (`r##"…"##`), or `None` when it is not one (`r#type`).
fn raw_string_end(chars: &[char], from: usize) -> Option<usize> {
    let hashes = chars[from + 1..].iter().take_while(|&&c| c == '#').count();
    let open = from + 1 + hashes;
    if chars.get(open) != Some(&'"') {
        return None;
    }
    let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
    let end =
        (open + 1..chars.len()).find(|&i| chars[i..].starts_with(&closing)).map_or(chars.len(), |i| i + closing.len());
    Some(end)
}

fn code_contains(chars: &[char], kinds: &[Kind], needle: &str) -> bool {
    code_positions(chars, kinds, needle).next().is_some()
}

/// Where `needle` stands in code (not in a string or comment).
fn code_positions<'a>(chars: &'a [char], kinds: &'a [Kind], needle: &str) -> impl Iterator<Item = usize> + 'a {
    let needle: Vec<char> = needle.chars().collect();
    (0..chars.len()).filter(move |&i| {
        chars[i..].starts_with(&needle) && kinds[i..i + needle.len()].iter().all(|k| *k == Kind::Code)
    })
}

/// Marks each item `#[cfg(test)]` stands on as test-only, through the end of the item: its `;`
/// or its closing brace, brackets counted in code only. Returns the modules declared for tests
/// by a `mod name;`.
fn leave_out_test_items(chars: &[char], kinds: &mut [Kind]) -> Vec<String> {
    const MARK: &str = "#[cfg(test)]";
    let mut test_modules = Vec::new();
    let starts: Vec<usize> = code_positions(chars, kinds, MARK).collect();
    let items: Vec<(usize, usize)> =
        starts.into_iter().map(|start| (start, item_end(chars, kinds, start + MARK.len()))).collect();
    for (start, end) in items {
        let item: String = chars[start + MARK.len()..end].iter().collect();
        let words: Vec<&str> = item.split(|c: char| !is_identifier(c)).filter(|w| !w.is_empty()).collect();
        if item.trim_end().ends_with(';')
            && !item.contains('{')
            && let Some(at) = words.iter().position(|w| *w == "mod")
        {
            test_modules.extend(words.get(at + 1).map(|w| w.to_string()));
        }
        for kind in &mut kinds[start..end] {
            if *kind != Kind::Comment {
                *kind = Kind::TestOnly;
            }
        }
    }
    test_modules
}

/// The end of the item starting at `from`: past its `;` or its closing brace, brackets counted
/// in code only.
fn item_end(chars: &[char], kinds: &[Kind], from: usize) -> usize {
    let mut depth = 0usize;
    for (i, c) in chars.iter().enumerate().skip(from) {
        if kinds[i] != Kind::Code {
            continue;
        }
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth = depth.saturating_sub(1);
                if *c == '}' && depth == 0 {
                    // `use a::{b, c};`: the `;` after the brace is the item's too.
                    let rest = (i + 1..chars.len()).find(|&j| !chars[j].is_whitespace());
                    return rest.filter(|&j| chars[j] == ';' && kinds[j] == Kind::Code).map_or(i + 1, |j| j + 1);
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    chars.len()
}
