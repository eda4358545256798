//! The metrics-db twin: an in-memory stand-in for InfluxDB 2 speaking its HTTP API.
//!
//! - `GET|HEAD /health`: InfluxDB's health JSON; `GET|HEAD /ping`: 204 with
//!   `X-Influxdb-Version` and `X-Influxdb-Build` (every answer carries both, as InfluxDB's do).
//! - `GET /api/v2/buckets`, `POST /api/v2/write` (line protocol, gzip too), `POST
//!   /api/v2/query` (Flux subset of `flux`, raw `application/vnd.flux` or a JSON body with a
//!   dialect; CSV from `csv`), `GET /api/v2/config` (runtime config with `engine-path`).
//! - Every `/api/v2` call but setup needs `Authorization: Token <token>` of a known
//!   authorization (checked by one middleware layer, `http::require_token`); otherwise 401
//!   `{"code":"unauthorized","message":"unauthorized access"}`. The token is never logged.
//! - Tenancy (`tenant`, `tenant_http`, `onboarding`): `MetricsDb::fresh` starts as a fresh
//!   `influxd`, with nothing until `POST /api/v2/setup`; `MetricsDb::new` starts already
//!   onboarded with the options' org and buckets and the given operator token. Buckets and
//!   orgs are listed in pages (`paging`), `/api/v2/authorizations` makes tokens, and
//!   `/api/v2/config` takes operator tokens only.
//! - `GET /ready`: `{"status":"ready","started":…,"up":…}`.
//!
//! Errors are InfluxDB's JSON `{"code": …, "message": …}`. Points live in memory (`store`)
//! and are dropped when older than the retention window.
//!
//! `database` holds the state and what it does (write, query); `http` the routes and
//! answers, `serve` serves them, `resources` the JSON describing buckets and the runtime
//! config. This file only
//! declares the modules and shows the state to other crates.

mod answers;
mod csv;
mod database;
mod flux;
mod http;
pub mod influxd_config;
mod kept_setup;
mod onboarding;
mod paging;
mod resources;
mod serve;
mod store;
mod tenant;
mod tenant_http;

pub use database::{MetricsDb, Options};
