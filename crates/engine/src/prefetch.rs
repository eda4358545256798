//! Parsing a run's modules ahead of it. While the process reads its command line and
//! configuration and builds the engine's shared library, a thread parses the modules the
//! runbook imports (and those they import), in the order the run will import them, so the
//! first `import` of each finds it parsed instead of parsing it then. A module the thread has
//! not started yet when the run asks for it is parsed by the run itself (the thread skips it),
//! so the two share the parsing instead of one waiting for the other. What it hands over is a
//! parse of the very text the resolver finds, by an engine that parses as the runbook's does
//! (`syntax::parse_settings`), taken once: a module edited since, or asked for again, is parsed
//! by the run when it imports it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rhai::{AST, Engine, ParseError};

use crate::catalog::{Catalog, Kind};

/// A module's parse, in progress or done (`None`: the parsing thread panicked), and the text
/// it parses; `claimed` once the thread or the run has started parsing it.
struct Slot {
    text: Arc<str>,
    claimed: AtomicBool,
    parsed: OnceLock<Option<Result<AST, ParseError>>>,
}

impl Slot {
    fn new(text: Arc<str>) -> Slot {
        Slot { text, claimed: AtomicBool::new(false), parsed: OnceLock::new() }
    }

    /// Whether the caller is the first to claim this parse (and so must make it).
    fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }
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
        opsbook_base::helper_thread();
        let Ok(runbook) = catalog.find(Kind::Runbook, &name) else { return };
        let order = import_order(&catalog, &runbook.text);
        // Every slot is there before the first parse: a run asking for a module the thread
        // has not reached parses it itself rather than waiting behind the others.
        let slots: Vec<Arc<Slot>> = {
            let mut waiting = waiting().lock().unwrap_or_else(|e| e.into_inner());
            order
                .into_iter()
                .map(|(path, text)| {
                    let slot = Arc::new(Slot::new(text));
                    waiting.insert(path, slot.clone());
                    slot
                })
                .collect()
        };
        let mut engine = Engine::new_raw();
        crate::syntax::parse_settings(&mut engine);
        for slot in slots.iter().filter(|slot| slot.claim()) {
            let unfinished = Unfinished(slot);
            let _ = slot.parsed.set(Some(engine.compile(&*slot.text)));
            drop(unfinished);
        }
    });
}

/// The modules a script imports, and those they import, each with its text, in the order a
/// run imports them: a module's own imports right after it (they are resolved while it is
/// evaluated), each module at its first import.
fn import_order(catalog: &Catalog, text: &str) -> Vec<(String, Arc<str>)> {
    let mut order: Vec<(String, Arc<str>)> = Vec::new();
    let mut pending: Vec<String> = imports(text).into_iter().rev().collect();
    while let Some(path) = pending.pop() {
        if order.iter().any(|(seen, _)| *seen == path) {
            continue;
        }
        let Ok(module) = catalog.find(Kind::Module, &path) else { continue };
        pending.extend(imports(&module.text).into_iter().rev());
        order.push((path, module.text));
    }
    order
}

/// The parse of module `path` made ahead, when there is one of exactly `text` (waiting for
/// it to finish); `None` otherwise, for the caller to parse it — also when the thread has not
/// started on it yet (it then leaves it to the caller).
pub(crate) fn take(path: &str, text: &Arc<str>) -> Option<Result<AST, ParseError>> {
    let slot = waiting().lock().unwrap_or_else(|e| e.into_inner()).remove(path)?;
    if *slot.text != **text || slot.claim() {
        return None;
    }
    slot.parsed.wait().clone()
}

/// The parse of module `path` made ahead when it is done already, without waiting: `None`
/// when there is none of exactly `text`, or it is still being made (then `take` waits for it,
/// on a thread the run's cancellation can leave behind).
pub(crate) fn take_done(path: &str, text: &Arc<str>) -> Option<Result<AST, ParseError>> {
    let mut waiting = waiting().lock().unwrap_or_else(|e| e.into_inner());
    let slot = waiting.get(path)?;
    if *slot.text != **text {
        return None;
    }
    let done = slot.parsed.get()?.clone()?;
    waiting.remove(path);
    Some(done)
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

    /// A slot as the parsing thread leaves it: claimed, its parse made.
    fn parsed_slot(text: &Arc<str>) -> Arc<Slot> {
        let slot = Arc::new(Slot::new(text.clone()));
        assert!(slot.claim());
        let _ = slot.parsed.set(Some(Engine::new_raw().compile(&**text)));
        slot
    }

    #[test]
    fn a_parse_made_ahead_is_taken_once_and_only_for_the_same_text() {
        let text: Arc<str> = Arc::from("fn f() { 1 }");
        waiting().lock().unwrap().insert("prefetch-test-a".into(), parsed_slot(&text));
        assert!(take("prefetch-test-a", &Arc::from("fn f() { 2 }")).is_none(), "another text is parsed anew");
        waiting().lock().unwrap().insert("prefetch-test-a".into(), parsed_slot(&text));
        let ast = take("prefetch-test-a", &text).expect("made ahead").expect("parses");
        assert_eq!(ast.iter_functions().map(|f| f.name).collect::<Vec<_>>(), ["f"]);
        assert!(take("prefetch-test-a", &text).is_none(), "taken once");
    }

    #[test]
    fn a_finished_parse_is_taken_without_waiting_and_one_in_progress_is_left_for_take() {
        let text: Arc<str> = Arc::from("fn g() { 1 }");
        let slot = Arc::new(Slot::new(text.clone()));
        assert!(slot.claim(), "the parsing thread has started on it");
        waiting().lock().unwrap().insert("prefetch-test-c".into(), slot.clone());
        assert!(take_done("prefetch-test-c", &text).is_none(), "still being made: not waited for");
        let _ = slot.parsed.set(Some(Engine::new_raw().compile(&*text)));
        assert!(take_done("prefetch-test-c", &Arc::from("fn g() { 2 }")).is_none(), "another text is parsed anew");
        let ast = take_done("prefetch-test-c", &text).expect("done").expect("parses");
        assert_eq!(ast.iter_functions().map(|f| f.name).collect::<Vec<_>>(), ["g"]);
        assert!(take("prefetch-test-c", &text).is_none(), "taken once");
    }

    #[test]
    fn a_parse_that_never_finished_is_parsed_by_the_caller_instead_of_waited_for() {
        let text: Arc<str> = Arc::from("fn f() { 1 }");
        let slot = Arc::new(Slot::new(text.clone()));
        waiting().lock().unwrap().insert("prefetch-test-b".into(), slot.clone());
        let parsing = std::thread::spawn(move || {
            assert!(slot.claim());
            let _unfinished = Unfinished(&slot);
            panic!("the parser panicked");
        });
        assert!(parsing.join().is_err());
        assert!(take("prefetch-test-b", &text).is_none());
    }

    #[test]
    fn a_parse_not_started_is_left_to_the_caller_and_skipped_by_the_thread() {
        let text: Arc<str> = Arc::from("fn f() { 1 }");
        let slot = Arc::new(Slot::new(text.clone()));
        waiting().lock().unwrap().insert("prefetch-test-c".into(), slot.clone());
        assert!(take("prefetch-test-c", &text).is_none(), "the caller parses it");
        assert!(!slot.claim(), "the thread finds it claimed and moves on");
    }

    #[test]
    fn modules_are_parsed_in_the_order_a_run_imports_them() {
        let dir = tempfile::tempdir().unwrap();
        let stdlib = dir.path().join("stdlib");
        std::fs::create_dir_all(&stdlib).unwrap();
        std::fs::create_dir_all(dir.path().join("runbooks")).unwrap();
        for (name, text) in [
            ("pa", "import \"pc\" as c;\nimport \"pd\" as d;\nfn a() { 1 }"),
            ("pb", "import \"pe\" as e;\nimport \"pa\" as a;\nfn b() { 2 }"),
            ("pc", "fn c() { 3 }"),
            ("pd", "import \"pc\" as c;\nfn d() { 4 }"),
            ("pe", "fn e() { 5 }"),
        ] {
            std::fs::write(stdlib.join(format!("{name}.rhai")), text).unwrap();
        }
        let catalog = Catalog::new(&[dir.path().join("runbooks")]);
        let order = import_order(&catalog, "import \"pa\" as a;\nimport \"pb\" as b;\nimport \"nowhere\" as n;");
        let names: Vec<&str> = order.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(names, ["pa", "pc", "pd", "pb", "pe"]);
        assert_eq!(&*order[4].1, "fn e() { 5 }");
    }
}
