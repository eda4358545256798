//! The stack twin: faithful stand-ins for the four components, speaking the real wire
//! formats (each written and read by `opsbook_wire`), usable as processes (`opsbook twin
//! SERVICE`, e.g. as systemd units under the stack's names and ports; see `process`) and
//! in-process (the `--sandbox`, see `opsbook-sandbox`'s `components.rs`). Both start a twin the same
//! way: its state from options, then `twin::serve(state, listener, stop)` (each component
//! implements `Twin`), stopped by SIGINT/SIGTERM or by a `Shutdown` handle.
//!
//! One folder per component:
//! - `metrics_db/`: InfluxDB 2 API (health, ping, ready, setup, buckets and orgs in pages,
//!   authorizations, write, Flux query, config); a fresh server until onboarding, or started
//!   already onboarded (`tenant`, `onboarding`); data in memory (`store`), the Flux subset in
//!   `flux/`, the token check as a middleware layer.
//! - `log_store/`: Loki 3.4 API (ready, metrics, push, query_range/query, labels, series,
//!   config); LogQL subset in `logql`, Loki 3's own labels in `loki3`, its log lines in `voice`.
//! - `agent/`: Telegraf-like sampler of the real host writing line protocol.
//! - `shipper/`: Alloy-like journal follower pushing to the log store, with its own
//!   `/metrics`, `/-/ready`, `/-/reload`, and `validate`.
//!
//! Shared: `running` (the `Twin` trait, `serve`, how a twin is told to stop), `clock` (the
//! twins' one clock), `http_client` (the client of the agent's and shipper's requests),
//! `build_info` (the Go servers' build-info gauge), `logger` (where lines go), `go_time` (Go's
//! duration and time texts), `faults` (the sandbox's failure knobs), `toml_check`
//! (config diagnostics of agent and shipper), `argv` (the real programs' command lines, which
//! the twins accept: Loki's single-dash flags, Telegraf's `--config`). Each process logs to stdout in its
//! counterpart's style, so under systemd the journal holds its lines.

#![deny(missing_docs)]
// The twin speaks as the vendors' programs do on their own stdout and stderr (`telegraf
// --test`, `alloy validate`, a server's log lines): it prints as they print, not through
// opsbook's output layer.
#![allow(clippy::disallowed_macros)]

pub mod agent;
mod argv;
mod build_info;
mod clock;
pub(crate) mod faults;
mod go_time;
mod http_client;
pub mod log_store;
pub mod logger;
pub mod metrics_db;
mod notify;
mod process;
mod running;
pub mod shipper;
pub(crate) mod toml_check;

pub use argv::translate as translate_argv;
pub use clock::now_ns;
pub use http_client::http_client;
pub use process::{Service, TwinArgs, run};
pub use running::{Shutdown, Stop, Twin, loopback, serve};
