//! A variable of an Ansible inventory as written (`Var`: its value, untemplated, and its
//! `Place`), and a host's variable after precedence (`HostVar`, with the `Level` that set it).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value as Json;

/// Where a value was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file.
    pub path: PathBuf,
    /// The line, from 1.
    pub line: usize,
}

/// A variable as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    /// The value, as JSON (Jinja not yet rendered).
    pub value: Json,
    /// Where it was written.
    pub place: Place,
}

pub(crate) type Vars = BTreeMap<String, Var>;

/// Which level of the inventory a host's variable came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Level {
    /// A variable of this group (`group_vars`, the group's `vars`).
    Group(String),
    /// A variable of the host itself (`host_vars`, the host's line or entry).
    Host,
}

/// A host's variable after precedence: its value, where it was written, at which level.
#[derive(Debug, Clone, PartialEq)]
pub struct HostVar {
    /// The value, as JSON.
    pub value: Json,
    /// Where it was written.
    pub place: Place,
    /// The level that set it.
    pub level: Level,
}
