//! What each subcommand does. `execute` returns the exit status, or an error (exit 2).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use crate::cli::{Arguments, Command, GlobalOptions, RunArgs};
use opsbook_base::Error;
use opsbook_base::report::Format;
use opsbook_engine::catalog::{Catalog, Kind};
use opsbook_fleet::{Reach, Session};

/// Builds the session the subcommand needs (if any) and executes it.
pub(crate) fn execute(args: Arguments) -> Result<u8, Error> {
    let global = args.global.options();
    refuse_prometheus(global.format, &args.command)?;
    // A folder the operator named that is not one: never the built-in runbook in its place.
    opsbook_engine::catalog::check_named_folders(&global.runbook_dirs)?;
    // Before anything reads the component table: the components a `components.toml` adds.
    if !matches!(args.command, Command::Twin(_) | Command::Completions { .. } | Command::Generate(_)) {
        Catalog::new(&global.runbook_dirs).install_components()?;
    }
    let session = |reach| Session::open(&global, reach);
    match args.command {
        Command::Run(run) => {
            // Parsed on another thread while this one reads the configuration (what every
            // engine shares is being built since the process started: `crate::run`).
            opsbook_engine::prefetch_modules_of(Catalog::new(&global.runbook_dirs), &run.name);
            run_command(&global, &run)
        }
        // Listing reads only the catalog: it works with a broken configuration file too.
        Command::List => list(&Catalog::new(&global.runbook_dirs), global.format),
        Command::Show { name } => show(&session(Reach::Describe)?, &name, global.format),
        Command::Templates { name } => templates(&Catalog::new(&global.runbook_dirs), name.as_deref(), global.format),
        Command::Check { names } => check(&session(Reach::Describe)?, &names),
        Command::Fns { filter, json, definitions } => {
            fns(&session(Reach::Describe)?, filter.as_deref(), json || global.format == Format::Json, definitions)
        }
        Command::Config => config(&session(Reach::Act)?, global.format),
        Command::Repl if global.host.is_some() || global.hosts.is_some() => repl_on_host(&global),
        Command::Repl => crate::repl::run(session(Reach::Act)?, global.sandbox),
        Command::Hosts { pattern } => {
            let inventory = global.inventory()?;
            // `opsbook hosts --hosts P` and `--host N` select as the positional pattern does.
            let pattern = pattern.or_else(|| global.hosts.clone()).or_else(|| global.host.clone());
            crate::inventory_show::hosts(&inventory, pattern.as_deref(), global.format)
        }
        Command::Twin(args) => opsbook_twin::run(args),
        Command::Serve(args) => crate::serve::run(&global, &args),
        Command::History(args) => {
            let settings = global.load_config()?.serve;
            crate::history::command::run(
                &args,
                crate::serve::state_dir(args.state_dir.clone(), &settings)?,
                global.format,
                global.sandbox,
            )
        }
        Command::Scripts(args) => crate::scripts::run(&args),
        Command::Completions { shell } => {
            crate::generate::completion(shell, &mut std::io::stdout());
            Ok(0)
        }
        Command::Generate(args) => crate::generate::run(&args),
    }
}

/// `opsbook run NAME`: on this machine (or the sandbox), on the sandbox's simulated fleet, or
/// on the inventory hosts `--host`/`--hosts` select.
fn run_command(global: &GlobalOptions, run: &RunArgs) -> Result<u8, Error> {
    if let Some(flag) = run.rollout.stray() {
        return Err(Error::Usage(format!("`{flag}` goes with a rollout: add `--serial N` or `--canary`")));
    }
    match global.fleet {
        Some(clients) => {
            let (targets, inventory, _sandbox) = opsbook_fleet::targets::sandbox_targets(global, clients)?;
            let targets =
                opsbook_fleet::targets::select(targets, &inventory, global.host.as_deref(), global.hosts.as_deref())?;
            fleet_run(targets, inventory, global, run)
        }
        // The sandbox is one simulated machine: acting on an inventory host instead would
        // leave it for the real one.
        None if global.sandbox && (global.host.is_some() || global.hosts.is_some()) => Err(Error::Usage(
            "`--host`/`--hosts` pick inventory hosts, which `--sandbox` never touches\n  help: add `--fleet N` \
             to pick among simulated hosts (server, c1…cN)"
                .into(),
        )),
        None => match selection(global, run) {
            Some((host, hosts)) => {
                let inventory = Arc::new(global.inventory()?);
                let selected = inventory.targets(host.as_deref(), hosts.as_deref())?.unwrap_or_default();
                let targets = opsbook_fleet::targets::inventory_targets(global, &selected);
                fleet_run(targets, inventory.clone(), global, run)
            }
            None if run.rollout.wanted() => Err(Error::Usage(
                "a rollout changes hosts batch by batch: select them (`--hosts all`, `--set service=ROLE`), or \
                 simulate a fleet (`--sandbox --fleet N`)"
                    .into(),
            )),
            None => {
                let session = Session::open(global, Reach::Act)?;
                let code = run_runbook(&session, run, global);
                // The engine, its modules and the bus connection end with the process: taking
                // them apart piece by piece is work nobody waits for. The sandbox is dropped, as
                // it removes its private files.
                if !global.sandbox {
                    std::mem::forget(session);
                }
                code
            }
        },
    }
}

/// A run over several hosts: rolled out batch by batch when `--serial`/`--canary` ask, else on
/// every host at once.
fn fleet_run(
    targets: Vec<opsbook_fleet::targets::Target>,
    inventory: Arc<opsbook_inventory::Inventory>,
    global: &GlobalOptions,
    run: &RunArgs,
) -> Result<u8, Error> {
    let job = opsbook_fleet::Job {
        runbook: &run.name,
        params: &run.params,
        forks: global.forks,
        format: global.format,
        save_json: run.save_json.as_deref(),
        dry_run: global.dry_run,
        timeout: run.timeout,
    };
    if run.rollout.wanted() {
        if run.timeout.is_some() {
            return Err(Error::Usage(
                "--timeout stops a run where it stands, and a rollout stops only between batches (Ctrl-C), each \
                 host bounded by its gate's own deadlines: leave --timeout out of a rollout"
                    .into(),
            ));
        }
        return opsbook_fleet::rollout::run(targets, inventory, &job, &run.rollout.options());
    }
    opsbook_fleet::run::run(targets, inventory, &job)
}

/// `opsbook repl --host NAME`: the REPL acting on one inventory host.
fn repl_on_host(global: &GlobalOptions) -> Result<u8, Error> {
    let inventory = global.inventory()?;
    let selected = inventory.targets(global.host.as_deref(), global.hosts.as_deref())?.unwrap_or_default();
    let [host] = selected.as_slice() else {
        let names: Vec<&str> = selected.iter().map(|h| h.name.as_str()).collect();
        return Err(Error::Usage(format!(
            "the REPL works on one host; the selection names {}: use `--host NAME`",
            names.join(", ")
        )));
    };
    let session = opsbook_fleet::targets::host_session(global, opsbook_inventory::Inventory::resolved(host)?)?;
    session.context.set_place(opsbook_engine::verbs::Place::with_inventory(Arc::new(inventory.clone())));
    crate::repl::run(session, false)
}

/// `--format prometheus` is the file_sd output of `opsbook hosts`; every other subcommand
/// (the runs' reports first) refuses it rather than print something else.
fn refuse_prometheus(format: Format, command: &Command) -> Result<(), Error> {
    let name = match command {
        Command::Hosts { .. } => return Ok(()),
        _ if format != Format::Prometheus => return Ok(()),
        Command::Run(_) => "run",
        Command::List => "list",
        Command::Show { .. } => "show",
        Command::Templates { .. } => "templates",
        Command::Check { .. } => "check",
        Command::Fns { .. } => "fns",
        Command::Config => "config",
        Command::Repl => "repl",
        Command::Serve(_) => "serve",
        Command::History(_) => "history",
        Command::Twin(_) => "twin",
        Command::Scripts(_) => "scripts",
        Command::Completions { .. } => "completions",
        Command::Generate(_) => "generate",
    };
    Err(Error::Usage(format!(
        "`--format prometheus` is only for `opsbook hosts` (its Prometheus file_sd targets), not for \
         `opsbook {name}`: the other formats are human, json, junit and tap\n  help: `opsbook hosts --format \
         prometheus > targets.json`"
    )))
}

/// The hosts a run acts on: `--host`/`--hosts`, else the host of `--set service=HOST:ROLE`
/// (every host playing the role of `--set service=ROLE`), else the inventory group of
/// `--set environment=GROUP` (how the lifecycle runbooks are
/// called); `None` is this machine (or the sandbox), with no inventory needed.
fn selection(global: &GlobalOptions, run: &RunArgs) -> Option<(Option<String>, Option<String>)> {
    if global.host.is_some() || global.hosts.is_some() {
        return Some((global.host.clone(), global.hosts.clone()));
    }
    if global.sandbox {
        return None;
    }
    let param = |name: &str| run.params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    if let Some(service) = param("service") {
        return Some(match service.rsplit_once(':') {
            Some((host, _role)) => (Some(host.to_string()), None),
            // A role alone: every host playing it.
            None => (None, Some(service)),
        });
    }
    param("environment").map(|group| (None, Some(group)))
}

fn run_runbook(session: &Session, args: &RunArgs, global: &GlobalOptions) -> Result<u8, Error> {
    let format = global.format;
    // The time limit and Ctrl-C hold from the start: compiling a large runbook takes a while.
    opsbook_base::on_signals(session.context.runtime(), vec![session.context.cancel.clone()], "the runbook");
    let limit = args.timeout.unwrap_or_else(|| session.config.duration(opsbook_base::config::keys::LIMITS_RUN_TIMEOUT));
    if !limit.is_zero() {
        session.context.cancel.time_out_after(session.context.runtime(), limit);
    }
    let compiled = match session.compile_or_stop(&args.name, format)? {
        Ok(compiled) => compiled,
        Err(stopped) => return saved(stopped, args),
    };
    // The note is the run's first line: in the report itself, or beside a machine's format.
    if let Some(note) = crate::outside_inventory::note(global, session, &compiled, &args.name) {
        if format == Format::Human {
            opsbook_base::tell!("{note}");
        } else {
            opsbook_base::say!("{note}");
        }
    }
    let report = session.run(&compiled, &args.params, format)?;
    saved(report, args)
}

/// A run's report saved where `--save-json` says; the run's exit code.
fn saved(report: opsbook_base::report::Report, args: &RunArgs) -> Result<u8, Error> {
    if let Some(path) = &args.save_json {
        opsbook_base::report::json::save(path, &opsbook_base::report::json::document(&report))?;
    }
    Ok(report.exit_code())
}

fn list(catalog: &Catalog, format: Format) -> Result<u8, Error> {
    let entries = catalog.all(Kind::Runbook)?;
    let mut out = opsbook_base::secret::stdout();
    if format == Format::Json {
        let rows: Vec<_> = entries
            .iter()
            .map(|e| serde_json::json!({"name": e.name, "summary": e.summary(), "from": e.origin.to_string(), "source": e.source}))
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows).unwrap_or_default()).ok();
        return Ok(0);
    }
    if entries.is_empty() {
        writeln!(out, "no runbooks found; search path:").ok();
        for d in catalog.search_path() {
            writeln!(out, "  {} ({})", d.runbooks.display(), d.reason).ok();
        }
        return Ok(0);
    }
    // The summary goes last and whole; only a terminal too narrow for it cuts it, at a word.
    let width = entries.iter().map(|e| e.name.len()).max().unwrap_or(4).max(4);
    let from_width = entries.iter().map(|e| e.origin.to_string().len()).max().unwrap_or(4).max(4);
    let room = terminal_width().map(|columns| columns.saturating_sub(width + from_width + 4).max(20));
    writeln!(out, "{:width$}  {:from_width$}  SUMMARY", "NAME", "FROM").ok();
    for e in &entries {
        let summary = e.summary();
        let summary = room.map_or(summary.clone(), |room| cut_at_a_word(&summary, room));
        writeln!(out, "{:width$}  {:from_width$}  {summary}", e.name, e.origin.to_string()).ok();
    }
    Ok(0)
}

/// The columns of the terminal stdout is (`COLUMNS` overrides what it says, as for `ls`), or
/// none when stdout is not a terminal: a pipe or a file gets every line whole.
fn terminal_width() -> Option<usize> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return None;
    }
    if let Some(columns) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok()) {
        return Some(columns);
    }
    // SAFETY: TIOCGWINSZ only writes a `winsize` into the one it is given.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let asked = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (asked == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// `text` in at most `room` characters: whole when it fits, else its words that fit and "…".
fn cut_at_a_word(text: &str, room: usize) -> String {
    if text.chars().count() <= room {
        return text.to_string();
    }
    let mut kept = String::new();
    for word in text.split(' ') {
        let longer = if kept.is_empty() { word.to_string() } else { format!("{kept} {word}") };
        if longer.chars().count() + 1 > room {
            break;
        }
        kept = longer;
    }
    if kept.is_empty() {
        kept = text.chars().take(room.saturating_sub(1)).collect();
    }
    kept.trim_end_matches([',', ';', ':']).to_string() + "…"
}

/// `opsbook templates [NAME]`: every template with where the winning copy is, or one's text.
fn templates(catalog: &Catalog, name: Option<&str>, format: Format) -> Result<u8, Error> {
    use opsbook_engine::verbs::template;
    let mut out = opsbook_base::secret::stdout();
    if let Some(name) = name {
        let found = template::find(catalog, name).map_err(Error::Usage)?;
        let found =
            found.ok_or_else(|| Error::Usage(format!("no template `{name}` (`opsbook templates` lists them)")))?;
        write!(out, "{}", found.text).ok();
        return Ok(0);
    }
    let all = template::all(catalog);
    if format == Format::Json {
        let rows: Vec<_> = all.iter().map(|f| serde_json::json!({"name": f.name, "source": f.source})).collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows).unwrap_or_default()).ok();
        return Ok(0);
    }
    if all.is_empty() {
        writeln!(out, "no templates found; looked in:").ok();
        for d in catalog.search_path() {
            let dir = d.runbooks.parent().unwrap_or(std::path::Path::new("")).join("templates");
            writeln!(out, "  {} ({})", dir.display(), d.reason).ok();
        }
        return Ok(0);
    }
    let width = all.iter().map(|f| f.name.len()).max().unwrap_or(4).max(4);
    writeln!(out, "{:width$}  FROM", "NAME").ok();
    for f in &all {
        writeln!(out, "{:width$}  {}", f.name, f.source).ok();
    }
    // A template that cannot be read is named, not passed over.
    let unreadable = template::unreadable(catalog);
    for why in &unreadable {
        opsbook_base::say!("error: {why}");
    }
    Ok(if unreadable.is_empty() { 0 } else { 2 })
}

fn show(session: &Session, name: &str, format: Format) -> Result<u8, Error> {
    let compiled = session.compile(name)?;
    let e = &compiled.entry;
    let mut out = opsbook_base::secret::stdout();
    if format == Format::Json {
        let params: Vec<_> = compiled
            .params
            .iter()
            .map(|p| serde_json::json!({"name": p.name, "default": p.default_text(), "kind": p.kind.describe()}))
            .collect();
        let doc = serde_json::json!({
            "name": e.name, "doc": e.doc(), "source": e.source, "from": e.origin.to_string(),
            "params": params, "imports": compiled.imports,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default()).ok();
        return Ok(0);
    }
    writeln!(out, "{}  ({}, {})\n", e.name, e.source, e.origin).ok();
    let doc = e.doc();
    writeln!(out, "{}\n", if doc.is_empty() { "(no `//!` documentation)" } else { doc.as_str() }).ok();
    if compiled.params.is_empty() {
        writeln!(out, "Parameters: none").ok();
    } else {
        writeln!(out, "Parameters (set with --set NAME=VALUE):").ok();
        let width = compiled.params.iter().map(|p| p.name.len()).max().unwrap_or(0);
        let dwidth = compiled.params.iter().map(|p| p.default_text().len()).max().unwrap_or(0);
        for p in &compiled.params {
            writeln!(out, "  {:width$}  {:dwidth$}  {}", p.name, p.default_text(), p.kind.describe()).ok();
        }
    }
    if !compiled.imports.is_empty() {
        writeln!(out, "\nImports: {}", compiled.imports.join(", ")).ok();
    }
    writeln!(out, "\nRun: opsbook run {}", e.name).ok();
    Ok(0)
}

fn check(session: &Session, names: &[String]) -> Result<u8, Error> {
    let catalog = &session.catalog;
    let (runbooks, modules) = if names.is_empty() {
        (catalog.all(Kind::Runbook)?, catalog.all(Kind::Module)?)
    } else {
        (names.iter().map(|n| catalog.find(Kind::Runbook, n)).collect::<Result<Vec<_>, _>>()?, Vec::new())
    };
    let mut errors = Vec::new();
    let mut checked_modules: BTreeMap<String, bool> = BTreeMap::new();
    let mut module_results = Vec::new();
    for m in modules {
        checked_modules.insert(m.name.clone(), true);
        module_results.push(session.compile_entry(m).map(|_| ()));
    }
    let (mut n_runbooks, mut n_modules) = (0, module_results.len());
    for result in module_results {
        if let Err(e) = result {
            errors.push(e);
        }
    }
    for entry in runbooks {
        n_runbooks += 1;
        let source = entry.source.clone();
        match session.compile_entry(entry) {
            Err(e) => errors.push(e),
            Ok(compiled) => {
                for import in &compiled.imports {
                    if checked_modules.contains_key(import) {
                        continue;
                    }
                    checked_modules.insert(import.clone(), true);
                    match catalog.find(Kind::Module, import) {
                        Ok(m) => {
                            n_modules += 1;
                            if let Err(e) = session.compile_entry(m) {
                                errors.push(e);
                            }
                        }
                        Err(Error::UnknownModule { name, suggestions }) => {
                            let hint = opsbook_base::did_you_mean(&name, suggestions.iter().map(String::as_str))
                                .unwrap_or_default();
                            errors.push(Error::Usage(format!(
                                "{source} imports `{name}`, which is not a stdlib module{hint}"
                            )));
                        }
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
    }
    errors.extend(import_cycles(session, checked_modules.keys()));
    if errors.is_empty() {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        opsbook_base::tell!(
            "checked {n_runbooks} runbook{} and {n_modules} module{}: no errors",
            s(n_runbooks),
            s(n_modules)
        );
        Ok(0)
    } else {
        Err(Error::Many(errors))
    }
}

/// Each circle of imports among `modules` (and what they import), once.
fn import_cycles<'a>(session: &Session, modules: impl Iterator<Item = &'a String>) -> Vec<Error> {
    let mut imports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // A module that does not compile is reported by `check` already: here it imports nothing.
    let mut imports_of = |name: &str| {
        let compiled = || session.catalog.find(Kind::Module, name).and_then(|m| session.compile_entry(m));
        imports.entry(name.to_string()).or_insert_with(|| compiled().map(|c| c.imports).unwrap_or_default()).clone()
    };
    let mut seen: Vec<std::collections::BTreeSet<String>> = Vec::new();
    let mut errors = Vec::new();
    for module in modules {
        if let Some(cycle) = opsbook_engine::find_import_cycle(module, &mut imports_of) {
            let members = cycle.0.iter().cloned().collect();
            if !seen.contains(&members) {
                seen.push(members);
                errors.push(Error::Usage(cycle.to_string()));
            }
        }
    }
    errors
}

fn fns(
    session: &Session,
    filter: Option<&str>,
    json: bool,
    definitions: Option<std::path::PathBuf>,
) -> Result<u8, Error> {
    let engine = session.engine();
    if let Some(dir) = definitions {
        std::fs::create_dir_all(&dir)
            .and_then(|_| engine.definitions().include_standard_packages(false).write_to_dir(&dir))
            .map_err(|source| Error::Io {
                context: format!("cannot write definitions into `{}`", dir.display()),
                source,
            })?;
        opsbook_base::tell!("wrote Rhai definition files into {}", dir.display());
        return Ok(0);
    }
    let mut functions = opsbook_engine::functions::list(engine);
    if let Some(filter) = filter {
        let f = filter.to_lowercase();
        functions.retain(|d| {
            d.namespace.to_lowercase().contains(&f)
                || d.name.to_lowercase().contains(&f)
                || d.doc.to_lowercase().contains(&f)
        });
    }
    let mut out = opsbook_base::secret::stdout();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&functions).unwrap_or_default()).ok();
        return Ok(0);
    }
    for d in &functions {
        let effect = if d.effect == Some(opsbook_engine::verbs::Effect::Changes) { "  [changes the host]" } else { "" };
        writeln!(out, "{}{effect}", d.signature).ok();
        for line in d.doc.lines() {
            writeln!(out, "    {line}").ok();
        }
        if let Some(example) = &d.example {
            writeln!(out, "    e.g. {example}").ok();
        }
        writeln!(out).ok();
    }
    if functions.is_empty() {
        writeln!(out, "no host function matches").ok();
    }
    Ok(0)
}

fn config(session: &Session, format: Format) -> Result<u8, Error> {
    let (config, catalog) = (&session.config, &session.catalog);
    let rows = config.describe();
    let mut out = opsbook_base::secret::stdout();
    if format == Format::Json {
        let values: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, v, o)| (k.name.to_string(), serde_json::json!({"value": v, "from": o.to_string()})))
            .collect();
        let files: Vec<String> = config.files().iter().map(|p| p.display().to_string()).collect();
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"files": files, "settings": values})).unwrap_or_default()
        )
        .ok();
        return Ok(0);
    }
    let width = rows.iter().map(|(k, _, _)| k.name.len()).max().unwrap_or(0);
    let vwidth = rows.iter().map(|(_, v, _)| v.len() + 2).max().unwrap_or(0).min(40);
    for (k, v, origin) in &rows {
        writeln!(out, "{:width$} = {:vwidth$}  # {origin}", k.name, format!("{v:?}")).ok();
    }
    writeln!(out).ok();
    match config.files() {
        [] => writeln!(out, "config files: none found (defaults and environment only)").ok(),
        files => writeln!(
            out,
            "config files (lowest precedence first): {}",
            files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
        )
        .ok(),
    };
    writeln!(out, "runbook search path (first wins, then built-in):").ok();
    for d in catalog.search_path() {
        writeln!(out, "  {}  [{}]  modules: {}", d.runbooks.display(), d.reason, d.stdlib.display()).ok();
    }
    Ok(0)
}
