//! Parsing a run's modules ahead of it. While the process reads its command line and
//! configuration and builds the engine's shared library, a thread parses the modules the
//! runbook imports (and those they import), so the first `import` of each finds it parsed
//! instead of parsing it then. What it hands over is a parse of the very text the resolver
//! finds, by an engine that parses as the runbook's does (`syntax::parse_settings`), taken
//! once: a module edited since, or asked for again, is parsed as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rhai::{AST, Engine, ParseError};

use crate::catalog::{Catalog, Kind};

/// A module's parse, in progress or done (`None`: the parsing thread panicked), and the text
/// it parses.
struct Slot {
    text: Arc<str>,
    parsed: OnceLock<Option<Result<AST, ParseError>>>,
}

/// Fills its slot with `None` if the parse never finished, so nobody waits for it for ever.
struct Unfinished<'a>(&'a Slot);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        let _ = self.0.parsed.set(None);
    }
}

/// Parses waiting for their module's first `import`, by module path.
fn waiting() -> &'static Mutex<HashMap<String, Arc<Slot>>> {
    static WAITING: OnceLock<Mutex<HashMap<String, Arc<Slot>>>> = OnceLock::new();
    WAITING.get_or_init(Mutex::default)
}

/// Starts parsing the modules runbook `name` of `catalog` imports, on a thread of its own.
pub fn modules_of(catalog: Catalog, name: &str) {
    let name = name.to_string();
    // Without the thread (none left to start), each module is parsed when imported.
    let _ = std::thread::Builder::new().name("opsbook-parse".into()).spawn(move || {
        let Ok(runbook) = catalog.find(Kind::Runbook, &name) else { return };
        let mut engine = Engine::new_raw();
        crate::syntax::parse_settings(&mut engine);
        let mut queue = imports(&runbook.text);
        let mut seen: Vec<String> = Vec::new();
        while let Some(path) = queue.pop() {
            if seen.contains(&path) {
                continue;
            }
            seen.push(path.clone());
            let Ok(module) = catalog.find(Kind::Module, &path) else { continue };
            let slot = Arc::new(Slot { text: module.text.clone(), parsed: OnceLock::new() });
            waiting().lock().unwrap_or_else(|e| e.into_inner()).insert(path, slot.clone());
            let unfinished = Unfinished(&slot);
            let _ = slot.parsed.set(Some(engine.compile(&*module.text)));
            drop(unfinished);
            queue.extend(imports(&module.text));
        }
    });
}

/// The parse of module `path` made ahead, when there is one of exactly `text` (waiting for
/// it to finish); `None` otherwise, for the caller to parse it.
pub fn take(path: &str, text: &Arc<str>) -> Option<Result<AST, ParseError>> {
    let slot = waiting().lock().unwrap_or_else(|e| e.into_inner()).remove(path)?;
    if *slot.text != **text {
        return None;
    }
    slot.parsed.wait().clone()
}

/// The module paths a script's `import "…"` lines name (a comment or a string that looks like
/// one costs a parse never taken, nothing more).
fn imports(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("import")?.trim_start().strip_prefix('"')?.split_once('"'))
        .map(|(path, _)| path.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_imports_of_a_script_are_its_import_lines() {
        let text = "//! doc\nimport \"stack\" as stack;\n  import \"text\" as t;\n// import \"not\"\nlet x = \"import\";\nimport  \"checks\";";
        assert_eq!(imports(text), ["stack", "text", "checks"]);
    }

    #[test]
    fn a_parse_made_ahead_is_taken_once_and_only_for_the_same_text() {
        let text: Arc<str> = Arc::from("fn f() { 1 }");
        let engine = Engine::new_raw();
        let slot = Arc::new(Slot { text: text.clone(), parsed: OnceLock::new() });
        let _ = slot.parsed.set(Some(engine.compile(&*text)));
        waiting().lock().unwrap().insert("prefetch-test-a".into(), slot);
        assert!(take("prefetch-test-a", &Arc::from("fn f() { 2 }")).is_none(), "another text is parsed anew");
        let slot = Arc::new(Slot { text: text.clone(), parsed: OnceLock::new() });
        let _ = slot.parsed.set(Some(engine.compile(&*text)));
        waiting().lock().unwrap().insert("prefetch-test-a".into(), slot);
        let ast = take("prefetch-test-a", &text).expect("made ahead").expect("parses");
        assert_eq!(ast.iter_functions().map(|f| f.name).collect::<Vec<_>>(), ["f"]);
        assert!(take("prefetch-test-a", &text).is_none(), "taken once");
    }

    #[test]
    fn a_parse_that_never_finished_is_parsed_by_the_caller_instead_of_waited_for() {
        let text: Arc<str> = Arc::from("fn f() { 1 }");
        let slot = Arc::new(Slot { text: text.clone(), parsed: OnceLock::new() });
        waiting().lock().unwrap().insert("prefetch-test-b".into(), slot.clone());
        let parsing = std::thread::spawn(move || {
            let _unfinished = Unfinished(&slot);
            panic!("the parser panicked");
        });
        assert!(parsing.join().is_err());
        assert!(take("prefetch-test-b", &text).is_none());
    }
}
