//! The lifecycle on a fleet of real hosts over ssh: `prepare` an environment, `deploy` each
//! role (the twins as the components' programs, their command lines from the inventory), a
//! second deploy that changes nothing, `configure` refusing a broken template and a file the
//! component's own tool rejects (the running file untouched, the unit running), then `remove`
//! returning every host to the state it had before the deploys (files and units compared) —
//! through the orchestrator scripts as an operator calls them. Skipped, saying why, without
//! root or sshd.

use crate::fleet_runs::{boot, opsbook};
use crate::support::fleet::{Fleet, FleetHost};
use crate::support::{Output, Test};

const TOKEN: &str = "lifecycle-token-5b2c";

/// The rollback point a killed `configure` of c3's shipper would have left.
const PLANT_POINT: &str = r#"printf '%s' '{"role":"log-shipper","unit":"alloy.service","taken":"2026-11-27 21:03:07 UTC","run":"20261127T210307Z-ab12","change":"configure","by":"root@op1","known":true,"enabled":true,"active":true,"files":[]}' >/etc/alloy/config.alloy.opsbook-rollback"#;

/// The operator's config: the inventory (a server and clients, all in group `lab`), and each
/// component's command line being the twin's.
#[track_caller]
pub(crate) fn configure_operator(t: &Test, fleet: &Fleet, extra: &str) {
    let bin = crate::support::opsbook();
    let server = fleet.host("server").address();
    let mut inventory = String::new();
    for h in fleet.hosts() {
        // The servers' ports admit the clients only (prepare's firewall): the server host itself
        // is checked on its loopback, which opsbook reaches through its ssh connection.
        let (roles, own) = if h.name() == "server" {
            (
                r#"["influxdb", "loki"]"#,
                "config.metrics_db.url = \"http://127.0.0.1:8086\"\nconfig.log_store.url = \"http://127.0.0.1:3100\"\n",
            )
        } else {
            (r#"["telegraf", "alloy"]"#, "")
        };
        inventory.push_str(&format!(
            "[hosts.{}]\naddress = \"{}\"\nroles = {roles}\nuser = \"root\"\nkey = \"{}\"\n{own}",
            h.name(),
            h.address(),
            h.key().display()
        ));
    }
    let names: Vec<String> = fleet.hosts().iter().map(|h| format!("\"{}\"", h.name())).collect();
    inventory.push_str(&format!("[groups.lab]\nhosts = [{}]\n", names.join(", ")));
    std::fs::write(
        t.path().join("opsbook.toml"),
        format!(
            "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n\
[metrics_db]\nurl = \"http://{server}:8086\"\ntoken = \"{TOKEN}\"\norg = \"opsbook\"\n\
exec = \"{bin} twin metrics-db --token {TOKEN} --org opsbook\"\n\
[log_store]\nurl = \"http://{server}:3100\"\nexec = \"{bin} twin log-store -config.file={{config}} --ready-delay 0s\"\n\
[metrics_agent]\nexec = \"{bin} twin metrics-agent --config {{config}}\"\n\
test_command = [\"{bin}\", \"twin\", \"metrics-agent\", \"--config\", \"{{config}}\", \"--test\"]\n\
[log_shipper]\nexec = \"{bin} twin log-shipper run --server.http.listen-addr=127.0.0.1:12345 --storage.path={{data_dir}} {{config}}\"\n\
validate_command = [\"{bin}\", \"twin\", \"log-shipper\", \"validate\", \"{{config}}\"]\n\
{extra}{inventory}"
        ),
    )
    .unwrap();
}

/// What a deploy or remove may touch on a host: the components' files and the user units.
#[track_caller]
fn state_of(host: &FleetHost) -> String {
    host.ok(&[
        "sh",
        "-c",
        "find /etc/influxdb /etc/loki /etc/telegraf /etc/alloy /run/user/0/systemd/user /run/user/0/home/.config/systemd \
         -xdev \\( -type f -o -type l \\) 2>/dev/null | sort; systemctl --user list-unit-files --no-legend 'influxdb*' 'loki*' 'telegraf*' 'alloy*' | sort",
    ])
}

/// The scripts, installed as an operator installs them.
#[track_caller]
fn scripts(t: &Test) -> (String, String) {
    opsbook(t, &["scripts", "--install", &t.path().join("bin").display().to_string()]).code(0);
    let dir = t.path().join("bin");
    (dir.join("manage-svc.sh").display().to_string(), dir.join("svc-exec.sh").display().to_string())
}

/// Runs a script in the test's directory (its opsbook: the one under test).
#[track_caller]
fn script(t: &Test, argv: &[&str]) -> Output {
    let out = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(t.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path())
        .env("XDG_STATE_HOME", t.path().join(".state"))
        .env("OPSBOOK", crate::support::opsbook())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the script runs");
    Output::from_raw(out, t.path())
}

#[test]
fn prepare_deploy_verify_configure_and_remove_across_hosts() {
    let Some(fleet) = boot(&["server", "c1", "c2", "c3"]) else { return };
    let t = Test::new();
    configure_operator(&t, &fleet, "");
    let (manage, exec) = scripts(&t);

    // Prepare: data directories; the server's own firewall table admitting 8086 and 3100 from
    // the clients; each client reaches those ports (refused: nothing listens yet).
    let prepared = script(&t, &[&manage, "prepare", "lab", "-y"]).code(0);
    assert!(prepared.stdout.contains("4 host(s): all passed"), "{}", prepared.stdout);
    let first: Vec<String> = fleet.hosts().iter().map(state_of).collect();

    for service in [
        "server:influxdb",
        "server:loki",
        "c1:telegraf",
        "c1:alloy",
        "c2:telegraf",
        "c2:alloy",
        "c3:telegraf",
        "c3:alloy",
    ] {
        let out = script(&t, &[&manage, "deploy", service, "-y"]);
        assert_eq!(out.code, 0, "deploy {service}:\n{}\n{}", out.stdout, out.stderr);
        assert!(out.stdout.contains("changed="), "deploy {service}:\n{}", out.stdout);
        // The plan shown first starts nothing, so it judges neither readiness nor the component
        // (it used to wait out the deadline for a component it had not started).
        let role = match service.split(':').nth(1) {
            Some("influxdb") => "metrics-db",
            Some("loki") => "log-store",
            Some("telegraf") => "metrics-agent",
            _ => "log-shipper",
        };
        for skipped in [
            format!(
                "  skip  {role} ready — not answering now, and a dry run starts nothing: the real run waits up to 60s for it\n"
            ),
            format!(
                "  skip  verification of {role} — a dry run starts nothing: the real run verifies it once it answers\n"
            ),
        ] {
            assert!(out.stdout.contains(&skipped), "deploy {service}'s plan lacks {skipped:?}:\n{}", out.stdout);
        }
        assert!(!out.stdout.contains("  FAIL  "), "deploy {service}:\n{}", out.stdout);
    }
    // Deployed again with nothing changed: nothing written, nothing restarted.
    let again = opsbook(&t, &["run", "deploy", "--set", "service=c1:alloy"]).code(0);
    assert!(
        again.stdout.contains("  nothing changed (changed=0): configuration and unit as deployed, nothing restarted\n"),
        "{}",
        again.stdout
    );
    for service in ["server:influxdb", "server:loki", "c1:telegraf", "c2:alloy", "c3:alloy"] {
        let out = script(&t, &[&exec, "verify", service]);
        assert_eq!(out.code, 0, "verify {service}:\n{}\n{}", out.stdout, out.stderr);
    }
    let checklist = opsbook(&t, &["run", "checklist", "--hosts", "all"]);
    assert_eq!(checklist.code, 0, "{}", checklist.stdout);

    // A configuration the shipper's own tool rejects never replaces the running one.
    let c2 = fleet.host("c2");
    let running = c2.ok(&["cat", "/etc/alloy/config.alloy"]);
    let overrides = t.path().join("override");
    std::fs::create_dir_all(overrides.join("runbooks")).unwrap();
    std::fs::create_dir_all(overrides.join("templates/log-shipper")).unwrap();
    std::fs::write(
        overrides.join("templates/log-shipper/config.alloy.j2"),
        "loki.write \"default\" {\n  endpont {\n    url = \"{{ log_store_url }}\"\n  }\n}\n",
    )
    .unwrap();
    let runbooks = overrides.join("runbooks").display().to_string();
    let rejected = opsbook(&t, &["--runbooks", &runbooks, "run", "configure", "--set", "service=c2:alloy"]).code(1);
    assert!(
        rejected.stdout.contains("FAIL  configuration validated by the component's own tool"),
        "{}",
        rejected.stdout
    );
    assert_eq!(c2.ok(&["cat", "/etc/alloy/config.alloy"]), running);
    assert_eq!(c2.ok(&["systemctl", "--user", "is-active", "alloy"]), "active\n");
    // A broken template: the same.
    std::fs::write(overrides.join("templates/log-shipper/config.alloy.j2"), "{% if %}\n").unwrap();
    let broken = opsbook(&t, &["--runbooks", &runbooks, "run", "configure", "--set", "service=c2:alloy"]).code(1);
    assert!(
        broken.stdout.contains("FAIL  configuration rendered from log-shipper/config.alloy.j2"),
        "{}",
        broken.stdout
    );
    assert_eq!(c2.ok(&["cat", "/etc/alloy/config.alloy"]), running);
    assert_eq!(c2.ok(&["systemctl", "--user", "is-active", "alloy"]), "active\n");

    // Remove all four: every host as it was before the deploys, ports closed.
    for service in [
        "c1:telegraf",
        "c1:alloy",
        "c2:telegraf",
        "c2:alloy",
        "c3:telegraf",
        "c3:alloy",
        "server:loki",
        "server:influxdb",
    ] {
        if service == "c3:alloy" {
            // A killed configure's point: remove names the unfinished change and takes its
            // point away with the component (the state compared below has no file left).
            fleet.host("c3").ok(&["sh", "-c", PLANT_POINT]);
        }
        let out = script(&t, &[&manage, "remove", service, "-y"]);
        assert_eq!(out.code, 0, "remove {service}:\n{}\n{}", out.stdout, out.stderr);
        if service == "c3:alloy" {
            for line in [
                "  WARN  unfinished change of log-shipper — c3 log-shipper: an unfinished change from run \
                 20261127T210307Z-ab12 (configure, by root@op1, 2026-11-27 21:03 UTC) was never verified; its rollback \
                 point (from before that change) is kept; `opsbook run rollback --set service=log-shipper` restores the \
                 state from before it; a change whose verification passes ends it\n",
                ", rollback point /etc/alloy/config.alloy.opsbook-rollback",
            ] {
                assert!(out.stdout.contains(line), "remove c3:alloy lacks {line:?}:\n{}", out.stdout);
            }
        }
    }
    let after: Vec<String> = fleet.hosts().iter().map(state_of).collect();
    assert_eq!(after, first);
}
