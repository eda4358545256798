//! `opsbook repl`: explore the stack and develop runbooks line by line.
//!
//! One engine and one scope for the whole session: variables, functions (`fn …`) and
//! imported modules persist across lines. Lines starting with `:` are commands (`:help`).
//! An unfinished statement continues on the next line. Ctrl-C cancels the running
//! statement (every host call watches the cancellation) or clears the line; Ctrl-D exits.
//! History lives in `$XDG_STATE_HOME/opsbook/history`.

mod helper;
mod pretty;

use opsbook_world::change_lock::LockError;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rhai::{AST, Dynamic, Engine, Scope};
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;

use helper::{ReplHelper, Vocabulary};
use opsbook_base::Error;
use opsbook_base::config::keys;
use opsbook_base::report::Format;
use opsbook_engine::catalog::Kind;
use opsbook_fleet::Session;

const COMMANDS: &[&str] =
    &[":help", ":fns", ":doc", ":vars", ":reset", ":reload", ":history", ":run", ":load", ":host", ":quit"];

const HELP: &str = "\
Type Rhai: `unit::status(\"loki\")`, `let e = journal::read(#{unit: \"loki\", since: \"1 hour ago\"})`,
`influx::query(flux::recent(\"telegraf\", \"5m\"))` after `import \"flux\" as flux;`.
Variables, functions and imports persist. Tab completes; the hint shows the signature.

  :run NAME [k=v]...  run a runbook and print its report
  :load FILE          run a script into this session
  :fns [FILTER]       host functions and their signatures
  :doc NAME           documentation of a host function or a runbook
  :vars               variables in this session
  :reset              forget variables and functions
  :reload             re-read runbooks and stdlib modules after editing them
  :host [NAME]        the host calls act on; NAME (from the inventory) to act on another
  :history            lines entered
  :quit               leave (or Ctrl-D); Ctrl-C cancels a running statement";

/// An interactive session: the machine's session plus what the operator typed.
struct Repl {
    session: Session,
    scope: Scope<'static>,
    /// Function definitions entered so far.
    functions: AST,
    imports: Vec<(String, String)>,
    evaluating: Arc<AtomicBool>,
}

/// Runs the REPL against `session` until `:quit` or Ctrl-D.
pub(crate) fn run(session: Session, sandbox: bool) -> Result<u8, Error> {
    let mut session = Repl {
        session,
        scope: Scope::new(),
        functions: AST::empty(),
        imports: Vec::new(),
        evaluating: Arc::new(AtomicBool::new(false)),
    };
    session.install_interrupt();
    // The REPL takes a host's change lock at its first change, and keeps it until it ends.
    session.session.context.lock_for("repl", "");

    let mut parser = Engine::new_raw();
    opsbook_engine::parse_settings(&mut parser);
    let mut editor: rustyline::Editor<ReplHelper, DefaultHistory> =
        rustyline::Editor::new().map_err(|e| Error::Usage(format!("cannot start the line editor: {e}")))?;
    editor.set_helper(Some(ReplHelper { vocabulary: session.vocabulary(), parser }));
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    let typed = std::io::IsTerminal::is_terminal(&std::io::stdin());
    if typed {
        opsbook_base::tell!("opsbook {} — :help for help, Ctrl-D to leave", env!("CARGO_PKG_VERSION"));
    }
    // Lines that could not be read (not UTF-8): each is said and skipped. Fed from a pipe or
    // a file, the exit status says some input was lost; typed, the operator read it and went
    // on, as after any other error in the session.
    let mut unreadable = 0usize;
    let mut read = 0usize;
    loop {
        let prompt = match (&session.session.mode().host, sandbox) {
            (Some(host), _) => format!("opsbook[{host}]> "),
            (None, true) => "opsbook[sandbox]> ".to_string(),
            (None, false) => "opsbook> ".to_string(),
        };
        read += 1;
        match editor.readline(&prompt) {
            Ok(line) => {
                let input = line.trim();
                if input.is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(input);
                if input.starts_with(':') {
                    match session.command(input, editor.history()) {
                        Flow::Quit => break,
                        Flow::Reloaded => {
                            if let Some(h) = editor.helper_mut() {
                                h.vocabulary = session.vocabulary();
                            }
                        }
                        Flow::Continue => {}
                    }
                } else {
                    session.eval(input, "<repl>");
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(ReadlineError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData && unreadable < 100 => {
                unreadable += 1;
                opsbook_base::say!("error: input line {read} is not UTF-8 text: it was skipped");
            }
            Err(e) => {
                opsbook_base::say!("error: cannot read the next line: {e}");
                unreadable += 1;
                break;
            }
        }
    }
    session.session.context.release_after(0);
    if let Some(path) = &history {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(path);
    }
    Ok(if unreadable > 0 && !typed { 2 } else { 0 })
}

/// `$XDG_STATE_HOME/opsbook/history`, else `~/.local/state/opsbook/history`.
fn history_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    let dir = base.join("opsbook");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("history"))
}

enum Flow {
    Continue,
    Reloaded,
    Quit,
}

impl Repl {
    /// Ctrl-C while a statement runs cancels it; at the prompt the line editor handles it.
    fn install_interrupt(&self) {
        let cancel = self.session.context.cancel.clone();
        let evaluating = self.evaluating.clone();
        // Registered here, before the first prompt: a Ctrl-C that came before the handler
        // would kill the session.
        let runtime = self.session.context.runtime();
        let _context = runtime.enter();
        let Ok(mut int) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) else { return };
        runtime.spawn(async move {
            while int.recv().await.is_some() {
                if evaluating.load(Ordering::SeqCst) {
                    cancel.cancel();
                }
            }
        });
    }

    fn vocabulary(&self) -> Vocabulary {
        let names = |kind| {
            self.session.catalog.all(kind).map(|all| all.into_iter().map(|e| e.name).collect()).unwrap_or_default()
        };
        let units =
            opsbook_base::components::all().iter().map(|c| self.session.config.text(keys::of(c, "unit"))).collect();
        Vocabulary {
            functions: opsbook_engine::functions::list(self.session.engine()),
            runbooks: names(Kind::Runbook),
            modules: names(Kind::Module),
            units,
            commands: COMMANDS.to_vec(),
        }
    }

    /// Makes `import "x" as y;` lines last for the session: the module becomes a static one.
    fn keep_imports(&mut self, ast: &AST) {
        let mut found = Vec::new();
        ast.walk(&mut |path: &[rhai::ASTNode]| {
            if let Some(rhai::ASTNode::Stmt(rhai::Stmt::Import(import, _))) = path.last()
                && let rhai::Expr::StringConstant(module, _) = &import.0
                && !import.1.name.is_empty()
            {
                found.push((module.to_string(), import.1.name.to_string()));
            }
            true
        });
        for (module, alias) in found {
            let engine = self.session.engine();
            let resolved = engine.module_resolver().resolve(engine, None, &module, rhai::Position::NONE);
            if let Ok(m) = resolved {
                self.session.engine_mut().register_static_module(alias.as_str(), m);
                self.imports.retain(|(_, a)| a != &alias);
                self.imports.push((module, alias));
            }
        }
    }

    /// Compiles and runs one input; prints its value or its error.
    fn eval(&mut self, input: &str, source: &str) {
        let text: Arc<str> = input.into();
        self.session.catalog.remember(source, &text);
        let mut ast = match self.session.engine().compile_with_scope(&self.scope, input) {
            Ok(ast) => ast,
            Err(e) => {
                opsbook_base::say_part!(
                    "{}",
                    printable(&opsbook_engine::engine::parse_diagnostic(&e, source, &self.session.catalog).to_string())
                );
                return;
            }
        };
        ast.set_source(source);
        self.keep_imports(&ast);
        self.functions = self.functions.merge(&ast.clone_functions_only());
        let program = self.functions.merge(&ast);
        self.session.context.cancel.reset();
        self.evaluating.store(true, Ordering::SeqCst);
        let result = self.session.engine().eval_ast_with_scope::<Dynamic>(&mut self.scope, &program);
        self.evaluating.store(false, Ordering::SeqCst);
        opsbook_base::clear_progress();
        // A change refused because another run holds the host's change lock: said as it was
        // refused (`refused to …: HOST: held by …`); its value (nothing was done) not shown.
        let refused = self.session.context.take_lock_refusal().is_some_and(|r| r != LockError::Interrupted);
        match result {
            _ if refused => {}
            Ok(value) => {
                let shown = pretty::show(&value);
                if !shown.is_empty() {
                    opsbook_base::tell!("{}", printable(&shown));
                }
            }
            Err(e) => {
                let explained =
                    opsbook_engine::engine::explain(&e, source, &self.session.catalog, Some(&self.session.context));
                match explained.class {
                    opsbook_engine::engine::Class::Interrupted => opsbook_base::say!("interrupted"),
                    _ => opsbook_base::say_part!("{}", printable(&explained.diagnostic.to_string())),
                }
            }
        }
        self.session.context.cancel.reset();
    }

    fn command(&mut self, input: &str, history: &DefaultHistory) -> Flow {
        let mut words = input.split_whitespace();
        let command = words.next().unwrap_or("");
        let args: Vec<&str> = words.collect();
        match command {
            ":quit" | ":q" | ":exit" => return Flow::Quit,
            ":help" | ":h" => opsbook_base::tell!("{HELP}"),
            ":fns" => {
                let filter = args.first().map(|f| f.to_lowercase());
                for f in opsbook_engine::functions::list(self.session.engine()) {
                    if filter
                        .as_ref()
                        .is_none_or(|x| f.signature.to_lowercase().contains(x) || f.doc.to_lowercase().contains(x))
                    {
                        opsbook_base::tell!("{}", f.signature);
                    }
                }
            }
            ":doc" => self.doc(args.first().copied().unwrap_or("")),
            ":vars" => {
                for (name, constant, value) in self.scope.iter() {
                    let shown = pretty::show(&value).replace('\n', " ");
                    opsbook_base::tell!("{}{name} = {}", if constant { "const " } else { "" }, printable(&shown));
                }
                for (module, alias) in &self.imports {
                    opsbook_base::tell!("import \"{}\" as {}", printable(module), printable(alias));
                }
            }
            ":reset" => {
                self.scope.clear();
                self.functions = AST::empty();
                opsbook_base::tell!("variables and functions forgotten");
            }
            ":reload" => {
                // A new engine forgets compiled modules; imports are resolved again.
                self.session.reload();
                let imports = std::mem::take(&mut self.imports);
                for (module, alias) in imports {
                    self.eval(&format!("import \"{module}\" as {alias};"), "<reload>");
                }
                opsbook_base::tell!("runbooks and stdlib re-read");
                return Flow::Reloaded;
            }
            ":history" => {
                for (i, entry) in history.iter().enumerate() {
                    opsbook_base::tell!("{:4}  {}", i + 1, printable(entry));
                }
            }
            ":load" => match args.first() {
                Some(file) => {
                    match opsbook_base::read_text_or_explain(
                        std::path::Path::new(file),
                        opsbook_base::InputKind::SCRIPT,
                    ) {
                        Ok(text) => self.eval(&text, file),
                        Err(e) => opsbook_base::say!("error: {}", printable(&e.to_string())),
                    }
                }
                None => opsbook_base::say!("usage: :load FILE"),
            },
            ":run" => self.run_runbook(&args),
            ":host" => self.switch_host(args.first().copied()),
            other => {
                let hint = opsbook_base::did_you_mean(other, COMMANDS.iter().copied()).unwrap_or_default();
                opsbook_base::say!("error: unknown command `{}`{hint} (:help lists them)", printable(other));
            }
        }
        Flow::Continue
    }

    fn doc(&self, name: &str) {
        if name.is_empty() {
            return opsbook_base::say!("usage: :doc NAME (a host function such as unit::status, or a runbook)");
        }
        let (ns, fname) = name.rsplit_once("::").unwrap_or(("", name));
        let found: Vec<_> = opsbook_engine::functions::list(self.session.engine())
            .into_iter()
            .filter(|f| f.name == fname && (ns.is_empty() || f.namespace == ns))
            .collect();
        for f in &found {
            opsbook_base::tell!("{}\n    {}\n", printable(&f.signature), printable(&f.doc.replace('\n', "\n    ")));
        }
        if let Ok(entry) = self.session.catalog.find(Kind::Runbook, name) {
            opsbook_base::tell!(
                "runbook {} ({})\n{}",
                printable(&entry.name),
                printable(&entry.source.to_string()),
                printable(&entry.doc())
            );
        } else if found.is_empty() {
            opsbook_base::say!("error: no host function or runbook named `{}`", printable(name));
        }
    }

    /// `:host` says where calls act; `:host NAME` moves them to another host of the inventory
    /// (connected to now, over ssh when it has an address), for every line after.
    fn switch_host(&mut self, name: Option<&str>) {
        let Some(name) = name else {
            let here = self.session.mode().host.clone().unwrap_or_else(|| self.session.context.hostname());
            return opsbook_base::tell!("acting on {}", printable(&here));
        };
        match opsbook_engine::verbs::reach(&self.session.context, name) {
            Ok(ground) => {
                self.session.context.move_to(ground);
                self.session.set_host_name(name);
            }
            Err(e) => match *e {
                rhai::EvalAltResult::ErrorRuntime(why, _) => {
                    opsbook_base::say!("{}", printable(&opsbook_engine::verbs::text(&why)))
                }
                other => opsbook_base::say!("error: {}", printable(&other.to_string())),
            },
        }
    }

    fn run_runbook(&mut self, args: &[&str]) {
        let Some(name) = args.first() else { return opsbook_base::say!("usage: :run NAME [key=value]...") };
        let mut pairs = Vec::new();
        for a in &args[1..] {
            match a.split_once('=') {
                Some((k, v)) => pairs.push((k.to_string(), v.to_string())),
                None => return opsbook_base::say!("error: expected key=value, got `{}`", printable(a)),
            }
        }
        let compiled = match self.session.compile(name) {
            Ok(compiled) => compiled,
            Err(e) => return opsbook_base::say!("{}", printable(&e.to_string())),
        };
        self.session.context.cancel.reset();
        self.evaluating.store(true, Ordering::SeqCst);
        let report = self.session.run(&compiled, &pairs, Format::Human);
        self.evaluating.store(false, Ordering::SeqCst);
        self.session.context.cancel.reset();
        match report {
            Ok(report) if report.exit_code() != 0 => {
                opsbook_base::say!("(runbook ended with exit status {})", report.exit_code())
            }
            Ok(_) => {}
            Err(e) => opsbook_base::say!("{}", printable(&e.to_string())),
        }
    }
}

/// `text` as the REPL prints it: secrets redacted, control characters escaped.
fn printable(text: &str) -> String {
    opsbook_base::escaped(&opsbook_base::secret::redact(text)).into_owned()
}
