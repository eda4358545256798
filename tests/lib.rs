//! Integration tests: one binary that drives the real `opsbook` executable.

mod support;

mod cli;
mod config;
mod journal;
mod probes;
mod repl;
mod run;
mod runbooks;
mod sandbox;
mod secrets;
mod serve;
mod tools;
mod twin;
mod units;
