//! Where runbooks and stdlib modules are found.
//!
//! A runbook is looked up by name in, highest first: `--runbooks DIR` (repeatable, first
//! wins), `$OPSBOOK_PATH` (colon-separated), `./runbooks`, `$XDG_CONFIG_HOME/opsbook/runbooks`,
//! `/etc/opsbook/runbooks`, then the copies built into the binary. A stdlib module
//! (`import "stack" as stack;`) is looked up in the `stdlib` folder beside each of those
//! runbook folders, in the same order, then among the built-in modules. The first file found
//! wins, so an operator overrides a built-in by dropping a file of the same name higher up.
//!
//! Components added to the stack's four are read from the `components.toml` beside each of
//! those runbook folders (`component_files`, `opsbook_base::components::file`).
//!
//! The catalog also remembers the text of every file it handed out, keyed by the source name
//! the engine sees, so diagnostics can quote the offending line, and the modules whose top
//! level only declares (constants, functions, imports): compiled and evaluated once, they
//! serve every session of a run (a fleet of a hundred hosts compiles `stack` once).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use opsbook_base::Error;
use opsbook_base::suggest;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// Runbook or module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A runbook (`runbooks/NAME.rhai`).
    Runbook,
    /// A module runbooks import (`stdlib/NAME.rhai`).
    Module,
}

/// Where an entry comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A folder of the search path.
    Dir(PathBuf),
    /// Embedded in the binary.
    BuiltIn,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Dir(d) => write!(f, "{}", d.display()),
            Origin::BuiltIn => f.write_str("built-in"),
        }
    }
}

/// A runbook or module with its text.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name (`verify`, no `.rhai`).
    pub name: String,
    /// Runbook or module.
    pub kind: Kind,
    /// Where it was found.
    pub origin: Origin,
    /// What diagnostics call the file: its path, or `<built-in>/runbooks/NAME.rhai`.
    pub source: String,
    /// Its text.
    pub text: Arc<str>,
}

/// One folder on the search path.
#[derive(Debug, Clone)]
pub struct SearchDir {
    /// The folder's runbooks.
    pub runbooks: PathBuf,
    /// The `stdlib` folder beside it, for modules.
    pub stdlib: PathBuf,
    /// Why it is on the path (`--runbooks`, `$OPSBOOK_PATH`, …).
    pub reason: &'static str,
}

#[derive(Debug, Default)]
/// Where runbooks, modules and templates are found: the search path's folders before the
/// built-ins; each text read once.
pub struct Catalog {
    dirs: Vec<SearchDir>,
    texts: Mutex<HashMap<String, Arc<str>>>,
    /// Modules shared by every engine of this catalog, by import path.
    modules: Mutex<HashMap<String, rhai::Shared<rhai::Module>>>,
    /// Each module's parse, with the text parsed, by import path: a module that cannot be
    /// shared (its top level reads `config` or calls) is evaluated by every host's engine, from
    /// one parse.
    parses: Mutex<HashMap<String, (Arc<str>, rhai::AST)>>,
}

impl Catalog {
    /// The module `path` as an engine of this catalog evaluated it, when it can be shared.
    pub(crate) fn shared_module(&self, path: &str) -> Option<rhai::Shared<rhai::Module>> {
        self.modules.lock().unwrap_or_else(|e| e.into_inner()).get(path).cloned()
    }

    /// Keeps a module whose top level only declares, for the other engines of this catalog.
    pub(crate) fn share_module(&self, path: &str, module: rhai::Shared<rhai::Module>) {
        self.modules.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_string(), module);
    }

    /// The parse of module `path` kept by `keep_parse`, when it is of exactly `text`.
    pub(crate) fn parsed_module(&self, path: &str, text: &str) -> Option<rhai::AST> {
        let parses = self.parses.lock().unwrap_or_else(|e| e.into_inner());
        parses.get(path).filter(|(parsed, _)| **parsed == *text).map(|(_, ast)| ast.clone())
    }

    /// Keeps the parse of module `path` (of `text`) for the other engines of this catalog.
    pub(crate) fn keep_parse(&self, path: &str, text: &Arc<str>, ast: &rhai::AST) {
        self.parses.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_string(), (text.clone(), ast.clone()));
    }

    /// Forgets the shared modules and parses (the REPL's reload reads them again).
    pub fn forget_modules(&self) {
        self.modules.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.parses.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The search path for these `--runbooks` folders and the environment.
    pub fn new(cli_dirs: &[PathBuf]) -> Catalog {
        let mut dirs: Vec<(PathBuf, &'static str)> = cli_dirs.iter().map(|d| (d.clone(), "--runbooks")).collect();
        dirs.extend(opsbook_path().into_iter().map(|p| (p, "$OPSBOOK_PATH")));
        dirs.push((PathBuf::from("runbooks"), "working directory"));
        if let Some(config) = opsbook_base::config::xdg_config_home() {
            dirs.push((config.join("opsbook/runbooks"), "$XDG_CONFIG_HOME"));
        }
        dirs.push((PathBuf::from("/etc/opsbook/runbooks"), "system"));
        let dirs = dirs
            .into_iter()
            .map(|(runbooks, reason)| {
                let stdlib = runbooks.parent().unwrap_or(Path::new("")).join("stdlib");
                SearchDir { runbooks, stdlib, reason }
            })
            .collect();
        Catalog { dirs, texts: Mutex::default(), modules: Mutex::default(), parses: Mutex::default() }
    }

    /// The folders searched, in order.
    pub fn search_path(&self) -> &[SearchDir] {
        &self.dirs
    }

    /// The `components.toml` beside each runbook folder, highest first (those that exist add
    /// components to the table).
    pub fn component_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.runbooks.parent().unwrap_or(Path::new("")).join("components.toml")).collect()
    }

    /// Adds the components of `component_files` to the table, once, before anything reads it.
    pub fn install_components(&self) -> Result<(), Error> {
        let added = opsbook_base::components::file::read(&self.component_files())?;
        opsbook_base::components::install(added).map_err(Error::Usage)
    }

    fn folders(&self, kind: Kind) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(move |d| match kind {
            Kind::Runbook => d.runbooks.as_path(),
            Kind::Module => d.stdlib.as_path(),
        })
    }

    fn built_ins(kind: Kind) -> &'static [(&'static str, &'static str)] {
        match kind {
            Kind::Runbook => embedded::RUNBOOKS,
            Kind::Module => embedded::STDLIB,
        }
    }

    /// Every name of this kind with the entry that wins, sorted by name.
    pub fn all(&self, kind: Kind) -> Result<Vec<Entry>, Error> {
        let mut found: BTreeMap<String, Entry> = BTreeMap::new();
        for dir in self.folders(kind) {
            let Ok(read) = std::fs::read_dir(dir) else { continue };
            let mut paths: Vec<PathBuf> = read.filter_map(Result::ok).map(|e| e.path()).collect();
            paths.sort();
            for path in paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "rhai") && p.is_file()) {
                let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
                if !found.contains_key(&name) {
                    found.insert(name.clone(), self.load_file(&name, kind, dir, &path)?);
                }
            }
        }
        for (name, text) in Self::built_ins(kind) {
            if !found.contains_key(*name) {
                found.insert(name.to_string(), self.built_in(name, kind, text));
            }
        }
        Ok(found.into_values().collect())
    }

    /// The winning entry for `name`, or an error suggesting close names.
    pub fn find(&self, kind: Kind, name: &str) -> Result<Entry, Error> {
        // A path (`./try.rhai`, `drafts/x.rhai`) runs that file: handy while writing one.
        if kind == Kind::Runbook && name.contains('/') {
            let path = Path::new(name);
            // Anything there is read (a folder, FIFO or device refused naming it), not passed over.
            if path.exists() {
                let stem = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
                return self.load_file(&stem, kind, path.parent().unwrap_or(Path::new(".")), path);
            }
            return Err(Error::Usage(format!("no runbook file `{name}`")));
        }
        let name = name.strip_suffix(".rhai").unwrap_or(name);
        if valid_name(name) {
            for dir in self.folders(kind) {
                let path = dir.join(format!("{name}.rhai"));
                if path.exists() {
                    return self.load_file(name, kind, dir, &path);
                }
            }
            if let Some((_, text)) = Self::built_ins(kind).iter().find(|(n, _)| *n == name) {
                return Ok(self.built_in(name, kind, text));
            }
        }
        let all = self.all(kind)?;
        let suggestions = suggest(name, all.iter().map(|e| e.name.as_str()));
        Err(match kind {
            Kind::Runbook => Error::UnknownRunbook { name: name.to_string(), suggestions },
            Kind::Module => Error::UnknownModule { name: name.to_string(), suggestions },
        })
    }

    fn load_file(&self, name: &str, kind: Kind, dir: &Path, path: &Path) -> Result<Entry, Error> {
        let what = match kind {
            Kind::Runbook => opsbook_base::InputKind::RUNBOOK,
            Kind::Module => opsbook_base::InputKind::MODULE,
        };
        let text: Arc<str> = opsbook_base::read_text_or(path, what, |source| Error::Io {
            context: format!("cannot read `{}`", path.display()),
            source,
        })?
        .into();
        let source = path.display().to_string();
        self.remember(&source, &text);
        Ok(Entry { name: name.to_string(), kind, origin: Origin::Dir(dir.to_path_buf()), source, text })
    }

    fn built_in(&self, name: &str, kind: Kind, text: &'static str) -> Entry {
        let folder = match kind {
            Kind::Runbook => "runbooks",
            Kind::Module => "stdlib",
        };
        let source = format!("<built-in>/{folder}/{name}.rhai");
        let text: Arc<str> = text.into();
        self.remember(&source, &text);
        Entry { name: name.to_string(), kind, origin: Origin::BuiltIn, source, text }
    }

    /// Registers a text under a source name (also used for REPL input and `--` scripts).
    pub fn remember(&self, source: &str, text: &Arc<str>) {
        self.texts.lock().unwrap_or_else(|e| e.into_inner()).insert(source.to_string(), text.clone());
    }

    /// The text of a source handed out earlier, for quoting in diagnostics.
    pub fn text_of(&self, source: &str) -> Option<Arc<str>> {
        self.texts.lock().unwrap_or_else(|e| e.into_inner()).get(source).cloned()
    }
}

/// Refuses `--runbooks` folders that are missing, not folders, unreadable or a loop of
/// links: running the built-in runbook in their place would pass for the operator's own. An
/// `$OPSBOOK_PATH` entry that is there and not a folder is refused too, saying what it is
/// (one missing is passed over, as `$PATH`'s are).
pub fn check_named_folders(dirs: &[PathBuf]) -> Result<(), Error> {
    for dir in dirs {
        check_folder(dir, "--runbooks", false)?;
    }
    for dir in opsbook_path() {
        check_folder(&dir, "$OPSBOOK_PATH entry", true)?;
    }
    Ok(())
}

/// The folders `$OPSBOOK_PATH` names, in order.
fn opsbook_path() -> Vec<PathBuf> {
    std::env::var_os("OPSBOOK_PATH")
        .map(|path| std::env::split_paths(&path).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default()
}

/// Refuses `dir`, given as `given` (`--runbooks`, …), unless it is a readable folder (or,
/// when `missing_ok`, not there at all).
fn check_folder(dir: &Path, given: &str, missing_ok: bool) -> Result<(), Error> {
    let shown = dir.display();
    let refused = |why: String| Err(Error::Usage(format!("{given} `{shown}`: {why}")));
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing_ok => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return refused("no such folder".into()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return refused("a loop of symbolic links, not a folder".into());
        }
        Err(e) => return refused(format!("cannot be read: {e}")),
        Ok(meta) if !meta.is_dir() && missing_ok => {
            let what = opsbook_base::file_type(&meta);
            let what = if meta.is_file() { "regular file" } else { what };
            return refused(format!(
                "is a {what}, not a folder: give folders holding NAME.rhai files, separated by `:`"
            ));
        }
        Ok(meta) if !meta.is_dir() => {
            return refused("is not a folder: give the folder holding NAME.rhai files".into());
        }
        Ok(_) => {}
    }
    if let Err(e) = std::fs::read_dir(dir) {
        return refused(format!("cannot be read: {e}"));
    }
    Ok(())
}

/// How a runbook's documentation declares that it changes the host (`Entry::changes_hosts`).
pub const CHANGES_THE_HOST: &str = "Changes the host";

/// Names are file stems: no path separators, no leading dot.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains('/') && !name.contains('\0')
}

impl Entry {
    /// The runbook's documentation: its `//!` lines without the marker.
    pub fn doc(&self) -> String {
        let mut lines = Vec::new();
        for line in self.text.lines() {
            let trimmed = line.trim_start();
            if let Some(rest) = trimmed.strip_prefix("//!") {
                lines.push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
            } else if !(trimmed.is_empty() && lines.is_empty()) {
                break;
            }
        }
        lines.join("\n").trim().to_string()
    }

    /// Whether the runbook declares that it changes the host (a `//!` line beginning
    /// `CHANGES_THE_HOST`): its runs take the host's change lock before anything runs.
    pub fn changes_hosts(&self) -> bool {
        self.doc().lines().any(|line| line.starts_with(CHANGES_THE_HOST))
    }

    /// The first sentence of the doc header, whole: its first paragraph's lines joined, up to
    /// the first full stop that ends a sentence (one followed by a blank or the end, outside
    /// parentheses and code); the whole paragraph when it has none.
    pub fn summary(&self) -> String {
        let doc = self.doc();
        let paragraph: Vec<&str> = doc.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
        first_sentence(&paragraph.join(" ")).to_string()
    }
}

/// `text` up to and with its first sentence's full stop (`(…)` and `` `…` `` may hold stops).
fn first_sentence(text: &str) -> &str {
    let (mut depth, mut in_code) = (0usize, false);
    for (at, c) in text.char_indices() {
        match c {
            '`' => in_code = !in_code,
            '(' if !in_code => depth += 1,
            ')' if !in_code => depth = depth.saturating_sub(1),
            '.' if !in_code && depth == 0 && text[at + 1..].chars().next().is_none_or(char::is_whitespace) => {
                return &text[..=at];
            }
            _ => {}
        }
    }
    text
}

/// The names of the files under `dir` (with `prefix`, folders joined by `/`), hidden ones
/// left out: the templates a folder of the catalog holds.
pub(crate) fn file_names(dir: &std::path::Path, prefix: &str, names: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.path().is_dir() {
            file_names(&e.path(), &format!("{name}/"), names);
        } else if !name.rsplit('/').next().is_some_and(|n| n.starts_with('.')) {
            names.push(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modules_parse_is_kept_for_the_other_engines_only_for_the_same_text() {
        let catalog = Catalog::new(&[]);
        let text: Arc<str> = Arc::from("fn f() { config.x }");
        assert!(catalog.parsed_module("m", &text).is_none(), "nothing kept yet");
        let ast = rhai::Engine::new_raw().compile(&*text).unwrap();
        catalog.keep_parse("m", &text, &ast);
        let kept = catalog.parsed_module("m", &text).expect("kept");
        assert_eq!(kept.iter_functions().map(|f| f.name).collect::<Vec<_>>(), ["f"]);
        assert!(catalog.parsed_module("m", "fn f() { 2 }").is_none(), "an edited module is parsed anew");
        assert!(catalog.parsed_module("other", &text).is_none());
        catalog.forget_modules();
        assert!(catalog.parsed_module("m", &text).is_none(), "forgotten on the REPL's reload");
    }
}
