//! The fleet's inventory: which hosts there are, how to reach each, the roles each plays, and
//! the configuration opsbook uses on each.
//!
//! Read from opsbook's config files (`[hosts.NAME]`, `[groups.NAME]`, see `toml_source.rs`)
//! and from an Ansible inventory (`--inventory FILE` or `inventory = "…"`, see `ansible/`).
//! With neither, the inventory is one host: this machine, playing every role, so single-host
//! use is what it always was.
//!
//! ```text
//! let inventory = Inventory::load(&config, None)?;
//! for host in inventory.select("clients:!monitor3")? { host.config() … }
//! inventory.hosts_with(Role::parse("loki").unwrap());
//! inventory.services("monitor3:log-shipper")?;
//! ```
//!
//! Every fact remembers where it came from (`Source`), for `opsbook hosts`.
//!
//! This file only declares the modules and shows what other crates use: `host` (a host and its
//! facts), `inventory` (the fleet and host selection), `build` (reading it from its sources).

#![deny(missing_docs)]

pub mod ansible;
mod build;
mod data_only;
mod host;
mod inventory;
pub(crate) mod role;
pub mod template;
pub(crate) mod toml_source;

pub use host::{Fact, Host, Override, Problem, Service, Source};
pub use inventory::Inventory;
pub use opsbook_base::components::{Component, Reload, Repository, Tier};
pub use role::Role;
