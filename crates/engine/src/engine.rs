//! Builds the Rhai engine a runbook runs in, and explains what went wrong when one fails.
//!
//! The engine gets: limits (a runaway loop hits `limits.max_operations`), cancellation
//! checked after every operation, `print`/`debug` routed into the report, `config` as a
//! read-only variable, a module resolver backed by the catalog, and the verbs (their modules
//! are built once for the process and shared by every engine: building one costs little).
//! `explain` turns an evaluation error into a rustc-style diagnostic that points into the
//! right file (runbook or stdlib module) and classifies it: operational failure, script
//! mistake or interruption.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rhai::module_resolvers::ModuleResolver;
use rhai::{Dynamic, Engine, EvalAltResult, Module, ParseError, Position, Scope, Shared};

type SharedModule = Shared<Module>;

use crate::catalog::{Catalog, Kind};
use crate::import_cycle::ImportCycle;
use crate::verbs;
use crate::verbs::context::Context;
use opsbook_base::Diagnostic;
use opsbook_base::config::keys;
use opsbook_base::did_you_mean;
use opsbook_base::report::Level;

/// Rhai's standard library, built once for the process and shared by every engine (each
/// host of a fleet run has its own engine; `Engine::new` would build the library for each).
fn standard_library() -> SharedModule {
    use rhai::packages::{Package, StandardPackage};
    static LIBRARY: std::sync::OnceLock<SharedModule> = std::sync::OnceLock::new();
    LIBRARY.get_or_init(|| StandardPackage::new().as_shared_module()).clone()
}

/// Builds what every engine shares (the standard library, the verbs' modules) on a thread
/// of its own, while the caller goes on reading its command line, configuration and hosts:
/// the first engine then finds them built, or waits for the rest.
pub fn prepare_in_background() {
    // Without the thread (none left to start), the first engine builds them itself.
    let _ = std::thread::Builder::new().name("opsbook-prepare".into()).spawn(|| {
        opsbook_base::helper_thread();
        standard_library();
        verbs::registry::prepare();
    });
}

/// The most heap the process may hold while a runbook runs: past it the run is stopped.
const MAX_HEAP: usize = 2 << 30;

/// Why a run was stopped for its memory.
fn too_much_memory() -> String {
    format!(
        "the run held more than {} GiB of memory and was stopped (a map or a string growing without end?)",
        MAX_HEAP >> 30
    )
}

/// A configured engine for one host context.
pub fn build(cx: &Arc<Context>, catalog: &Arc<Catalog>) -> Engine {
    // What `Engine::new` does, with the standard library shared; print, debug and the module
    // resolver are ours below.
    let mut engine = Engine::new_raw();
    crate::syntax::parse_settings(&mut engine);
    engine.register_global_module(standard_library());
    engine.set_max_operations(cx.config().int(keys::LIMITS_MAX_OPERATIONS).max(0) as u64);
    engine.set_max_call_levels(64);

    let cancel = cx.cancel.clone();
    engine.on_progress(move |_| {
        if cancel.is_cancelled() {
            return Some(Dynamic::from("interrupted"));
        }
        // Rhai bounds a string and an array's total, but not a map filled by assignment: the
        // process's heap bounds whatever a runbook builds.
        (opsbook_base::heap_in_use() > MAX_HEAP).then(|| Dynamic::from(too_much_memory()))
    });

    // Arrays and maps are printed to a bounded depth (Rhai's own printer overflowed the stack);
    // `print`, `debug` and interpolation of a value holding them all go through these.
    for name in ["print", "debug", "to_string", "to_debug"] {
        engine.register_fn(name, |a: &mut rhai::Array| crate::verbs::values::nested_array(a));
        engine.register_fn(name, |m: &mut rhai::Map| crate::verbs::values::nested_map(m));
    }

    let h = cx.clone();
    engine.on_print(move |text| h.log(Level::Info, text));
    let h = cx.clone();
    engine.on_debug(move |text, _, _| h.log(Level::Info, text));

    // `config` is the configuration of the host acted on now (another's inside `fleet::on`).
    let h = cx.clone();
    #[allow(deprecated)] // on_var is marked volatile, not deprecated
    engine.on_var(move |name, _, _| Ok((name == "config").then(|| h.config_view())));

    engine.set_module_resolver(CatalogResolver {
        catalog: catalog.clone(),
        cache: Mutex::default(),
        importing: Mutex::default(),
        cancel: cx.cancel.clone(),
    });

    verbs::registry::register_all(&mut engine, cx, catalog);
    engine
}

/// Resolves `import "name"` through the catalog, compiling each module once per engine — or
/// once for every engine of the catalog, when its top level only declares (no call, no
/// `config`: nothing that depends on the host an engine acts on). An import closing a circle
/// (`a` importing `b` importing `a`) is refused, naming it, instead of recursing for ever.
struct CatalogResolver {
    catalog: Arc<Catalog>,
    cache: Mutex<HashMap<String, SharedModule>>,
    /// The modules being evaluated now, outermost first, by the thread evaluating them.
    importing: Mutex<HashMap<std::thread::ThreadId, Vec<String>>>,
    /// The run's cancellation, which also stops a module's parse (`parse_bounded`).
    cancel: opsbook_base::Cancel,
}

impl CatalogResolver {
    /// Module `path`'s parse of `text`: the one another host's engine made, the one made ahead
    /// when it is done, or one waited for or made now — for a module too large to parse in
    /// place (`parse_bounded::by_size`), on a thread of its own, so that the run's time limit
    /// and Ctrl-C stop the wait.
    fn parse(
        &self,
        path: &str,
        text: &Arc<str>,
    ) -> Result<Result<rhai::AST, ParseError>, crate::parse_bounded::Stopped> {
        if let Some(ast) = self.catalog.parsed_module(path, text) {
            return Ok(Ok(ast));
        }
        let parsed = match crate::prefetch::take_done(path, text) {
            Some(done) => done,
            None => {
                let (key, text) = (path.to_string(), text.clone());
                crate::parse_bounded::by_size(&self.cancel, text.len(), move || {
                    crate::prefetch::take(&key, &text).unwrap_or_else(|| crate::parse_bounded::parse_here(&text))
                })?
            }
        };
        if let Ok(ast) = &parsed {
            self.catalog.keep_parse(path, text, ast);
        }
        Ok(parsed)
    }

    /// Marks `path` as being evaluated by this thread until the guard drops, or names the
    /// circle importing it would close.
    fn enter(&self, path: &str) -> Result<Importing<'_>, ImportCycle> {
        let thread = std::thread::current().id();
        let mut importing = self.importing.lock().unwrap_or_else(|e| e.into_inner());
        let stack = importing.entry(thread).or_default();
        if let Some(cycle) = ImportCycle::closed_by(stack, path) {
            return Err(cycle);
        }
        stack.push(path.to_string());
        Ok(Importing { resolver: self, thread })
    }
}

/// A module being evaluated: leaves the resolver's stack when dropped (an error included).
struct Importing<'a> {
    resolver: &'a CatalogResolver,
    thread: std::thread::ThreadId,
}

impl Drop for Importing<'_> {
    fn drop(&mut self) {
        let mut importing = self.resolver.importing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stack) = importing.get_mut(&self.thread) {
            stack.pop();
            if stack.is_empty() {
                importing.remove(&self.thread);
            }
        }
    }
}

impl ModuleResolver for CatalogResolver {
    fn resolve(
        &self,
        engine: &Engine,
        _source: Option<&str>,
        path: &str,
        pos: Position,
    ) -> Result<SharedModule, Box<EvalAltResult>> {
        if let Some(m) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            return Ok(m.clone());
        }
        if let Some(m) = self.catalog.shared_module(path) {
            self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_string(), m.clone());
            return Ok(m);
        }
        let in_module = |e: Box<EvalAltResult>| Box::new(EvalAltResult::ErrorInModule(path.to_string(), e, pos));
        let entry = self.catalog.find(Kind::Module, path).map_err(|e| match e {
            opsbook_base::Error::UnknownModule { .. } => {
                Box::new(EvalAltResult::ErrorModuleNotFound(path.to_string(), pos))
            }
            // There, yet no file to read (a folder, FIFO or device): said as such.
            other => {
                let message = other.to_string();
                let message = message.strip_prefix("error: ").unwrap_or(&message).to_string();
                in_module(EvalAltResult::ErrorSystem(String::new(), message.into()).into())
            }
        })?;
        let _importing = self
            .enter(path)
            .map_err(|cycle| in_module(EvalAltResult::ErrorSystem(String::new(), cycle.into()).into()))?;
        let parsed = self
            .parse(path, &entry.text)
            .map_err(|_| Box::new(EvalAltResult::ErrorTerminated(Dynamic::from("interrupted"), pos)))?;
        let mut ast = parsed.map_err(|e| in_module(e.into()))?;
        ast.set_source(entry.source.as_str());
        let module: SharedModule = Module::eval_ast_as_new(Scope::new(), &ast, engine).map_err(in_module)?.into();
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_string(), module.clone());
        // A module importing one that cannot be shared holds that host's copy: not shared.
        if only_declares(&ast).is_some_and(|imports| imports.iter().all(|i| self.catalog.shared_module(i).is_some())) {
            self.catalog.share_module(path, module.clone());
        }
        Ok(module)
    }
}

/// The modules a module's top level imports, when that top level (its functions' bodies
/// aside) calls nothing and reads no `config` — evaluating it then gives the same module on
/// every host, as long as what it imports does too; `None` otherwise.
fn only_declares(ast: &rhai::AST) -> Option<Vec<String>> {
    use rhai::{ASTNode, Expr, Stmt};
    let mut pure = true;
    let mut imports = Vec::new();
    for stmt in ast.statements() {
        stmt.walk(&mut Vec::new(), &mut |path: &[ASTNode]| {
            let impure = match path.last() {
                Some(ASTNode::Expr(Expr::FnCall(..) | Expr::MethodCall(..))) => true,
                Some(ASTNode::Expr(Expr::Variable(v, ..))) => v.1 == "config",
                Some(ASTNode::Stmt(Stmt::Import(import, _))) => match &import.0 {
                    Expr::StringConstant(name, _) => {
                        imports.push(name.to_string());
                        false
                    }
                    _ => true,
                },
                _ => false,
            };
            pure &= !impure;
            pure
        });
    }
    pure.then_some(imports)
}

/// What kind of failure an evaluation error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `throw` or a host function failing: the run aborts (exit 1).
    Aborted,
    /// The script is wrong: unknown function, wrong type, runaway loop… (exit 2).
    Script,
    /// Ctrl-C.
    Interrupted,
    /// The script called `exit(code)`: the run stops there with that exit status.
    Stopped(u8),
}

/// An explained evaluation error.
#[derive(Debug)]
pub struct Explained {
    /// What kind of error it is.
    pub class: Class,
    /// One line: the innermost message, for reports.
    pub message: String,
    /// Where, rustc-style, with the line and a caret.
    pub diagnostic: Diagnostic,
    /// Where the runbook itself made the call that failed (`runbooks/x.rhai:3:9`), when the
    /// error was raised inside a module or function it called: a runbook's line, not only the
    /// stdlib's.
    pub called_at: Option<String>,
}

/// A compile error of `source` as a diagnostic.
pub fn parse_diagnostic(err: &ParseError, source: &str, catalog: &Catalog) -> Diagnostic {
    let text = catalog.text_of(source);
    let pos = err.position();
    Diagnostic::at(
        err.err_type().to_string(),
        source,
        text.as_deref(),
        pos.line().unwrap_or(0),
        pos.position().unwrap_or(1),
    )
}

/// Walks the error chain to the innermost error, following the source files of the
/// functions and modules it passes through.
pub fn explain(err: &EvalAltResult, main_source: &str, catalog: &Catalog, cx: Option<&Context>) -> Explained {
    let mut source = main_source.to_string();
    let mut current = err;
    let mut trail: Vec<(String, String, Position)> = Vec::new(); // (what, in which source, where)
    loop {
        match current {
            EvalAltResult::ErrorInFunctionCall(name, fn_source, inner, pos) => {
                let what = if name.starts_with("anon$") {
                    "in a closure".to_string()
                } else {
                    format!("in function `{name}`")
                };
                trail.push((what, source.clone(), *pos));
                if !fn_source.is_empty() {
                    source = fn_source.clone();
                }
                current = inner;
            }
            EvalAltResult::ErrorInModule(path, inner, pos) => {
                trail.push((format!("importing module `{path}`"), source.clone(), *pos));
                if let Ok(entry) = catalog.find(Kind::Module, path) {
                    source = entry.source;
                }
                current = inner;
            }
            _ => break,
        }
    }
    let (class, message) = classify(current, catalog, cx);
    // The innermost position; when it has none, the innermost wrapper's call site.
    let mut pos = current.position();
    if pos.is_none()
        && let Some((_, s, p)) = trail.iter().rev().find(|(_, _, p)| !p.is_none())
    {
        source = s.clone();
        pos = *p;
    }
    let text = catalog.text_of(&source);
    let mut diagnostic =
        Diagnostic::at(&message, &source, text.as_deref(), pos.line().unwrap_or(0), pos.position().unwrap_or(1));
    for (what, s, p) in trail.iter().rev() {
        match p.line() {
            Some(line) => {
                diagnostic.notes.push(format!("note: {what}, called at {s}:{line}:{}", p.position().unwrap_or(1)))
            }
            None => diagnostic.notes.push(format!("note: {what}")),
        }
    }
    if class == Class::Script
        && let EvalAltResult::ErrorFunctionNotFound(..) = current
    {
        diagnostic.notes.push("help: `opsbook fns` lists the host functions and their signatures".to_string());
    }
    let called_at = trail
        .iter()
        .find(|(_, s, p)| s == main_source && !p.is_none())
        .map(|(_, s, p)| format!("{s}:{}:{}", p.line().unwrap_or(0), p.position().unwrap_or(1)));
    Explained { class, message, diagnostic, called_at }
}

/// What kind of ending the innermost error is (an operational failure, a script mistake, an
/// interruption), and its message in an operator's words.
fn classify(current: &EvalAltResult, catalog: &Catalog, cx: Option<&Context>) -> (Class, String) {
    let cancelled = cx.is_some_and(|h| h.cancel.is_cancelled());
    let max_ops = cx.map_or(0, |h| h.config().int(keys::LIMITS_MAX_OPERATIONS));
    match current {
        EvalAltResult::ErrorRuntime(value, _) => (Class::Aborted, verbs::core::text(value)),
        EvalAltResult::ErrorTerminated(value, _) if value.is::<verbs::result::Stop>() => {
            let code = value.clone_cast::<verbs::result::Stop>().0;
            (Class::Stopped(code), format!("stopped by exit({code})"))
        }
        EvalAltResult::ErrorTerminated(..) if cancelled => (Class::Interrupted, "interrupted".to_string()),
        EvalAltResult::ErrorTerminated(value, _) => (Class::Aborted, verbs::core::text(value)),
        EvalAltResult::ErrorTooManyOperations(_) => (
            Class::Script,
            format!(
                "the runbook exceeded {max_ops} operations and was stopped (a runaway loop?); `limits.max_operations` raises the limit"
            ),
        ),
        EvalAltResult::ErrorModuleNotFound(name, _) => {
            let names: Vec<String> =
                catalog.all(Kind::Module).map(|all| all.into_iter().map(|e| e.name).collect()).unwrap_or_default();
            // `checks::…` without its import is a module Rhai cannot find, yet one that exists.
            let message = if names.iter().any(|n| n == name) {
                format!("module `{name}` is not imported here: add `import \"{name}\" as {name};` at the top")
            } else {
                let mut message = format!("no stdlib module named `{name}`");
                message.push_str(&did_you_mean(name, names.iter().map(String::as_str)).unwrap_or_default());
                message
            };
            (Class::Script, message)
        }
        EvalAltResult::ErrorParsing(kind, _) => (Class::Script, kind.to_string()),
        other => (Class::Script, strip_position(&other.to_string())),
    }
}

/// Rhai appends ` (line N, position M)` to messages; the diagnostic shows that already.
fn strip_position(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message);
    match first.rfind(" (line ") {
        Some(i) if first.ends_with(')') => first[..i].to_string(),
        _ => first.to_string(),
    }
}
