//! The seams between the verbs and the machine they act on.
//!
//! Verbs (`opsbook_engine::verbs`) never talk to D-Bus, journalctl, processes or podman
//! directly: they go through the small traits declared in this folder, one file per seam
//! (units, journal, commands, containers, files). Each trait has a real implementation (zbus,
//! `journalctl -o json`, child processes, podman, std::fs), one for another host reached over
//! its shared ssh connection (`remote`), and, for `--sandbox`, an in-process twin.

#![deny(missing_docs)]

pub mod change_lock;
mod commands;
mod containers;
mod endpoints;
pub mod files;
mod future;
mod hostname;
mod http_client;
mod http_direct;
mod http_explain;
pub mod journal;
mod local_files;
mod local_time;
mod net;
mod remote;
mod systemd_dbus;
mod this_run;
pub mod transport;
mod unit_properties;
pub mod units;
mod world;

pub use commands::{AGENT_CONFIG_FILES, CPU_LOAD, Commands, Completed, Invocation, Processes};
pub use containers::{
    Container, Containers, Podman, Row as ContainerRow, Stats as ContainerStats, parse_version as parse_podman_version,
};
pub use endpoints::Endpoints;
pub use future::BoxFuture;
pub use hostname::this_machine;
pub use http_client::{Http, Request, Response};
pub use local_files::{LocalFiles, confined};
pub use local_time::{micros as local_micros, today as local_today};
pub use net::{ConfinedNet, Link, LocalNet, Net, Reach, Resolved, resolve as resolve_name};
pub use remote::{endpoints_from_host, routes as forwarded_routes};
pub use this_run::{id as run_id, who as run_by};
pub use world::World;
