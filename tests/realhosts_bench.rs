//! The benchmark of bench/real-hosts.sh (ignored in a test run): a fresh deploy of the four
//! roles, each package installed from the local signed repositories, on one Debian 13 host
//! (all four roles, deployed one after the other) and on three (a server and two clients: each
//! role deployed on every host playing it at once). Every run boots fresh hosts (about a
//! second, not counted) and times the four `opsbook run deploy` from the first to the last;
//! `OPSBOOK_BENCH_RUNS` runs (5 by default) per size, then the median, minimum and maximum.
//! Then a healthy rollout: on a server and three clients, once deployed, `configure` of the
//! agent and of the shipper rolled out one client at a time (`--serial 1`), the built-in
//! template with one more comment line (a new one each run), each host gated by evidence made
//! after its change; `OPSBOOK_BENCH_RUNS` runs of each, the median, minimum and maximum.

use std::time::{Duration, Instant};

use crate::realhosts::{ROLES, operator_config, passes_on, run, site};
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

/// `--runbooks` folder whose templates are the built-in `template` with `line` appended.
fn marked_template(t: &Test, template: &str, line: &str) -> String {
    let text = run(t, &["templates", template]).stdout;
    let root = t.path().join(line.replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
    let path = root.join("templates").join(template);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::create_dir_all(root.join("runbooks")).unwrap();
    std::fs::write(&path, format!("{text}\n{line}\n")).unwrap();
    root.join("runbooks").display().to_string()
}

#[test]
#[ignore = "a benchmark: bench/real-hosts.sh runs it"]
fn bench_a_healthy_rollout_of_the_agent_and_the_shipper_over_three_debian13_clients() {
    let runs: usize = std::env::var("OPSBOOK_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let names = ["d13rsrv", "d13rc1", "d13rc2", "d13rc3"];
    let Some(site) = site(&names) else { return };
    let server = site.fleet.host(names[0]).address();
    let urls = format!("metrics_db.url = \"http://{server}:8086\"\nlog_store.url = \"http://{server}:3100\"\n");
    let roles = |name: &str| {
        if name == "d13rsrv" { vec!["metrics-db", "log-store"] } else { vec!["metrics-agent", "log-shipper"] }
    };
    let t = Test::new();
    let config = operator_config(&site, t.path(), &urls, roles);
    let t = t.config(&config);
    for role in ROLES {
        passes_on(&t, &site, &names, &["run", "deploy", "--set", &format!("service={role}")]);
    }
    for (role, template, comment) in
        [("metrics-agent", "metrics-agent/telegraf.conf.j2", "#"), ("log-shipper", "log-shipper/config.alloy.j2", "//")]
    {
        let mut times = Vec::new();
        for n in 0..runs {
            let dir = marked_template(&t, template, &format!("{comment} rollout mark {role} {n}"));
            let service = format!("service={role}");
            let started = Instant::now();
            let out = run(&t, &["--runbooks", &dir, "run", "configure", "--set", &service, "--serial", "1"]);
            times.push(started.elapsed());
            assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        }
        println!("healthy rollout of {role} over 3 Debian 13 clients, --serial 1: {}", medians(times));
    }
}
