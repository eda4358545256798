//! Ansible's templating of inventory values, through minijinja.
//!
//! `ansible-inventory --list` hands templated values back as written; Ansible renders them
//! only when a play uses them, with the host's variables in scope. `Resolver` does the same on
//! demand: a value's templates are rendered after the variables they use (each rendered once,
//! cycles reported), with Ansible's magic `inventory_hostname` and `group_names`, and the few
//! Ansible additions inventories use: `lookup('env', NAME)`, the `bool`, `regex_replace`,
//! `regex_search`, `ternary`, `mandatory` and `d` filters. An undefined variable is an error
//! (naming it), never an empty string. A rendered value is bounded (`MAX_RENDERED`, and
//! minijinja's `FUEL`): a chain of `{{ a ~ a ~ a }}` through ten variables
//! would otherwise ask for gigabytes.

use std::cell::RefCell;
use std::collections::BTreeMap;

use minijinja::value::{Kwargs, Rest};
use minijinja::{Environment, ErrorKind, UndefinedBehavior, Value};
use serde_json::Value as Json;

use super::ansible::HostVar;

/// Why a variable could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unresolved {
    pub var: String,
    pub reason: String,
}

const CYCLE: &str = "it refers to itself";

/// The most bytes one rendered inventory value may hold.
pub(crate) const MAX_RENDERED: usize = 1 << 20;

/// The most fuel one inventory value's rendering may burn: minijinja charges one for each
/// step and one for each 64 bytes an operator, a filter or the output makes, before making
/// them — a loop of concatenation is stopped by this before its text reaches the output.
const FUEL: u64 = 1_000_000;

/// Renders one host's variables.
pub(crate) struct Resolver<'a> {
    vars: &'a BTreeMap<String, HostVar>,
    magic: BTreeMap<String, Json>,
    env: Environment<'static>,
    done: RefCell<BTreeMap<String, Result<Json, String>>>,
    stack: RefCell<Vec<String>>,
}

impl<'a> Resolver<'a> {
    /// `groups`: the host's groups, `all` excluded (Ansible's `group_names`).
    pub(crate) fn new(host: &str, vars: &'a BTreeMap<String, HostVar>, groups: &[String]) -> Resolver<'a> {
        let mut magic = BTreeMap::new();
        magic.insert("inventory_hostname".to_string(), Json::from(host));
        magic.insert("inventory_hostname_short".to_string(), Json::from(host.split('.').next().unwrap_or(host)));
        magic.insert("group_names".to_string(), Json::from(groups.to_vec()));
        let mut env = environment();
        env.set_fuel(Some(FUEL));
        Resolver { vars, magic, env, done: RefCell::default(), stack: RefCell::default() }
    }

    /// The variable's value with its templates rendered; `None` when the host has no such
    /// variable.
    pub(crate) fn get(&self, name: &str) -> Option<Result<Json, Unresolved>> {
        if let Some(v) = self.magic.get(name) {
            return Some(Ok(v.clone()));
        }
        self.vars.get(name)?;
        Some(self.resolve(name).map_err(|reason| Unresolved { var: name.to_string(), reason }))
    }

    fn resolve(&self, name: &str) -> Result<Json, String> {
        if let Some(done) = self.done.borrow().get(name) {
            return done.clone();
        }
        if self.stack.borrow().iter().any(|n| n == name) {
            let chain = self.stack.borrow().join("` → `");
            return Err(format!("{CYCLE} (`{chain}` → `{name}`)"));
        }
        self.stack.borrow_mut().push(name.to_string());
        let raw = self.vars[name].value.clone();
        let result = self.render_value(&raw);
        self.stack.borrow_mut().pop();
        self.done.borrow_mut().insert(name.to_string(), result.clone());
        result
    }

    fn render_value(&self, value: &Json) -> Result<Json, String> {
        Ok(match value {
            Json::String(s) if s.contains("{{") || s.contains("{%") => Json::String(self.render(s)?),
            Json::Array(items) => Json::Array(items.iter().map(|i| self.render_value(i)).collect::<Result<_, _>>()?),
            Json::Object(map) => Json::Object(
                map.iter().map(|(k, v)| Ok((k.clone(), self.render_value(v)?))).collect::<Result<_, String>>()?,
            ),
            other => other.clone(),
        })
    }

    fn render(&self, source: &str) -> Result<String, String> {
        let template = self
            .env
            .template_from_str(source)
            .map_err(|e| format!("`{source}` is not a valid template: {}", detail(&e)))?;
        let mut context = self.magic.clone();
        let mut missing = Vec::new();
        let mut used: Vec<String> = template.undeclared_variables(false).into_iter().collect();
        used.sort();
        for name in used {
            if self.magic.contains_key(&name) {
                continue;
            }
            if self.vars.contains_key(&name) {
                let value = self.resolve(&name).map_err(|why| {
                    // A cycle is said once, whole, not once per variable on it.
                    if why.starts_with(CYCLE) {
                        why
                    } else {
                        format!("it uses `{name}`, which cannot be resolved: {why}")
                    }
                })?;
                context.insert(name, value);
            } else {
                missing.push(name);
            }
        }
        let mut out = Bounded(Vec::new());
        let rendered = template.render_captured_to(Value::from(minijinja::value::Serde(&context)), &mut out);
        rendered
            .map_err(|e| match (e.kind(), missing.as_slice()) {
                (ErrorKind::WriteFailure, _) => too_large(),
                (ErrorKind::OutOfFuel, _) => format!(
                    "rendering it did more work than an inventory value may (more than {FUEL} steps of 64 bytes \
                     each: a loop or a chain of templates growing without end?)"
                ),
                (ErrorKind::UndefinedError, [one]) => format!("`{one}` is not defined for this host"),
                (ErrorKind::UndefinedError, many) if !many.is_empty() => {
                    format!("one of `{}` is not defined for this host", many.join("`, `"))
                }
                _ => format!("`{source}`: {}", detail(&e)),
            })
            .and_then(|_| String::from_utf8(out.0).map_err(|_| "its rendered text is not UTF-8".to_string()))
    }
}

fn too_large() -> String {
    format!(
        "its rendered text is larger than {} MiB, the most an inventory value may hold (a chain of templates \
         repeating each other?)",
        MAX_RENDERED >> 20
    )
}

/// The rendered text, refusing to grow past `MAX_RENDERED` (minijinja then stops rendering).
struct Bounded(Vec<u8>);

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > MAX_RENDERED {
            return Err(std::io::Error::other("the rendered value is too large"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The error's own words, without minijinja's template name and line.
fn detail(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    }
}

/// The strict environment with the Ansible additions; `template::` renders with it too.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_function("lookup", lookup);
    env.add_filter("d", minijinja::filters::default);
    env.add_filter("bool", ansible_bool);
    env.add_filter("ternary", ternary);
    env.add_filter("mandatory", mandatory);
    env.add_filter("regex_replace", regex_replace);
    env.add_filter("regex_search", regex_search);
    env
}

/// `lookup('env', NAME…)`: the variables' values joined by commas, `''` for an unset one (as
/// Ansible's env lookup). Other lookup plugins read files or run things; they are refused.
fn lookup(plugin: &str, terms: Rest<String>, _options: Kwargs) -> Result<Value, minijinja::Error> {
    if plugin != "env" {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("lookup plugin `{plugin}` is not supported by opsbook (only `env` is)"),
        ));
    }
    let values: Vec<String> = terms.iter().map(|t| std::env::var(t).unwrap_or_default()).collect();
    Ok(Value::from(values.join(",")))
}

/// Ansible's `bool`: `yes`, `on`, `true`, `1` (any case) are true, everything else false.
fn ansible_bool(value: Value) -> bool {
    if value.kind() == minijinja::value::ValueKind::Bool {
        return value.is_true();
    }
    let text = value.to_string().trim().to_ascii_lowercase();
    matches!(text.as_str(), "yes" | "on" | "true" | "1" | "y" | "t")
}

fn ternary(value: Value, yes: Value, no: Value) -> Value {
    if value.is_true() { yes } else { no }
}

fn mandatory(value: Value, message: Option<String>) -> Result<Value, minijinja::Error> {
    if value.is_undefined() {
        let why = message.unwrap_or_else(|| "a mandatory variable is not defined".into());
        return Err(minijinja::Error::new(ErrorKind::UndefinedError, why));
    }
    Ok(value)
}

fn python_regex(pattern: &str, kwargs: &Kwargs) -> Result<regex::Regex, minijinja::Error> {
    let ignorecase: Option<bool> = kwargs.get("ignorecase")?;
    let multiline: Option<bool> = kwargs.get("multiline")?;
    regex::RegexBuilder::new(pattern)
        .case_insensitive(ignorecase.unwrap_or(false))
        .multi_line(multiline.unwrap_or(false))
        .build()
        .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("invalid regex `{pattern}`: {e}")))
}

/// Python's `\1` and `\g<name>` back-references, in the regex crate's `${1}` spelling.
fn python_replacement(replacement: &str) -> String {
    let re = regex::Regex::new(r"\\(\d+)|\\g<(\w+)>|\$").expect("a valid regex");
    re.replace_all(replacement, |c: &regex::Captures<'_>| match (c.get(1), c.get(2)) {
        (Some(n), _) | (_, Some(n)) => format!("${{{}}}", n.as_str()),
        _ => "$$".to_string(),
    })
    .into_owned()
}

fn regex_replace(
    value: String,
    pattern: String,
    replacement: Option<String>,
    kwargs: Kwargs,
) -> Result<String, minijinja::Error> {
    let re = python_regex(&pattern, &kwargs)?;
    let out = re.replace_all(&value, python_replacement(&replacement.unwrap_or_default()).as_str()).into_owned();
    kwargs.assert_all_used()?;
    Ok(out)
}

fn regex_search(value: String, pattern: String, kwargs: Kwargs) -> Result<Value, minijinja::Error> {
    let re = python_regex(&pattern, &kwargs)?;
    kwargs.assert_all_used()?;
    Ok(re.find(&value).map_or(Value::from(()), |m| Value::from(m.as_str())))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::ansible::{Level, Place};

    fn vars(pairs: &[(&str, Json)]) -> BTreeMap<String, HostVar> {
        let place = Place { path: PathBuf::from("inv.yml"), line: 1 };
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), HostVar { value: v.clone(), place: place.clone(), level: Level::Host }))
            .collect()
    }

    fn get(vars: &BTreeMap<String, HostVar>, name: &str) -> Result<Json, String> {
        Resolver::new("web1", vars, &["web".into()]).get(name).expect("defined").map_err(|u| u.reason)
    }

    #[test]
    fn values_render_after_the_variables_they_use() {
        let v = vars(&[
            ("domain", Json::from("{{ lookup('env', 'OPSBOOK_TEST_UNSET_TLD') | default('example.com', true) }}")),
            ("ansible_host", Json::from("{{ inventory_hostname }}.{{ domain | upper }}")),
            ("flag", Json::from("{{ 'yes' | bool }}")),
            ("short", Json::from("{{ ansible_host | regex_replace('^(\\w+)\\..*$', '\\\\1') }}")),
            ("list", serde_json::json!(["{{ group_names | join(',') }}", 3])),
        ]);
        assert_eq!(get(&v, "ansible_host").unwrap(), "web1.EXAMPLE.COM");
        assert_eq!(get(&v, "flag").unwrap(), "True");
        assert_eq!(get(&v, "short").unwrap(), "web1");
        assert_eq!(get(&v, "list").unwrap(), serde_json::json!(["web", 3]));
    }

    #[test]
    fn what_cannot_be_resolved_is_named() {
        let v = vars(&[
            ("a", Json::from("{{ b }}")),
            ("b", Json::from("{{ a }}")),
            ("c", Json::from("x{{ nowhere }}")),
            ("d", Json::from("{{ lookup('file', '/etc/passwd') }}")),
            ("e", Json::from("{{ c }}")),
            ("f", Json::from("{{ oops")),
        ]);
        assert_eq!(get(&v, "a").unwrap_err(), "it refers to itself (`a` → `b` → `a`)");
        assert_eq!(get(&v, "c").unwrap_err(), "`nowhere` is not defined for this host");
        assert_eq!(
            get(&v, "d").unwrap_err(),
            "`{{ lookup('file', '/etc/passwd') }}`: invalid operation: lookup plugin `file` is not supported by opsbook (only `env` is)"
        );
        assert_eq!(
            get(&v, "e").unwrap_err(),
            "it uses `c`, which cannot be resolved: `nowhere` is not defined for this host"
        );
        assert_eq!(
            get(&v, "f").unwrap_err(),
            "`{{ oops` is not a valid template: syntax error: unexpected end of input, expected end of variable block"
        );
        assert!(Resolver::new("h", &v, &[]).get("zzz").is_none());
    }
}
