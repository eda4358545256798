//! A runbook compiled, its parameters read from the script (`Session::run` runs it).
//!
//! Parameters are declared in the script itself (`let wait = param("wait", "5s");`). They are
//! found by walking the compiled AST for `param` calls with a literal name, so `show` can list
//! them and `run` can reject an unknown `--set` key, or a value of the wrong kind, before
//! anything runs. The default's kind decides what `--set` accepts. A default is a literal, or
//! a constant of an imported stdlib module (`param("window", verify::DEFAULTS.window)`), read by
//! importing it: a module's defaults are declared once, in the module.

use std::collections::BTreeMap;

use rhai::{AST, ASTNode, Dynamic, Engine, Expr, ImmutableString, Stmt};

use crate::catalog::{Catalog, Entry};
use crate::engine;
use opsbook_base::Cancel;
use opsbook_base::Error;
use opsbook_base::suggest;

/// What a parameter accepts, from the kind of its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// Text.
    Text,
    /// A duration (`5s`, `2m`).
    Duration,
    /// An integer.
    Int,
    /// A number.
    Float,
    /// `true` or `false`.
    Bool,
    /// A comma-separated list.
    List,
    /// Declared with `()` as default: the operator must give it.
    Required,
}

impl ParamKind {
    /// What it accepts, in words for an error.
    pub fn describe(self) -> &'static str {
        match self {
            ParamKind::Text => "text",
            ParamKind::Duration => "a duration like 5s or 2m",
            ParamKind::Int => "an integer",
            ParamKind::Float => "a number",
            ParamKind::Bool => "true or false",
            ParamKind::List => "a comma-separated list",
            ParamKind::Required => "text (required)",
        }
    }
}

/// A declared parameter.
#[derive(Debug, Clone)]
pub struct Param {
    /// The parameter's name.
    pub name: String,
    /// Its default value.
    pub default: Dynamic,
    /// What it accepts.
    pub kind: ParamKind,
}

impl Param {
    /// The default as the operator would type it.
    pub fn default_text(&self) -> String {
        match self.kind {
            ParamKind::Required => "(required)".to_string(),
            ParamKind::List => self
                .default
                .clone()
                .into_typed_array::<Dynamic>()
                .map(|a| a.iter().map(crate::verbs::core::text).collect::<Vec<_>>().join(","))
                .unwrap_or_default(),
            _ => crate::verbs::core::text(&self.default),
        }
    }

    /// Converts `--set` text into a value of this parameter's kind.
    pub(crate) fn convert(&self, text: &str) -> Result<Dynamic, Error> {
        let bad = || Error::BadParamValue {
            key: self.name.clone(),
            value: text.to_string(),
            expected: self.kind.describe().to_string(),
        };
        Ok(match self.kind {
            ParamKind::Text | ParamKind::Required => Dynamic::from(text.to_string()),
            ParamKind::Duration => {
                opsbook_base::config::parse_duration(text).ok_or_else(bad)?;
                Dynamic::from(text.to_string())
            }
            ParamKind::Int => Dynamic::from(text.trim().parse::<i64>().map_err(|_| bad())?),
            // `NaN` and `inf` parse as floats yet are no margin or ratio anyone means.
            ParamKind::Float => {
                Dynamic::from(text.trim().parse::<f64>().ok().filter(|f| f.is_finite()).ok_or_else(bad)?)
            }
            ParamKind::Bool => Dynamic::from(match text.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => true,
                "false" | "no" | "off" | "0" => false,
                _ => return Err(bad()),
            }),
            ParamKind::List => {
                let items: rhai::Array = text
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| Dynamic::from(s.to_string()))
                    .collect();
                Dynamic::from_array(items)
            }
        })
    }
}

fn kind_of(default: &Dynamic) -> ParamKind {
    if default.is_unit() {
        ParamKind::Required
    } else if default.is_bool() {
        ParamKind::Bool
    } else if default.is_int() {
        ParamKind::Int
    } else if default.is_float() {
        ParamKind::Float
    } else if default.is_array() {
        ParamKind::List
    } else if let Some(s) = default.read_lock::<ImmutableString>()
        && s.trim().parse::<f64>().is_err()
        && opsbook_base::config::parse_duration(&s).is_some()
    {
        ParamKind::Duration
    } else {
        ParamKind::Text
    }
}

/// A compiled runbook.
pub struct Compiled {
    /// The runbook as found.
    pub entry: Entry,
    /// Its compiled script.
    pub ast: AST,
    /// Its declared parameters.
    pub params: Vec<Param>,
    /// Modules it imports by literal name.
    pub imports: Vec<String>,
}

/// Compiles a runbook or module; a syntax error becomes a located diagnostic. For a run, the
/// parse stops at its `cancel` (the run's time limit, Ctrl-C): `Error::Interrupted` says while
/// compiling what.
pub fn compile(engine: &Engine, catalog: &Catalog, entry: Entry, cancel: Option<&Cancel>) -> Result<Compiled, Error> {
    let parsed = match cancel {
        Some(cancel) => crate::parse_bounded::parse(entry.text.clone(), cancel)
            .map_err(|_| Error::Interrupted(format!("while compiling {}", entry.source)))?,
        None => crate::parse_bounded::parse_here(&entry.text),
    };
    let mut ast = parsed.map_err(|e| Error::located(engine::parse_diagnostic(&e, &entry.source, catalog)))?;
    ast.set_source(entry.source.as_str());
    let mut params: Vec<Param> = Vec::new();
    let mut imports = Vec::new();
    // Module paths by the alias the runbook imports them as, and the defaults naming a constant.
    let mut aliases: Vec<(String, String)> = Vec::new();
    let mut named: Vec<(usize, Expr)> = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(call, _)))
                if call.name == "param" && call.namespace.is_empty() && call.args.len() == 2 =>
            {
                if let (Expr::StringConstant(name, _), default) = (&call.args[0], &call.args[1])
                    && !params.iter().any(|p| p.name == name.as_str())
                {
                    let literal = default.get_literal_value(None);
                    if literal.is_none() {
                        named.push((params.len(), default.clone()));
                    }
                    let default = literal.unwrap_or(Dynamic::UNIT);
                    params.push(Param { name: name.to_string(), kind: kind_of(&default), default });
                }
            }
            Some(ASTNode::Stmt(Stmt::Import(import, _))) => {
                if let Expr::StringConstant(name, _) = &import.0 {
                    imports.push(name.to_string());
                    aliases.push((import.1.name.to_string(), name.to_string()));
                }
            }
            _ => {}
        }
        true
    });
    for (i, expr) in named {
        if let Some(default) = module_constant(engine, &aliases, &expr) {
            params[i].kind = kind_of(&default);
            params[i].default = default;
        }
    }
    Ok(Compiled { entry, ast, params, imports })
}

/// The value of a default naming an imported module's constant, `MODULE::NAME` or
/// `MODULE::NAME.key`, read by importing the module; `None` for any other expression.
fn module_constant(engine: &Engine, aliases: &[(String, String)], expr: &Expr) -> Option<Dynamic> {
    let (variable, key) = match expr {
        Expr::Dot(x, ..) => match (&x.lhs, &x.rhs) {
            (Expr::Variable(v, ..), Expr::Property(p, ..)) => (v, Some(&p.2)),
            _ => return None,
        },
        Expr::Variable(v, ..) => (v, None),
        _ => return None,
    };
    let (_, name, namespace, _) = variable.as_ref();
    if namespace.path.len() != 1 {
        return None;
    }
    let (_, module) = aliases.iter().find(|(alias, _)| alias == namespace.root())?;
    let key = key.map(|k| format!(".{k}")).unwrap_or_default();
    engine.eval::<Dynamic>(&format!("import {module:?} as m; m::{name}{key}")).ok().filter(|v| !v.is_unit())
}

impl Compiled {
    /// Checks `--set` pairs against the declared parameters and converts them.
    pub fn bind(&self, pairs: &[(String, String)]) -> Result<BTreeMap<String, Dynamic>, Error> {
        let mut bound = BTreeMap::new();
        for (key, value) in pairs {
            let Some(param) = self.params.iter().find(|p| &p.name == key) else {
                let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
                return Err(Error::UnknownParam {
                    runbook: self.entry.name.clone(),
                    key: key.clone(),
                    suggestions: suggest(key, names.iter().copied()),
                    declared: names.iter().map(|n| format!("`{n}`")).collect(),
                });
            };
            bound.insert(key.clone(), param.convert(value)?);
        }
        if let Some(missing) =
            self.params.iter().find(|p| p.kind == ParamKind::Required && !bound.contains_key(&p.name))
        {
            return Err(Error::Usage(format!(
                "runbook `{}` needs `--set {}=…`\n  help: `opsbook show {}` describes its parameters",
                self.entry.name, missing.name, self.entry.name
            )));
        }
        Ok(bound)
    }

    /// The parameters as the report shows them: every declared one with its effective value.
    pub fn effective_params(&self, bound: &BTreeMap<String, Dynamic>) -> BTreeMap<String, String> {
        self.params
            .iter()
            .map(|p| {
                let value = match bound.get(&p.name) {
                    Some(v) if p.kind == ParamKind::List => Param { default: v.clone(), ..p.clone() }.default_text(),
                    Some(v) => crate::verbs::core::text(v),
                    None => p.default_text(),
                };
                (p.name.clone(), value)
            })
            .collect()
    }
}
