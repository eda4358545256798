//! One machine of the fleet (`Host`): how to reach it, its roles, its groups, the
//! configuration opsbook uses on it, and where each fact about it came from (`Source`, `Fact`);
//! one role on one host (`Service`).

use std::fmt;

use super::ansible::{Level, Place};
use super::role::Role;
use opsbook_base::config::{Config, keys};

/// The Ansible variable holding a host's address.
pub(crate) const ADDRESS_VAR: &str = "ansible_host";

/// Where a fact about a host came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Nothing said otherwise (the local machine, the base configuration).
    Default,
    /// `[hosts.NAME]` or `[groups.NAME]` of an opsbook config file.
    Toml {
        /// The file and line of the table.
        place: Place,
        /// The group whose table it is (`[groups.NAME]`); `None` for the host's own.
        group: Option<String>,
    },
    /// A variable of the Ansible inventory, at the group or host level.
    Ansible {
        /// Where the variable was written.
        place: Place,
        /// Whether a group or the host itself set it.
        level: Level,
    },
    /// Ansible's own rule, said in words (a host without `ansible_host` is reached by name).
    Rule(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Toml { place, group: None } => write!(f, "{}", shown(place)),
            Source::Toml { place, group: Some(g) } => write!(f, "{} (group {g})", shown(place)),
            Source::Ansible { place, level: Level::Host } => write!(f, "{} (host var)", shown(place)),
            Source::Ansible { place, level: Level::Group(g) } => write!(f, "{} (group var of {g})", shown(place)),
            Source::Rule(rule) => f.write_str(rule),
        }
    }
}

/// `file:line`, the file relative to the working directory when it is below it.
pub(crate) fn shown(place: &Place) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    let path = place.path.strip_prefix(&cwd).unwrap_or(&place.path);
    format!("{}:{}", path.display(), place.line)
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub from: Source,
}

/// A setting of one opsbook config key for one host.
#[derive(Debug, Clone)]
pub struct Override {
    /// The key.
    pub key: &'static keys::Key,
    /// Its value for this host.
    pub value: opsbook_base::config::Value,
    /// Where it was set.
    pub from: Source,
}

/// A value of the inventory that could not be resolved, so nothing was guessed for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The variable (`ansible_host`, a key's name).
    pub var: String,
    /// Where it was written.
    pub from: Source,
    /// Why it could not be resolved, in words.
    pub reason: String,
}

/// One machine of the fleet.
#[derive(Debug, Clone)]
pub struct Host {
    /// The host's name in the inventory.
    pub name: String,
    /// Where ssh connects; `None` is the local machine (no ssh).
    pub address: Option<Fact<String>>,
    /// In `Role::all()` order (the table's), each once.
    pub roles: Vec<Fact<Role>>,
    /// The ssh user (`ansible_user`); `None`: ssh's own choice.
    pub user: Option<Fact<String>>,
    /// The ssh port (`ansible_port`); `None`: ssh's own choice.
    pub port: Option<Fact<u16>>,
    /// The ssh private key file (`ansible_ssh_private_key_file`); `None`: ssh's own choice.
    pub key: Option<Fact<String>>,
    /// Config keys set for this host (the last one for each key wins).
    pub overrides: Vec<Override>,
    /// The groups the host is in (`all` excluded), inventory order.
    pub groups: Vec<String>,
    /// The values that could not be resolved, each left unset rather than guessed.
    pub problems: Vec<Problem>,
    pub(crate) config: Config,
}

impl Host {
    /// The configuration opsbook uses on this host: the base one with its overrides.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// No address, and none that failed to resolve: opsbook acts on this machine itself.
    pub fn is_local(&self) -> bool {
        self.address.is_none() && !self.problems.iter().any(|p| p.var == ADDRESS_VAR)
    }

    /// Whether the host has `role`.
    pub fn has(&self, role: Role) -> bool {
        self.roles.iter().any(|r| r.value == role)
    }

    /// `system` or `user`: which service manager opsbook talks to there.
    pub fn scope(&self) -> String {
        self.config.text(keys::SCOPE)
    }
}

/// One role on one host (`monitor3:log-shipper`).
#[derive(Debug, Clone, Copy)]
pub struct Service<'a> {
    /// The host.
    pub host: &'a Host,
    /// The role on it.
    pub role: Role,
}
