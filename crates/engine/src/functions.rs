//! The verbs an engine offers, read from Rhai's own metadata: what `opsbook fns` prints, what
//! the REPL completes, which calls `serve` refuses in a watching job (those that change the
//! host), and the examples the tests run. Each verb says its effect and gives its example where
//! it is registered (`register!`, `host::verb`), so this is the one table of them.

use rhai::Engine;
use serde::Serialize;
use serde_json::Value;

use crate::verbs::verb::{self, Effect};

/// One registered host function.
#[derive(Debug, Clone, Serialize)]
pub struct Function {
    /// Module namespace (`unit`, `journal`, …), or empty for global functions.
    pub namespace: String,
    /// The function's name.
    pub name: String,
    /// `unit::status(name: &str) -> Map`
    pub signature: String,
    /// The doc comment without `///` markers (nor the effect and example lines).
    pub doc: String,
    /// Whether it only reads the host or changes it; `None` for Rhai's own accessors of host
    /// types (a unit status's fields), which read.
    pub effect: Option<Effect>,
    /// A call a runbook could contain.
    pub example: Option<String>,
}

impl Function {
    /// `unit::restart`, or `check` for a global function.
    pub fn qualified_name(&self) -> String {
        if self.namespace.is_empty() { self.name.clone() } else { format!("{}::{}", self.namespace, self.name) }
    }
}

/// The qualified names of every verb that changes the host (`unit::restart`, `file::write`, …).
pub fn changing(engine: &Engine) -> std::collections::BTreeSet<String> {
    list(engine).into_iter().filter(|f| f.effect == Some(Effect::Changes)).map(|f| f.qualified_name()).collect()
}

/// Every non-standard function, sorted by namespace, name and signature.
pub fn list(engine: &Engine) -> Vec<Function> {
    let json = engine.gen_fn_metadata_to_json(false).unwrap_or_default();
    let root: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
    let mut out = Vec::new();
    if let Some(modules) = root.get("modules").and_then(Value::as_object) {
        for (ns, m) in modules {
            collect(ns, m.get("functions"), &mut out);
        }
    }
    collect("", root.get("functions"), &mut out);
    out.sort_by(|a, b| (&a.namespace, &a.name, &a.signature).cmp(&(&b.namespace, &b.name, &b.signature)));
    out
}

fn collect(namespace: &str, functions: Option<&Value>, out: &mut Vec<Function>) {
    for f in functions.and_then(Value::as_array).into_iter().flatten() {
        let name = f.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let params: Vec<String> = f
            .get("params")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| {
                let n = p.get("name").and_then(Value::as_str).unwrap_or("_");
                match p.get("type").and_then(Value::as_str) {
                    Some(t) => format!("{n}: {t}"),
                    None => n.to_string(),
                }
            })
            .collect();
        let ret = f.get("returnType").and_then(Value::as_str).unwrap_or("");
        let prefix = if namespace.is_empty() { String::new() } else { format!("{namespace}::") };
        let mut signature = format!("{prefix}{name}({})", params.join(", "));
        if !ret.is_empty() && ret != "()" {
            signature.push_str(&format!(" -> {ret}"));
        }
        let lines: Vec<&str> = f
            .get("docComments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .flat_map(str::lines)
            .map(|l| l.trim_start().trim_start_matches("///").trim_start_matches("/**").trim_end_matches("*/").trim())
            .collect();
        let effect = lines.iter().find_map(|l| Effect::from_doc_line(l));
        let example = lines.iter().find_map(|l| verb::example_from_doc_line(l));
        let doc = lines
            .iter()
            .filter(|l| Effect::from_doc_line(l).is_none() && verb::example_from_doc_line(l).is_none())
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        out.push(Function { namespace: namespace.to_string(), name, signature, doc, effect, example });
    }
}
