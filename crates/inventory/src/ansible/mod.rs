//! An Ansible inventory, read directly: groups, hosts, children, group and host variables
//! (inline, and from `group_vars/` and `host_vars/` beside the file), combined with Ansible's
//! precedence.
//!
//! Precedence, lowest first, as Ansible's variable manager applies it: the inventory file's
//! `all` vars, its other groups' vars (parents before children: by depth, then
//! `ansible_group_priority`, then name), `group_vars/all`, the other `group_vars/` files in the
//! same group order, the host's inline vars, then `host_vars/HOST`. A later value replaces an
//! earlier one whole (Ansible's default `hash_behaviour = replace`).
//!
//! Values are kept as Ansible hands them out, untemplated; `template.rs` renders them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::error::Error;

mod ini;
mod vars_dir;
mod yaml;

/// Where a value was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub path: PathBuf,
    pub line: usize,
}

/// A variable as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    pub value: Json,
    pub place: Place,
}

pub(crate) type Vars = BTreeMap<String, Var>;

/// Which level of the inventory a host's variable came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Level {
    Group(String),
    Host,
}

/// A host's variable after precedence: its value, where it was written, at which level.
#[derive(Debug, Clone, PartialEq)]
pub struct HostVar {
    pub value: Json,
    pub place: Place,
    pub level: Level,
}

#[derive(Debug, Default)]
pub struct Group {
    pub name: String,
    pub hosts: Vec<String>,
    pub children: Vec<String>,
    /// From the inventory file.
    pub vars: Vars,
    /// From `group_vars/NAME`.
    pub(crate) dir_vars: Vars,
}

#[derive(Debug, Default)]
pub(crate) struct HostEntry {
    pub name: String,
    pub vars: Vars,
    pub(crate) dir_vars: Vars,
}

/// A whole inventory.
#[derive(Debug, Default)]
pub struct AnsibleInventory {
    groups: Vec<Group>,
    hosts: Vec<HostEntry>,
}

impl AnsibleInventory {
    /// Reads `path`: YAML (`.yml`, `.yaml`, `.json`) or INI (anything else), then the
    /// `group_vars/` and `host_vars/` directories beside it.
    pub fn load(path: &Path) -> Result<AnsibleInventory, Error> {
        let text = crate::input::read_text_or(path, crate::input::INVENTORY, |source| Error::Io {
            context: format!("cannot read the Ansible inventory `{}`", path.display()),
            source,
        })?;
        let mut inventory = AnsibleInventory::default();
        inventory.group_mut("all");
        inventory.group_mut("ungrouped");
        let is_yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yml" | "yaml" | "json"));
        if is_yaml {
            yaml::read_inventory(&mut inventory, path, &text)?;
        } else {
            ini::read_inventory(&mut inventory, path, &text)?;
        }
        inventory.reconcile();
        let dir = path.parent().unwrap_or(Path::new("."));
        for i in 0..inventory.groups.len() {
            let vars = vars_dir::read(&dir.join("group_vars"), &inventory.groups[i].name)?;
            inventory.groups[i].dir_vars = vars;
        }
        for i in 0..inventory.hosts.len() {
            let vars = vars_dir::read(&dir.join("host_vars"), &inventory.hosts[i].name)?;
            inventory.hosts[i].dir_vars = vars;
        }
        Ok(inventory)
    }

    pub(crate) fn group_mut(&mut self, name: &str) -> &mut Group {
        let at = match self.groups.iter().position(|g| g.name == name) {
            Some(at) => at,
            None => {
                self.groups.push(Group { name: name.to_string(), ..Default::default() });
                self.groups.len() - 1
            }
        };
        &mut self.groups[at]
    }

    pub(crate) fn host_mut(&mut self, name: &str) -> &mut HostEntry {
        let at = match self.hosts.iter().position(|h| h.name == name) {
            Some(at) => at,
            None => {
                self.hosts.push(HostEntry { name: name.to_string(), ..Default::default() });
                self.hosts.len() - 1
            }
        };
        &mut self.hosts[at]
    }

    /// Adds `host` to `group` (both created when new), once.
    pub(crate) fn add_member(&mut self, group: &str, host: &str) {
        self.host_mut(host);
        let g = self.group_mut(group);
        if !g.hosts.iter().any(|h| h == host) {
            g.hosts.push(host.to_string());
        }
    }

    pub(crate) fn add_child(&mut self, parent: &str, child: &str) {
        self.group_mut(child);
        let g = self.group_mut(parent);
        if !g.children.iter().any(|c| c == child) {
            g.children.push(child.to_string());
        }
    }

    /// What Ansible does once a source is read: every group without a parent becomes a child
    /// of `all`, and every host in no group but `all` goes to `ungrouped`.
    fn reconcile(&mut self) {
        let with_parent: BTreeSet<String> = self.groups.iter().flat_map(|g| g.children.clone()).collect();
        let orphans: Vec<String> =
            self.groups.iter().map(|g| g.name.clone()).filter(|n| n != "all" && !with_parent.contains(n)).collect();
        for g in orphans {
            self.add_child("all", &g);
        }
        let grouped: BTreeSet<String> =
            self.groups.iter().filter(|g| g.name != "all").flat_map(|g| g.hosts.clone()).collect();
        let lone: Vec<String> = self.hosts.iter().map(|h| h.name.clone()).filter(|h| !grouped.contains(h)).collect();
        for h in lone {
            self.add_member("ungrouped", &h);
        }
    }

    /// Host names in the order the inventory first mentions them.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.name.as_str())
    }

    /// Group names, `all` first, in the order the inventory first mentions them.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.iter().map(|g| g.name.as_str())
    }

    fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// Every host of `group`, its children's included (`all` holds every host).
    pub fn members(&self, group: &str) -> BTreeSet<String> {
        if group == "all" {
            return self.hosts().map(str::to_string).collect();
        }
        let mut out = BTreeSet::new();
        let mut todo = vec![group.to_string()];
        let mut seen = BTreeSet::new();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(g) = self.group(&name) {
                out.extend(g.hosts.iter().cloned());
                todo.extend(g.children.iter().cloned());
            }
        }
        out
    }

    /// Each group's depth: the longest chain of parents up to `all` (Ansible's `depth`).
    fn depths(&self) -> BTreeMap<&str, usize> {
        let mut depth: BTreeMap<&str, usize> = self.groups.iter().map(|g| (g.name.as_str(), 0)).collect();
        // Relaxation bounded by the number of groups, so a cycle cannot loop forever.
        for _ in 0..self.groups.len() {
            let mut changed = false;
            for g in &self.groups {
                let d = depth[g.name.as_str()];
                for c in &g.children {
                    if let Some(cd) = depth.get_mut(c.as_str())
                        && *cd < d + 1
                    {
                        *cd = d + 1;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        depth
    }

    /// The groups `host` belongs to, directly or through children, `all` included, in
    /// Ansible's order of precedence (lowest first).
    pub(crate) fn groups_of(&self, host: &str) -> Vec<String> {
        let depth = self.depths();
        let priority = |g: &Group| {
            g.vars
                .get("ansible_group_priority")
                .and_then(|v| v.value.as_i64().or_else(|| v.value.as_str()?.parse().ok()))
        };
        let mut found: Vec<(usize, i64, &str)> = self
            .groups
            .iter()
            .filter(|g| g.name == "all" || self.members(&g.name).contains(host))
            .map(|g| (depth[g.name.as_str()], priority(g).unwrap_or(1), g.name.as_str()))
            .collect();
        found.sort();
        found.into_iter().map(|(_, _, n)| n.to_string()).collect()
    }

    /// The host's variables after Ansible's precedence, untemplated.
    pub fn host_vars(&self, host: &str) -> BTreeMap<String, HostVar> {
        let groups: Vec<&Group> = self.groups_of(host).iter().filter_map(|n| self.group(n)).collect();
        let mut out = BTreeMap::new();
        let mut apply = |vars: &Vars, level: Level| {
            for (name, var) in vars {
                let hv = HostVar { value: var.value.clone(), place: var.place.clone(), level: level.clone() };
                out.insert(name.clone(), hv);
            }
        };
        for g in &groups {
            apply(&g.vars, Level::Group(g.name.clone()));
        }
        for g in &groups {
            apply(&g.dir_vars, Level::Group(g.name.clone()));
        }
        if let Some(h) = self.hosts.iter().find(|h| h.name == host) {
            apply(&h.vars, Level::Host);
            apply(&h.dir_vars, Level::Host);
        }
        out
    }
}

/// A value written in an INI inventory, read as Ansible reads it: a Python literal when it is
/// one (numbers, `True`/`False`/`None`, quoted strings), the text as it stands otherwise.
pub(crate) fn literal(text: &str) -> Json {
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
