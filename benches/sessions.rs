//! What each host of a fleet run costs before its runbook runs: a session (configuration,
//! world, verbs context) with its engine built, then dropped, for 200 hosts. The verbs'
//! modules are built once for the process, so the first host pays for them and the others
//! only register them. Run with `cargo bench --bench sessions`; prints medians per host.

// Tests and benchmarks report to the developer running them (`skipped: why`).
#![allow(clippy::disallowed_macros)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use opsbook_base::config::Config;
use opsbook_base::report::Mode;
use opsbook_engine::catalog::Catalog;
use opsbook_fleet::Session;
use opsbook_world::World;

const HOSTS: u32 = 200;

fn per_host(catalog: &Arc<Catalog>, config: &Config) -> Duration {
    let started = Instant::now();
    let sessions: Vec<Session> = (0..HOSTS)
        .map(|_| {
            let world = World::real(config);
            let session = Session::new(config.clone(), world, catalog.clone(), Mode::default());
            std::hint::black_box(session.engine());
            session
        })
        .collect();
    drop(sessions);
    started.elapsed() / HOSTS
}

fn main() {
    let catalog = Arc::new(Catalog::new(&[]));
    let config = Config::defaults();
    let first = Instant::now();
    let session = Session::new(config.clone(), World::real(&config), catalog.clone(), Mode::default());
    std::hint::black_box(session.engine());
    drop(session);
    println!("first host (builds the verbs' modules): {:?}", first.elapsed());
    let mut runs: Vec<Duration> = (0..20).map(|_| per_host(&catalog, &config)).collect();
    runs.sort();
    println!("a host's session and engine, built and dropped: median {:?} per host", runs[runs.len() / 2]);
}
