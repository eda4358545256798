//! Building the fleet from its sources (`Inventory::load`, and `Inventory::simulated` for the
//! sandbox): the Ansible inventory's hosts and resolved variables, then opsbook's
//! `[groups.NAME]` and `[hosts.NAME]` on top.
//!
//! What wins, per fact: `[hosts.NAME]` over the Ansible variables (`ansible_host`,
//! `ansible_user`, `ansible_port`, `ansible_ssh_private_key_file`). Roles are the union of the
//! host var `opsbook_roles`, `[hosts.NAME] roles` and the `roles` of every `[groups.NAME]` the
//! host is in (a TOML group or an Ansible group of that name). Config overrides, lowest first:
//! the Ansible variables `opsbook_KEY` (the key with `.` as `_`, e.g.
//! `opsbook_log_shipper_unit`, by Ansible's precedence), `[groups.NAME] config` (groups in
//! name order), `[hosts.NAME] config`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::ansible::{AnsibleInventory, HostVar};
use super::host::{ADDRESS_VAR, Fact, Host, Override, Problem, Source, shown};
use super::inventory::Inventory;
use super::role::Role;
use super::template::Resolver;
use super::toml_source::{self, At, Setting, TomlGroup, TomlHost, TomlInventory};
use opsbook_base::Diagnostic;
use opsbook_base::Error;
use opsbook_base::config::{self, Config, Origin, Value, keys};
use opsbook_base::did_you_mean;

/// The host variable holding a host's roles (a list, or a comma-separated string).
pub(crate) const ROLES_VAR: &str = "opsbook_roles";
/// Host variables named `opsbook_…` set config keys.
const KEY_PREFIX: &str = "opsbook_";

impl Inventory {
    /// Reads the inventory: `inventory_path` (from `--inventory`), else the `inventory` config
    /// key, plus the `[hosts]` and `[groups]` of `config.file_texts()`. Malformed files are errors
    /// pointing into them; unresolvable values become each host's `problems`.
    pub fn load(config: &Config, inventory_path: Option<&Path>) -> Result<Inventory, Error> {
        let path = match inventory_path {
            Some(p) => Some(p.to_path_buf()),
            None => configured_path(config),
        };
        build(config, path.as_deref())
    }

    /// The simulated hosts of the sandbox's fleet (`--sandbox --fleet N`).
    pub fn simulated(config: &Config, hosts: &[(String, Vec<String>)]) -> Inventory {
        simulated_fleet(config, hosts)
    }
}

/// The `inventory` key's path, relative to the config file that set it.
fn configured_path(config: &Config) -> Option<PathBuf> {
    let setting = config.setting(keys::INVENTORY);
    let text = config.text(keys::INVENTORY);
    if text.trim().is_empty() {
        return None;
    }
    let path = PathBuf::from(text);
    match &setting.origin {
        opsbook_base::config::Origin::File { path: file, .. } if path.is_relative() => {
            Some(file.parent().unwrap_or(Path::new(".")).join(path))
        }
        _ => Some(path),
    }
}

fn build(config: &Config, ansible_path: Option<&Path>) -> Result<Inventory, Error> {
    let ansible = ansible_path.map(AnsibleInventory::load).transpose()?;
    let toml = toml_source::read(config.file_texts())?;
    let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut names: Vec<String> = Vec::new();
    if let Some(a) = &ansible {
        names.extend(a.hosts().map(str::to_string));
        for g in a.groups() {
            groups.insert(g.to_string(), a.members(g));
        }
    }
    for h in &toml.hosts {
        if !names.contains(&h.name) {
            names.push(h.name.clone());
        }
    }
    for g in &toml.groups {
        // A group that lists no hosts must name an Ansible group, or its roles and config
        // would silently apply to nothing (a typo such as `[groups.cleints]`).
        if g.hosts.is_empty() && !groups.contains_key(&g.name) {
            let hint = did_you_mean(&g.name, groups.keys().map(String::as_str)).unwrap_or_default();
            let at = g.place.as_ref().map(|p| format!("{}: ", shown(p))).unwrap_or_default();
            let known = if ansible.is_some() { "names no group of the Ansible inventory and " } else { "" };
            return Err(Error::Usage(format!("{at}`[groups.{}]` {known}lists no hosts{hint}", g.name)));
        }
        let members = groups.entry(g.name.clone()).or_default();
        for host in &g.hosts {
            if !names.contains(&host.value) {
                let hint = did_you_mean(&host.value, names.iter().map(String::as_str)).unwrap_or_default();
                return Err(Error::Usage(format!(
                    "{}: `[groups.{}]` lists `{}`, which is no host of the inventory{hint}",
                    shown(&host.place),
                    g.name,
                    host.value
                )));
            }
            members.insert(host.value.clone());
        }
    }
    if names.is_empty() {
        return Ok(local(config));
    }
    groups.insert("all".into(), names.iter().cloned().collect());
    let mut hosts = Vec::new();
    for name in &names {
        let in_groups: Vec<String> =
            groups.iter().filter(|(g, m)| *g != "all" && m.contains(name)).map(|(g, _)| g.clone()).collect();
        hosts.push(host(config, name, ansible.as_ref(), &toml, in_groups)?);
    }
    Ok(Inventory { hosts, groups })
}

/// No inventory: this machine, playing every role, with the base configuration.
fn local(config: &Config) -> Inventory {
    let roles = Role::all().map(|r| Fact { value: r, from: Source::Default }).collect();
    let host = on_this_machine("localhost", roles, config);
    let groups = [("all".to_string(), ["localhost".to_string()].into())].into();
    Inventory { hosts: vec![host], groups }
}

/// The simulated hosts of `--sandbox --fleet N`, by name and role names, all in process.
fn simulated_fleet(config: &Config, hosts: &[(String, Vec<String>)]) -> Inventory {
    let hosts: Vec<Host> = hosts
        .iter()
        .map(|(name, roles)| {
            let roles = roles
                .iter()
                .filter_map(|r| Role::parse(r))
                .map(|value| Fact { value, from: Source::Rule("the sandbox's fleet") })
                .collect();
            on_this_machine(name, roles, config)
        })
        .collect();
    let groups = [("all".to_string(), hosts.iter().map(|h| h.name.clone()).collect())].into();
    Inventory { hosts, groups }
}

/// A host reached without ssh (this machine, or one simulated in this process).
fn on_this_machine(name: &str, roles: Vec<Fact<Role>>, config: &Config) -> Host {
    Host {
        name: name.to_string(),
        address: None,
        roles,
        user: None,
        port: None,
        key: None,
        overrides: Vec::new(),
        groups: Vec::new(),
        problems: Vec::new(),
        config: config.clone(),
    }
}

/// One host's variables, rendered on demand, with unresolvable ones collected as problems.
struct Vars<'a> {
    raw: &'a BTreeMap<String, HostVar>,
    resolver: Resolver<'a>,
    problems: Vec<Problem>,
}

impl Vars<'_> {
    fn source(&self, name: &str) -> Source {
        let v = &self.raw[name];
        Source::Ansible { place: v.place.clone(), level: v.level.clone() }
    }

    fn get(&mut self, name: &str) -> Option<Fact<Json>> {
        match self.resolver.get(name)? {
            Ok(value) => Some(Fact { value, from: self.source(name) }),
            Err(u) => {
                let from = self.source(name);
                self.problems.push(Problem { var: u.var, from, reason: u.reason });
                None
            }
        }
    }

    fn text(&mut self, name: &str) -> Option<Fact<String>> {
        let fact = self.get(name)?;
        match json_text(&fact.value) {
            Some(value) => Some(Fact { value, from: fact.from }),
            None => {
                let reason = format!("expected a string, found `{}`", fact.value);
                self.problems.push(Problem { var: name.into(), from: fact.from, reason });
                None
            }
        }
    }
}

fn from_toml<T: Clone>(at: &At<T>, group: Option<&str>) -> Fact<T> {
    Fact { value: at.value.clone(), from: Source::Toml { place: at.place.clone(), group: group.map(str::to_string) } }
}

fn host(
    config: &Config,
    name: &str,
    ansible: Option<&AnsibleInventory>,
    toml: &TomlInventory,
    groups: Vec<String>,
) -> Result<Host, Error> {
    let in_ansible = ansible.is_some_and(|a| a.has_host(name));
    let raw = ansible.filter(|_| in_ansible).map(|a| a.host_vars(name)).unwrap_or_default();
    let mut vars = Vars { raw: &raw, resolver: Resolver::new(name, &raw, &groups), problems: Vec::new() };
    let th = toml.hosts.iter().find(|h| h.name == name);
    let tgroups: Vec<&TomlGroup> = toml.groups.iter().filter(|g| groups.contains(&g.name)).collect();

    let reach = reach(&mut vars, th, name, in_ansible);
    let roles = roles(&mut vars, th, &tgroups, name)?;
    let overrides = overrides(&mut vars, th, &tgroups, name)?;
    let applied: Vec<_> = overrides
        .iter()
        .map(|o| {
            let origin = match &o.from {
                Source::Toml { place, .. } | Source::Ansible { place, .. } => {
                    Origin::File { path: place.path.clone(), line: place.line }
                }
                _ => Origin::Default,
            };
            (o.key, o.value.clone(), origin)
        })
        .collect();
    let mut host_config = config.with_overrides(&applied)?;
    if !roles.is_empty() {
        // Scripts act on the components the host runs (`config.roles`, `stack::all()`).
        let names: Vec<&str> = roles.iter().map(|r| r.value.name()).collect();
        host_config.set(keys::ROLES, Value::Text(names.join(",")), Origin::Inventory)?;
    }
    let problems = std::mem::take(&mut vars.problems);
    let Reach { address, user, port, key } = reach;
    Ok(Host { name: name.into(), address, roles, user, port, key, overrides, groups, problems, config: host_config })
}

/// How a host is reached: its address (none for this machine), ssh user, port and key.
struct Reach {
    address: Option<Fact<String>>,
    user: Option<Fact<String>>,
    port: Option<Fact<u16>>,
    key: Option<Fact<String>>,
}

fn reach(vars: &mut Vars<'_>, th: Option<&TomlHost>, name: &str, in_ansible: bool) -> Reach {
    let connection = vars.text("ansible_connection");
    let address = match th.and_then(|h| h.address.as_ref()) {
        Some(a) => Some(from_toml(a, None)),
        None if connection.as_ref().is_some_and(|c| c.value == "local") => None,
        None => match vars.text(ADDRESS_VAR).or_else(|| vars.text("ansible_ssh_host")) {
            Some(a) => Some(a),
            None if !in_ansible || matches!(name, "localhost" | "127.0.0.1" | "::1") => None,
            None if vars.raw.contains_key(ADDRESS_VAR) => None,
            None => Some(Fact { value: name.to_string(), from: Source::Rule("its inventory name (no ansible_host)") }),
        },
    };
    // `ansible_ssh_*` are the older spellings Ansible still reads.
    let user = th
        .and_then(|h| h.user.as_ref())
        .map(|u| from_toml(u, None))
        .or_else(|| vars.text("ansible_user"))
        .or_else(|| vars.text("ansible_ssh_user"));
    let key = th
        .and_then(|h| h.key.as_ref())
        .map(|k| from_toml(k, None))
        .or_else(|| vars.text("ansible_ssh_private_key_file"))
        .or_else(|| vars.text("ansible_private_key_file"));
    let port = match th.and_then(|h| h.port.as_ref()) {
        Some(p) => Some(from_toml(p, None)),
        None => vars.text("ansible_port").or_else(|| vars.text("ansible_ssh_port")).and_then(|p| {
            match p.value.parse::<u16>() {
                Ok(n) if n > 0 => Some(Fact { value: n, from: p.from }),
                _ => {
                    let reason = format!("`{}` is not a port number (1 to 65535)", p.value);
                    vars.problems.push(Problem { var: "ansible_port".into(), from: p.from, reason });
                    None
                }
            }
        }),
    };
    Reach { address, user, port, key }
}

/// The roles a host plays, from its `opsbook_roles` variable, its TOML entry and its groups'.
fn roles(
    vars: &mut Vars<'_>,
    th: Option<&TomlHost>,
    tgroups: &[&TomlGroup],
    name: &str,
) -> Result<Vec<Fact<Role>>, Error> {
    let mut roles: Vec<Fact<Role>> = Vec::new();
    if let Some(fact) = vars.get(ROLES_VAR) {
        let listed: Vec<String> = match &fact.value {
            Json::Array(items) => items.iter().filter_map(json_text).collect(),
            other => json_text(other).unwrap_or_default().split(',').map(|s| s.trim().to_string()).collect(),
        };
        for r in listed.iter().filter(|r| !r.is_empty()) {
            let role = Role::parse_or_explain(r).map_err(|m| var_error(name, ROLES_VAR, &fact.from, m))?;
            roles.push(Fact { value: role, from: fact.from.clone() });
        }
    }
    if let Some(h) = th {
        roles.extend(h.roles.iter().map(|r| from_toml(r, None)));
    }
    for g in tgroups {
        roles.extend(g.roles.iter().map(|r| from_toml(r, Some(&g.name))));
    }
    let mut seen = BTreeSet::new();
    roles.retain(|r| seen.insert(r.value));
    roles.sort_by_key(|r| r.value);
    Ok(roles)
}

/// The configuration keys the inventory sets for a host (`opsbook_KEY` variables, then its
/// groups' and its own TOML `config`): the last setting of a key wins, in the keys' order.
fn overrides(
    vars: &mut Vars<'_>,
    th: Option<&TomlHost>,
    tgroups: &[&TomlGroup],
    name: &str,
) -> Result<Vec<Override>, Error> {
    let mut overrides: Vec<Override> = Vec::new();
    let wanted: Vec<String> =
        vars.raw.keys().filter(|k| k.starts_with(KEY_PREFIX) && k.as_str() != ROLES_VAR).cloned().collect();
    for var in wanted {
        let Some(key) = keys::all().iter().copied().find(|k| var_name(k) == var) else {
            let names: Vec<String> = keys::all().iter().map(|k| var_name(k)).collect();
            let hint = did_you_mean(&var, names.iter().map(String::as_str))
                .unwrap_or_else(|| format!("; `{ROLES_VAR}` or `opsbook_` + a config key"));
            return Err(var_error(
                name,
                &var,
                &vars.source(&var),
                format!("no opsbook setting is named `{var}`{hint}"),
            ));
        };
        let Some(fact) = vars.get(&var) else { continue };
        let value = match (&fact.value, key.kind) {
            (Json::Array(items), keys::Kind::Command) => Value::Argv(items.iter().filter_map(json_text).collect()),
            (v, _) => match json_text(v) {
                Some(t) => Value::Text(t),
                None => return Err(var_error(name, &var, &fact.from, format!("expected a string, found `{v}`"))),
            },
        };
        if let Some(refusal) = crate::data_only::refusal(key, &value) {
            return Err(var_error(name, &var, &fact.from, refusal));
        }
        config::validate(key, &value).map_err(|p| var_error(name, &var, &fact.from, p))?;
        if let (true, Value::Text(t)) = (key.secret, &value)
            && !t.trim().is_empty()
        {
            // Known to the redactor before anything could print it.
            opsbook_base::secret::Secret::new(t.clone());
        }
        overrides.push(Override { key, value, from: fact.from });
    }
    let settings = |s: &Setting, group: Option<&str>| Override {
        key: s.key,
        value: s.value.clone(),
        from: Source::Toml { place: s.place.clone(), group: group.map(str::to_string) },
    };
    for g in tgroups {
        overrides.extend(g.config.iter().map(|s| settings(s, Some(&g.name))));
    }
    if let Some(h) = th {
        overrides.extend(h.config.iter().map(|s| settings(s, None)));
    }
    let mut last: BTreeMap<&str, Override> = BTreeMap::new();
    for o in overrides {
        last.insert(o.key.name, o);
    }
    Ok(keys::all().iter().filter_map(|k| last.remove(k.name)).collect())
}

/// `opsbook_` + the key with dots as underscores: `opsbook_log_shipper_unit`.
pub(crate) fn var_name(key: &keys::Key) -> String {
    format!("{KEY_PREFIX}{}", key.name.replace('.', "_"))
}

fn var_error(host: &str, var: &str, from: &Source, message: String) -> Error {
    match from {
        Source::Ansible { place, .. } => {
            let text = std::fs::read_to_string(&place.path).ok();
            let column = text
                .as_deref()
                .and_then(|t| t.lines().nth(place.line.saturating_sub(1)))
                .and_then(|l| l.find(var))
                .map_or(1, |c| c + 1);
            let d = Diagnostic::at(
                format!("host `{host}`: `{var}`: {message}"),
                place.path.display().to_string(),
                text.as_deref(),
                place.line,
                column,
            );
            Error::located(d)
        }
        other => Error::Usage(format!("host `{host}`: `{var}` ({other}): {message}")),
    }
}

/// An Ansible variable's value as text (numbers as written), for addresses, users, keys.
fn json_text(value: &Json) -> Option<String> {
    match value {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
