//! Real hosts: Debian 13 hosts (tests/support/debian13.rs, systemd 257 as PID 1, root over
//! ssh, the system manager) on which opsbook installs what it deploys, from signed apt
//! repositories served on the test network as the vendors serve theirs
//! (tests/support/apt_repo.rs: Grafana's alloy and loki, InfluxData's telegraf and influxdb2,
//! laid out as the vendors' packages, their programs the twins; Debian's nftables).
//!
//! - the package verbs on a fresh host: a repository added as the vendor documents it, a
//!   package installed pinned and upgraded, idempotent, removed and purged; a repository whose
//!   signature its key does not verify, one that does not answer, a pinned version the
//!   repository lacks — each refused in words, nothing installed, the host as before;
//! - deploy on a fresh host with only sshd, one role at a time, installs all four, running
//!   and verified, in the vendors' units changed only through opsbook's drop-ins;
//! - one host with all four roles: prepare (nftables installed), deploy ×4, checklist green;
//! - a server and two clients: prepare → deploy → checklist → configure → restart-all →
//!   remove with purge, proven gone.
//!
//! Skipped, saying why, without root, the Debian 13 root (debian13-root.sh), its packages
//! (debian13-debs.sh) or gpg, dpkg-deb and apt-ftparchive.

use std::net::IpAddr;
use std::time::Instant;

use crate::debian13::host::{Debian13Fleet, Debian13Host};
use crate::support::apt_repo::AptRepos;
use crate::support::{Output, Test, run_in};

/// The Debian 13 hosts and the repositories they install from, served on their network.
struct Site {
    fleet: Debian13Fleet,
    repos: AptRepos,
}

/// Boots the hosts and builds the repositories side by side; `None` (skipped) when either
/// cannot be had here.
fn site(names: &[&str]) -> Option<Site> {
    let started = Instant::now();
    let fleet = match Debian13Fleet::boot(names) {
        Ok(f) => f,
        Err(why) => {
            crate::support::skip(why);
            return None;
        }
    };
    let repos = match AptRepos::build(IpAddr::V4(fleet.gateway())) {
        Ok(r) => r,
        Err(why) => {
            crate::support::skip(why);
            return None;
        }
    };
    eprintln!("{} Debian 13 host(s) and the repositories up in {:?}", names.len(), started.elapsed());
    for host in fleet.hosts() {
        debian_mirror(host, &repos);
    }
    Some(Site { fleet, repos })
}

/// The host's own distribution repository is the local mirror (the hosts reach no other).
fn debian_mirror(host: &Debian13Host, repos: &AptRepos) {
    let script = format!(
        "set -e\nmkdir -p /etc/apt/keyrings\ncat >/etc/apt/keyrings/debian-test.asc <<'KEY'\n{}KEY\n\
         printf '%s' '{}' >/etc/apt/sources.list\n",
        repos.key_text("debian"),
        repos.debian_sources_list()
    );
    host.ok(&["sh", "-c", &script]);
}

/// A runbook run by the operator against `host` (the config in `t`), its output.
fn run(t: &Test, args: &[&str]) -> Output {
    run_in(t.path(), args, None)
}

/// The stack's packages dpkg has (installed: the version; removed with its configuration
/// left: `config-files`), then the files of the host's apt sources and keyrings.
fn installed(host: &Debian13Host) -> String {
    host.ok(&[
        "sh",
        "-c",
        "for p in alloy loki telegraf influxdb2 nftables; do v=$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' $p 2>/dev/null); \
         case \"$v\" in ii*) echo \"$p ${v#ii }\";; rc*) echo \"$p config-files\";; esac; done; \
         find /etc/apt/sources.list.d /etc/apt/keyrings -type f | sort",
    ])
}

/// The operator's opsbook.toml for `site`: the fleet (every host with `roles`), the
/// repositories here, the metrics database's token and organisation, and `extra` keys.
fn operator_config(site: &Site, extra: &str, roles: impl Fn(&str) -> Vec<&'static str>) -> String {
    // A key of `extra` replaces the repositories' own.
    let key = |line: &str| line.split(" = ").next().unwrap_or_default().to_string();
    let given: Vec<String> = extra.lines().map(key).collect();
    let repos: String =
        site.repos.config_toml().lines().filter(|l| !given.contains(&key(l))).map(|l| format!("{l}\n")).collect();
    let keys = format!("{repos}metrics_db.token = \"{TOKEN}\"\nmetrics_db.org = \"opsbook\"\n{extra}");
    site.fleet.config_toml(&keys, roles)
}

const TOKEN: &str = "realhosts-token-7d1e";

/// What a deploy of the shipper says when its package cannot be had, masked.
fn refused_deploy(t: &Test, site: &Site, extra: &str) -> String {
    std::fs::write(t.path().join("opsbook.toml"), operator_config(site, extra, |_| vec!["log-shipper"])).unwrap();
    let out = run(t, &["run", "deploy", "--set", "service=d13pkg:log-shipper"]);
    assert_eq!(out.code, 1, "a deploy whose package cannot be had stops\n{}{}", out.stdout, out.stderr);
    masked(&format!("{}--- stderr\n{}", out.stdout, out.stderr), &site.repos)
}

#[test]
fn the_package_verbs_install_from_a_signed_repository_and_refuse_one_that_is_not_in_words() {
    let Some(site) = site(&["d13pkg"]) else { return };
    let host = site.fleet.host("d13pkg");
    let t = Test::new();
    // Deploy on a fresh host: a repository signed by another key than its own, one that does
    // not answer, a version it does not have — each refused in words, nothing installed.
    let wrong = format!("log_shipper.repository_key = \"{}\"\n", site.repos.url("wrong.key"));
    let seen = refused_deploy(&t, &site, &wrong);
    fixture("deploy-wrong-key.txt", &seen);
    assert_eq!(installed(host), "/etc/apt/keyrings/debian-test.asc\n");
    let seen = refused_deploy(&t, &site, "log_shipper.repository = \"http://127.0.0.1:9/grafana stable main\"\n");
    fixture("deploy-unreachable.txt", &seen);
    assert_eq!(installed(host), "/etc/apt/keyrings/debian-test.asc\n");
    let seen = refused_deploy(&t, &site, "log_shipper.version = \"9.9.9\"\n");
    fixture("deploy-no-such-version.txt", &seen);
    assert_eq!(
        installed(host),
        "/etc/apt/keyrings/debian-test.asc\n/etc/apt/keyrings/grafana.gpg\n/etc/apt/sources.list.d/grafana.list\n"
    );
    host.ok(&["rm", "/etc/apt/keyrings/grafana.gpg", "/etc/apt/sources.list.d/grafana.list"]);
    // The verbs themselves.
    let t = t.config(&site.fleet.config_toml("", |_| vec![]));
    let (grafana, key, wrong) = (site.repos.url("grafana"), site.repos.url("grafana.key"), site.repos.url("wrong.key"));
    let runbook = format!(
        r#"//! The package verbs on a fresh Debian 13 host.
let grafana = #{{ url: "{grafana} stable main", key: "{key}" }};
check("family", pkg::os().family == "apt", pkg::os().name);
check("nothing installed", pkg::version("alloy") == "");
let wrong = #{{ url: "{grafana} stable main", key: "{wrong}" }};
try {{ pkg::add_repository("grafana", wrong); check("a wrong key refused", false); }}
catch (e) {{ check("a wrong key refused", true, e); }}
let down = #{{ url: "http://127.0.0.1:9/grafana stable main", key: "{key}" }};
try {{ pkg::add_repository("grafana", down); check("a repository that does not answer refused", false); }}
catch (e) {{ check("a repository that does not answer refused", true, e); }}
let no_key = #{{ url: "{grafana} stable main", key: "http://127.0.0.1:9/grafana.key" }};
try {{ pkg::add_repository("grafana", no_key); check("a key that does not answer refused", false); }}
catch (e) {{ check("a key that does not answer refused", true, e); }}
check("added", pkg::add_repository("grafana", grafana).changed);
check("added once", !pkg::add_repository("grafana", grafana).changed);
check("offered", pkg::available("alloy") == ["1.9.1", "1.8.3"], `${{pkg::available("alloy")}}`);
try {{ pkg::install("alloy", #{{ version: "9.9.9" }}); check("a version not offered refused", false); }}
catch (e) {{ check("a version not offered refused", true, e); }}
check("pinned", pkg::install("alloy", #{{ version: "1.8.3" }}).version == "1.8.3");
let up = pkg::install("alloy", #{{ version: "1.9.1" }});
check("upgraded", up.previous == "1.8.3" && up.version == "1.9.1", `${{up}}`);
check("installed once", !pkg::install("alloy").changed);
check("removed", pkg::remove("alloy").changed && pkg::version("alloy") == "");
check("purged", pkg::remove("alloy", #{{ purge: true }}).changed);
check("purged once", !pkg::remove("alloy", #{{ purge: true }}).changed);
"#
    );
    let t = t.runbook("pkgs", &runbook);
    let out = run(&t, &["run", "pkgs", "--host", "d13pkg"]).code(0);
    fixture("package-verbs.txt", &masked(&out.stdout, &site.repos));
    // The repository stays; nothing of alloy is left.
    assert_eq!(
        installed(host),
        "/etc/apt/keyrings/debian-test.asc\n/etc/apt/keyrings/grafana.gpg\n/etc/apt/sources.list.d/grafana.list\n"
    );
}

/// `seen` equals tests/fixtures/realhosts/NAME; with `OPSBOOK_BLESS=1` the file is written
/// from what was seen instead (review the change with `git diff`).
#[track_caller]
fn fixture(name: &str, seen: &str) {
    let path = crate::support::repo_dir().join("tests/fixtures/realhosts").join(name);
    if std::env::var_os("OPSBOOK_BLESS").is_some() {
        std::fs::write(&path, seen).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        seen == expected,
        "{} differs (OPSBOOK_BLESS=1 rewrites it)\n--- expected\n{expected}\n--- seen\n{seen}",
        path.display()
    );
}

/// A run's output with what varies masked: temporary paths (`support::mask`), durations
/// (left out: a check shows one only when it took a while), the repositories' address
/// (`[REPO]`) and key fingerprints (`[FPR]`).
fn masked(text: &str, repos: &AptRepos) -> String {
    let text = crate::support::mask(text).replace("  ([DUR])", "").replace(&repos.url(""), "[REPO]/");
    regex::Regex::new("[0-9A-F]{40}").expect("a pattern").replace_all(&text, "[FPR]").into_owned()
}
