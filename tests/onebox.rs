//! One box, every topology: a fresh Debian 13 host (tests/support/debian13.rs) that plays
//! all four roles, with opsbook run *on* it (`/usr/local/bin/opsbook`, bound there) as an
//! operator of a single machine runs it — no ssh — from `/etc/opsbook/config.toml`:
//!
//! - with no inventory at all (the repositories' settings only): `opsbook run prepare`
//!   without naming a group (nftables installed, 8086 and 3100 admitted from loopback only),
//!   deploy of the four roles, and the checklist green, its firewall judged from loopback;
//! - with an inventory naming this host with all four roles and no address (this machine):
//!   the same, deploy and checklist addressed to that host.
//!
//! The prepare and checklist reports are compared whole with what varies masked
//! (tests/fixtures/realhosts/onebox-*.txt; `OPSBOOK_BLESS=1` rewrites them). Skipped, saying
//! why, as tests/realhosts.rs is.

use std::process::Stdio;
use std::time::Duration;

use crate::debian13::host::Debian13Host;
use crate::realhosts::{ROLES, Site, all_passed, fixture, masked, site, units_said};
use crate::support::{Output, Test};

/// How long one opsbook run on the host may take (a deploy installs a package).
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// `opsbook ARGS` run on `host` itself as root, in /root, the host's own environment.
fn on_host(host: &Debian13Host, args: &[&str]) -> Output {
    let mut argv = vec!["sh", "-c", "cd /root && exec opsbook \"$@\"", "opsbook"];
    argv.extend_from_slice(args);
    let mut command = host.command(&argv);
    command.stdin(Stdio::null());
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(command.output()));
    let out = result
        .recv_timeout(RUN_LIMIT)
        .unwrap_or_else(|_| panic!("opsbook {} on {} did not end within {RUN_LIMIT:?}", args.join(" "), host.name()))
        .expect("run opsbook on the host");
    Output::from_raw(out, std::path::Path::new("/"))
}

/// The same, which must pass (exit 0, every host passed); what the stack's units say when not.
#[track_caller]
fn passes(site: &Site, host: &Debian13Host, args: &[&str]) -> Output {
    let out = on_host(host, args);
    let verdict = all_passed(&out.stdout) || out.stdout.lines().last().is_some_and(|l| l.contains(" 0 failed"));
    if out.code != 0 || !verdict {
        panic!(
            "opsbook {} on {} did not pass (exit {})\n{}{}\n{}",
            args.join(" "),
            host.name(),
            out.code,
            out.stdout,
            out.stderr,
            units_said(site, &[host.name()])
        );
    }
    out
}

/// What varies on a host's report beyond `realhosts::masked`: connect times, how many journal
/// lines known to be benign came by now, a slow check's own time.
fn settled(text: &str, site: &Site) -> String {
    let rules = [
        (r"connected in [\d.]+ ms", "connected in [DUR]"),
        (r" — ignored \d+ known-benign line\(s\) \(stdlib/benign\.rhai\)", ""),
        (r"(?m)^(  (?:ok|FAIL|warn|skip) [^\n]*?)  \(\[DUR\]\)$", "$1"),
    ];
    rules.iter().fold(masked(text, &site.repos), |text, (pattern, with)| {
        regex::Regex::new(pattern).expect("a pattern").replace_all(&text, *with).into_owned()
    })
}

/// Writes the host's opsbook configuration: the repositories here, the organisation and the
/// file deploy keeps the operator token in, and `inventory` (empty: none).
fn configure(site: &Site, host: &Debian13Host, inventory: &str) {
    let config = format!(
        "{}metrics_db.token_file = \"/root/influx-token\"\nmetrics_db.org = \"opsbook\"\n{inventory}",
        site.repos.config_toml()
    );
    let script = format!("mkdir -p /etc/opsbook && cat > /etc/opsbook/config.toml <<'EOF'\n{config}EOF\n");
    host.ok(&["sh", "-c", &script]);
}

/// prepare (no group named), deploy of each role (`service(role)`), the checklist (`checklist`
/// its arguments): the prepare and checklist reports compared with `NAME-prepare.txt` and
/// `NAME-checklist.txt`.
fn round_trip(site: &Site, name: &str, host: &Debian13Host, service: impl Fn(&str) -> String, checklist: &[&str]) {
    let prepared = passes(site, host, &["run", "prepare"]);
    fixture(&format!("{name}-prepare.txt"), &settled(&prepared.stdout, site));
    for role in ROLES {
        passes(site, host, &["run", "deploy", "--set", &format!("service={}", service(role))]);
    }
    let checked = passes(site, host, &["run", "checklist"].iter().chain(checklist).copied().collect::<Vec<_>>());
    // Deploy's gate ends at the agent's first point (any point stamped after the change); the
    // checklist's `cpu` count needs its second gather, which may still be to come: whether the
    // check waited for it is the clock's, not the verdict's.
    let checked = settled(&checked.stdout, site).replace("metrics in database — after [DUR]", "metrics in database");
    fixture(&format!("{name}-checklist.txt"), &checked);
}

#[test]
fn one_box_prepares_deploys_and_passes_its_checklist_with_no_inventory_and_as_a_host_without_address() {
    let Some(site) = site(&["d13box", "d13inv"]) else { return };
    let (bare, named) = (site.fleet.host("d13box"), site.fleet.host("d13inv"));
    configure(&site, bare, "");
    configure(
        &site,
        named,
        "[hosts.d13inv]\nroles = [\"metrics-db\", \"log-store\", \"metrics-agent\", \"log-shipper\"]\n",
    );
    std::thread::scope(|s| {
        // No inventory: this machine plays every role; a role alone names it.
        s.spawn(|| round_trip(&site, "onebox", bare, |role| role.to_string(), &[]));
        // An inventory host with no address is this machine too.
        s.spawn(|| round_trip(&site, "onebox-host", named, |role| format!("d13inv:{role}"), &["--host", "d13inv"]));
    });
    // What prepare made: opsbook's table admits the servers' ports from loopback only.
    for host in [bare, named] {
        let table = host.ok(&["nft", "list", "table", "inet", "opsbook"]);
        let rules: Vec<&str> = table.lines().map(str::trim).filter(|l| l.contains("dport")).collect();
        assert_eq!(
            rules.iter().map(|r| r.split(" comment ").next().unwrap_or_default()).collect::<Vec<_>>(),
            [
                "iifname \"lo\" tcp dport 8086 accept",
                "tcp dport 8086 drop",
                "iifname \"lo\" tcp dport 3100 accept",
                "tcp dport 3100 drop"
            ],
            "{}",
            host.name()
        );
    }
}

#[test]
fn prepare_without_a_group_is_refused_in_words_when_the_inventory_names_other_hosts() {
    // Planned only (`--dry-run`): the refusal comes before any step, and nothing here changes.
    let inventory = "[hosts.monitor1]\naddress = \"10.9.9.1\"\nroles = [\"metrics-db\", \"log-store\"]\n";
    let clients: String = (2..=6)
        .map(|i| {
            format!("[hosts.monitor{i}]\naddress = \"10.9.9.{i}\"\nroles = [\"metrics-agent\", \"log-shipper\"]\n")
        })
        .collect();
    let out = Test::new().config(&format!("{inventory}{clients}")).args(["run", "prepare", "--dry-run"]).run().code(1);
    assert_eq!(
        settled_here(&format!("{}--- stderr\n{}", out.stdout, out.stderr)),
        "prepare (<built-in>/runbooks/prepare.rhai)  (dry run: nothing will be changed)

aborted: give the inventory group to prepare: --set environment=GROUP (or its hosts: --hosts PATTERN); the \
         inventory names hosts reached over ssh (monitor1, monitor2, monitor3 and 3 more), and without either \
         prepare would act on this machine alone (at <built-in>/runbooks/prepare.rhai:LINE)

0 passed, 0 failed  ([DUR])
--- stderr
"
    );
}

/// A local run's report with its durations, paths and the runbook's line masked.
fn settled_here(text: &str) -> String {
    let text = crate::support::mask(text);
    regex::Regex::new(r"\.rhai:\d+:\d+\)").expect("a pattern").replace_all(&text, ".rhai:LINE)").into_owned()
}
