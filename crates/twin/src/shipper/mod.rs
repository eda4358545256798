//! The log-shipper twin: an Alloy-like agent that follows the journal and pushes its entries
//! to the log store.
//!
//! Entries come from the `Journal` seam (`opsbook_world::journal`): the real one follows
//! `journalctl -o json --follow` (starting at now, killed when the shipper stops); the
//! sandbox plugs its in-process journal into the same trait. Each entry becomes a line of
//! the stream labelled with the config's static labels (`hostname`, `service_type`, …) and
//! its `unit`; batches go out after `batch_wait` or at `batch_size` bytes, as snappy
//! protobuf (what Alloy sends) or JSON, retried with backoff, then dropped and counted.
//!
//! Its local endpoint (127.0.0.1:12345 by default) serves `/metrics` (Alloy's
//! `loki_write_sent_entries_total` and friends), `/-/ready`, `/-/healthy` and `/-/reload`
//! (200 `config reloaded`, or 400 with the error). SIGHUP reloads too. `validate CONFIG`
//! checks a file offline like `alloy validate`.
//!
//! Its config is the twin's TOML (`config`) or, for a `.alloy` file, Alloy's own syntax
//! (`alloy`): `run CONFIG.alloy` and `validate CONFIG.alloy` then answer as Alloy does, its
//! diagnostics included, and its streams carry only the labels the file configures.
//!
//! `pipeline` holds the state and the pipeline (follow, batch, send); `http` the local
//! endpoint, `metrics` its `/metrics`, `config` the TOML config and its checks, `command` the
//! shipper as a command (`run`, `validate`), `loading` reads its config file in either syntax,
//! `counters` what it counts, `serve` runs the endpoint and the pipeline until stopped.

mod alloy;
mod command;
pub mod config;
mod counters;
mod http;
mod loading;
mod metrics;
mod pipeline;
mod positions;
mod serve;

pub use self::command::{DEFAULT_LISTEN, run_command, validate_command, validate_output};
pub use self::pipeline::{Shipper, ShipperFaults};
