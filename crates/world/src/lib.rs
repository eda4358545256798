//! The seams between the verbs and the machine they act on.
//!
//! Verbs (`opsbook_engine::verbs`) never talk to D-Bus, journalctl, processes or podman
//! directly: they go through the small traits declared in this folder, one file per seam
//! (units, journal, commands, containers, files). Each trait has a real implementation (zbus,
//! `journalctl -o json`, child processes, podman, std::fs), one for another host reached over
//! its shared ssh connection (`remote`), and, for `--sandbox`, an in-process twin.

#![warn(missing_docs)]

pub mod change_lock;
pub mod commands;
pub mod containers;
pub mod endpoints;
pub mod files;
mod future;
pub mod hostname;
pub mod http_client;
mod http_explain;
mod http_through;
pub mod journal;
pub mod local_files;
pub mod local_time;
pub mod net;
pub mod remote;
pub(crate) mod systemd_dbus;
pub mod this_run;
pub mod transport;
mod unit_properties;
pub mod units;
mod world;

pub use future::BoxFuture;
pub use world::World;
