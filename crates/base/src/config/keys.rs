//! Every configuration key, declared once: name, kind, default, environment variable, help.
//!
//! Each key is a constant (`keys::LOG_STORE_URL`) that `Config::text`, `int` and `duration`
//! take, so a misspelt key does not compile; `KEYS` lists them all in declaration order for
//! `opsbook config`, the files' validation and the scripts' `config` view.

use crate::components::{Component, NAMES};

/// What a key accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Url,
    Int,
    Duration,
    /// A command: an argv array, or a string run by `sh -c`.
    Command,
    Choice(&'static [&'static str]),
    /// Some of these, comma-separated (scripts see a list).
    Subset(&'static [&'static str]),
    /// `true` or `false` (a TOML boolean, or the word; scripts see a boolean).
    Bool,
}

/// One declared configuration key.
#[derive(Debug)]
pub struct Key {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub env: Option<&'static str>,
    pub secret: bool,
    pub help: &'static str,
}

const fn key(name: &'static str, kind: Kind, default: &'static str, help: &'static str) -> Key {
    Key { name, kind, default, env: None, secret: false, help }
}

const fn env_key(name: &'static str, kind: Kind, default: &'static str, env: &'static str, help: &'static str) -> Key {
    Key { name, kind, default, env: Some(env), secret: false, help }
}

/// Declares each key as a constant and `KEYS` as the list of all of them.
macro_rules! keys {
    ($($id:ident = $key:expr;)*) => {
        $(#[allow(missing_docs)] pub const $id: &Key = &$key;)*
        /// Every configuration key, in declaration order, with its default.
        pub static KEYS: &[&Key] = &[$($id),*];
    };
}

keys! {
    SCOPE = key(
        "scope",
        Kind::Choice(&["system", "user"]),
        "system",
        "which service manager: system bus, or user bus for rootless units",
    );
    ROLES = key(
        "roles",
        Kind::Subset(&NAMES),
        "metrics-db,log-store,metrics-agent,log-shipper",
        "the components this host runs: servers, clients or all four (an inventory sets it per host)",
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
    METRICS_DB_URL = env_key(
        "metrics_db.url",
        Kind::Url,
        "http://127.0.0.1:8086",
        "INFLUX_HOST",
        "base address of the metrics database (InfluxDB 2 API)",
    );
    METRICS_DB_UNIT = key("metrics_db.unit", Kind::Text, "influxdb.service", "unit of the metrics database");
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
    LOG_STORE_URL = env_key(
        "log_store.url",
        Kind::Url,
        "http://127.0.0.1:3100",
        "LOKI_ADDR",
        "base address of the log store (Loki API)",
    );
    METRICS_DB_EXEC = key("metrics_db.exec", Kind::Text, "/usr/bin/influxd", "command line the deployed metrics database runs (its unit's ExecStart)");
    METRICS_DB_CONFIG = key("metrics_db.config", Kind::Text, "/etc/influxdb/config.toml", "configuration file of the metrics database");
    METRICS_DB_DATA_DIR = key("metrics_db.data_dir", Kind::Text, "/var/lib/influxdb", "data directory of the metrics database");
    METRICS_DB_ACCOUNT = key("metrics_db.account", Kind::Text, "influxdb", "service account the metrics database runs as (system scope)");
    METRICS_DB_PACKAGE = key("metrics_db.package", Kind::Text, "influxdb2", "package deploy installs when the program is missing (the vendor's name)");
    METRICS_DB_VERSION = key("metrics_db.version", Kind::Text, "", "version of the package to install (empty: the newest the repository offers)");
    METRICS_DB_REPOSITORY = key("metrics_db.repository", Kind::Text, "", "repository the package comes from: apt `URL SUITE COMPONENT…`, dnf baseurl (empty: InfluxData's, as the vendor documents it)");
    METRICS_DB_REPOSITORY_KEY = key("metrics_db.repository_key", Kind::Text, "", "URL of the repository's signing key (empty: InfluxData's)");
    METRICS_DB_INSTALL = key("metrics_db.install", Kind::Bool, "true", "whether deploy installs the package when it is missing (false: the program is the operator's to provide)");
    METRICS_DB_RUN_AS = key("metrics_db.run_as", Kind::Choice(&["native", "container"]), "native", "deploy the metrics database as a native unit or a container");
    METRICS_DB_IMAGE = key("metrics_db.image", Kind::Text, "docker.io/library/influxdb:2.7", "container image of the metrics database");
    LOG_STORE_UNIT = key("log_store.unit", Kind::Text, "loki.service", "unit of the log store");
    LOG_STORE_EXEC = key("log_store.exec", Kind::Text, "/usr/bin/loki -config.file={config}", "command line the deployed log store runs (its unit's ExecStart)");
    LOG_STORE_CONFIG = key("log_store.config", Kind::Text, "/etc/loki/config.yaml", "configuration file of the log store");
    LOG_STORE_VERIFY_COMMAND = key("log_store.verify_command", Kind::Command, "", "offline validation; default: the exec line with -verify-config");
    LOG_STORE_DATA_DIR = key("log_store.data_dir", Kind::Text, "/var/lib/loki", "data directory of the log store");
    LOG_STORE_ACCOUNT = key("log_store.account", Kind::Text, "loki", "service account the log store runs as (system scope)");
    LOG_STORE_PACKAGE = key("log_store.package", Kind::Text, "loki", "package deploy installs when the program is missing (the vendor's name)");
    LOG_STORE_VERSION = key("log_store.version", Kind::Text, "", "version of the package to install (empty: the newest the repository offers)");
    LOG_STORE_REPOSITORY = key("log_store.repository", Kind::Text, "", "repository the package comes from: apt `URL SUITE COMPONENT…`, dnf baseurl (empty: Grafana's, as the vendor documents it)");
    LOG_STORE_REPOSITORY_KEY = key("log_store.repository_key", Kind::Text, "", "URL of the repository's signing key (empty: Grafana's)");
    LOG_STORE_INSTALL = key("log_store.install", Kind::Bool, "true", "whether deploy installs the package when it is missing (false: the program is the operator's to provide)");
    LOG_STORE_RUN_AS = key("log_store.run_as", Kind::Choice(&["native", "container"]), "native", "deploy the log store as a native unit or a container");
    LOG_STORE_IMAGE = key("log_store.image", Kind::Text, "docker.io/grafana/loki:3.4.6", "container image of the log store");
    METRICS_AGENT_UNIT = key("metrics_agent.unit", Kind::Text, "telegraf.service", "unit of the metrics agent");
    METRICS_AGENT_CONFIG = key("metrics_agent.config", Kind::Text, "/etc/telegraf/telegraf.conf", "configuration file of the metrics agent");
    METRICS_AGENT_EXEC = key("metrics_agent.exec", Kind::Text, "/usr/bin/telegraf --config {config}", "command line the deployed metrics agent runs (its unit's ExecStart)");
    METRICS_AGENT_ACCOUNT = key("metrics_agent.account", Kind::Text, "telegraf", "service account the metrics agent runs as (system scope)");
    METRICS_AGENT_PACKAGE = key("metrics_agent.package", Kind::Text, "telegraf", "package deploy installs when the program is missing (the vendor's name)");
    METRICS_AGENT_VERSION = key("metrics_agent.version", Kind::Text, "", "version of the package to install (empty: the newest the repository offers)");
    METRICS_AGENT_REPOSITORY = key("metrics_agent.repository", Kind::Text, "", "repository the package comes from: apt `URL SUITE COMPONENT…`, dnf baseurl (empty: InfluxData's, as the vendor documents it)");
    METRICS_AGENT_REPOSITORY_KEY = key("metrics_agent.repository_key", Kind::Text, "", "URL of the repository's signing key (empty: InfluxData's)");
    METRICS_AGENT_INSTALL = key("metrics_agent.install", Kind::Bool, "true", "whether deploy installs the package when it is missing (false: the program is the operator's to provide)");
    METRICS_AGENT_TEST_COMMAND = key(
        "metrics_agent.test_command",
        Kind::Command,
        "",
        "configuration test; default: telegraf --config {config} --test",
    );
    LOG_SHIPPER_UNIT = key("log_shipper.unit", Kind::Text, "alloy.service", "unit of the log shipper");
    LOG_SHIPPER_URL = key("log_shipper.url", Kind::Url, "http://127.0.0.1:12345", "local metrics endpoint of the log shipper");
    LOG_SHIPPER_CONFIG = key("log_shipper.config", Kind::Text, "/etc/alloy/config.alloy", "configuration file of the log shipper");
    LOG_SHIPPER_EXEC = key(
        "log_shipper.exec",
        Kind::Text,
        "/usr/bin/alloy run --server.http.listen-addr=127.0.0.1:12345 --storage.path={data_dir} {config}",
        "command line the deployed log shipper runs (its unit's ExecStart)",
    );
    LOG_SHIPPER_DATA_DIR = key("log_shipper.data_dir", Kind::Text, "/var/lib/alloy", "data directory of the log shipper");
    LOG_SHIPPER_ACCOUNT = key("log_shipper.account", Kind::Text, "alloy", "service account the log shipper runs as (system scope)");
    LOG_SHIPPER_PACKAGE = key("log_shipper.package", Kind::Text, "alloy", "package deploy installs when the program is missing (the vendor's name)");
    LOG_SHIPPER_VERSION = key("log_shipper.version", Kind::Text, "", "version of the package to install (empty: the newest the repository offers)");
    LOG_SHIPPER_REPOSITORY = key("log_shipper.repository", Kind::Text, "", "repository the package comes from: apt `URL SUITE COMPONENT…`, dnf baseurl (empty: Grafana's, as the vendor documents it)");
    LOG_SHIPPER_REPOSITORY_KEY = key("log_shipper.repository_key", Kind::Text, "", "URL of the repository's signing key (empty: Grafana's)");
    LOG_SHIPPER_INSTALL = key("log_shipper.install", Kind::Bool, "true", "whether deploy installs the package when it is missing (false: the program is the operator's to provide)");
    LOG_SHIPPER_VALIDATE_COMMAND = key("log_shipper.validate_command", Kind::Command, "", "offline validation; default: alloy validate {config}");
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

/// The key named `name`, as files and scripts spell it.
pub fn lookup(name: &str) -> Option<&'static Key> {
    KEYS.iter().copied().find(|k| k.name == name)
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
    fn every_constant_is_found_by_its_name() {
        for k in KEYS {
            assert_eq!(lookup(k.name).map(|found| found.name), Some(k.name));
        }
        assert_eq!(LOG_STORE_URL.name, "log_store.url");
        assert_eq!(METRICS_DB_TOKEN_COMMAND.name, "metrics_db.token_command");
    }
}

#[cfg(test)]
mod component_tests {
    use super::*;
    use crate::components::COMPONENTS;

    #[test]
    fn the_component_table_agrees_with_the_configuration_keys() {
        let Kind::Subset(accepted) = ROLES.kind else { panic!("roles is a subset") };
        assert_eq!(accepted, NAMES);
        assert_eq!(ROLES.default, NAMES.join(","));
        // Each section has the keys the stdlib and the derived lists read.
        for c in &COMPONENTS {
            for leaf in ["unit", "config", "exec", "account", "package", "install"] {
                assert!(lookup(&format!("{}.{leaf}", c.section)).is_some(), "{}.{leaf}", c.section);
            }
            assert_eq!(lookup(&format!("{}.url", c.section)).is_some(), c.serves(), "{}.url", c.section);
            if !c.behaviour.check_key.is_empty() {
                assert!(lookup(&format!("{}.{}", c.section, c.behaviour.check_key)).is_some(), "{}", c.name);
            }
        }
    }
}
