//! The stack's components, described once: the role each plays, the names operators give it,
//! its tier, where its configuration keys live, the template of its configuration file, how a
//! new configuration takes effect, its package — and its behaviour: the stdlib functions that
//! verify it, say it is ready, prove it after a change and set it up, its offline check of a
//! configuration file and the arguments it runs with as a container (`COMPONENTS`).
//!
//! Every other description derives from this table: the roles the inventory accepts
//! (`opsbook_inventory::Role`), `config.roles` (`config::keys::ROLES`), `inventory::roles()`
//! (from which `stdlib/stack.rhai` builds `stack::components()` and the scripts dispatch to each
//! one's functions), the units the sandbox boots and the REPL completes, the addresses a remote
//! host's connection forwards, and the orchestrator scripts' role names.
//!
//! opsbook's own names (`metrics-db`, `log-store`, `metrics-agent`, `log-shipper`) are what
//! reports print; inventories written for Ansible usually say `influxdb`, `loki`, `telegraf`
//! and `alloy`, so those are accepted as aliases wherever a role is read.

use serde::Serialize;

/// Servers start first and stop last; clients start once the servers are ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    Server,
    Client,
}

/// How a component takes a new configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reload {
    /// A restart: it reads its configuration only when it starts.
    Restart,
    /// The unit's reload (SIGHUP), a restart when the unit cannot reload.
    Unit,
    /// Its own reload endpoint (the shipper's `POST /-/reload`), a restart when that fails.
    Endpoint,
}

/// One component as opsbook knows it before any configuration is read.
#[derive(Debug, Serialize)]
pub struct Component {
    /// opsbook's name for the role (reports, `HOST:ROLE`, `config.roles`).
    pub name: &'static str,
    /// The operators' usual name for the program playing it.
    pub alias: &'static str,
    /// How reports name it in a sentence.
    pub label: &'static str,
    /// What it is, as its deployed unit describes it.
    pub description: &'static str,
    pub tier: Tier,
    /// The section of its configuration keys (`metrics_db`: `metrics_db.unit`, `.config`, …).
    pub section: &'static str,
    /// The template its configuration file is rendered from.
    pub template: &'static str,
    /// The port its address has when the URL names none; 0: it serves no address.
    pub port: u16,
    pub reload: Reload,
    /// The vendor's package repository its package comes from (`SECTION.package`).
    pub repository: &'static Repository,
    /// Where the unit of the vendor's package reads its configuration: deploy writes it there
    /// when that unit is the one run.
    pub packaged_config: &'static str,
    /// Further groups the vendor's package puts its account in (to read the logs).
    pub account_groups: &'static [&'static str],
    /// What it does that the others do not, as the stdlib functions doing it (each called by
    /// name through this table, so no script switches on a component's name) and as data.
    #[serde(flatten)]
    pub behaviour: Behaviour,
}

/// A component's behaviour: the functions scripts call for it by name, and the facts those
/// functions and the lifecycle read. `{config}` in a word stands for its configuration file.
#[derive(Debug, Serialize)]
pub struct Behaviour {
    /// `stdlib/verify.rhai`: its whole verification, given the options (`verify::component`).
    pub verify: &'static str,
    /// `stdlib/stack.rhai`: whether it answers as ready now, a probe record (`stack::ready`).
    pub ready: &'static str,
    /// `stdlib/evidence.rhai`: it serves after a change (unit, readiness, its new run's errors).
    pub serving: &'static str,
    /// `stdlib/evidence.rhai`: evidence made after a change (`evidence::evidence_after`).
    pub evidence: &'static str,
    /// `stdlib/lifecycle.rhai`: what deploy does once it first answers (empty: nothing).
    pub set_up: &'static str,
    /// The key in its section of the command that checks a file offline (empty: none).
    pub check_key: &'static str,
    /// That check when the key is left empty, as an argv; a first word `{exec}` stands for the
    /// words of its `exec` line (empty: it has no offline check; its health after start is it).
    pub check: &'static [&'static str],
    /// The check's arguments after the program of the vendor's unit, when that unit is run.
    pub packaged_check: &'static [&'static str],
    /// Run as a container: the environment (`NAME=VALUE`) and arguments it is given its file by.
    pub container_env: &'static [&'static str],
    pub container_args: &'static [&'static str],
    /// It reads the host's journal: deploy's record of a change is written until it counted one.
    pub reads_journal: bool,
}

/// A vendor's package repository, as the vendor documents adding it: apt's sources line and
/// key, dnf's baseurl and key. Deploy adds it where `SECTION.repository` names none.
#[derive(Debug, Serialize)]
pub struct Repository {
    /// What its files on a host are named (`/etc/apt/sources.list.d/NAME.list`, …).
    pub name: &'static str,
    /// apt: the sources line without `deb` and its options (URL SUITE COMPONENT…).
    pub apt: &'static str,
    /// apt: the URL of the key its InRelease is signed with.
    pub apt_key: &'static str,
    /// dnf: the baseurl.
    pub dnf: &'static str,
    /// dnf: the gpgkey.
    pub dnf_key: &'static str,
}

/// Grafana Labs' repositories (Alloy, Loki): grafana.com/docs/grafana/latest/setup-grafana/installation/debian/.
pub const GRAFANA: Repository = Repository {
    name: "grafana",
    apt: "https://apt.grafana.com stable main",
    apt_key: "https://apt.grafana.com/gpg.key",
    dnf: "https://rpm.grafana.com",
    dnf_key: "https://rpm.grafana.com/gpg.key",
};

/// InfluxData's repositories (Telegraf, InfluxDB 2): docs.influxdata.com, "Install InfluxDB".
pub const INFLUXDATA: Repository = Repository {
    name: "influxdata",
    apt: "https://repos.influxdata.com/debian stable main",
    apt_key: "https://repos.influxdata.com/influxdata-archive.key",
    dnf: "https://repos.influxdata.com/stable/$basearch/main",
    dnf_key: "https://repos.influxdata.com/influxdata-archive.key",
};

/// The components, servers first (the order the stack starts in).
pub const COMPONENTS: [Component; 4] = [
    Component {
        name: "metrics-db",
        alias: "influxdb",
        label: "metrics database",
        description: "InfluxDB 2 metrics database",
        tier: Tier::Server,
        section: "metrics_db",
        template: "metrics-db/config.toml.j2",
        port: 8086,
        reload: Reload::Restart,
        repository: &INFLUXDATA,
        packaged_config: "/etc/influxdb/config.toml",
        account_groups: &[],
        behaviour: Behaviour {
            verify: "metrics_db",
            ready: "metrics_db_ready",
            serving: "metrics_db_serving",
            evidence: "metrics_db_round_trip",
            set_up: "metrics_db_set_up",
            check_key: "",
            check: &[],
            packaged_check: &[],
            container_env: &["INFLUXD_CONFIG_PATH={config}"],
            container_args: &[],
            reads_journal: false,
        },
    },
    Component {
        name: "log-store",
        alias: "loki",
        label: "log store",
        description: "Loki log store",
        tier: Tier::Server,
        section: "log_store",
        template: "log-store/config.yaml.j2",
        port: 3100,
        reload: Reload::Restart,
        repository: &GRAFANA,
        packaged_config: "/etc/loki/config.yml",
        account_groups: &[],
        behaviour: Behaviour {
            verify: "log_store",
            ready: "log_store_ready",
            serving: "log_store_serving",
            evidence: "log_store_round_trip",
            set_up: "",
            check_key: "verify_command",
            check: &["{exec}", "-verify-config"],
            packaged_check: &["-config.file={config}", "-verify-config"],
            container_env: &[],
            container_args: &["-config.file={config}"],
            reads_journal: false,
        },
    },
    Component {
        name: "metrics-agent",
        alias: "telegraf",
        label: "metrics agent",
        description: "Telegraf metrics agent",
        tier: Tier::Client,
        section: "metrics_agent",
        template: "metrics-agent/telegraf.conf.j2",
        port: 0,
        reload: Reload::Unit,
        repository: &INFLUXDATA,
        packaged_config: "/etc/telegraf/telegraf.conf",
        account_groups: &[],
        behaviour: Behaviour {
            verify: "metrics_agent",
            ready: "unit_active",
            serving: "agent_serving",
            evidence: "agent_delivers",
            set_up: "",
            check_key: "test_command",
            check: &["telegraf", "--config", "{config}", "--test"],
            packaged_check: &[],
            container_env: &[],
            container_args: &[],
            reads_journal: false,
        },
    },
    Component {
        name: "log-shipper",
        alias: "alloy",
        label: "log shipper",
        description: "Grafana Alloy log shipper",
        tier: Tier::Client,
        section: "log_shipper",
        template: "log-shipper/config.alloy.j2",
        port: 12345,
        reload: Reload::Endpoint,
        repository: &GRAFANA,
        packaged_config: "/etc/alloy/config.alloy",
        account_groups: &["systemd-journal", "adm"],
        behaviour: Behaviour {
            verify: "log_shipper",
            ready: "log_shipper_ready",
            serving: "shipper_serving",
            evidence: "shipper_delivers",
            set_up: "",
            check_key: "validate_command",
            check: &["alloy", "validate", "{config}"],
            packaged_check: &[],
            container_env: &[],
            container_args: &[],
            reads_journal: true,
        },
    },
];

impl Component {
    /// The component named `name` (opsbook's name, not an alias).
    pub fn named(name: &str) -> Option<&'static Component> {
        COMPONENTS.iter().find(|c| c.name == name)
    }

    /// Whether it serves an address (its `SECTION.url`).
    pub fn serves(&self) -> bool {
        self.port != 0
    }
}

/// Every component's name, servers first.
pub const NAMES: [&str; COMPONENTS.len()] = {
    let mut names = [""; COMPONENTS.len()];
    let mut i = 0;
    while i < COMPONENTS.len() {
        names[i] = COMPONENTS[i].name;
        i += 1;
    }
    names
};
