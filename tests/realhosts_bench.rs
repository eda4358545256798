//! The benchmark of bench/real-hosts.sh (ignored in a test run): a fresh deploy of the four
//! roles, each package installed from the local signed repositories, on one Debian 13 host
//! (all four roles, deployed one after the other) and on three (a server and two clients: each
//! role deployed on every host playing it at once). Every run boots fresh hosts (about a
//! second, not counted) and times the four `opsbook run deploy` from the first to the last;
//! `OPSBOOK_BENCH_RUNS` runs (5 by default) per size, then the median, minimum and maximum.

use std::time::{Duration, Instant};

use crate::realhosts::{ROLES, operator_config, passes_on, site};
use crate::support::Test;

/// One fresh deploy of the four roles on `names` (the first the server when there are
/// several): the wall time of each role's deploy, in `ROLES`' order, or `None` when the hosts
/// cannot be had here (skipped).
fn fresh_deploy(names: &[&str]) -> Option<Vec<Duration>> {
    let site = site(names)?;
    let lone = names.len() == 1;
    let server = site.fleet.host(names[0]).address();
    let urls = if lone {
        String::new()
    } else {
        format!("metrics_db.url = \"http://{server}:8086\"\nlog_store.url = \"http://{server}:3100\"\n")
    };
    let first = names[0].to_string();
    let roles = move |name: &str| {
        if lone {
            ROLES.to_vec()
        } else if name == first {
            vec!["metrics-db", "log-store"]
        } else {
            vec!["metrics-agent", "log-shipper"]
        }
    };
    let t = Test::new();
    let config = operator_config(&site, t.path(), &urls, roles);
    let t = t.config(&config);
    let mut times = Vec::new();
    for role in ROLES {
        let started = Instant::now();
        passes_on(&t, &site, names, &["run", "deploy", "--set", &format!("service={role}")]);
        times.push(started.elapsed());
    }
    Some(times)
}

/// `median … ms (min …, max …)` of `times`.
fn medians(mut times: Vec<Duration>) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let n = times.len();
    format!("median {:.0} ms (min {:.0}, max {:.0}, n={n})", ms(times[n / 2]), ms(times[0]), ms(times[n - 1]))
}

#[test]
#[ignore = "a benchmark: bench/real-hosts.sh runs it"]
fn bench_a_fresh_deploy_of_the_four_roles_with_their_packages() {
    let runs: usize = std::env::var("OPSBOOK_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    for names in [&["d13b1"][..], &["d13bsrv", "d13bc1", "d13bc2"][..]] {
        let mut runs_of: Vec<Vec<Duration>> = Vec::new();
        for _ in 0..runs {
            let Some(took) = fresh_deploy(names) else { return };
            runs_of.push(took);
        }
        let totals = runs_of.iter().map(|r| r.iter().sum()).collect();
        println!("fresh deploy of the four roles on {} Debian 13 host(s): {}", names.len(), medians(totals));
        for (i, role) in ROLES.iter().enumerate() {
            println!(
                "fresh deploy of the four roles: of which {role}: {}",
                medians(runs_of.iter().map(|r| r[i]).collect())
            );
        }
    }
}
