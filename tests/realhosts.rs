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
//! - `manage-svc.sh deploy HOST:ROLE` on a fresh host with only sshd, one role at a time,
//!   installs all four, running and verified, in the vendors' units changed only through
//!   opsbook's drop-ins;
//! - one host with all four roles: prepare (nftables installed), deploy ×4, checklist green;
//! - a server (its log store a Quadlet container of an image made here) and two clients:
//!   prepare → deploy → checklist → configure → restart-all → remove with purge, proven gone.
//!
//! Skipped, saying why, without root, the Debian 13 root (debian13-root.sh), its packages
//! (debian13-debs.sh) or gpg, dpkg-deb and apt-ftparchive.

use std::net::IpAddr;
use std::time::Instant;

use crate::debian13::host::{Debian13Fleet, Debian13Host};
use crate::support::apt_repo::AptRepos;
use crate::support::{Output, Test, run_in};

/// The Debian 13 hosts and the repositories they install from, served on their network.
pub(crate) struct Site {
    pub fleet: Debian13Fleet,
    pub repos: AptRepos,
}

/// Boots the hosts and builds the repositories side by side; `None` (skipped) when either
/// cannot be had here.
pub(crate) fn site(names: &[&str]) -> Option<Site> {
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
pub(crate) fn run(t: &Test, args: &[&str]) -> Output {
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

/// The operator's opsbook.toml for `site` in `dir`: the fleet (every host with `roles`), the
/// repositories here, the metrics database's organisation and the file deploy keeps its
/// operator token in when it sets it up (`dir/influx-token`), and `extra` keys.
pub(crate) fn operator_config(
    site: &Site,
    dir: &std::path::Path,
    extra: &str,
    roles: impl Fn(&str) -> Vec<&'static str>,
) -> String {
    // A key of `extra` replaces the repositories' own.
    let key = |line: &str| line.split(" = ").next().unwrap_or_default().to_string();
    let given: Vec<String> = extra.lines().map(key).collect();
    let repos: String =
        site.repos.config_toml().lines().filter(|l| !given.contains(&key(l))).map(|l| format!("{l}\n")).collect();
    let token = dir.join("influx-token");
    let keys = format!("{repos}metrics_db.token_file = \"{}\"\nmetrics_db.org = \"opsbook\"\n{extra}", token.display());
    site.fleet.config_toml(&keys, roles)
}

/// What a deploy of the shipper says when its package cannot be had, masked.
fn refused_deploy(t: &Test, site: &Site, extra: &str) -> String {
    std::fs::write(t.path().join("opsbook.toml"), operator_config(site, t.path(), extra, |_| vec!["log-shipper"]))
        .unwrap();
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
pub(crate) fn fixture(name: &str, seen: &str) {
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
/// (`[REPO]`), key fingerprints (`[FPR]`) and where in a runbook an error was raised.
pub(crate) fn masked(text: &str, repos: &AptRepos) -> String {
    let text = crate::support::mask(text).replace("  ([DUR])", "").replace(&repos.url(""), "[REPO]/");
    let text = regex::Regex::new("[0-9A-F]{40}").expect("a pattern").replace_all(&text, "[FPR]").into_owned();
    // Where in the runbook the error was raised: another change to it must not fail a test.
    regex::Regex::new(r"\.rhai:\d+:\d+\)").expect("a pattern").replace_all(&text, ".rhai:LINE)").into_owned()
}

/// The four roles in the order they are deployed: servers first.
pub(crate) const ROLES: [&str; 4] = ["metrics-db", "log-store", "metrics-agent", "log-shipper"];

/// Whether a fleet report's verdict (`N host(s): …`, before the connections line) says all passed.
pub(crate) fn all_passed(stdout: &str) -> bool {
    stdout.lines().rev().find(|l| l.contains(" host(s): ")).is_some_and(|l| l.contains("all passed"))
}

/// `opsbook ARGS` in `t`, which must pass on every host it acts on (exit 0, `all passed`).
#[track_caller]
fn passes(t: &Test, args: &[&str]) -> Output {
    let out = run(t, args);
    assert!(
        out.code == 0 && all_passed(&out.stdout),
        "opsbook {} did not pass (exit {})\n{}{}",
        args.join(" "),
        out.code,
        out.stdout,
        out.stderr
    );
    out
}

/// The same, on `hosts` of `site`: when it does not pass, what their units say comes with it.
#[track_caller]
pub(crate) fn passes_on(t: &Test, site: &Site, hosts: &[&str], args: &[&str]) -> Output {
    let out = run(t, args);
    if out.code == 0 && all_passed(&out.stdout) {
        return out;
    }
    // The failed checks again at the end: a log cut to its last lines still shows them.
    let failed = crate::support::failed_checks(&out.stdout);
    panic!(
        "opsbook {} did not pass (exit {})\n{}{}\n{}\n--- opsbook {} failed (exit {}):\n{failed}",
        args.join(" "),
        out.code,
        out.stdout,
        out.stderr,
        units_said(site, hosts),
        args.join(" "),
        out.code,
    );
}

/// What the stack's units on `hosts` say of themselves: their status and their last entries.
pub(crate) fn units_said(site: &Site, hosts: &[&str]) -> String {
    let mut said = String::new();
    for name in hosts {
        let seen = site.fleet.host(name).ssh(
            "systemctl --no-pager status influxdb loki telegraf alloy 2>&1 | tail -n 60; \
             journalctl --no-pager -n 40 -u influxdb -u loki -u telegraf -u alloy",
        );
        said.push_str(&format!("--- {name}\n{}\n", String::from_utf8_lossy(&seen.stdout)));
    }
    said
}

/// What the host runs of the stack: each unit's state, its unit file and drop-ins as the
/// manager reads them, and whether it starts at boot (`systemctl show`, in its order).
fn units(host: &Debian13Host) -> String {
    host.ok(&[
        "sh",
        "-c",
        "for u in influxdb loki telegraf alloy; do systemctl show -P Id -P ActiveState -P FragmentPath -P DropInPaths -P UnitFileState $u.service | paste -sd ' '; done",
    ])
}

#[test]
fn deploy_installs_each_role_on_a_fresh_host_and_one_host_plays_all_four_after_prepare() {
    let Some(site) = site(&["d13one", "d13all"]) else { return };
    // Two operators, two stacks of one host each: each inventory gives roles to its own host.
    let alone = |me: &'static str| move |name: &str| if name == me { ROLES.to_vec() } else { vec![] };
    let (one, all) = (Test::new(), Test::new());
    let one_config = operator_config(&site, one.path(), "", alone("d13one"));
    let all_config = operator_config(&site, all.path(), "", alone("d13all")) + "[groups.solo]\nhosts = [\"d13all\"]\n";
    let (one, all) = (one.config(&one_config), all.config(&all_config));
    // A plan first: the repository and the package it would add, and nothing more.
    let plan = run(&one, &["run", "deploy", "--dry-run", "--set", "service=d13one:metrics-db"]).code(0);
    fixture("deploy-dry-run.txt", &masked(&plan.stdout, &site.repos));
    std::thread::scope(|s| {
        // d13one: only sshd, then one role at a time through the orchestrator script.
        s.spawn(|| {
            let bin = crate::scripts::installed(&one);
            for role in ROLES {
                let service = format!("d13one:{role}");
                let ran = crate::scripts::script(&one, &bin, "manage-svc.sh", &["-y", "deploy", &service]);
                if ran.code != 0 || !all_passed(&ran.stdout) {
                    panic!(
                        "manage-svc.sh -y deploy {service} did not pass (exit {})\n{}{}\n{}",
                        ran.code,
                        ran.stdout,
                        ran.stderr,
                        units_said(&site, &["d13one"])
                    );
                }
            }
        });
        // d13all: prepare (nftables installed, loopback only), then the four roles, then the checklist.
        s.spawn(|| {
            passes(&all, &["run", "prepare", "--set", "environment=solo"]);
            for role in ROLES {
                passes_on(&all, &site, &["d13all"], &["run", "deploy", "--set", &format!("service=d13all:{role}")]);
            }
            passes(&all, &["run", "checklist", "--host", "d13all"]);
        });
    });
    for name in ["d13one", "d13all"] {
        let host = site.fleet.host(name);
        let nft = if name == "d13all" { "nftables 1.1.3-1\n" } else { "" };
        assert_eq!(
            installed(host),
            format!(
                "alloy 1.9.1\nloki 3.4.6\ntelegraf 1.34.1-1\ninfluxdb2 2.7.12-1\n{nft}/etc/apt/keyrings/debian-test.asc\n\
                 /etc/apt/keyrings/grafana.gpg\n/etc/apt/keyrings/influxdata.gpg\n/etc/apt/sources.list.d/grafana.list\n\
                 /etc/apt/sources.list.d/influxdata.list\n"
            ),
            "{name}"
        );
        // The vendors' units run, changed only through opsbook's drop-ins.
        assert_eq!(
            units(host),
            "influxdb.service active /usr/lib/systemd/system/influxdb.service /etc/systemd/system/influxdb.service.d/opsbook.conf enabled\n\
             loki.service active /etc/systemd/system/loki.service /etc/systemd/system/loki.service.d/opsbook.conf enabled\n\
             telegraf.service active /usr/lib/systemd/system/telegraf.service /etc/systemd/system/telegraf.service.d/opsbook.conf enabled\n\
             alloy.service active /usr/lib/systemd/system/alloy.service /etc/systemd/system/alloy.service.d/opsbook.conf enabled\n",
            "{name}"
        );
    }
    // The shipper's account is in the groups its package gives it; a second deploy changes nothing.
    assert_eq!(site.fleet.host("d13one").ok(&["id", "-Gn", "alloy"]), "alloy adm systemd-journal\n");
    passes(&one, &["run", "deploy", "--set", "service=d13one:log-shipper"]).stdout_has("nothing changed (changed=0)");
    // Removed without purge: opsbook's drop-in and file go, the package and its unit stay.
    passes(&one, &["run", "remove", "--set", "service=d13one:log-shipper"]);
    let host = site.fleet.host("d13one");
    assert_eq!(
        host.ok(&[
            "sh",
            "-c",
            "dpkg-query -W -f='${Version}\\n' alloy; systemctl show -P ActiveState -P DropInPaths -P UnitFileState alloy; \
             ls /etc/alloy"
        ]),
        "1.9.1\ninactive\n\ndisabled\n"
    );
}

#[test]
fn a_server_and_two_clients_round_trip_from_prepare_to_remove_with_their_packages() {
    // The log store runs in a container, which changes the machine's cgroups: no other test's
    // private hosts meanwhile (`support::cgroups_exclusive`).
    let _cgroups = crate::support::cgroups_exclusive();
    let Some(site) = site(&["d13srv", "d13c1", "d13c2"]) else { return };
    let server = site.fleet.host("d13srv").address();
    // The log store as a Quadlet container of an image made here (no registry is reachable).
    let t = Test::new();
    let _containers = RemoveContainers(site.fleet.host("d13srv"));
    import_image(site.fleet.host("d13srv"), &crate::lifecycle_container::rootfs_tarball(t.path()));
    let urls = format!(
        "metrics_db.url = \"http://{server}:8086\"\nlog_store.url = \"http://{server}:3100\"\n\
         log_store.run_as = \"container\"\nlog_store.image = \"{LOKI_IMAGE}\"\n"
    );
    let roles = |name: &str| {
        if name == "d13srv" { vec!["metrics-db", "log-store"] } else { vec!["metrics-agent", "log-shipper"] }
    };
    let hosts = ["d13srv", "d13c1", "d13c2"];
    // The agent's template as an operator overrides it (beside the runbooks folder): configure applies it.
    let built_in =
        std::fs::read_to_string(crate::support::repo_dir().join("templates/metrics-agent/telegraf.conf.j2")).unwrap();
    let faster = built_in.replace("interval | default(\"10s\")", "interval | default(\"5s\")");
    assert_ne!(faster, built_in, "the agent's template sets its interval");
    let config = operator_config(&site, t.path(), &urls, roles);
    let t = t.config(&config).file("runbooks/.keep", "");
    passes_on(&t, &site, &hosts, &["run", "prepare", "--set", "environment=debian13"]);
    for role in ROLES {
        passes_on(&t, &site, &hosts, &["run", "deploy", "--set", &format!("service={role}")]);
    }
    passes_on(&t, &site, &hosts, &["run", "checklist", "--hosts", "all"]);
    // The log store is the system unit Quadlet made of opsbook's .container file; no package.
    assert_eq!(
        site.fleet.host("d13srv").ok(&[
            "sh",
            "-c",
            "systemctl show -P ActiveState -P SourcePath loki.service; podman ps --format '{{.Names}} {{.Image}} {{.State}}'; \
             dpkg-query -W loki >/dev/null 2>&1 || echo 'no loki package'"
        ]),
        format!("active\n/etc/containers/systemd/loki.container\nloki {LOKI_IMAGE} running\nno loki package\n")
    );
    let t = t.file("templates/metrics-agent/telegraf.conf.j2", &faster);
    passes_on(&t, &site, &hosts, &["run", "configure", "--set", "service=metrics-agent"]);
    for client in ["d13c1", "d13c2"] {
        assert!(site.fleet.host(client).ok(&["cat", "/etc/telegraf/telegraf.conf"]).contains("interval = \"5s\""));
    }
    passes_on(&t, &site, &hosts, &["run", "restart-all", "--hosts", "all"]);
    for role in ROLES.iter().rev() {
        passes_on(&t, &site, &hosts, &["run", "remove", "--set", &format!("service={role}"), "--set", "purge=true"]);
    }
    // Gone: no package, no unit, no drop-in, no file of the stack; the repositories stay (they
    // are the host's now), and nftables with opsbook's table on the server. The server installed
    // only InfluxData's package: its log store was a container.
    for name in hosts {
        let host = site.fleet.host(name);
        let expected = if name == "d13srv" {
            "nftables 1.1.3-1\n/etc/apt/keyrings/debian-test.asc\n/etc/apt/keyrings/influxdata.gpg\n\
             /etc/apt/sources.list.d/influxdata.list\n"
        } else {
            "/etc/apt/keyrings/debian-test.asc\n/etc/apt/keyrings/grafana.gpg\n/etc/apt/keyrings/influxdata.gpg\n\
             /etc/apt/sources.list.d/grafana.list\n/etc/apt/sources.list.d/influxdata.list\n"
        };
        assert_eq!(installed(host), expected, "{name}");
        assert_eq!(
            host.ok(&[
                "sh",
                "-c",
                "systemctl show -P LoadState influxdb loki telegraf alloy; \
                 find /etc/influxdb /etc/loki /etc/telegraf /etc/alloy /etc/systemd/system -path '*opsbook*' 2>/dev/null; \
                 ls /var/lib/influxdb /var/lib/loki /var/lib/alloy 2>/dev/null | wc -l; \
                 find /etc/containers/systemd -name '*.container*' 2>/dev/null; podman ps --all --quiet | wc -l"
            ]),
            "not-found\n\nnot-found\n\nnot-found\n\nnot-found\n0\n0\n",
            "{name}"
        );
    }
}

/// The image the log store's container runs: opsbook's twin of Loki.
const LOKI_IMAGE: &str = "localhost/opsbook-loki:test";

/// Imports the root file system in `tarball` (opsbook and its libraries) on `host` as
/// `LOKI_IMAGE`, fed over the host's stdin as `podman import -` reads it.
#[track_caller]
fn import_image(host: &Debian13Host, tarball: &str) {
    let entrypoint = r#"ENTRYPOINT ["/opsbook", "twin", "log-store", "--ready-delay", "0s"]"#;
    let out = host
        .command(&["podman", "import", "--quiet", "--change", entrypoint, "-", LOKI_IMAGE])
        .stdin(std::fs::File::open(tarball).expect("the image's tarball"))
        .output()
        .expect("podman import on the host");
    assert!(out.status.success(), "podman import on {}: {}", host.name(), String::from_utf8_lossy(&out.stderr));
}

/// Takes every container off the host before its fleet goes, should the test fail half-way:
/// a container killed with its host would leave its cgroups on this machine.
struct RemoveContainers<'a>(&'a Debian13Host);

impl Drop for RemoveContainers<'_> {
    fn drop(&mut self) {
        self.0.exec(&["podman", "rm", "--force", "--all", "--time", "2"]);
    }
}
