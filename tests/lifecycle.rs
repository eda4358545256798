//! The lifecycle on a fleet of real hosts over ssh: `prepare` an environment, `deploy` each
//! role (the twins as the components' programs, their command lines from the inventory), a
//! second deploy that changes nothing, `configure` refusing a broken template and a file the
//! component's own tool rejects (the running file untouched, the unit running), then `remove`
//! returning every host to the state it had before the deploys (files and units compared) —
//! through the orchestrator scripts as an operator calls them. A server deployed as a
//! container through the real podman. Skipped, saying why, without root or sshd.

use crate::fleet_runs::{boot, opsbook};
use crate::support::fleet::{Fleet, FleetHost};
use crate::support::{Output, Test};

const TOKEN: &str = "lifecycle-token-5b2c";

/// The operator's config: the inventory (a server and clients, all in group `lab`), and each
/// component's command line being the twin's.
fn configure_operator(t: &Test, fleet: &Fleet, extra: &str) {
    let bin = crate::support::opsbook();
    let server = fleet.host("server").address();
    let mut inventory = String::new();
    for h in fleet.hosts() {
        let roles = if h.name() == "server" { r#"["influxdb", "loki"]"# } else { r#"["telegraf", "alloy"]"# };
        inventory.push_str(&format!(
            "[hosts.{}]\naddress = \"{}\"\nroles = {roles}\nuser = \"root\"\nkey = \"{}\"\n",
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
fn state_of(host: &FleetHost) -> String {
    host.ok(&[
        "sh",
        "-c",
        "find /etc/influxdb /etc/loki /etc/telegraf /etc/alloy /run/user/0/systemd/user /run/user/0/home/.config/systemd \
         -xdev 2>/dev/null | sort; systemctl --user list-unit-files --no-legend 'influxdb*' 'loki*' 'telegraf*' 'alloy*' | sort",
    ])
}

/// The scripts, installed as an operator installs them.
fn scripts(t: &Test) -> (String, String) {
    opsbook(t, &["scripts", "--install", &t.path().join("bin").display().to_string()]).code(0);
    let dir = t.path().join("bin");
    (dir.join("manage-svc.sh").display().to_string(), dir.join("svc-exec.sh").display().to_string())
}

/// Runs a script in the test's directory (its opsbook: the one under test).
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
        let out = script(&t, &[&manage, "remove", service, "-y"]);
        assert_eq!(out.code, 0, "remove {service}:\n{}\n{}", out.stdout, out.stderr);
    }
    let after: Vec<String> = fleet.hosts().iter().map(state_of).collect();
    assert_eq!(after, first);
}

/// Deployed as a container where podman has no Quadlet (Debian 12's 4.3): a unit running
/// `podman run --replace`, from an image imported from a tarball (no registry).
#[test]
fn a_log_store_deployed_as_a_container_through_the_real_podman() {
    let Some(fleet) = boot(&["server"]) else { return };
    let t = Test::new();
    let dir = t.path().display().to_string();
    let server = fleet.host("server");
    // An image of one binary and the libraries it links.
    let rootfs = t.path().join("rootfs");
    let bin = crate::support::opsbook();
    for (from, to) in [
        (bin, "opsbook"),
        ("/lib/x86_64-linux-gnu/libgcc_s.so.1", "lib/x86_64-linux-gnu/libgcc_s.so.1"),
        ("/lib/x86_64-linux-gnu/libm.so.6", "lib/x86_64-linux-gnu/libm.so.6"),
        ("/lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libc.so.6"),
        ("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2"),
    ] {
        let to = rootfs.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("{from}: {e}"));
    }
    std::fs::write(
        t.path().join("podman"),
        format!("#!/bin/sh\nexec podman --root {dir}/containers --runroot {dir}/containers-run \"$@\"\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(t.path().join("podman"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let image = "localhost/opsbook-twin:test";
    let made = server.exec(&[
        "sh",
        "-c",
        &format!(
            "tar -C {dir}/rootfs -cf {dir}/rootfs.tar . && {dir}/podman import --change 'ENTRYPOINT [\"/opsbook\", \"twin\", \"log-store\", \"--ready-delay\", \"0s\"]' {dir}/rootfs.tar {image}"
        ),
    ]);
    assert!(made.status.success(), "podman import: {}", String::from_utf8_lossy(&made.stderr));
    // crun refuses hybrid cgroup hierarchies and raised limits here; runc with lowered ones runs.
    configure_operator(
        &t,
        &fleet,
        &format!(
            "[container]\nruntime = \"{dir}/podman\"\nrun_options = \"--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024\"\n"
        ),
    );
    let toml = std::fs::read_to_string(t.path().join("opsbook.toml")).unwrap();
    std::fs::write(
        t.path().join("opsbook.toml"),
        toml.replace("[log_store]\n", &format!("[log_store]\nrun_as = \"container\"\nimage = \"{image}\"\n")),
    )
    .unwrap();
    let deployed = opsbook(&t, &["run", "deploy", "--set", "service=server:loki"]);
    assert_eq!(deployed.code, 0, "{}", deployed.stdout);
    let unit = server.ok(&["cat", "/run/user/0/home/.config/systemd/user/loki.service"]);
    assert!(unit.contains("--replace --rm --name loki --network host"), "{unit}");
    let names = server.ok(&["sh", "-c", &format!("{dir}/podman ps --format '{{{{.Names}}}} {{{{.Image}}}}'")]);
    assert_eq!(names, format!("loki {image}\n"));
    let removed = opsbook(&t, &["run", "remove", "--set", "service=server:loki"]);
    assert_eq!(removed.code, 0, "{}", removed.stdout);
    assert_eq!(server.ok(&["sh", "-c", &format!("{dir}/podman ps -q")]), "");
}
