//! Ansible's YAML inventory format, and the YAML of `group_vars/` and `host_vars/` files.
//!
//! Read with saphyr's marked nodes, so every variable remembers its line and every mistake is
//! shown at its line and column with a caret. Scalars are resolved as Ansible's YAML 1.1
//! loader resolves them: plain `yes`/`no`/`on`/`off` are booleans, quoted text is text.

use std::path::Path;

use saphyr::{MarkedYaml, Scalar, ScalarStyle, YamlData, YamlLoader};
use serde_json::Value as Json;

use super::inventory::AnsibleInventory;
use super::vars::{Place, Var, Vars};
use opsbook_base::Diagnostic;
use opsbook_base::Error;
use opsbook_base::did_you_mean;

/// Parses `text` into its first document (`None` when the file holds none).
pub(super) fn parse<'a>(path: &Path, text: &'a str) -> Result<Option<MarkedYaml<'a>>, Error> {
    let mut loader: YamlLoader<'a, MarkedYaml<'a>> = YamlLoader::default();
    // Scalars stay as written (with their style) until `scalar` resolves them.
    loader.early_parse(false);
    let mut parser = saphyr_parser::Parser::new_from_str(text);
    let loaded = parser.load(&mut loader, true);
    if let Some(e) = loaded.err().or_else(|| loader.error().cloned()) {
        let m = e.marker();
        return Err(Error::located(Diagnostic::at(
            format!("invalid YAML: {}", e.info()),
            path.display().to_string(),
            Some(text),
            m.line(),
            m.col() + 1,
        )));
    }
    Ok(loader.into_documents().into_iter().next().filter(|d| !is_null(d)))
}

/// A scalar node's value: quoted is text; plain is resolved as PyYAML (YAML 1.1) does for
/// null and booleans, as YAML 1.2 for numbers.
fn scalar<'a>(node: &MarkedYaml<'a>) -> Option<Scalar<'a>> {
    match &node.data {
        YamlData::Value(v) => Some(v.clone()),
        YamlData::Representation(text, ScalarStyle::Plain, None) => Some(match text.as_ref() {
            "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Scalar::Boolean(true),
            "no" | "No" | "NO" | "off" | "Off" | "OFF" => Scalar::Boolean(false),
            "" | "~" | "null" | "Null" | "NULL" => Scalar::Null,
            _ => Scalar::parse_from_cow(text.clone()),
        }),
        YamlData::Representation(text, _, _) => Some(Scalar::String(text.clone())),
        _ => None,
    }
}

/// An error pointing at `node`.
pub(super) fn at(path: &Path, text: &str, node: &MarkedYaml<'_>, message: String) -> Error {
    let m = node.span.start;
    Error::located(Diagnostic::at(message, path.display().to_string(), Some(text), m.line(), m.col() + 1))
}

/// An empty entry (`monitor3:` with nothing after it) or an explicit null.
fn is_null(node: &MarkedYaml<'_>) -> bool {
    scalar(node) == Some(Scalar::Null)
}

/// A scalar as text (keys, host and group names).
pub(super) fn text(node: &MarkedYaml<'_>) -> Option<String> {
    match scalar(node)? {
        Scalar::String(s) => Some(s.to_string()),
        Scalar::Integer(i) => Some(i.to_string()),
        Scalar::FloatingPoint(f) => Some(f.to_string()),
        Scalar::Boolean(b) => Some(b.to_string()),
        Scalar::Null => None,
    }
}

/// A node as the JSON value Ansible would hold.
pub(super) fn to_json(node: &MarkedYaml<'_>) -> Json {
    if let Some(s) = scalar(node) {
        return match s {
            Scalar::Null => Json::Null,
            Scalar::Boolean(b) => Json::Bool(b),
            Scalar::Integer(i) => Json::from(i),
            Scalar::FloatingPoint(f) => serde_json::Number::from_f64(f.0).map_or(Json::Null, Json::Number),
            Scalar::String(s) => Json::String(s.to_string()),
        };
    }
    match &node.data {
        YamlData::Sequence(items) => Json::Array(items.iter().map(to_json).collect()),
        YamlData::Mapping(map) => Json::Object(
            map.iter().map(|(k, v)| (text(k).unwrap_or_default(), to_json(v))).collect::<serde_json::Map<_, _>>(),
        ),
        YamlData::Tagged(_, inner) => to_json(inner),
        _ => Json::Null,
    }
}

/// A mapping of variables (`vars:`, a host's entry, a vars file); null is no variables.
pub(super) fn vars(path: &Path, text: &str, node: &MarkedYaml<'_>, what: &str) -> Result<Vars, Error> {
    let map = match &node.data {
        YamlData::Mapping(map) => map,
        _ if is_null(node) => return Ok(Vars::new()),
        _ => return Err(at(path, text, node, format!("{what} must be a mapping of variable names to values"))),
    };
    let mut out = Vars::new();
    for (k, v) in map {
        let name = text_or_err(path, text, k, "a variable name")?;
        let place = Place { path: path.to_path_buf(), line: k.span.start.line() };
        out.insert(name, Var { value: to_json(v), place });
    }
    Ok(out)
}

fn text_or_err(path: &Path, source: &str, node: &MarkedYaml<'_>, what: &str) -> Result<String, Error> {
    text(node).ok_or_else(|| at(path, source, node, format!("expected {what} here")))
}

/// Reads an inventory: the top-level keys are groups (usually just `all`).
pub(super) fn read_inventory(inventory: &mut AnsibleInventory, path: &Path, text: &str) -> Result<(), Error> {
    let Some(root) = parse(path, text)? else { return Ok(()) };
    let YamlData::Mapping(map) = &root.data else {
        return Err(at(path, text, &root, "an inventory must be a mapping of group names (usually `all:`)".into()));
    };
    for (k, v) in map {
        let name = text_or_err(path, text, k, "a group name")?;
        read_group(inventory, path, text, &name, v, None)?;
    }
    Ok(())
}

const GROUP_KEYS: [&str; 3] = ["hosts", "vars", "children"];

fn read_group(
    inventory: &mut AnsibleInventory,
    path: &Path,
    text: &str,
    name: &str,
    body: &MarkedYaml<'_>,
    parent: Option<&str>,
) -> Result<(), Error> {
    inventory.group_mut(name);
    if let Some(parent) = parent {
        inventory.add_child(parent, name);
    }
    let map = match &body.data {
        YamlData::Mapping(map) => map,
        _ if is_null(body) => return Ok(()),
        _ => return Err(at(path, text, body, format!("group `{name}` must be a mapping with hosts, vars, children"))),
    };
    for (k, v) in map {
        let key = text_or_err(path, text, k, "`hosts`, `vars` or `children`")?;
        match key.as_str() {
            "hosts" => read_hosts(inventory, path, text, name, v)?,
            "vars" => {
                let vars = vars(path, text, v, &format!("`vars` of group `{name}`"))?;
                inventory.group_mut(name).vars.extend(vars);
            }
            "children" => match &v.data {
                YamlData::Mapping(children) => {
                    for (ck, cv) in children {
                        let child = text_or_err(path, text, ck, "a group name")?;
                        read_group(inventory, path, text, &child, cv, Some(name))?;
                    }
                }
                _ if is_null(v) => {}
                _ => {
                    return Err(at(path, text, v, format!("`children` of group `{name}` must be a mapping of groups")));
                }
            },
            other => {
                let hint = did_you_mean(other, GROUP_KEYS).unwrap_or_default();
                return Err(at(path, text, k, format!("group `{name}` has an unknown key `{other}`{hint}")));
            }
        }
    }
    Ok(())
}

fn read_hosts(
    inventory: &mut AnsibleInventory,
    path: &Path,
    text: &str,
    group: &str,
    node: &MarkedYaml<'_>,
) -> Result<(), Error> {
    let map = match &node.data {
        YamlData::Mapping(map) => map,
        _ if is_null(node) => return Ok(()),
        _ => {
            return Err(at(path, text, node, format!("`hosts` of group `{group}` must be a mapping of host names")));
        }
    };
    for (k, v) in map {
        let host = text_or_err(path, text, k, "a host name")?;
        let vars = vars(path, text, v, &format!("host `{host}`"))?;
        inventory.add_member(group, &host);
        inventory.host_mut(&host).vars.extend(vars);
    }
    Ok(())
}
