//! Ansible's INI inventory format: hosts before any section (ungrouped), `[group]` host lines
//! with inline `key=value` variables, `[group:vars]` and `[group:children]` sections, numeric
//! host ranges (`web[01:03]`) and `host:port`.

use std::path::Path;

use serde_json::Value as Json;

use super::inventory::AnsibleInventory;
use super::vars::{Place, Var};
use opsbook_base::Diagnostic;
use opsbook_base::Error;

enum Section {
    Hosts(String),
    Vars(String),
    Children(String),
}

/// Reads `text` into `inventory`; the first malformed line is an error with a caret.
pub(super) fn read_inventory(inventory: &mut AnsibleInventory, path: &Path, text: &str) -> Result<(), Error> {
    let shown = path.display().to_string();
    let mut section = Section::Hosts("ungrouped".into());
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        let indent = raw.len() - raw.trim_start().len();
        let err = |message: String, column: usize| {
            Error::located(Diagnostic::at(message, shown.clone(), Some(text), line_no, column + 1))
        };
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(head) = line.strip_prefix('[') {
            let Some(head) = head.split_once(']').map(|(h, _)| h.trim()) else {
                return Err(err("a section header needs its closing `]`".into(), indent + line.len()));
            };
            section = match head.split_once(':') {
                None => Section::Hosts(head.to_string()),
                Some((g, "vars")) => Section::Vars(g.to_string()),
                Some((g, "children")) => Section::Children(g.to_string()),
                Some((_, kind)) => {
                    let col = indent + 1 + head.find(':').unwrap_or(0) + 1;
                    return Err(err(format!("unknown section kind `:{kind}`; expected `:vars` or `:children`"), col));
                }
            };
            let (Section::Hosts(g) | Section::Vars(g) | Section::Children(g)) = &section;
            if g.is_empty() {
                return Err(err("a section header needs a group name".into(), indent + 1));
            }
            inventory.group_mut(g);
            continue;
        }
        let place = Place { path: path.to_path_buf(), line: line_no };
        match &section {
            Section::Children(group) => inventory.add_child(group, line),
            Section::Vars(group) => {
                let Some((key, value)) = line.split_once('=') else {
                    return Err(err(format!("expected `key=value` in `[{group}:vars]`"), indent));
                };
                let var = Var { value: literal(value), place };
                inventory.group_mut(group).vars.insert(key.trim().to_string(), var);
            }
            Section::Hosts(group) => read_host_line(inventory, group, (raw, line, indent), place, &err)?,
        }
    }
    Ok(())
}

/// A host line of `[group]`: its name (a range names several), `key=value` assignments and a
/// `:port`; `err` locates a message at a column of the line.
fn read_host_line(
    inventory: &mut AnsibleInventory,
    group: &str,
    (raw, line, indent): (&str, &str, usize),
    place: Place,
    err: &dyn Fn(String, usize) -> Error,
) -> Result<(), Error> {
    let words = split_words(line).map_err(|(m, at)| err(m, indent + at))?;
    let (name, assignments) = words.split_first().expect("a non-empty line has a word");
    let (name, port) = match name.rsplit_once(':') {
        Some((n, p)) if !n.contains(':') && p.parse::<u16>().is_ok() => (n.to_string(), Some(p)),
        _ => (name.clone(), None),
    };
    let mut vars = Vec::new();
    for a in assignments {
        let Some((k, v)) = a.split_once('=') else {
            let col = indent + raw.trim_start().find(a.as_str()).unwrap_or(0);
            return Err(err(format!("expected `key=value` after the host name, found `{a}`"), col));
        };
        vars.push((k.to_string(), Var { value: literal(v), place: place.clone() }));
    }
    if let Some(p) = port {
        vars.push(("ansible_port".into(), Var { value: literal(p), place: place.clone() }));
    }
    let named = expand_range(&name).map_err(|m| err(m, indent))?;
    let total = inventory.host_count() + named.len();
    if named.len() > 1 && total > MAX_HOSTS {
        return Err(err(
            format!(
                "`{name}` would bring the inventory to {total} hosts; an inventory may name at most \
                     {MAX_HOSTS} (split the fleet into several inventories)"
            ),
            indent,
        ));
    }
    for host in named {
        inventory.add_member(group, &host);
        inventory.host_mut(&host).vars.extend(vars.iter().cloned());
    }
    Ok(())
}

/// Words as a POSIX shell splits them (quotes removed, `#` starts a comment); an unclosed
/// quote is an error at its byte offset.
fn split_words(line: &str) -> Result<Vec<String>, (String, usize)> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' | '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some((_, q)) if q == c => break,
                        Some((_, '\\')) if c == '"' => {
                            if let Some((_, e)) = chars.next() {
                                w.push(e);
                            }
                        }
                        Some((_, x)) => w.push(x),
                        None => return Err((format!("this quote `{c}` is never closed"), i)),
                    }
                }
            }
            '#' if word.is_none() => break,
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// The most hosts one range may name.
const MAX_RANGE: u64 = 100_000;

/// The most hosts ranges may bring an inventory to in all: three ranges of 100,000 in 49
/// bytes must not become 300,000 hosts to build and select from.
const MAX_HOSTS: usize = 100_000;

/// `web[01:03]` → web01, web02, web03 (zero padding kept); names without a range as they are.
fn expand_range(name: &str) -> Result<Vec<String>, String> {
    let bad = || format!("`{name}`: a host range is written `[START:END]` with numbers, as in `web[01:10]`");
    let Some(open) = name.find('[') else { return Ok(vec![name.to_string()]) };
    let close = name[open..].find(']').map(|c| open + c).ok_or_else(bad)?;
    let (prefix, range, suffix) = (&name[..open], &name[open + 1..close], &name[close + 1..]);
    let (start, end) = range.split_once(':').ok_or_else(bad)?;
    let (a, b) = (start.parse::<u64>().map_err(|_| bad())?, end.parse::<u64>().map_err(|_| bad())?);
    if a > b {
        return Err(bad());
    }
    // A typo must not ask for a billion hosts (and the memory to hold them).
    if b - a >= MAX_RANGE {
        return Err(format!("`{name}`: the range names {} hosts; at most {MAX_RANGE} may be named at once", b - a + 1));
    }
    let width = if start.starts_with('0') { start.len() } else { 0 };
    Ok((a..=b).map(|n| format!("{prefix}{n:0width$}{suffix}")).collect())
}

/// A value written in an INI inventory, read as Ansible reads it: a Python literal when it is
/// one (numbers, `True`/`False`/`None`, quoted strings), the text as it stands otherwise.
fn literal(text: &str) -> Json {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Json::from(i);
    }
    if let Ok(f) = t.parse::<f64>()
        && t.contains('.')
        && let Some(n) = serde_json::Number::from_f64(f)
    {
        return Json::Number(n);
    }
    match t {
        "True" => return Json::Bool(true),
        "False" => return Json::Bool(false),
        "None" => return Json::Null,
        _ => {}
    }
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return Json::String(t[1..t.len() - 1].to_string());
        }
    }
    Json::String(t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(split_words(r#"h a="x y" b='{{ z }}' # note"#).unwrap(), ["h", "a=x y", "b={{ z }}"]);
        assert_eq!(split_words("h a=\"x").unwrap_err(), ("this quote `\"` is never closed".to_string(), 4));
    }

    #[test]
    fn ranges_expand_with_padding() {
        assert_eq!(expand_range("web[08:10].lab").unwrap(), ["web08.lab", "web09.lab", "web10.lab"]);
        assert_eq!(expand_range("c[1:2]").unwrap(), ["c1", "c2"]);
        assert_eq!(expand_range("plain").unwrap(), ["plain"]);
        // Found by the fuzz target: a `]` before the `[` sliced backwards (a panic).
        assert_eq!(
            expand_range("]][a:").unwrap_err(),
            "`]][a:`: a host range is written `[START:END]` with numbers, as in `web[01:10]`"
        );
        assert_eq!(
            expand_range("w[1:999999999]").unwrap_err(),
            "`w[1:999999999]`: the range names 999999999 hosts; at most 100000 may be named at once"
        );
        assert_eq!(
            expand_range("c[a:b]").unwrap_err(),
            "`c[a:b]`: a host range is written `[START:END]` with numbers, as in `web[01:10]`"
        );
    }
}
