//! The stack's components, described once: the role each plays, the names operators give it,
//! its tier, where its configuration keys live and their defaults, the template of its
//! configuration file, how a new configuration takes effect, its package — and its behaviour:
//! the stdlib functions that verify it, say it is ready, prove it after a change and set it up,
//! its offline check of a configuration file and the arguments it runs with as a container.
//!
//! The four of the stack are built in (`built_in.rs`); an operator adds another (a Prometheus,
//! a Grafana beside the stack) with an entry in a `components.toml` beside a runbook folder
//! (`file.rs`), a template and a stdlib module of its own — no other file changes. `install`
//! puts those entries after the built-in ones once, before anything reads the table; `all()`
//! is the table from then on.
//!
//! Every other description derives from this table: the roles the inventory accepts
//! (`opsbook_inventory::Role`), every component's configuration keys and `config.roles`
//! (`config::keys`), `inventory::roles()` (from which `stdlib/stack.rhai` builds
//! `stack::components()` and the scripts dispatch to each one's functions), the units the
//! sandbox boots and the REPL completes, the addresses a remote host's connection forwards, and
//! the orchestrator scripts' role names.
//!
//! opsbook's own names (`metrics-db`, `log-store`, `metrics-agent`, `log-shipper`) are what
//! reports print; inventories written for Ansible usually say `influxdb`, `loki`, `telegraf`
//! and `alloy`, so those are accepted as aliases wherever a role is read.

mod built_in;
pub mod file;
mod row;

use std::sync::OnceLock;

pub use built_in::{BUILT_IN, GRAFANA, INFLUXDATA};
pub use row::{Behaviour, Component, Reload, Repository, Settings, Tier};

/// The table once `install` or the first reader fixed it.
static TABLE: OnceLock<&'static [Component]> = OnceLock::new();

/// Every component, servers first (the order the stack starts in): the built-in four, then
/// those `install` added, in their files' order.
pub fn all() -> &'static [Component] {
    TABLE.get_or_init(|| &BUILT_IN)
}

/// Adds `added` after the built-in components (each checked against them by `file::read`).
/// Called once, before anything reads the table; a second call, or one after a read, is refused.
pub fn install(added: Vec<Component>) -> Result<(), String> {
    if added.is_empty() {
        return Ok(());
    }
    let mut table: Vec<Component> = BUILT_IN.into_iter().collect();
    // Servers first: an added server goes after the built-in servers, before the clients.
    for c in added {
        let at = match c.tier {
            Tier::Server => table.iter().rposition(|t| t.tier == Tier::Server).map_or(0, |i| i + 1),
            Tier::Client => table.len(),
        };
        table.insert(at, c);
    }
    TABLE.set(Vec::leak(table)).map_err(|_| "the component table was read before components.toml was".to_string())
}

/// Every component's name, servers first.
pub fn names() -> &'static [&'static str] {
    static NAMES: OnceLock<&'static [&'static str]> = OnceLock::new();
    NAMES.get_or_init(|| Vec::leak(all().iter().map(|c| c.name).collect()))
}

/// The offline check a configuration key runs by default — the table's `check` of the
/// component whose check key it is (`log_shipper.validate_command`: `alloy validate {config}`);
/// none for another key.
pub fn default_check(key: &str) -> &'static [&'static str] {
    let of = |c: &&Component| {
        !c.behaviour.check_key.is_empty()
            && key.strip_prefix(c.section).and_then(|k| k.strip_prefix('.')) == Some(c.behaviour.check_key)
    };
    all().iter().find(of).map_or(&[], |c| c.behaviour.check)
}

impl Component {
    /// The component named `name` (opsbook's name, not an alias).
    pub fn named(name: &str) -> Option<&'static Component> {
        all().iter().find(|c| c.name == name)
    }

    /// Whether it serves an address (its `SECTION.url`).
    pub fn serves(&self) -> bool {
        self.port != 0
    }
}
