//! Integration tests: one binary that drives the real `opsbook` executable.

mod support;

mod cli;
mod config;
mod debian13;
mod fleet;
mod fleet_failures;
mod fleet_masters;
mod fleet_order;
mod fleet_runs;
mod inventory;
mod journal;
mod lifecycle;
mod lifecycle_container;
mod lifecycle_verbs;
mod onboarding;
mod package;
mod probes;
mod prometheus;
mod remote_world;
mod repl;
mod rollout;
mod rollout_fleet;
mod run;
mod runbooks;
mod sandbox;
mod sandbox_fleet;
mod scripts;
mod secrets;
mod serve;
mod serve_fleet;
mod tools;
mod twin;
mod units;
mod verbs;
mod verdicts;
