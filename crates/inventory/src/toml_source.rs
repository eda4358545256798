//! The inventory written in opsbook's own config files: `[hosts.NAME]` and `[groups.NAME]`.
//!
//! ```toml
//! [hosts.monitor1]
//! address = "10.0.0.1"              # none: the local machine
//! roles = ["metrics-db", "log-store"]
//! user = "ops"                      # ssh user, port and key
//! port = 22
//! key = "~/.ssh/monitor_ed25519"
//! config = { scope = "user" }       # any opsbook config key, for this host only
//!
//! [groups.clients]                  # also names a group of the Ansible inventory
//! hosts = ["monitor3"]
//! roles = ["metrics-agent", "log-shipper"]
//! config.log_shipper.unit = "alloy.service"
//! ```
//!
//! Every config file is read from the text the configuration kept of it
//! (`Config::file_texts()`: a command reads each file once), lowest precedence first; a later
//! file's field replaces an earlier one's. Mistakes point into the file with a caret, as the config
//! loader's do.

use std::path::Path;

use toml::de::{DeTable, DeValue};

use super::ansible::Place;
use crate::role::Role;
use opsbook_base::Diagnostic;
use opsbook_base::Error;
use opsbook_base::config::{self, Key, Value};
use opsbook_base::did_you_mean;

/// A value with the place it was written.
#[derive(Debug, Clone)]
pub(crate) struct At<T> {
    pub value: T,
    pub place: Place,
}

/// A per-host (or per-group) setting of an opsbook config key.
#[derive(Debug, Clone)]
pub(crate) struct Setting {
    pub key: &'static Key,
    pub value: Value,
    pub place: Place,
}

#[derive(Debug, Default)]
pub(crate) struct TomlHost {
    pub name: String,
    pub address: Option<At<String>>,
    pub roles: Vec<At<Role>>,
    pub user: Option<At<String>>,
    pub port: Option<At<u16>>,
    pub key: Option<At<String>>,
    pub config: Vec<Setting>,
}

#[derive(Debug, Default)]
pub(crate) struct TomlGroup {
    pub name: String,
    /// Where the group's table is (the last file's, when several set it).
    pub place: Option<Place>,
    pub hosts: Vec<At<String>>,
    pub roles: Vec<At<Role>>,
    pub config: Vec<Setting>,
}

#[derive(Debug, Default)]
pub(crate) struct TomlInventory {
    pub hosts: Vec<TomlHost>,
    pub groups: Vec<TomlGroup>,
}

const HOST_FIELDS: [&str; 6] = ["address", "roles", "user", "port", "key", "config"];
const GROUP_FIELDS: [&str; 3] = ["hosts", "roles", "config"];

/// Reads `[hosts.*]` and `[groups.*]` from each file's text, as `files` gives them.
pub(crate) fn read<'a>(files: impl Iterator<Item = (&'a Path, &'a str)>) -> Result<TomlInventory, Error> {
    let mut out = TomlInventory::default();
    for (path, text) in files {
        // The config loader parsed this text already; a parse error here cannot be new.
        let Ok(table) = DeTable::parse(text) else { continue };
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        let file = File { path, text, line_starts };
        for (k, v) in table.get_ref().iter() {
            match k.get_ref().as_ref() {
                "hosts" => {
                    for (name, body) in file.table(v.get_ref(), k.span(), "`[hosts]` holds one table per host")? {
                        let host = out.host_mut(&name);
                        file.read_host(host, body)?;
                    }
                }
                "groups" => {
                    for (name, body) in file.table(v.get_ref(), k.span(), "`[groups]` holds one table per group")? {
                        let group = out.group_mut(&name);
                        file.read_group(group, body)?;
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

impl TomlInventory {
    fn host_mut(&mut self, name: &str) -> &mut TomlHost {
        let at = self.hosts.iter().position(|h| h.name == name).unwrap_or_else(|| {
            self.hosts.push(TomlHost { name: name.to_string(), ..Default::default() });
            self.hosts.len() - 1
        });
        &mut self.hosts[at]
    }

    fn group_mut(&mut self, name: &str) -> &mut TomlGroup {
        let at = self.groups.iter().position(|g| g.name == name).unwrap_or_else(|| {
            self.groups.push(TomlGroup { name: name.to_string(), ..Default::default() });
            self.groups.len() - 1
        });
        &mut self.groups[at]
    }
}

type Spanned<'a, 'i> = &'a toml::Spanned<DeValue<'i>>;

struct File<'f> {
    path: &'f Path,
    text: &'f str,
    /// Where each line starts (a byte offset), for `place`: every value of the file is placed,
    /// so counting the lines before each would cost the file's length per value.
    line_starts: Vec<usize>,
}

impl File<'_> {
    fn error(&self, message: String, offset: usize) -> Error {
        Error::located(Diagnostic::at_offset(message, self.path.display().to_string(), self.text, offset))
    }

    fn place(&self, offset: usize) -> Place {
        Place { path: self.path.to_path_buf(), line: self.line_starts.partition_point(|&start| start <= offset) }
    }

    /// The entries of a table, each as (name, value).
    fn table<'a, 'i>(
        &self,
        value: &'a DeValue<'i>,
        span: std::ops::Range<usize>,
        what: &str,
    ) -> Result<Vec<(String, Spanned<'a, 'i>)>, Error> {
        let DeValue::Table(t) = value else { return Err(self.error(what.to_string(), span.start)) };
        Ok(t.iter().map(|(k, v)| (k.get_ref().to_string(), v)).collect())
    }

    fn string(&self, v: Spanned<'_, '_>, field: &str) -> Result<At<String>, Error> {
        match v.get_ref() {
            DeValue::String(s) => Ok(At { value: s.to_string(), place: self.place(v.span().start) }),
            other => Err(self.error(format!("`{field}` expects a string, found {}", other.type_str()), v.span().start)),
        }
    }

    fn strings(&self, v: Spanned<'_, '_>, field: &str) -> Result<Vec<At<String>>, Error> {
        match v.get_ref() {
            DeValue::Array(items) => items.iter().map(|i| self.string(i, field)).collect(),
            other => Err(self
                .error(format!("`{field}` expects an array of strings, found {}", other.type_str()), v.span().start)),
        }
    }

    fn roles(&self, v: Spanned<'_, '_>) -> Result<Vec<At<Role>>, Error> {
        let mut roles = Vec::new();
        for (i, name) in self.strings(v, "roles")?.into_iter().enumerate() {
            let offset = match v.get_ref() {
                DeValue::Array(items) => items[i].span().start,
                _ => v.span().start,
            };
            let role = Role::parse_or_explain(&name.value).map_err(|m| self.error(m, offset))?;
            roles.push(At { value: role, place: name.place });
        }
        Ok(roles)
    }

    fn check_field(&self, field: &str, fields: &[&str], offset: usize, owner: &str) -> Result<(), Error> {
        if fields.contains(&field) {
            return Ok(());
        }
        let hint = did_you_mean(field, fields.iter().copied())
            .unwrap_or_else(|| format!("; expected one of {}", fields.join(", ")));
        Err(self.error(format!("{owner} has no field `{field}`{hint}"), offset))
    }

    fn read_host(&self, host: &mut TomlHost, body: Spanned<'_, '_>) -> Result<(), Error> {
        let owner = format!("`[hosts.{}]`", host.name);
        let DeValue::Table(t) = body.get_ref() else {
            return Err(self.error(format!("{owner} must be a table"), body.span().start));
        };
        for (k, v) in t.iter() {
            let field = k.get_ref().as_ref();
            self.check_field(field, &HOST_FIELDS, k.span().start, &owner)?;
            match field {
                "address" => host.address = Some(self.string(v, field)?),
                "user" => host.user = Some(self.string(v, field)?),
                "key" => host.key = Some(self.string(v, field)?),
                "roles" => host.roles = self.roles(v)?,
                "port" => {
                    let port = match v.get_ref() {
                        DeValue::Integer(i) => i.as_str().replace('_', "").parse::<u16>().ok().filter(|p| *p > 0),
                        _ => None,
                    };
                    let Some(port) = port else {
                        return Err(self.error("`port` expects a port number (1 to 65535)".into(), v.span().start));
                    };
                    host.port = Some(At { value: port, place: self.place(v.span().start) });
                }
                _ => host.config.extend(self.settings(v)?),
            }
        }
        Ok(())
    }

    fn read_group(&self, group: &mut TomlGroup, body: Spanned<'_, '_>) -> Result<(), Error> {
        let owner = format!("`[groups.{}]`", group.name);
        group.place = Some(self.place(body.span().start));
        let DeValue::Table(t) = body.get_ref() else {
            return Err(self.error(format!("{owner} must be a table"), body.span().start));
        };
        for (k, v) in t.iter() {
            let field = k.get_ref().as_ref();
            self.check_field(field, &GROUP_FIELDS, k.span().start, &owner)?;
            match field {
                "hosts" => group.hosts = self.strings(v, field)?,
                "roles" => group.roles = self.roles(v)?,
                _ => group.config.extend(self.settings(v)?),
            }
        }
        Ok(())
    }

    /// A `config` table: opsbook config keys, nested or dotted, validated as the loader does.
    fn settings(&self, v: Spanned<'_, '_>) -> Result<Vec<Setting>, Error> {
        let DeValue::Table(t) = v.get_ref() else {
            return Err(self.error("`config` must be a table of opsbook config keys".into(), v.span().start));
        };
        let mut found = Vec::new();
        flatten(t, "", &mut found);
        let mut out = Vec::new();
        for (name, offset, value) in found {
            let key =
                config::keys::lookup(&name).ok_or_else(|| self.error(config::unknown_key_problem(&name), offset))?;
            let value = config::to_value(key, value).map_err(|m| self.error(m, offset))?;
            config::validate(key, &value).map_err(|p| self.error(format!("`{name}`: {p}"), offset))?;
            if let (true, Value::Text(t)) = (key.secret, &value)
                && !t.trim().is_empty()
            {
                // Known to the redactor before anything could print it.
                opsbook_base::secret::Secret::new(t.clone());
            }
            out.push(Setting { key, value, place: self.place(offset) });
        }
        Ok(out)
    }
}

fn flatten<'a, 'i>(table: &'a DeTable<'i>, prefix: &str, out: &mut Vec<(String, usize, &'a DeValue<'i>)>) {
    for (k, v) in table.iter() {
        let name = if prefix.is_empty() { k.get_ref().to_string() } else { format!("{prefix}.{}", k.get_ref()) };
        match v.get_ref() {
            DeValue::Table(inner) => flatten(inner, &name, out),
            other => out.push((name, k.span().start, other)),
        }
    }
}
