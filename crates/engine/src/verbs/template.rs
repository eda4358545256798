//! `template::` — configuration files rendered from Jinja templates (minijinja, with the same
//! Ansible filters inventories use), strictly: an undefined variable is an error.
//!
//! A template `NAME` (`log-shipper/config.alloy.j2`) is found like a runbook: in the
//! `templates` folder beside each runbook folder on the search path (`--runbooks`,
//! `$OPSBOOK_PATH`, `./runbooks`, `$XDG_CONFIG_HOME/opsbook/runbooks`,
//! `/etc/opsbook/runbooks`), then among the copies built into the binary from the repository's
//! `templates/`. `{% include %}` and `{% import %}` find other templates the same way. An error
//! names the template's file, line and column and shows the line with a caret.
//!
//! A render is bounded: its output at `MAX_OUTPUT`, its work at `FUEL` (minijinja charges for
//! each step and for the bytes operators make, before making them), and it stops between two
//! writes once the run is cancelled (`--timeout`, Ctrl-C).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{catalog, context};
use super::result::{VerbResult, fail, interrupted};
use super::values::record;
use crate::catalog::Catalog;
use crate::register;
use opsbook_base::Cancel;
use opsbook_base::Diagnostic;
use opsbook_base::did_you_mean;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/templates.rs"));
}

/// The `template::` namespace: templates are looked up on the search path of the engine's
/// catalog.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "render",
        Reads,
        ["name: &str", "vars: Map", "String"],
        "/// Renders the template `name` (`templates/NAME` beside a runbook folder, else built in) with\n\
         /// `vars`, and `metrics_db_token` (the API token, which scripts never see; file diffs and\n\
         /// reports mask it). An undefined variable is an error naming the template's file, line and\n\
         /// column.",
        "template::render(\"log-shipper/config.alloy.j2\", #{ host: hostname(), log_store_url: config.log_store.url })",
        |call: NativeCallContext, name: &str, vars: Map| {
            let h = context(&call);
            let mut vars = vars;
            let token = h.config().token().ok().flatten().map(|t| t.expose().to_string()).unwrap_or_default();
            vars.insert("metrics_db_token".into(), token.into());
            render_until(&catalog(&call), name, &vars, &h.cancel).map_err(|e| stopped(&h.cancel, e))
        }
    );
    register!(
        &mut m,
        "render_string",
        Reads,
        ["text: &str", "vars: Map", "String"],
        "/// Renders a template given as text (errors name it `<string>`).",
        "template::render_string(\"url = {{ url }}\", #{ url: config.log_store.url })",
        |call: NativeCallContext, text: &str, vars: Map| {
            let cancel = &context(&call).cancel;
            render_text(&Sources::default(), "<string>", text, &vars, cancel).map_err(|e| stopped(cancel, e))
        }
    );
    register!(
        &mut m,
        "list",
        Reads,
        ["Array"],
        "/// Every template that can be rendered, with where it is found: `[#{name, origin}]`\n\
         /// (`origin`: the file, or \"built-in\"), sorted by name; the first found wins.",
        "template::list()",
        |call: NativeCallContext| list(&catalog(&call))
    );
    m
}

/// A template as found: its name, what errors call its file, and its text.
#[derive(Debug, Clone)]
pub struct Found {
    /// The template's name.
    pub name: String,
    /// The file's path, or `<built-in>/templates/NAME`.
    pub source: String,
    /// Its text.
    pub text: String,
}

/// The `templates` folder beside each runbook folder, highest first.
fn folders(catalog: &Catalog) -> Vec<PathBuf> {
    catalog
        .search_path()
        .iter()
        .map(|d| d.runbooks.parent().unwrap_or(std::path::Path::new("")).join("templates"))
        .collect()
}

/// A relative path without `..`: templates never reach outside their folders.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('/') && !name.split('/').any(|p| p.is_empty() || p == ".." || p == ".")
}

/// The winning template `name`, if any.
pub fn find(catalog: &Catalog, name: &str) -> Result<Option<Found>, String> {
    if !valid_name(name) {
        return Err(format!("`{name}` is not a template name (a path relative to a templates folder)"));
    }
    for dir in folders(catalog) {
        let path = dir.join(name);
        // Anything there is this template (a directory or a FIFO is refused, not passed over).
        if path.exists() {
            let text = opsbook_base::read_text_or_explain(&path, opsbook_base::InputKind::TEMPLATE)?;
            return Ok(Some(Found { name: name.to_string(), source: path.display().to_string(), text }));
        }
    }
    Ok(embedded::TEMPLATES.iter().find(|(n, _)| *n == name).map(|(n, text)| Found {
        name: n.to_string(),
        source: format!("<built-in>/templates/{n}"),
        text: text.to_string(),
    }))
}

/// Every template name with the entry that wins, sorted (those that cannot be read are
/// left out: `unreadable` says why).
pub fn all(catalog: &Catalog) -> Vec<Found> {
    names(catalog).iter().filter_map(|n| find(catalog, n).ok().flatten()).collect()
}

/// Why each template on the search path that cannot be read cannot (not UTF-8, too large,
/// not a regular file), in name order.
pub fn unreadable(catalog: &Catalog) -> Vec<String> {
    names(catalog).iter().filter_map(|n| find(catalog, n).err()).collect()
}

fn names(catalog: &Catalog) -> Vec<String> {
    let mut names: Vec<String> = embedded::TEMPLATES.iter().map(|(n, _)| n.to_string()).collect();
    for dir in folders(catalog) {
        crate::catalog::file_names(&dir, "", &mut names);
    }
    names.sort();
    names.dedup();
    names
}

/// What `template::list` shows of one template.
#[derive(Serialize)]
struct Listed<'a> {
    name: &'a str,
    origin: String,
}

fn list(catalog: &Catalog) -> VerbResult<Array> {
    all(catalog)
        .iter()
        .map(|f| {
            let origin = if f.source.starts_with("<built-in>") { "built-in".to_string() } else { f.source.clone() };
            record(&Listed { name: &f.name, origin }).map(Dynamic::from_map)
        })
        .collect()
}

/// The templates a render loaded, by name, so an error in an included one quotes its file.
#[derive(Default, Clone)]
struct Sources {
    catalog: Option<Arc<Catalog>>,
    loaded: Arc<Mutex<HashMap<String, Found>>>,
}

impl Sources {
    fn get(&self, name: &str) -> Option<Found> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    fn load(&self, name: &str) -> Result<Option<String>, minijinja::Error> {
        let Some(catalog) = &self.catalog else { return Ok(None) };
        // A template that is there but cannot be read is not "not found": it is said why.
        let found =
            find(catalog, name).map_err(|e| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e))?;
        Ok(found.map(|f| {
            let text = f.text.clone();
            self.loaded.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), f);
            text
        }))
    }
}

/// The most bytes one render may write.
const MAX_OUTPUT: usize = 16 << 20;

/// The most fuel one render may burn: one a step, one for each 64 bytes made — 256 MB made
/// and a fraction of a second of work at most, many times what rendering 16 MiB takes.
const FUEL: u64 = 4_000_000;

/// A render's error as the run's: an interruption once the run is cancelled (the render was
/// stopped for it), else the error's words.
fn stopped(cancel: &Cancel, e: String) -> Box<rhai::EvalAltResult> {
    if cancel.is_cancelled() { interrupted() } else { fail(e) }
}

/// The rendered text, refusing to pass `MAX_OUTPUT` or to go on once `cancel` is set
/// (minijinja then stops rendering with a write failure).
struct Bounded<'a> {
    text: Vec<u8>,
    cancel: &'a Cancel,
}

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.cancel.is_cancelled() || self.text.len() + buf.len() > MAX_OUTPUT {
            return Err(std::io::Error::other("the render was stopped"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Renders the template `name` found on `catalog`'s search path.
pub fn render(catalog: &Arc<Catalog>, name: &str, vars: &Map) -> Result<String, String> {
    render_until(catalog, name, vars, &Cancel::default())
}

/// Renders the template `name` found on `catalog`'s search path, stopping once `cancel` is set.
pub fn render_until(catalog: &Arc<Catalog>, name: &str, vars: &Map, cancel: &Cancel) -> Result<String, String> {
    let sources = Sources { catalog: Some(catalog.clone()), ..Sources::default() };
    let found =
        sources.load(name).map_err(|e| e.detail().map_or_else(|| e.to_string(), str::to_string))?.ok_or_else(|| {
            let known: Vec<String> = all(catalog).into_iter().map(|f| f.name).collect();
            let hint = did_you_mean(name, known.iter().map(String::as_str)).unwrap_or_default();
            let places: Vec<String> = folders(catalog).iter().map(|d| d.display().to_string()).collect();
            format!("no template `{name}` (looked in {} and the built-in templates){hint}", places.join(", "))
        })?;
    render_text(&sources, name, &found, vars, cancel)
}

/// Renders `text` under `name`, with `sources` for what it includes.
fn render_text(sources: &Sources, name: &str, text: &str, vars: &Map, cancel: &Cancel) -> Result<String, String> {
    let mut env = opsbook_inventory::template::environment();
    env.set_fuel(Some(FUEL));
    // As Ansible's template module: a configuration file keeps its last newline, and the
    // newline after a `{% … %}` block tag is dropped, so control lines leave no blank lines.
    let syntax = minijinja::syntax::SyntaxConfig::builder().keep_trailing_newline(true).trim_blocks(true).build();
    env.set_syntax(syntax.map_err(|e| e.to_string())?);
    let loader = sources.clone();
    env.set_loader(move |n| loader.load(n));
    // A value never changes the rendered file's structure (escaped or refused per format).
    env.set_formatter(super::template_values::write);
    env.add_template_owned(name.to_string(), text.to_string())
        .map_err(|e| shown(&diagnostic(sources, name, text, &e)))?;
    let template = env.get_template(name).map_err(|e| shown(&diagnostic(sources, name, text, &e)))?;
    let context = minijinja::Value::from(minijinja::value::Serde(&Dynamic::from_map(vars.clone())));
    let mut out = Bounded { text: Vec::new(), cancel };
    let rendered = template.render_captured_to(context, &mut out);
    if cancel.is_cancelled() {
        return Err("interrupted".to_string());
    }
    rendered.map_err(|e| {
        // An undefined name is easiest fixed when it is named.
        // Names the template uses that are neither given nor functions (`range`, `lookup`).
        let missing: Vec<String> = {
            let globals: Vec<&str> = env.globals().map(|(n, _)| n).collect();
            let mut m: Vec<String> = template
                .undeclared_variables(false)
                .into_iter()
                .filter(|v| !vars.contains_key(v.as_str()) && !globals.contains(&v.as_str()))
                .collect();
            m.sort();
            m
        };
        let mut d = diagnostic(sources, name, text, &e);
        if e.kind() == minijinja::ErrorKind::WriteFailure {
            d.message = format!(
                "template `{name}` rendered more than {} MiB, the most a template may (a loop or a concatenation \
                 growing without end?)",
                MAX_OUTPUT >> 20
            );
        } else if e.kind() == minijinja::ErrorKind::OutOfFuel {
            d.message = format!(
                "template `{name}` did more work than a template may (more than {FUEL} steps of 64 bytes each: a \
                 loop or a concatenation growing without end?)"
            );
        }
        let here = e.name().is_none_or(|n| n == name);
        if e.kind() == minijinja::ErrorKind::UndefinedError && here && !missing.is_empty() {
            d.message = format!("template variable `{}` is not defined", missing.join("`, `"));
            d = d.with_note(format!("help: pass it in the variables map: template::render(…, #{{{}: …}})", missing[0]));
        }
        shown(&d)
    })?;
    String::from_utf8(out.text).map_err(|_| format!("template `{name}` rendered text that is not UTF-8"))
}

/// Where the error is: the template it names (this one or an included one), its line, and
/// the column its byte range starts at.
fn diagnostic(sources: &Sources, name: &str, text: &str, e: &minijinja::Error) -> Diagnostic {
    let at = e.name().unwrap_or(name);
    let (source, body) = match sources.get(at) {
        Some(f) => (f.source, f.text),
        None if at == name => (name.to_string(), text.to_string()),
        None => (at.to_string(), String::new()),
    };
    let message = match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    };
    let message = format!("in template `{at}`: {message}");
    match (e.range(), e.line()) {
        (Some(range), _) if !body.is_empty() => Diagnostic::at_offset(message, source, &body, range.start),
        (None, Some(line)) if !body.is_empty() => Diagnostic::at(message, source, Some(&body), line, 0),
        _ => Diagnostic::at(message, source, None, 0, 0),
    }
}

/// A diagnostic as a script error's text: without the leading `error: `, which the run's own
/// error report already says.
fn shown(d: &Diagnostic) -> String {
    let text = d.to_string();
    text.strip_prefix("error: ").unwrap_or(&text).trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, Dynamic)]) -> Map {
        pairs.iter().map(|(k, v)| ((*k).into(), v.clone())).collect()
    }

    #[test]
    fn renders_with_the_inventory_filters_and_keeps_the_last_newline() {
        let v = vars(&[("port", Dynamic::from(3100_i64)), ("debug", Dynamic::from("yes"))]);
        let out = render_text(
            &Sources::default(),
            "<string>",
            "port = {{ port }}\ndebug = {{ debug | bool }}\n",
            &v,
            &Cancel::default(),
        );
        // `True`, as Jinja (and so Ansible) prints a boolean.
        assert_eq!(out.as_deref(), Ok("port = 3100\ndebug = True\n"));
    }

    #[test]
    fn a_cancelled_run_stops_a_render_between_two_writes() {
        let cancel = Cancel::default();
        let text = "{% for i in range(3) %}{{ i }}{% endfor %}";
        assert_eq!(render_text(&Sources::default(), "<string>", text, &Map::new(), &cancel).as_deref(), Ok("012"));
        cancel.cancel();
        let stopped = render_text(&Sources::default(), "<string>", text, &Map::new(), &cancel);
        assert_eq!(stopped, Err("interrupted".to_string()));
        assert!(matches!(*super::stopped(&cancel, "interrupted".into()), rhai::EvalAltResult::ErrorTerminated(..)));
    }

    #[test]
    fn an_undefined_variable_names_the_template_line_and_column() {
        let text = "[server]\nlisten = \"{{ address }}:{{ port }}\"\n";
        let v = vars(&[("address", Dynamic::from("127.0.0.1"))]);
        let err =
            render_text(&Sources::default(), "log-store/config.yaml.j2", text, &v, &Cancel::default()).unwrap_err();
        assert_eq!(
            err,
            "template variable `port` is not defined\n \
             --> log-store/config.yaml.j2:2:28\n  |\n2 | listen = \"{{ address }}:{{ port }}\"\n  |                            ^\n  \
             = help: pass it in the variables map: template::render(…, #{port: …})"
        );
    }

    #[test]
    fn functions_are_not_taken_for_missing_variables() {
        let text = "{% for i in range(2) %}{{ i }}{{ sep }}{% endfor %}\n";
        let err = render_text(&Sources::default(), "<string>", text, &Map::new(), &Cancel::default()).unwrap_err();
        assert_eq!(err.lines().next(), Some("template variable `sep` is not defined"));
    }

    #[test]
    fn a_syntax_error_points_at_its_place() {
        let err = render_text(&Sources::default(), "<string>", "a\n{% if x %}\nb\n", &Map::new(), &Cancel::default())
            .unwrap_err();
        assert_eq!(
            err,
            "in template `<string>`: syntax error: unexpected end of input, expected end of block\n \
             --> <string>:3:1\n  |\n3 | b\n  | ^"
        );
    }

    #[test]
    fn names_stay_inside_the_templates_folders() {
        assert!(valid_name("log-shipper/config.alloy.j2"));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./x"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
