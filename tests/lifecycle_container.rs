//! A server deployed as a container through the real podman, on a real host of the test fleet
//! over ssh: the log store's image is made on the host with `podman import` of a tarball
//! holding the opsbook binary (no registry), so the container runs `opsbook twin log-store`.
//! Deploy (a unit running `podman run --replace`: podman here predates Quadlet), verify, a
//! second deploy that changes nothing, then remove: the unit unknown, no container left, the
//! port closed, the data kept. The Quadlet path is rehearsed in a dry run in the sandbox, its
//! `.container` file compared whole. Skipped, saying why, without podman, root or sshd.

use std::path::Path;
use std::process::Command;

use crate::fleet_runs::{boot, opsbook};
use crate::support::Test;
use crate::support::fleet::FleetHost;

const IMAGE: &str = "localhost/opsbook-log-store:test";

/// Whether the real `podman` is installed on this machine (the fleet's hosts share its /usr).
fn podman_installed() -> bool {
    Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Whether this machine mixes cgroup v1 and v2 (a v2 hierarchy at /sys/fs/cgroup/unified), where
/// crun refuses to run containers and deploy chooses runc.
fn hybrid_cgroups() -> bool {
    Command::new("stat")
        .args(["-f", "-c", "%T", "/sys/fs/cgroup/unified"])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "cgroup2fs")
}

/// `expected` as a whole-text pattern in which each `⏱` may be a check's `  ([DUR])`.
fn timed(expected: &str) -> String {
    regex::escape(expected).replace('⏱', r"(?:  \(\[DUR\]\))?")
}

/// A root file system holding opsbook (stripped, when `strip` is there: the image is then
/// small) and the libraries it links, as a tarball in `dir`.
fn rootfs_tarball(dir: &Path) -> String {
    let root = dir.join("rootfs");
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    let bin = crate::support::opsbook();
    let stripped = Command::new("strip").arg("-o").arg(root.join("opsbook")).arg(bin).status();
    if !stripped.is_ok_and(|s| s.success()) {
        std::fs::copy(bin, root.join("opsbook")).unwrap();
    }
    let ldd = Command::new("ldd").arg(bin).output().expect("ldd");
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`.
        let Some(lib) = line.split_whitespace().find(|w| w.starts_with('/')) else { continue };
        let inside = root.join(lib.trim_start_matches('/'));
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::copy(lib, &inside).unwrap_or_else(|e| panic!("{lib}: {e}"));
    }
    let tarball = dir.join("rootfs.tar").display().to_string();
    let tar = Command::new("tar").args(["-C", &root.display().to_string(), "-cf", &tarball, "."]).status();
    assert!(tar.is_ok_and(|s| s.success()), "tar of the image's root file system");
    tarball
}

/// Podman's storage on the host: its /var/lib is an overlay, on which podman's overlay driver
/// cannot sit, and its /run is this machine's: tmpfs of the host's own for both (as a real
/// host has its own disk and /run). Then the image, imported there.
fn podman_store_with_image(host: &FleetHost, tarball: &str) {
    host.ok(&[
        "sh",
        "-c",
        "for d in /var/lib/containers /run/containers /run/libpod /run/runc /run/crun; do \
         mkdir -p $d && mount -t tmpfs -o mode=700 tmpfs $d || exit 1; done",
    ]);
    let entrypoint = r#"ENTRYPOINT ["/opsbook", "twin", "log-store", "--ready-delay", "0s"]"#;
    host.ok(&["podman", "import", "--quiet", "--change", entrypoint, tarball, IMAGE]);
}

/// The operator's config: the host runs the log store as a container of the test's image.
fn configure_operator(t: &Test, host: &FleetHost) {
    std::fs::write(
        t.path().join("opsbook.toml"),
        format!(
            "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n\
[log_store]\nurl = \"http://127.0.0.1:3100\"\nrun_as = \"container\"\nimage = \"{IMAGE}\"\n\
[hosts.server]\naddress = \"{}\"\nroles = [\"loki\"]\nuser = \"root\"\nkey = \"{}\"\n",
            host.address(),
            host.key().display()
        ),
    )
    .unwrap();
}

/// What the host's podman knows of containers: name, image and state, one per line.
fn containers(host: &FleetHost) -> String {
    host.ok(&["sh", "-c", "podman ps --all --quiet | xargs --no-run-if-empty podman inspect --format '{{.Name}} {{.ImageName}} {{.State.Status}}'"])
}

const UNITS: &str = "/run/user/0/home/.config/systemd/user";

fn expected_deploy(runc: &str) -> String {
    format!(
        "deploy on server (<built-in>/runbooks/deploy.rhai)

== configuration of log-store
  ok    configuration rendered from log-store/config.yaml.j2
  changed /etc/loki: directory created (mode 0755)
  changed /etc/loki/config.opsbook-candidate.yaml: created (31 lines, mode 0600)
  changed /etc/loki/config.opsbook-candidate.yaml: removed
  ok    configuration validated by the component's own tool⏱
  changed /var/lib/loki: directory created (mode 0750)
  changed /etc/loki/config.yaml: created (31 lines, mode 0640)

== unit loki.service
{runc}  podman 4.3.1 has no Quadlet (it came with podman 4.4): a unit running podman run
  changed {UNITS}: directory created
  changed {UNITS}/loki.service: created (25 lines, mode 0644)
  changed: the service manager re-read its unit files (daemon-reload)
  changed: created symlink {UNITS}/default.target.wants/loki.service → {UNITS}/loki.service
  changed=5: data directory /var/lib/loki, configuration /etc/loki/config.yaml, unit loki.service, enabled, started

== readiness
  ok    log-store ready⏱

== log store
  ok    loki.service active — active (running)
  ok    log store /ready says ready — ready
  ok    storage backend — local disk: filesystem (schema periods: filesystem)

6 passed, 0 failed  ([DUR])

HOST    ROLES      PASSED  FAILED  TIME
server  log-store  6       0       [DUR]

1 host(s): all passed  ([DUR])
"
    )
}

fn expected_redeploy(runc: &str) -> String {
    format!(
        "deploy on server (<built-in>/runbooks/deploy.rhai)

== configuration of log-store
  ok    configuration rendered from log-store/config.yaml.j2
  changed /etc/loki/config.opsbook-candidate.yaml: created (31 lines, mode 0600)
  changed /etc/loki/config.opsbook-candidate.yaml: removed
  ok    configuration validated by the component's own tool⏱

== unit loki.service
{runc}  podman 4.3.1 has no Quadlet (it came with podman 4.4): a unit running podman run
  nothing changed (changed=0): configuration and unit as deployed, nothing restarted

== readiness
  ok    log-store ready⏱

== log store
  ok    loki.service active — active (running)
  ok    log store /ready says ready — ready
  ok    storage backend — local disk: filesystem (schema periods: filesystem)

6 passed, 0 failed  ([DUR])

HOST    ROLES      PASSED  FAILED  TIME
server  log-store  6       0       [DUR]

1 host(s): all passed  ([DUR])
"
    )
}

fn expected_remove() -> String {
    format!(
        "remove on server (<built-in>/runbooks/remove.rhai)

== stop loki.service
  changed: removed {UNITS}/default.target.wants/loki.service

== files
  changed {UNITS}/loki.service: removed
  changed: the service manager re-read its unit files (daemon-reload)
  changed /etc/loki/config.yaml: removed
  data kept in /var/lib/loki (--set purge=true removes it)
  changed=4: stopped, disabled, unit loki.service, configuration /etc/loki/config.yaml

== gone
  ok    loki.service unknown to the service manager
  ok    /etc/loki/config.yaml removed
  ok    port 3100 closed

3 passed, 0 failed  ([DUR])

HOST    ROLES      PASSED  FAILED  TIME
server  log-store  3       0       [DUR]

1 host(s): all passed  ([DUR])
"
    )
}

#[test]
fn the_log_store_as_a_podman_container_is_deployed_verified_left_alone_and_removed() {
    if !podman_installed() {
        return crate::support::skip("podman is not installed (apt-get install podman): no container deployed");
    }
    let Some(fleet) = boot(&["server"]) else { return };
    let host = fleet.host("server");
    let t = Test::new();
    let tarball = rootfs_tarball(t.path());
    podman_store_with_image(host, &tarball);
    configure_operator(&t, host);
    let version = host.ok(&["podman", "--version"]);
    if version != "podman version 4.3.1\n" {
        // The expected report names the version and the unit it leads to.
        return crate::support::skip(format!("this test expects podman 4.3.1 (Debian 12), not {}", version.trim()));
    }
    let runc = if hybrid_cgroups() {
        "  this host mixes cgroup v1 and v2, which crun refuses: containers run with --runtime runc\n"
    } else {
        ""
    };

    let deployed = opsbook(&t, &["run", "deploy", "--set", "service=server:loki"]);
    deployed.code(0).stdout_matches(&timed(&expected_deploy(runc)));
    assert_eq!(containers(host), format!("loki {IMAGE} running\n"));
    let unit = host.read_file(&format!("{UNITS}/loki.service")).expect("the unit file");
    let options = if runc.is_empty() { "" } else { " --runtime runc" };
    assert_eq!(
        unit.lines().find(|l| l.starts_with("ExecStart=")).unwrap(),
        format!(
            "ExecStart=podman run --cidfile=%t/%n.ctr-id --cgroups=no-conmon --sdnotify=conmon --detach --replace --rm \
             --name loki --network host{options} --volume /etc/loki/config.yaml:/etc/loki/config.yaml:ro \
             --volume /var/lib/loki:/var/lib/loki {IMAGE} -config.file=/etc/loki/config.yaml"
        )
    );
    let pid = host.ok(&["systemctl", "--user", "show", "--property", "MainPID", "loki"]);

    let again = opsbook(&t, &["run", "deploy", "--set", "service=server:loki"]);
    again.code(0).stdout_matches(&timed(&expected_redeploy(runc)));
    // Nothing restarted: the same conmon, the same container.
    assert_eq!(host.ok(&["systemctl", "--user", "show", "--property", "MainPID", "loki"]), pid);
    assert_eq!(containers(host), format!("loki {IMAGE} running\n"));

    let removed = opsbook(&t, &["run", "remove", "--set", "service=server:loki"]);
    removed.code(0).stdout_is(&expected_remove());
    assert_eq!(containers(host), "");
    // The data kept, the container's id file gone with it, the unit unknown.
    assert_eq!(
        host.ok(&["sh", "-c", "ls -d /var/lib/loki; ls /run/user/0 | grep -c ctr-id || true"]),
        "/var/lib/loki\n0\n"
    );
    assert_eq!(host.ok(&["systemctl", "--user", "show", "--property", "LoadState", "loki"]), "LoadState=not-found\n");
}
