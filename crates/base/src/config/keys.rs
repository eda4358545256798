//! Every configuration key, declared once: name, kind, default, environment variable, help.
//!
//! Most are opsbook's own (`scope`, `ssh.*`, `http.*`, …), declared here. Each component's
//! (`SECTION.url`, `.unit`, `.config`, `.exec`, `.data_dir`, `.account`, `.package`,
//! `.version`, `.repository`, `.repository_key`, `.install`, its offline check, `.run_as` and
//! `.image`) are made from the component table (`components::all()`, its `settings`), so a
//! component added to the table has its keys; the metrics database's organisation, bucket and
//! token are its own, declared here. `all()` lists them in order for `opsbook config`, the
//! files' validation and the scripts' `config` view; `KeyName` constants (`keys::LOG_STORE_URL`)
//! name the keys Rust code reads, each found in the table (a test holds every one).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::OnceLock;

use crate::components::{self, Component};

/// What a key accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Any text.
    Text,
    /// An http or https URL.
    Url,
    /// An integer.
    Int,
    /// A duration (`30s`, `5m`).
    Duration,
    /// A command: an argv array, or a string run by `sh -c`.
    Command,
    /// One of these.
    Choice(&'static [&'static str]),
    /// Some of these, comma-separated (scripts see a list).
    Subset(&'static [&'static str]),
    /// `true` or `false` (a TOML boolean, or the word; scripts see a boolean).
    Bool,
}

/// One declared configuration key.
#[derive(Debug)]
pub struct Key {
    /// Its dotted name (`metrics_db.url`).
    pub name: &'static str,
    /// What it accepts.
    pub kind: Kind,
    /// Its value when nothing sets it.
    pub default: &'static str,
    /// The environment variable setting it, if any.
    pub env: Option<&'static str>,
    /// Whether its value is a secret, shown redacted.
    pub secret: bool,
    /// What it is for, for `opsbook config` and the reference.
    pub help: &'static str,
}

const fn key(name: &'static str, kind: Kind, default: &'static str, help: &'static str) -> Key {
    Key { name, kind, default, env: None, secret: false, help }
}

const fn env_key(name: &'static str, kind: Kind, default: &'static str, env: &'static str, help: &'static str) -> Key {
    Key { name, kind, default, env: Some(env), secret: false, help }
}

/// A key by its name, as Rust code reads it: `config.text(keys::LOG_STORE_URL)` reads the
/// key of that name in `all()` (a key a component's settings make is not a constant).
#[derive(Debug)]
pub struct KeyName(pub &'static str);

impl Deref for KeyName {
    type Target = Key;

    fn deref(&self) -> &Key {
        lookup(self.0).unwrap_or_else(|| panic!("no configuration key `{}`", self.0))
    }
}

/// Declares each key as a constant and the list of all of them, in declaration order.
macro_rules! keys {
    ($list:ident: $($id:ident = $key:expr;)*) => {
        $(#[allow(missing_docs)] pub const $id: &Key = &$key;)*
        static $list: &[&Key] = &[$($id),*];
    };
}

/// Declares names of keys Rust code reads.
macro_rules! names {
    ($($id:ident = $name:literal;)*) => {
        $(#[allow(missing_docs)] pub const $id: &KeyName = &KeyName($name);)*
        /// Every `KeyName` constant (a test finds each in `all()`).
        pub const NAMED: &[&KeyName] = &[$($id),*];
    };
}

names! {
    ROLES = "roles";
    METRICS_DB_URL = "metrics_db.url";
    METRICS_DB_UNIT = "metrics_db.unit";
    METRICS_DB_CONFIG = "metrics_db.config";
    LOG_STORE_URL = "log_store.url";
    LOG_STORE_UNIT = "log_store.unit";
    METRICS_AGENT_UNIT = "metrics_agent.unit";
    METRICS_AGENT_CONFIG = "metrics_agent.config";
    METRICS_AGENT_EXEC = "metrics_agent.exec";
    METRICS_AGENT_TEST_COMMAND = "metrics_agent.test_command";
    LOG_SHIPPER_UNIT = "log_shipper.unit";
    LOG_SHIPPER_URL = "log_shipper.url";
    LOG_SHIPPER_CONFIG = "log_shipper.config";
    LOG_SHIPPER_VALIDATE_COMMAND = "log_shipper.validate_command";
}

keys! { GENERAL:
    SCOPE = key(
        "scope",
        Kind::Choice(&["system", "user"]),
        "system",
        "which service manager: system bus, or user bus for rootless units",
    );
    INVENTORY = key(
        "inventory",
        Kind::Text,
        "",
        "Ansible inventory (YAML or INI) naming the fleet's hosts; relative to the file setting it",
    );
    SSH_OPTIONS = key(
        "ssh.options",
        Kind::Text,
        "",
        "extra ssh -o options for every host, comma-separated (e.g. StrictHostKeyChecking=accept-new)",
    );
    SSH_PERSIST = key(
        "ssh.persist",
        Kind::Duration,
        "60s",
        "how long a host's shared ssh connection stays after a run for the next to reuse, as Ansible's ControlPersist (0: it ends with the run)",
    );
    SSH_MAX_MASTERS = key(
        "ssh.max_masters",
        Kind::Int,
        "64",
        "at most this many lasting ssh connections stay after runs; past it the least recently used idle ones end",
    );
    NETWORK_TUNNEL = key(
        "network.tunnel",
        Kind::Text,
        "",
        "network interface of the tunnel this host reaches the servers through (empty: no tunnel)",
    );
    NETWORK_TUNNEL_KIND = key(
        "network.tunnel_kind",
        Kind::Choice(&["wireguard", "other"]),
        "wireguard",
        "what the tunnel is: wireguard (up and a recent handshake) or other (interface up)",
    );
    NETWORK_HANDSHAKE_MAX_AGE = key(
        "network.handshake_max_age",
        Kind::Duration,
        "180s",
        "a WireGuard peer whose last handshake is older than this counts as gone (WireGuard rekeys every 2 min)",
    );
}

// The metrics database's own: what its API is used with.
keys! { METRICS_DB_OWN:
    METRICS_DB_ORG = env_key("metrics_db.org", Kind::Text, "", "INFLUX_ORG", "organisation the token belongs to");
    METRICS_DB_BUCKET = key("metrics_db.bucket", Kind::Text, "telegraf", "bucket the metrics agent writes to");
    METRICS_DB_TOKEN = Key {
        name: "metrics_db.token",
        kind: Kind::Text,
        default: "",
        env: Some("INFLUX_TOKEN"),
        secret: true,
        help: "API token (prefer token_file or token_command)",
    };
    METRICS_DB_TOKEN_FILE = key("metrics_db.token_file", Kind::Text, "", "file holding the API token; must not be readable by group or others");
    METRICS_DB_TOKEN_COMMAND = key("metrics_db.token_command", Kind::Command, "", "command printing the API token on stdout");
}

keys! { TAIL:
    CONTAINER_RUNTIME = key("container.runtime", Kind::Text, "podman", "container runtime program for container::");
    CONTAINER_RUN_OPTIONS = key("container.run_options", Kind::Text, "", "extra `podman run` options of deployed containers (e.g. --runtime runc)");
    TOOLS_TIMEOUT = key("tools.timeout", Kind::Duration, "30s", "how long the agent's and shipper's own tools may run");
    UNITS_JOB_TIMEOUT = key("units.job_timeout", Kind::Duration, "90s", "how long a start/stop/restart/reload job may take");
    UNITS_SETTLE = key("units.settle", Kind::Duration, "300ms", "how long a started unit is watched for dying at once");
    PACKAGE_TIMEOUT = key("package.timeout", Kind::Duration, "10m", "how long one package manager command (a repository's update, an install, a removal) may take");
    HOST_EXEC_TIMEOUT = key("host.exec_timeout", Kind::Duration, "60s", "default timeout of host::exec");
    JOURNAL_TIMEOUT = key("journal.timeout", Kind::Duration, "30s", "how long one journalctl read may take");
    HTTP_TIMEOUT = key("http.timeout", Kind::Duration, "5s", "default timeout of every HTTP request (probes and queries)");
    HTTP_MAX_BODY = key("http.max_body", Kind::Int, "16", "largest HTTP answer read, in MB; a larger one is a failed check, not read on");
    HTTP_CA_FILE = key("http.ca_file", Kind::Text, "", "extra CA certificate (PEM) trusted for https:// addresses");
    LIMITS_MAX_OPERATIONS = key(
        "limits.max_operations",
        Kind::Int,
        "50000000",
        "operations a runbook may execute before it is stopped as runaway",
    );
    LIMITS_RUN_TIMEOUT = key(
        "limits.run_timeout",
        Kind::Duration,
        "0s",
        "how long one `opsbook run` may take before it is stopped with its partial report, exit 124 (0: no limit; `--timeout` overrides)",
    );
    LIMITS_TOKEN_COMMAND_TIMEOUT = key("limits.token_command_timeout", Kind::Duration, "10s", "how long token_command may run");
}

/// Every configuration key, in order: opsbook's own, each component's (in the table's order),
/// then the tools' and limits'.
pub fn all() -> &'static [&'static Key] {
    static ALL: OnceLock<&'static [&'static Key]> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<&'static Key> = GENERAL[..1].to_vec();
        all.push(leak(roles()));
        all.extend(&GENERAL[1..]);
        for c in components::all() {
            all.extend(of_component(c).into_iter().map(leak));
            all.extend(METRICS_DB_OWN.iter().filter(|k| in_section(k, c)));
        }
        all.extend(TAIL);
        Vec::leak(all)
    })
}

fn leak(key: Key) -> &'static Key {
    Box::leak(Box::new(key))
}

fn in_section(key: &Key, c: &Component) -> bool {
    key.name.split_once('.').is_some_and(|(section, _)| section == c.section)
}

/// `roles`: any of the table's components, all of them by default.
fn roles() -> Key {
    key(
        "roles",
        Kind::Subset(components::names()),
        Box::leak(components::names().join(",").into_boxed_str()),
        "the components this host runs: servers, clients or all of them (an inventory sets it per host)",
    )
}

/// The keys a component's `settings` make, `SECTION.LEAF` each.
fn of_component(c: &'static Component) -> Vec<Key> {
    let s = &c.settings;
    let label = c.label;
    let name = |leaf: &str| -> &'static str { Box::leak(format!("{}.{leaf}", c.section).into_boxed_str()) };
    let text = |leaf: &str, default: &'static str, help: String| {
        key(name(leaf), Kind::Text, default, Box::leak(help.into_boxed_str()))
    };
    let mut keys = Vec::new();
    if c.serves() {
        let url: &'static str = Box::leak(format!("http://127.0.0.1:{}", c.port).into_boxed_str());
        let env = (!s.address_env.is_empty()).then_some(s.address_env);
        let help = if s.address.is_empty() {
            Box::leak(format!("base address of the {label}").into_boxed_str())
        } else {
            s.address
        };
        keys.push(Key { name: name("url"), kind: Kind::Url, default: url, env, secret: false, help });
    }
    keys.push(text("unit", s.unit, format!("unit of the {label}")));
    keys.push(text("config", s.config, format!("configuration file of the {label}")));
    keys.push(text("exec", s.exec, format!("command line the deployed {label} runs (its unit's ExecStart)")));
    if !s.data_dir.is_empty() {
        keys.push(text("data_dir", s.data_dir, format!("data directory of the {label}")));
    }
    keys.push(text("account", s.account, format!("service account the {label} runs as (system scope)")));
    keys.extend(package_keys(c, &name));
    if !c.behaviour.check_key.is_empty() {
        // The default is the table's `check`, written there once.
        let default = c.behaviour.check.join(" ");
        let exec = if default.contains("{exec}") { " ({exec}: the exec line)" } else { "" };
        let help = format!("{}; default: {default}{exec}", s.check_help);
        keys.push(key(name(c.behaviour.check_key), Kind::Command, "", Box::leak(help.into_boxed_str())));
    }
    if !s.image.is_empty() {
        let help = format!("deploy the {label} as a native unit or a container");
        keys.push(key(
            name("run_as"),
            Kind::Choice(&["native", "container"]),
            "native",
            Box::leak(help.into_boxed_str()),
        ));
        keys.push(text("image", s.image, format!("container image of the {label}")));
    }
    keys
}

/// `package`, `version`, `repository`, `repository_key` and `install` of a component.
fn package_keys(c: &'static Component, name: &dyn Fn(&str) -> &'static str) -> Vec<Key> {
    let vendor = c.repository.vendor;
    let help = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
    vec![
        key(
            name("package"),
            Kind::Text,
            c.settings.package,
            "package deploy installs when the program is missing (the vendor's name)",
        ),
        key(
            name("version"),
            Kind::Text,
            "",
            "version of the package to install (empty: the newest the repository offers)",
        ),
        key(
            name("repository"),
            Kind::Text,
            "",
            help(format!(
                "repository the package comes from: apt `URL SUITE COMPONENT…`, dnf baseurl (empty: {vendor}'s, as the vendor documents it)"
            )),
        ),
        key(
            name("repository_key"),
            Kind::Text,
            "",
            help(format!("URL of the repository's signing key (empty: {vendor}'s)")),
        ),
        key(
            name("install"),
            Kind::Bool,
            "true",
            "whether deploy installs the package when it is missing (false: the program is the operator's to provide)",
        ),
    ]
}

/// The key named `name`, as files and scripts spell it.
pub fn lookup(name: &str) -> Option<&'static Key> {
    static BY_NAME: OnceLock<HashMap<&'static str, &'static Key>> = OnceLock::new();
    BY_NAME.get_or_init(|| all().iter().map(|k| (k.name, *k)).collect()).get(name).copied()
}

/// A component's configuration key `SECTION.leaf` (`unit`, `url`, `config`, …). Every component
/// has the keys the stdlib reads (a test holds it); another leaf is a programming error.
pub fn of(component: &Component, leaf: &str) -> &'static Key {
    let name = format!("{}.{leaf}", component.section);
    lookup(&name).unwrap_or_else(|| panic!("no configuration key `{name}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_key() {
        for k in all() {
            assert_eq!(lookup(k.name).map(|found| found.name), Some(k.name));
        }
        for named in NAMED {
            assert_eq!(named.name, named.0);
        }
        assert_eq!(METRICS_DB_TOKEN_COMMAND.name, "metrics_db.token_command");
    }

    #[test]
    fn the_component_table_makes_the_configuration_keys() {
        let Kind::Subset(accepted) = ROLES.kind else { panic!("roles is a subset") };
        assert_eq!(accepted, components::names());
        assert_eq!(ROLES.default, components::names().join(","));
        // Each section has the keys the stdlib and the derived lists read.
        for c in components::all() {
            for leaf in ["unit", "config", "exec", "account", "package", "install"] {
                assert!(lookup(&format!("{}.{leaf}", c.section)).is_some(), "{}.{leaf}", c.section);
            }
            assert_eq!(lookup(&format!("{}.url", c.section)).is_some(), c.serves(), "{}.url", c.section);
            if !c.behaviour.check_key.is_empty() {
                // The offline check's default is the table's, named in its key's help.
                let key = lookup(&format!("{}.{}", c.section, c.behaviour.check_key)).unwrap();
                assert_eq!(components::default_check(key.name), c.behaviour.check, "{}", c.name);
                assert!(key.help.contains(&c.behaviour.check.join(" ")), "{}", key.help);
            }
            assert_eq!(lookup(&format!("{}.run_as", c.section)).is_some(), !c.settings.image.is_empty());
        }
        let names: Vec<&str> = all().iter().map(|k| k.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a key declared twice");
    }
}
