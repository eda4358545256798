//! Integration tests: one binary that drives the real `opsbook` executable.

// Tests and benchmarks report to the developer running them (`skipped: why`).
#![allow(clippy::disallowed_macros)]

mod support;

mod bad_input;
mod bad_messages;
mod bad_sources;
mod bad_state;
mod bounded_reads;
mod change_faults_hosts;
mod cli;
mod config;
mod debian13;
mod delivery;
mod delivery_hosts;
mod fifth_component;
mod fleet;
mod fleet_failures;
mod fleet_interrupted;
mod fleet_masters;
mod fleet_order;
mod fleet_pipe;
mod fleet_runs;
mod inventory;
mod journal;
mod lifecycle;
mod lifecycle_container;
mod lifecycle_verbs;
mod module_cycles;
mod onboarding;
mod onebox;
mod outside_text;
mod package;
mod probes;
mod prometheus;
mod realhosts;
mod realhosts_bench;
mod refusals;
mod remote_world;
mod repl;
mod rollout;
mod rollout_fleet;
mod run;
mod run_hangup;
mod run_timeout;
mod runbook_exit;
mod runbooks;
mod sandbox;
mod sandbox_confined;
mod sandbox_fleet;
mod scripts;
mod secrets;
mod serve;
mod serve_fleet;
mod serve_idle;
mod tidy;
mod tools;
mod twin_processes;
mod twin_real_configs;
mod unfinished_changes;
mod units;
mod url_credentials;
mod vars_files;
mod verbs;
mod verdicts;
