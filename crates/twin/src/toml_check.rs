//! Reading the twins' TOML config files with located diagnostics: every problem — a syntax
//! error, an unknown key, a value of the wrong type, a bad duration or address — is reported
//! at its `file:line:col`, all of them at once, in the same rustc-like form as opsbook's own
//! config errors (`opsbook_base::Diagnostic`).

use std::ops::Range;
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use opsbook_base::Diagnostic;
use opsbook_base::did_you_mean;

/// Collects diagnostics while reading one file.
pub(crate) struct Checker<'a> {
    pub file: &'a str,
    pub text: &'a str,
    pub errors: Vec<Diagnostic>,
}

/// A parsed document, or the syntax error as a diagnostic.
pub(crate) fn parse<'a>(file: &str, text: &'a str) -> Result<Spanned<DeTable<'a>>, Diagnostic> {
    DeTable::parse(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        Diagnostic::at_offset(format!("invalid TOML: {}", e.message().trim()), file, text, offset)
    })
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Replaces `$NAME` and `${NAME}` with the environment's value (empty when unset), and
/// `${NAME:-default}` with the default when NAME is unset or empty, as Telegraf does in its
/// config files and Loki with `-config.expand-env=true`.
pub(crate) fn expand_env(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, used) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
        } else {
            let (name, default) = name.split_once(":-").unwrap_or((name, ""));
            let value = std::env::var(name).ok().filter(|v| !v.is_empty());
            out.push_str(value.as_deref().unwrap_or(default));
            rest = &after[used..];
        }
    }
    out.push_str(rest);
    out
}

impl<'a> Checker<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str) -> Checker<'a> {
        Checker { file, text, errors: Vec::new() }
    }

    pub(crate) fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.errors.push(Diagnostic::at_offset(message, self.file, self.text, span.start));
    }

    fn find<'t>(
        table: &'t DeTable<'a>,
        key: &str,
    ) -> Option<(&'t Spanned<toml::de::DeString<'a>>, &'t Spanned<DeValue<'a>>)> {
        table.iter().find(|(k, _)| k.get_ref().as_ref() == key)
    }

    /// Reports every key of `table` not in `allowed`.
    pub(crate) fn only(&mut self, table: &DeTable<'a>, allowed: &[&str], section: &str) {
        for (k, _) in table.iter() {
            let name: &str = k.get_ref().as_ref();
            if !allowed.contains(&name) {
                let hint = did_you_mean(name, allowed.iter().copied())
                    .unwrap_or_else(|| format!(" (known: {})", allowed.join(", ")));
                self.error(k.span(), format!("unknown key `{name}` in {section}{hint}"));
            }
        }
    }

    pub(crate) fn string(&mut self, table: &DeTable<'a>, key: &str) -> Option<String> {
        let (_, v) = Self::find(table, key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            other => {
                self.error(v.span(), format!("`{key}` must be a string, not {}", type_name(other)));
                None
            }
        }
    }

    pub(crate) fn bool(&mut self, table: &DeTable<'a>, key: &str) -> Option<bool> {
        let (_, v) = Self::find(table, key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                self.error(v.span(), format!("`{key}` must be true or false, not {}", type_name(other)));
                None
            }
        }
    }

    pub(crate) fn int(&mut self, table: &DeTable<'a>, key: &str, min: i64) -> Option<i64> {
        let (_, v) = Self::find(table, key)?;
        let parsed = match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok(),
            _ => None,
        };
        match parsed {
            Some(n) if n >= min => Some(n),
            _ => {
                self.error(v.span(), format!("`{key}` must be an integer of at least {min}"));
                None
            }
        }
    }

    /// A duration: `"10s"`, `"1m30s"`, `"500ms"` (or a number of seconds).
    pub(crate) fn duration(&mut self, table: &DeTable<'a>, key: &str) -> Option<Duration> {
        let (_, v) = Self::find(table, key)?;
        let parsed = match v.get_ref() {
            DeValue::String(s) => opsbook_base::config::parse_duration(s),
            DeValue::Integer(i) => i.as_str().parse::<u64>().ok().map(Duration::from_secs),
            _ => None,
        };
        if parsed.is_none() {
            self.error(v.span(), format!("`{key}` must be a duration such as \"10s\" or \"1m\""));
        }
        parsed
    }

    pub(crate) fn strings(&mut self, table: &DeTable<'a>, key: &str) -> Option<Vec<String>> {
        let (_, v) = Self::find(table, key)?;
        let DeValue::Array(items) = v.get_ref() else {
            self.error(v.span(), format!("`{key}` must be an array of strings, not {}", type_name(v.get_ref())));
            return None;
        };
        let mut out = Vec::new();
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push(s.to_string()),
                other => self.error(item.span(), format!("`{key}` items must be strings, not {}", type_name(other))),
            }
        }
        Some(out)
    }

    /// A sub-table (`[name]`), with its span.
    pub(crate) fn table<'t>(&mut self, table: &'t DeTable<'a>, key: &str) -> Option<(&'t DeTable<'a>, Range<usize>)> {
        let (k, v) = Self::find(table, key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some((t, k.span())),
            other => {
                self.error(v.span(), format!("`{key}` must be a table, not {}", type_name(other)));
                None
            }
        }
    }

    /// An array of tables (`[[name]]`); a single table counts as one.
    pub(crate) fn tables<'t>(&mut self, table: &'t DeTable<'a>, key: &str) -> Vec<(&'t DeTable<'a>, Range<usize>)> {
        let Some((k, v)) = Self::find(table, key) else { return Vec::new() };
        match v.get_ref() {
            DeValue::Table(t) => vec![(t, k.span())],
            DeValue::Array(items) => items
                .iter()
                .filter_map(|i| match i.get_ref() {
                    DeValue::Table(t) => Some((t, i.span())),
                    other => {
                        self.error(i.span(), format!("`{key}` must hold tables, not {}", type_name(other)));
                        None
                    }
                })
                .collect(),
            other => {
                self.error(v.span(), format!("`{key}` must be a table, not {}", type_name(other)));
                Vec::new()
            }
        }
    }

    /// The span of a key's value (for errors about a value read earlier).
    pub(crate) fn span_of(table: &DeTable<'a>, key: &str) -> Option<Range<usize>> {
        Self::find(table, key).map(|(_, v)| v.span())
    }

    /// String key/value pairs of a table (labels, tags).
    pub(crate) fn string_map(&mut self, table: &DeTable<'a>) -> Vec<(String, String, Range<usize>)> {
        let mut out = Vec::new();
        for (k, v) in table.iter() {
            match v.get_ref() {
                DeValue::String(s) => out.push((k.get_ref().to_string(), s.to_string(), k.span())),
                other => self.error(v.span(), format!("`{}` must be a string, not {}", k.get_ref(), type_name(other))),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_located() {
        let text = "[a]\nname = 5\nflag = \"yes\"\nwait = \"soon\"\nlist = [\"x\", 2]\nextra = 1\n";
        let doc = parse("c.toml", text).unwrap();
        let mut c = Checker::new("c.toml", text);
        let (a, _) = c.table(doc.get_ref(), "a").unwrap();
        assert_eq!(c.string(a, "name"), None);
        assert_eq!(c.bool(a, "flag"), None);
        assert_eq!(c.duration(a, "wait"), None);
        assert_eq!(c.strings(a, "list"), Some(vec!["x".to_string()]));
        c.only(a, &["name", "flag", "wait", "list"], "[a]");
        let at: Vec<(usize, usize)> = c.errors.iter().map(|d| (d.line, d.column)).collect();
        assert_eq!(at, vec![(2, 8), (3, 8), (4, 8), (5, 14), (6, 1)]);
        assert!(c.errors[4].message.contains("unknown key `extra`"));
    }

    #[test]
    fn syntax_errors_are_located() {
        let d = parse("c.toml", "a = 1\nb = \n").unwrap_err();
        assert_eq!(
            (d.line, d.column, d.message.as_str()),
            (2, 5, "invalid TOML: string values must be quoted, expected literal string")
        );
    }

    #[test]
    fn environment_references_expand() {
        // SAFETY: test-local variable name, no other thread reads it.
        unsafe { std::env::set_var("OPSBOOK_TWIN_TEST_VAR", "v") };
        assert_eq!(expand_env("a $OPSBOOK_TWIN_TEST_VAR ${OPSBOOK_TWIN_TEST_VAR}b $ $"), "a v vb $ $");
        assert_eq!(expand_env("$OPSBOOK_TWIN_UNSET_VAR"), "");
        assert_eq!(expand_env("${OPSBOOK_TWIN_UNSET_VAR:-3100}:${OPSBOOK_TWIN_TEST_VAR:-x}"), "3100:v");
    }
}
