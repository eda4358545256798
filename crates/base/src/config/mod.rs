//! The effective configuration: the stack's usual defaults, TOML files, environment, flags.
//!
//! Every key is declared once in `keys::all()` (name, kind, default, environment variable, help), so
//! adding a setting is one line. Files are layered, lowest first: `/etc/opsbook/config.toml`,
//! `$XDG_CONFIG_HOME/opsbook/config.toml`, `./opsbook.toml`, then one explicit file
//! (`--config`, else `$OPSBOOK_CONFIG`, which must exist); then the stack tools' own
//! environment variables (`INFLUX_HOST`, `INFLUX_TOKEN`, `INFLUX_ORG`, `LOKI_ADDR`); then flags.
//! Each value remembers where it came from, for `opsbook config`.
//!
//! The API token is never a plain value here: `metrics_db.token` is shown redacted, and
//! `token()` resolves it (inline, `token_file` with permissions checked, or `token_command`)
//! into a `Secret` only when a verb needs it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toml::de::{DeTable, DeValue};

mod duration;
pub mod keys;
pub mod serve;

use crate::diagnostic::Diagnostic;
use crate::error::Error;
use crate::secret::{Secret, TokenSource};
use crate::suggest::did_you_mean;
pub use duration::parse_duration;
pub use keys::{Key, KeyName, Kind};

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The key's default.
    Default,
    /// A line of a configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
    },
    /// This environment variable.
    Env(&'static str),
    /// This command-line flag.
    Flag(&'static str),
    /// Pointed at the in-process stack by `--sandbox`.
    Sandbox,
    /// An endpoint as a host reaches it, through a port forwarded over ssh to that host.
    Forwarded(String),
    /// What the inventory says of the host (its roles).
    Inventory,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Sandbox => f.write_str("sandbox"),
            Origin::Forwarded(host) => write!(f, "forwarded over ssh, reached from {host}"),
            Origin::Inventory => f.write_str("inventory (the host's roles)"),
        }
    }
}

/// A configured value: scalars are kept as text, commands as argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A scalar, as text.
    Text(String),
    /// A command, as argv.
    Argv(Vec<String>),
}

impl Value {
    fn as_text(&self) -> String {
        match self {
            Value::Text(t) => t.clone(),
            Value::Argv(a) => a.join(" "),
        }
    }
}

#[derive(Debug, Clone)]
/// A key's value and where it came from.
pub struct Setting {
    /// The value.
    pub value: Value,
    /// Where it came from.
    pub origin: Origin,
}

/// What loading looks at besides the files themselves.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `--config FILE`: this file only (it must exist), over the search path.
    pub explicit: Option<PathBuf>,
    /// `--user`: the user's files and scope.
    pub user_scope: bool,
}

/// The effective configuration. A clone shares nothing mutable: a host's copy (see
/// `with_overrides`) resolves its own token.
#[derive(Clone)]
pub struct Config {
    settings: BTreeMap<&'static str, Setting>,
    files: Vec<PathBuf>,
    /// Each file's text as it was read, beside `files`: what else the files hold (the
    /// inventory's `[hosts]` and `[groups]`) is read from here, never from the file again.
    texts: Vec<Arc<str>>,
    /// A token handed over as a value (the sandbox's), never stored as text.
    given_token: Option<Secret>,
    /// The resolved token, kept until `forget_token` (after deploy wrote a new one).
    token: TokenCache,
    /// The `[serve]` table: what `opsbook serve` schedules.
    pub serve: serve::Serve,
    /// Values as the host itself sees them, for keys later pointed at a forwarded port
    /// (`Origin::Forwarded`): what a configuration rendered for that host must say.
    on_host: BTreeMap<&'static str, Value>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config").field("files", &self.files).finish_non_exhaustive()
    }
}

impl Config {
    /// Defaults only; what tests and `--sandbox` start from.
    pub fn defaults() -> Config {
        let settings = keys::all()
            .iter()
            .map(|k| (k.name, Setting { value: Value::Text(k.default.to_string()), origin: Origin::Default }))
            .collect();
        Config {
            settings,
            files: Vec::new(),
            texts: Vec::new(),
            given_token: None,
            token: TokenCache::default(),
            serve: serve::Serve::default(),
            on_host: BTreeMap::new(),
        }
    }

    /// Loads files, environment and flags in precedence order.
    pub fn load(sources: &Sources) -> Result<Config, Error> {
        let mut config = Config::defaults();
        for path in implicit_files() {
            // One that is there and no regular file (a folder, a FIFO) is refused in words by
            // `merge_file`, never passed over — nor opened, which a FIFO would hang.
            if path.exists() {
                config.merge_file(&path)?;
            }
        }
        let explicit = sources.explicit.clone().or_else(|| std::env::var_os("OPSBOOK_CONFIG").map(PathBuf::from));
        if let Some(path) = explicit {
            config.merge_file(&path)?;
        }
        for k in keys::all() {
            if let Some(var) = k.env
                && let Ok(text) = std::env::var(var)
                && !text.is_empty()
            {
                config.set(k, Value::Text(text), Origin::Env(var))?;
            }
        }
        // Known to the redactor from the start, whether or not anything resolves it.
        let inline = config.text(keys::METRICS_DB_TOKEN);
        if !inline.trim().is_empty() {
            Secret::new(inline);
        }
        // A readable token_file's token too (its errors are said when the token is needed).
        if let TokenSource::File(path) = config.token_source() {
            let _ = TokenSource::File(path).resolve();
        }
        if sources.user_scope {
            config.set(keys::SCOPE, Value::Text("user".into()), Origin::Flag("--user"))?;
        }
        Ok(config)
    }

    /// Sets one key, validating the value against its kind.
    pub fn set(&mut self, key: &'static Key, value: Value, origin: Origin) -> Result<(), Error> {
        if let Value::Text(text) = &value {
            // A password in a URL, from a file, the environment or an inventory: known before
            // a refusal could quote the value.
            crate::secret::learn_url_passwords(text);
        }
        if let Err(problem) = validate(key, &value) {
            return Err(Error::ConfigValue { key: key.name.to_string(), problem });
        }
        if matches!(origin, Origin::Forwarded(_))
            && let Some(before) = self.settings.get(key.name)
        {
            self.on_host.entry(key.name).or_insert_with(|| before.value.clone());
        }
        self.settings.insert(key.name, Setting { value, origin });
        if key.name.starts_with("metrics_db.token") {
            self.token = TokenCache::default();
        }
        Ok(())
    }

    /// A copy with `overrides` set on top, each validated like a file's value: what one host
    /// of the inventory runs with (its unit names, URLs, paths, scope).
    pub fn with_overrides(&self, overrides: &[(&'static Key, Value, Origin)]) -> Result<Config, Error> {
        let mut config = self.clone();
        for (key, value, origin) in overrides {
            config.set(key, value.clone(), origin.clone())?;
        }
        Ok(config)
    }

    /// Hands over a token as a value (the sandbox's own): it replaces every other source and
    /// is never stored as text, so no view of the configuration can show it.
    pub fn hand_token(&mut self, token: Secret, origin: Origin) {
        for key in [keys::METRICS_DB_TOKEN, keys::METRICS_DB_TOKEN_FILE, keys::METRICS_DB_TOKEN_COMMAND] {
            self.settings.insert(key.name, Setting { value: Value::Text(String::new()), origin: origin.clone() });
        }
        self.given_token = Some(token);
        self.forget_token();
    }

    fn merge_file(&mut self, path: &Path) -> Result<(), Error> {
        let text = crate::error::read_text_or(path, crate::input::Kind::CONFIG, |e| Error::ConfigFileMissing {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let shown = path.display().to_string();
        // Known to the redactor before a syntax error could quote the line holding it.
        crate::secret::learn_assignments(&text);
        let table = DeTable::parse(&text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            Error::located(Diagnostic::at_offset(
                format!("invalid TOML: {}", e.message().trim()),
                &shown,
                &text,
                offset,
            ))
        })?;
        // `serve` holds arrays of tables, which the flat key list cannot express.
        for (k, v) in table.get_ref().iter() {
            if k.get_ref() == "serve" {
                self.serve.merge(v.get_ref(), k.span().start, &shown, &text)?;
            }
        }
        let mut found = Vec::new();
        flatten(table.get_ref(), "", &mut found);
        for (name, span, value) in found {
            let at = |message: String| Error::located(Diagnostic::at_offset(message, &shown, &text, span.start));
            let key = keys::lookup(&name).ok_or_else(|| at(unknown_key_problem(&name)))?;
            let value = to_value(key, value).map_err(at)?;
            validate(key, &value).map_err(|p| at(format!("`{name}`: {p}")))?;
            let line = crate::diagnostic::line_column(&text, span.start).0;
            self.settings.insert(key.name, Setting { value, origin: Origin::File { path: path.to_path_buf(), line } });
        }
        self.files.push(path.to_path_buf());
        self.texts.push(Arc::from(text.as_str()));
        Ok(())
    }

    /// The setting of `key`.
    pub fn setting(&self, key: &Key) -> &Setting {
        // Every declared key has a setting from `defaults()` on.
        &self.settings[key.name]
    }

    /// A text value (commands joined by spaces).
    pub fn text(&self, key: &Key) -> String {
        self.setting(key).value.as_text()
    }

    /// An integer value (0 when it is not one).
    pub fn int(&self, key: &Key) -> i64 {
        self.text(key).parse().unwrap_or_default()
    }

    /// A duration value (10 seconds when it is not one).
    pub fn duration(&self, key: &Key) -> Duration {
        parse_duration(&self.text(key)).unwrap_or(Duration::from_secs(10))
    }

    /// A command as argv: an array as given, a string run by `sh -c`, `None` when unset.
    pub fn command(&self, key: &Key) -> Option<Vec<String>> {
        match &self.setting(key).value {
            Value::Argv(a) if !a.is_empty() => Some(a.clone()),
            Value::Text(t) if !t.trim().is_empty() => Some(vec!["sh".into(), "-c".into(), t.clone()]),
            _ => None,
        }
    }

    /// The files that were read, lowest precedence first.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The files that were read with the text read then, lowest precedence first: the one
    /// read of each file a command makes (the inventory parses its tables from here).
    pub fn file_texts(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.files.iter().map(PathBuf::as_path).zip(self.texts.iter().map(|t| &**t))
    }

    /// Every key with its value (secrets redacted) and origin, in declaration order.
    pub fn describe(&self) -> Vec<(&'static Key, String, &Origin)> {
        keys::all()
            .iter()
            .map(|&k| {
                let s = self.setting(k);
                let shown = match (&s.value, k.secret) {
                    (_, true) if self.given_token.is_some() => "<redacted>".to_string(),
                    (Value::Text(t), true) if t.is_empty() => "(not set)".to_string(),
                    (_, true) => "<redacted>".to_string(),
                    // token_command's arguments may be the token itself (`["echo", TOKEN]`):
                    // only the program is shown.
                    (Value::Argv(a), false) if k.name == keys::METRICS_DB_TOKEN_COMMAND.name && a.len() > 1 => {
                        let shown: Vec<&str> =
                            a.iter().enumerate().map(|(i, w)| if i == 0 { w.as_str() } else { "<redacted>" }).collect();
                        serde_json::to_string(&shown).unwrap_or_default()
                    }
                    (Value::Argv(a), false) => serde_json::to_string(a).unwrap_or_default(),
                    (Value::Text(t), false) => t.clone(),
                };
                (k, shown, &s.origin)
            })
            .collect()
    }

    /// The configuration as scripts see it (`config.metrics_db.url`): nested, no secrets.
    pub fn script_view(&self) -> serde_json::Value {
        let mut root = serde_json::Map::new();
        for k in keys::all().iter().filter(|k| !k.secret) {
            let value = match &self.setting(k).value {
                Value::Argv(a) => serde_json::json!(a),
                Value::Text(t) if k.kind == Kind::Int => serde_json::json!(t.parse::<i64>().unwrap_or_default()),
                Value::Text(t) if matches!(k.kind, Kind::Subset(_)) => serde_json::json!(list(t)),
                Value::Text(t) if k.kind == Kind::Bool => serde_json::json!(t == "true"),
                Value::Text(t) => serde_json::json!(t),
            };
            match k.name.split_once('.') {
                Some((section, leaf)) => {
                    let entry = root.entry(section).or_insert_with(|| serde_json::json!({}));
                    if let Some(map) = entry.as_object_mut() {
                        map.insert(leaf.to_string(), value);
                    }
                }
                None => {
                    root.insert(k.name.to_string(), value);
                }
            }
        }
        // `config.on_host.log_store_url`: the addresses as the host itself reaches them (this
        // view's own may lead through a port forwarded over ssh).
        let mut on_host = serde_json::Map::new();
        for k in crate::components::all().iter().filter(|c| c.serves()).map(|c| keys::of(c, "url")) {
            let value = match self.on_host.get(k.name) {
                Some(Value::Text(t)) => t.clone(),
                _ => self.text(k),
            };
            on_host.insert(k.name.replace('.', "_"), serde_json::json!(value));
        }
        root.insert("on_host".into(), serde_json::Value::Object(on_host));
        serde_json::Value::Object(root)
    }

    /// The API token, resolved once: handed over, inline value, else `token_file`, else
    /// `token_command`. `Ok(None)` when none is configured.
    pub fn token(&self) -> Result<Option<Secret>, Error> {
        let mut cached = self.token.0.lock().unwrap_or_else(|e| e.into_inner());
        cached.get_or_insert_with(|| self.token_source().resolve()).clone().map_err(Error::Token)
    }

    /// Resolves the token afresh at its next use (a deploy that onboarded the metrics database
    /// has just written it to `token_file`).
    pub fn forget_token(&self) {
        *self.token.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The file the token is read from, when the configuration names one.
    pub fn token_file(&self) -> Option<PathBuf> {
        match self.token_source() {
            TokenSource::File(path) => Some(path),
            _ => None,
        }
    }

    /// Where the token comes from, by the settings' precedence.
    pub(crate) fn token_source(&self) -> TokenSource {
        if let Some(given) = &self.given_token {
            return TokenSource::Given(given.clone());
        }
        let inline = self.text(keys::METRICS_DB_TOKEN);
        if !inline.trim().is_empty() {
            return TokenSource::Given(Secret::new(inline));
        }
        let file = self.text(keys::METRICS_DB_TOKEN_FILE);
        if !file.is_empty() {
            return TokenSource::File(PathBuf::from(file));
        }
        match self.command(keys::METRICS_DB_TOKEN_COMMAND) {
            Some(argv) => TokenSource::Command { argv, timeout: self.duration(keys::LIMITS_TOKEN_COMMAND_TIMEOUT) },
            None => TokenSource::None,
        }
    }
}

/// The resolved token of a configuration; a copy of the configuration keeps what was resolved.
#[derive(Default)]
struct TokenCache(std::sync::Mutex<Option<Result<Option<Secret>, String>>>);

impl Clone for TokenCache {
    fn clone(&self) -> TokenCache {
        TokenCache(std::sync::Mutex::new(self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()))
    }
}

fn implicit_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("/etc/opsbook/config.toml")];
    if let Some(dir) = xdg_config_home() {
        files.push(dir.join("opsbook/config.toml"));
    }
    files.push(PathBuf::from("opsbook.toml"));
    files
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn xdg_config_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
}

/// Why `name` is not a key, with the nearest key as a suggestion.
pub fn unknown_key_problem(name: &str) -> String {
    let hint = did_you_mean(name, keys::all().iter().map(|k| k.name))
        .unwrap_or_else(|| "; `opsbook config` lists every key".to_string());
    format!("unknown key `{name}`{hint}")
}

type Found<'a, 'i> = Vec<(String, std::ops::Range<usize>, &'a DeValue<'i>)>;

/// Top-level tables of the same files that other readers own: `[serve]` and its jobs
/// (`config::serve`, handed the table while the file is read), `[hosts.NAME]` and
/// `[groups.NAME]` (the inventory, which re-reads `Config::files()`); their errors point into
/// the file as these do.
pub(crate) const SECTIONS_READ_ELSEWHERE: &[&str] = &["serve", "hosts", "groups"];

fn flatten<'a, 'i>(table: &'a DeTable<'i>, prefix: &str, out: &mut Found<'a, 'i>) {
    for (k, v) in table.iter() {
        if prefix.is_empty() && SECTIONS_READ_ELSEWHERE.contains(&k.get_ref().as_ref()) {
            continue;
        }
        let name = if prefix.is_empty() { k.get_ref().to_string() } else { format!("{prefix}.{}", k.get_ref()) };
        match v.get_ref() {
            DeValue::Table(inner) => flatten(inner, &name, out),
            other => out.push((name, k.span(), other)),
        }
    }
}

/// A TOML value as `key`'s value, or why it cannot be one.
pub fn to_value(key: &Key, value: &DeValue<'_>) -> Result<Value, String> {
    let kind_name = value.type_str();
    match (key.kind, value) {
        (Kind::Command, DeValue::Array(items)) => items
            .iter()
            .map(|i| {
                i.get_ref()
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| "command array items must be strings".to_string())
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Argv),
        (Kind::Int, DeValue::Integer(i)) => Ok(Value::Text(i.as_str().replace('_', ""))),
        (Kind::Int, _) => Err(format!("`{}` expects an integer, found {kind_name}", key.name)),
        (Kind::Bool, DeValue::Boolean(b)) => Ok(Value::Text(b.to_string())),
        (_, DeValue::String(s)) => Ok(Value::Text(s.to_string())),
        _ => Err(format!("`{}` expects a string, found {kind_name}", key.name)),
    }
}

/// Whether `value` is one `key` accepts; why not, in words.
pub fn validate(key: &Key, value: &Value) -> Result<(), String> {
    let Value::Text(text) = value else { return Ok(()) };
    match key.kind {
        Kind::Url => url_problem(text).map_or(Ok(()), Err),
        Kind::Int if text.parse::<i64>().is_err() => Err(format!("`{text}` is not an integer")),
        // Every count is of something there must be some of (operations, megabytes).
        Kind::Int if text.parse::<i64>().is_ok_and(|n| n < 1) => Err(format!("`{text}` must be more than zero")),
        Kind::Duration if parse_duration(text).is_none() => {
            Err(format!("`{text}` is not a duration like `5s` or `2m`"))
        }
        Kind::Duration
            if parse_duration(text).is_some_and(|d| d.is_zero()) && !ZERO_IS_A_CHOICE.contains(&key.name) =>
        {
            Err(format!("`{text}` must be more than zero"))
        }
        Kind::Subset(options) => match list(text).into_iter().find(|item| !options.contains(&item.as_str())) {
            Some(bad) => Err(format!("`{bad}` is not one of {}", options.join(", "))),
            None => Ok(()),
        },
        Kind::Bool if text != "true" && text != "false" => Err(format!("`{text}` is not true or false")),
        Kind::Choice(options) if !options.contains(&text.as_str()) => {
            Err(format!("`{text}` is not one of {}", options.join(", ")))
        }
        _ => Ok(()),
    }
}

/// Durations for which zero means something (no persisting connection, no settling watch);
/// every other duration is a time limit or an age, and zero of it makes no sense.
const ZERO_IS_A_CHOICE: &[&str] = &["ssh.persist", "units.settle", "limits.run_timeout"];

/// What is wrong with an http(s) address, in words, with how to write one; `None` for a
/// usable one.
fn url_problem(text: &str) -> Option<String> {
    const HOW: &str = "write it as http://HOST:PORT or https://HOST:PORT";
    let Some((_, rest)) = text.split_once("://").filter(|(scheme, _)| matches!(*scheme, "http" | "https")) else {
        return Some(format!("`{text}` is not an http:// or https:// address; {HOW}"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if !authority.contains('@') && rest.contains('@') {
        // `user:pa#ss@host`: what follows the `#` is not a host, and naming its pieces would
        // show the password.
        return Some(format!(
            "`{text}`: the user or password holds `/`, `?` or `#`, which end an address's host part; write              them as %2F, %3F and %23"
        ));
    }
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.is_empty() || host == "[]" {
        return Some(format!("`{text}` names no host; {HOW}"));
    }
    if host.chars().any(|c| c.is_whitespace()) {
        return Some(format!("`{text}`: the host name `{host}` holds a space; {HOW}"));
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Some(format!("`{text}`: the port `{port}` is not a number from 1 to 65535; {HOW}"));
    }
    None
}

/// The items of a comma-separated value, trimmed, empty ones left out.
pub fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_units_and_bare_seconds() {
        assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("1m 30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("soon"), None);
    }

    #[test]
    fn script_view_hides_the_token() {
        let mut c = Config::defaults();
        c.set(keys::METRICS_DB_TOKEN, Value::Text("sekrit-token".into()), Origin::Flag("test")).unwrap();
        let view = c.script_view().to_string();
        assert!(!view.contains("sekrit-token"));
        assert!(view.contains("\"bucket\":\"telegraf\""));
    }

    #[test]
    fn set_rejects_bad_values_with_the_reason() {
        let mut c = Config::defaults();
        let e = c.set(keys::LOG_STORE_URL, Value::Text("localhost:3100".into()), Origin::Default).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error: config `log_store.url`: `localhost:3100` is not an http:// or https:// address; write it as http://HOST:PORT or https://HOST:PORT"
        );
        assert_eq!(unknown_key_problem("log_store.ur"), "unknown key `log_store.ur`; did you mean `log_store.url`?");
    }
}
