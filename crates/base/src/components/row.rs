//! One row of the component table (`Component`) and its parts: the tier, how a new
//! configuration takes effect, the behaviour scripts dispatch to, the keys' defaults and the
//! vendor's package repository.

use serde::{Deserialize, Serialize};

/// Servers start first and stop last; clients start once the servers are ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// A server: the metrics database, the log store.
    Server,
    /// A client of the servers: the agent, the shipper.
    Client,
}

/// How a component takes a new configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Server or client.
    pub tier: Tier,
    /// The section of its configuration keys (`metrics_db`: `metrics_db.unit`, `.config`, …).
    pub section: &'static str,
    /// The template its configuration file is rendered from.
    pub template: &'static str,
    /// The port its address has when the URL names none; 0: it serves no address.
    pub port: u16,
    /// How it takes a changed configuration.
    pub reload: Reload,
    /// The vendor's package repository its package comes from (`SECTION.package`).
    pub repository: &'static Repository,
    /// Where the unit of the vendor's package reads its configuration: deploy writes it there
    /// when that unit is the one run (empty: its package brings no unit).
    pub packaged_config: &'static str,
    /// Further groups the vendor's package puts its account in (to read the logs).
    pub account_groups: &'static [&'static str],
    /// The defaults of its configuration keys (`config::keys` makes the keys from them).
    #[serde(skip)]
    pub settings: Settings,
    /// What it does that the others do not, as the stdlib functions doing it (each called by
    /// name through this table, so no script switches on a component's name) and as data.
    #[serde(flatten)]
    pub behaviour: Behaviour,
}

/// A component's behaviour: the functions scripts call for it by name, and the facts those
/// functions and the lifecycle read. `{config}` in a word stands for its configuration file.
#[derive(Debug, Serialize)]
pub struct Behaviour {
    /// The stdlib module of its own holding the functions below, for a component added by
    /// `components.toml` (`verify`, `ready`, … each its module's; `module` is a word Rhai
    /// keeps for itself); empty: the built-in modules' functions named below.
    pub own_module: &'static str,
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
    /// The arguments it is given then.
    pub container_args: &'static [&'static str],
    /// It reads the host's journal: deploy's record of a change is written until it counted one.
    pub reads_journal: bool,
}

/// The defaults of a component's configuration keys, `SECTION.LEAF` each (`config::keys`).
#[derive(Debug)]
pub struct Settings {
    /// `url`'s help (a component with a port), and the environment variable setting it, if any.
    pub address: &'static str,
    /// The environment variable setting the address, empty when none.
    pub address_env: &'static str,
    /// `unit`, `exec` (`{config}`, `{data_dir}`, `{port}` filled in), `config`, `account`, `package`.
    pub unit: &'static str,
    /// `exec`'s default.
    pub exec: &'static str,
    /// `config`'s default: its configuration file.
    pub config: &'static str,
    /// `account`'s default: the user it runs as.
    pub account: &'static str,
    /// `package`'s default.
    pub package: &'static str,
    /// `data_dir`; empty: it keeps no data of its own (no key).
    pub data_dir: &'static str,
    /// `image`; empty: it is not run as a container (no `run_as` and `image` keys).
    pub image: &'static str,
    /// The help of its offline check's key (`Behaviour::check_key`); the key's help adds the
    /// default, `Behaviour::check`.
    pub check_help: &'static str,
}

/// A vendor's package repository, as the vendor documents adding it: apt's sources line and
/// key, dnf's baseurl and key. Deploy adds it where `SECTION.repository` names none.
#[derive(Debug, Serialize)]
pub struct Repository {
    /// What its files on a host are named (`/etc/apt/sources.list.d/NAME.list`, …).
    pub name: &'static str,
    /// Whose it is, as help texts name it (`Grafana`).
    pub vendor: &'static str,
    /// apt: the sources line without `deb` and its options (URL SUITE COMPONENT…).
    pub apt: &'static str,
    /// apt: the URL of the key its InRelease is signed with.
    pub apt_key: &'static str,
    /// dnf: the baseurl.
    pub dnf: &'static str,
    /// dnf: the gpgkey.
    pub dnf_key: &'static str,
}
