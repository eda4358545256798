//! An Ansible inventory once read: its groups and hosts, each group's members (its children's
//! included), and a host's groups and variables in Ansible's order of precedence.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::OnceLock;

use super::vars::{HostVar, Level, Vars};
use opsbook_base::Error;

#[derive(Debug, Default)]
/// A group of the inventory: its hosts, its child groups and its variables.
pub struct Group {
    /// The group's name.
    pub name: String,
    /// The hosts named in the group itself, in order.
    pub hosts: Vec<String>,
    /// The groups it contains.
    pub children: Vec<String>,
    /// From the inventory file.
    pub vars: Vars,
    /// From `group_vars/NAME`.
    pub(crate) dir_vars: Vars,
    /// `hosts` as a set, so adding a member stays cheap in a group of thousands.
    host_set: HashSet<String>,
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
    pub(super) groups: Vec<Group>,
    pub(super) hosts: Vec<HostEntry>,
    /// Where each group and host is in `groups` and `hosts`, by name: reading and resolving
    /// stay linear in the inventory's size (an inventory of 10,000 hosts reads in well under a
    /// second).
    group_at: HashMap<String, usize>,
    host_at: HashMap<String, usize>,
    /// Every group's members and depth, and each host's groups, worked out once when first
    /// asked (after the inventory is read).
    resolved: OnceLock<Resolved>,
}

/// The group tree, resolved once.
#[derive(Debug, Default)]
struct Resolved {
    /// Every host of each group, its children's included.
    members: HashMap<String, BTreeSet<String>>,
    /// Each host's groups (not `all`), by name.
    groups_of: HashMap<String, Vec<String>>,
    depth: HashMap<String, usize>,
}

/// The longest chain of nested groups (`all` counted): Ansible's own inventories nest a handful.
const MAX_NESTING: usize = 1000;

impl AnsibleInventory {
    pub(crate) fn group_mut(&mut self, name: &str) -> &mut Group {
        let at = match self.group_at.get(name) {
            Some(&at) => at,
            None => {
                self.groups.push(Group { name: name.to_string(), ..Default::default() });
                self.group_at.insert(name.to_string(), self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        &mut self.groups[at]
    }

    pub(crate) fn host_mut(&mut self, name: &str) -> &mut HostEntry {
        let at = match self.host_at.get(name) {
            Some(&at) => at,
            None => {
                self.hosts.push(HostEntry { name: name.to_string(), ..Default::default() });
                self.host_at.insert(name.to_string(), self.hosts.len() - 1);
                self.hosts.len() - 1
            }
        };
        &mut self.hosts[at]
    }

    /// Adds `host` to `group` (both created when new), once.
    pub(crate) fn add_member(&mut self, group: &str, host: &str) {
        self.host_mut(host);
        let g = self.group_mut(group);
        if g.host_set.insert(host.to_string()) {
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

    /// A group that is its own ancestor is refused, as Ansible refuses it ("creates a
    /// recursive dependency loop"), naming the whole loop; so is a group nested deeper than
    /// `MAX_NESTING` (a chain of 50,000 `[gN:children]` would overflow the stack).
    pub(super) fn refuse_cycles(&self, path: &Path) -> Result<(), Error> {
        // Depth-first from each group; `trail` is the path of parents to the group in hand.
        fn visit<'a>(
            inv: &'a AnsibleInventory,
            name: &'a str,
            trail: &mut Vec<&'a str>,
            done: &mut HashSet<&'a str>,
        ) -> Option<Vec<&'a str>> {
            if let Some(at) = trail.iter().position(|n| *n == name) {
                let mut cycle = trail[at..].to_vec();
                cycle.push(name);
                return Some(cycle);
            }
            if done.contains(name) {
                return None;
            }
            trail.push(name);
            if trail.len() > MAX_NESTING {
                return Some(trail.clone());
            }
            for child in inv.group(name).map(|g| g.children.as_slice()).unwrap_or_default() {
                if let Some(cycle) = visit(inv, child, trail, done) {
                    return Some(cycle);
                }
            }
            trail.pop();
            done.insert(name);
            None
        }
        let mut done = HashSet::new();
        for g in &self.groups {
            if let Some(cycle) = visit(self, &g.name, &mut Vec::new(), &mut done) {
                if cycle.len() > MAX_NESTING {
                    return Err(Error::Usage(format!(
                        "{}: the group `{}` ends a chain of {} nested groups (`{}` → `{}` → … → `{}`); an inventory \
                         may nest at most {MAX_NESTING} groups in a chain (make the chain of `children` shorter)",
                        path.display(),
                        cycle[cycle.len() - 1],
                        cycle.len(),
                        cycle[0],
                        cycle[1],
                        cycle[cycle.len() - 1],
                    )));
                }
                let shown: Vec<String> = cycle.iter().map(|n| format!("`{n}`")).collect();
                return Err(Error::Usage(format!(
                    "{}: the groups {} form a loop: each is a child of the one before, so a host of any \
                     of them would be in all of them forever (Ansible: \"creates a recursive dependency \
                     loop\"); remove one of these `children` entries",
                    path.display(),
                    shown.join(" → ")
                )));
            }
        }
        Ok(())
    }

    /// What Ansible does once a source is read: every group without a parent becomes a child
    /// of `all`, and every host in no group but `all` goes to `ungrouped`.
    pub(super) fn reconcile(&mut self) {
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

    /// How many hosts the inventory names so far.
    pub(crate) fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// Whether the inventory names `host` (without walking every host).
    pub fn has_host(&self, host: &str) -> bool {
        self.host_at.contains_key(host)
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
        self.group_at.get(name).map(|&at| &self.groups[at])
    }

    /// Every host of `group`, its children's included (`all` holds every host).
    pub fn members(&self, group: &str) -> BTreeSet<String> {
        if group == "all" {
            return self.hosts().map(str::to_string).collect();
        }
        self.resolved().members.get(group).cloned().unwrap_or_default()
    }

    fn resolved(&self) -> &Resolved {
        self.resolved.get_or_init(|| {
            let mut r = Resolved { depth: self.depths(), ..Resolved::default() };
            for g in &self.groups {
                let mut out = BTreeSet::new();
                let mut todo = vec![g.name.as_str()];
                let mut seen = HashSet::new();
                while let Some(name) = todo.pop() {
                    if !seen.insert(name) {
                        continue;
                    }
                    if let Some(child) = self.group(name) {
                        out.extend(child.hosts.iter().cloned());
                        todo.extend(child.children.iter().map(String::as_str));
                    }
                }
                if g.name != "all" {
                    for h in &out {
                        r.groups_of.entry(h.clone()).or_default().push(g.name.clone());
                    }
                }
                r.members.insert(g.name.clone(), out);
            }
            r
        })
    }

    /// Each group's depth: the longest chain of parents up to `all` (Ansible's `depth`).
    fn depths(&self) -> HashMap<String, usize> {
        let mut depth: HashMap<&str, usize> = self.groups.iter().map(|g| (g.name.as_str(), 0)).collect();
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
        depth.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// The groups `host` belongs to, directly or through children, `all` included, in
    /// Ansible's order of precedence (lowest first).
    pub(crate) fn groups_of(&self, host: &str) -> Vec<String> {
        let resolved = self.resolved();
        let depth = &resolved.depth;
        let priority = |g: &Group| {
            g.vars
                .get("ansible_group_priority")
                .and_then(|v| v.value.as_i64().or_else(|| v.value.as_str()?.parse().ok()))
        };
        let mine = resolved.groups_of.get(host).into_iter().flatten();
        let mut found: Vec<(usize, i64, &str)> = std::iter::once("all")
            .chain(mine.map(String::as_str))
            .filter_map(|n| self.group(n))
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
        if let Some(h) = self.host_at.get(host).map(|&at| &self.hosts[at]) {
            apply(&h.vars, Level::Host);
            apply(&h.dir_vars, Level::Host);
        }
        out
    }
}
