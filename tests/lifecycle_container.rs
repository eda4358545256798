//! The servers deployed as containers through the real podman, on a real host of the test
//! fleet over ssh: their images are made on the host with `podman import` of a tarball holding
//! the opsbook binary (no registry), so the containers run `opsbook twin log-store` and
//! `opsbook twin metrics-db`. Deploy (a unit running `podman run --replace`: these are user
//! units, and podman here may predate Quadlet), verify, a second deploy that changes and
//! restarts nothing, then remove: the units unknown, no container left, the ports closed, the
//! data kept. The choice between Quadlet and `podman run` by podman's version, and a Quadlet
//! deploy with its `.container` file compared whole, are rehearsed with `--dry-run` in the
//! sandbox (podman here cannot run Quadlet). Skipped, saying why, without podman, root or sshd.

use std::path::Path;
use std::process::Command;

use crate::fleet_runs::{boot, opsbook};
use crate::support::Test;
use crate::support::fleet::FleetHost;

const IMAGE: &str = "localhost/opsbook-log-store:test";
const DB_IMAGE: &str = "localhost/opsbook-metrics-db:test";
const TOKEN: &str = "container-token-41d7";

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
    // How many ssh connections a run reused depends on the runs before it (`№`: a count).
    // `⊕`: the round trip's bucket made on first use (said once, on a database without it).
    regex::escape(expected)
        .replace('⏱', r"(?:  \(\[DUR\]\))?")
        .replace('№', r"\d+")
        .replace('⊕', r"(?:  make bucket opsbook_probe in org \S+ \(retention 1h\)\n)?")
}

/// A root file system holding opsbook (stripped, when `strip` is there: the image is then
/// small) and the libraries it links, as a tarball in `dir`.
#[track_caller]
pub(crate) fn rootfs_tarball(dir: &Path) -> String {
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
#[track_caller]
fn podman_store_with_image(host: &FleetHost, tarball: &str) {
    host.ok(&[
        "sh",
        "-c",
        "for d in /var/lib/containers /run/containers /run/libpod /run/runc /run/crun; do \
         mkdir -p $d && mount -t tmpfs -o mode=700 tmpfs $d || exit 1; done",
    ]);
    let entrypoint = r#"ENTRYPOINT ["/opsbook", "twin", "log-store", "--ready-delay", "0s"]"#;
    host.ok(&["podman", "import", "--quiet", "--change", entrypoint, tarball, IMAGE]);
    // The database's twin takes its token and organisation from the environment, as influxd's
    // image takes its setup.
    let entrypoint = r#"ENTRYPOINT ["/opsbook", "twin", "metrics-db"]"#;
    let token = format!("ENV INFLUX_TOKEN={TOKEN}");
    host.ok(&["podman", "import", "--quiet", "--change", entrypoint, "--change", &token, tarball, DB_IMAGE]);
}

/// Takes every container off the host before the fleet goes, should the test fail half-way:
/// a container killed with its host would leave its cgroups on this machine.
struct RemoveContainers<'a>(&'a FleetHost);

impl Drop for RemoveContainers<'_> {
    fn drop(&mut self) {
        self.0.exec(&["podman", "rm", "--force", "--all", "--time", "2"]);
    }
}

/// The operator's config: the host runs the log store as a container of the test's image.
#[track_caller]
fn configure_operator(t: &Test, host: &FleetHost) {
    std::fs::write(
        t.path().join("opsbook.toml"),
        format!(
            "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n\
[log_store]\nurl = \"http://127.0.0.1:3100\"\nrun_as = \"container\"\nimage = \"{IMAGE}\"\n\
[metrics_db]\nurl = \"http://127.0.0.1:8086\"\ntoken = \"{TOKEN}\"\norg = \"opsbook\"\nrun_as = \"container\"\nimage = \"{DB_IMAGE}\"\n\
[hosts.server]\naddress = \"{}\"\nroles = [\"loki\", \"influxdb\"]\nuser = \"root\"\nkey = \"{}\"\n",
            host.address(),
            host.key().display()
        ),
    )
    .unwrap();
}

/// What the host's podman knows of containers: name, image and state, one per line.
#[track_caller]
fn containers(host: &FleetHost) -> String {
    host.ok(&["sh", "-c", "podman ps --all --quiet | xargs --no-run-if-empty podman inspect --format '{{.Name}} {{.ImageName}} {{.State.Status}}' | sort"])
}

const UNITS: &str = "/run/user/0/home/.config/systemd/user";

/// `said`: what deploy says of the host's runtime before installing the unit.
fn expected_deploy(said: &str) -> String {
    format!(
        "deploy on server (<built-in>/runbooks/deploy.rhai)

== configuration of log-store
  ok    configuration rendered from log-store/config.yaml.j2
  changed /etc/loki: directory created (mode 0755)
  ok    configuration validated by the component's own tool⏱
  changed /var/lib/loki: directory created (mode 0750)
  changed /etc/loki/config.yaml: created (31 lines, mode 0640)

== unit loki.service
{said}  changed {UNITS}: directory created
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

== log-store: evidence made after the change
  ok    a line pushed after the change is taken — accepted
  ok    the line is read back from {{opsbook_probe=\"server\"}} — after [DUR]⏱

8 passed, 0 failed  ([DUR])

HOST    ROLES                  PASSED  FAILED  TIME
server  metrics-db, log-store  8       0       [DUR]

1 host(s): all passed  ([DUR])
ssh connections: № reused, № new
"
    )
}

fn expected_redeploy(said: &str) -> String {
    format!(
        "deploy on server (<built-in>/runbooks/deploy.rhai)

== configuration of log-store
  ok    configuration rendered from log-store/config.yaml.j2
  ok    configuration validated by the component's own tool⏱

== unit loki.service
{said}  nothing changed (changed=0): configuration and unit as deployed, nothing restarted

== readiness
  ok    log-store ready⏱

== log store
  ok    loki.service active — active (running)
  ok    log store /ready says ready — ready
  ok    storage backend — local disk: filesystem (schema periods: filesystem)

== log-store: evidence made after the change
  ok    a line pushed after the change is taken — accepted
  ok    the line is read back from {{opsbook_probe=\"server\"}} — after [DUR]⏱

8 passed, 0 failed  ([DUR])

HOST    ROLES                  PASSED  FAILED  TIME
server  metrics-db, log-store  8       0       [DUR]

1 host(s): all passed  ([DUR])
ssh connections: № reused, № new
"
    )
}

/// What `remove` of a server says: its unit stopped, disabled and removed, its configuration
/// removed, its data kept, then proven gone.
fn expected_remove(unit: &str, config: &str, data_dir: &str, port: u16) -> String {
    format!(
        "remove on server (<built-in>/runbooks/remove.rhai)

== stop {unit}
  changed: removed {UNITS}/default.target.wants/{unit}

== files
  changed {UNITS}/{unit}: removed
  changed: the service manager re-read its unit files (daemon-reload)
  changed {config}: removed
  data kept in {data_dir} (--set purge=true removes it)
  changed=4: stopped, disabled, unit {unit}, configuration {config}

== gone
  ok    {unit} unknown to the service manager
  ok    {config} removed
  ok    port {port} closed

3 passed, 0 failed  ([DUR])

HOST    ROLES                  PASSED  FAILED  TIME
server  metrics-db, log-store  3       0       [DUR]

1 host(s): all passed  ([DUR])
ssh connections: 1 reused, 0 new
"
    )
}

/// How a deploy of the metrics database begins: it has no offline check of its configuration.
const DB_DEPLOY_HEAD: &str = "deploy on server (<built-in>/runbooks/deploy.rhai)

== configuration of metrics-db
  ok    configuration rendered from metrics-db/config.toml.j2
  skip  configuration validated offline — the metrics database has no offline check: its health after the start is the check⏱
";

/// How a deploy of the metrics database ends: ready, then its verification.
const DB_VERIFIED: &str = "
== readiness
  ok    metrics-db ready⏱

== metrics database
  ok    influxdb.service active — active (running)
  ok    metrics database /health answers 200 — HTTP 200, ready for queries and writes (v2.7.11)
  ok    authenticated bucket listing
  ok    storage backend — local disk: engine at /var/lib/influxdb/engine

== metrics-db: evidence made after the change
⊕  ok    a point written after the change is taken — written (204)
  ok    the point is read back from opsbook_probe — after [DUR]⏱

8 passed, 0 failed, 1 skipped  ([DUR])

HOST    ROLES                  PASSED  FAILED  TIME
server  metrics-db, log-store  8       0       [DUR]

1 host(s): all passed  ([DUR])
ssh connections: № reused, № new
";

fn expected_db(kind: &str, said: &str, data_dir: &str) -> String {
    match kind {
        "deploy" => format!(
            "{DB_DEPLOY_HEAD}{data_dir}  changed /etc/influxdb/config.toml: created (6 lines, mode 0640)

== unit influxdb.service
{said}  changed {UNITS}/influxdb.service: created (25 lines, mode 0644)
  changed: the service manager re-read its unit files (daemon-reload)
  changed: created symlink {UNITS}/default.target.wants/influxdb.service → {UNITS}/influxdb.service
  changed={changes}: {data}configuration /etc/influxdb/config.toml, unit influxdb.service, enabled, started
{DB_VERIFIED}",
            changes = if data_dir.is_empty() { 4 } else { 5 },
            data = if data_dir.is_empty() { "" } else { "data directory /var/lib/influxdb, " },
        ),
        "redeploy" => format!(
            "{DB_DEPLOY_HEAD}
== unit influxdb.service
{said}  nothing changed (changed=0): configuration and unit as deployed, nothing restarted
{DB_VERIFIED}"
        ),
        _ => expected_remove("influxdb.service", "/etc/influxdb/config.toml", "/var/lib/influxdb", 8086),
    }
}

/// How deploy finds the database's data directory: made, its mode corrected, or as wanted.
#[track_caller]
fn db_data_dir(host: &FleetHost) -> String {
    let out = host.exec(&["stat", "-c", "%a", "/var/lib/influxdb"]);
    let mode = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match mode.as_str() {
        _ if !out.status.success() => "  changed /var/lib/influxdb: directory created (mode 0750)\n".to_string(),
        "750" => String::new(),
        _ => format!("  changed /var/lib/influxdb: mode 0{mode} → 0750\n"),
    }
}

#[test]
fn the_servers_as_podman_containers_are_deployed_verified_left_alone_and_removed() {
    if !podman_installed() {
        return crate::support::skip("podman is not installed (apt-get install podman): no container deployed");
    }
    let _cgroups = crate::support::cgroups_exclusive();
    let Some(fleet) = boot(&["server"]) else { return };
    let host = fleet.host("server");
    let t = Test::new();
    let tarball = rootfs_tarball(t.path());
    podman_store_with_image(host, &tarball);
    let _cleanup = RemoveContainers(host);
    configure_operator(&t, host);
    // What deploy says of the host's podman: these user units never use Quadlet either way.
    let version = host.ok(&["podman", "--version"]);
    let version = version.trim().trim_start_matches("podman version ");
    let numbers: Vec<u64> = version.split(['.', '-']).take(2).map(|n| n.parse().unwrap_or(0)).collect();
    let choice = if numbers < vec![4, 4] {
        format!("  podman {version} has no Quadlet (it came with podman 4.4): a unit running podman run\n")
    } else {
        format!(
            "  podman {version} has Quadlet, read here for the system manager only (scope = \"system\"): a unit running podman run\n"
        )
    };
    let runc = if hybrid_cgroups() {
        "  this host mixes cgroup v1 and v2, which crun refuses: containers run with --runtime runc\n"
    } else {
        ""
    };
    let said = format!("{runc}{choice}");
    let data_dir = db_data_dir(host);
    let main_pid = |unit: &str| host.ok(&["systemctl", "--user", "show", "--property", "MainPID", unit]);

    let deployed = opsbook(&t, &["run", "deploy", "--set", "service=server:loki"]);
    deployed.code(0).stdout_matches(&timed(&expected_deploy(&said)));
    let deployed = opsbook(&t, &["run", "deploy", "--set", "service=server:influxdb"]);
    deployed.code(0).stdout_matches(&timed(&expected_db("deploy", &said, &data_dir)));
    assert_eq!(containers(host), format!("influxdb {DB_IMAGE} running\nloki {IMAGE} running\n"));
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
    let pids = (main_pid("loki"), main_pid("influxdb"));

    let again = opsbook(&t, &["run", "deploy", "--set", "service=server:loki"]);
    again.code(0).stdout_matches(&timed(&expected_redeploy(&said)));
    let again = opsbook(&t, &["run", "deploy", "--set", "service=server:influxdb"]);
    again.code(0).stdout_matches(&timed(&expected_db("redeploy", &said, "")));
    // Nothing restarted: the same conmon, the same containers.
    assert_eq!((main_pid("loki"), main_pid("influxdb")), pids);
    assert_eq!(containers(host), format!("influxdb {DB_IMAGE} running\nloki {IMAGE} running\n"));

    opsbook(&t, &["run", "remove", "--set", "service=server:loki"]).code(0).stdout_is(&expected_remove(
        "loki.service",
        "/etc/loki/config.yaml",
        "/var/lib/loki",
        3100,
    ));
    opsbook(&t, &["run", "remove", "--set", "service=server:influxdb"])
        .code(0)
        .stdout_is(&expected_db("remove", "", ""));
    assert_eq!(containers(host), "");
    // The data kept, the containers' id files gone with them, the units unknown.
    let left = "ls -d /var/lib/loki /var/lib/influxdb; ls /run/user/0 | grep -c ctr-id || true";
    assert_eq!(host.ok(&["sh", "-c", left]), "/var/lib/influxdb\n/var/lib/loki\n0\n");
    for unit in ["loki", "influxdb"] {
        assert_eq!(host.ok(&["systemctl", "--user", "show", "--property", "LoadState", unit]), "LoadState=not-found\n");
    }
}

/// A sandbox whose container runtime is a script saying it is podman `version` (a dry run asks
/// the runtime only its version: every other podman call is planned, not run).
#[track_caller]
fn sandbox_with_podman(version: &str, scope: &str) -> Test {
    let t = Test::new();
    let runtime = t.path().join("podman");
    std::fs::write(&runtime, format!("#!/bin/sh\n[ \"$1\" = --version ] && echo 'podman version {version}'\n"))
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "scope = \"{scope}\"\n[log_store]\nrun_as = \"container\"\nimage = \"{IMAGE}\"\n\
         [container]\nruntime = \"{}\"\nrun_options = \"--runtime runc\"\n",
        runtime.display()
    );
    t.config(&config).args(["--sandbox", "--dry-run", "run", "deploy", "--set", "service=log-store"])
}

/// How the unit section of a rehearsed deploy begins: what deploy said of the runtime and the
/// unit file it would write (the lines up to that file's diff), masked.
#[track_caller]
fn unit_section(stdout: &str) -> String {
    let section = stdout.split("== unit loki.service\n").nth(1).unwrap_or_else(|| panic!("no unit section:\n{stdout}"));
    crate::support::mask(section.split("--- /dev/null\n").next().unwrap())
}

#[test]
fn deploy_chooses_quadlet_from_podman_4_4_for_the_system_manager_with_its_generator() {
    let system = "  plan: would write /etc/systemd/system/loki.service: created (25 lines, mode 0644)\n";
    let user = "  plan: would make directory [TMP]/.config/systemd/user: created\n  \
                plan: would write [TMP]/.config/systemd/user/loki.service: created (25 lines, mode 0644)\n";
    let runs = [
        (
            "4.3.1",
            "system",
            "  podman 4.3.1 has no Quadlet (it came with podman 4.4): a unit running podman run\n",
            system,
        ),
        (
            "5.0.1",
            "system",
            // The sandbox's files are its own: no generator there.
            "  podman 5.0.1 has Quadlet but /usr/lib/systemd/system-generators/podman-system-generator is missing: a unit running podman run\n",
            system,
        ),
        (
            "4.4.0",
            "user",
            "  podman 4.4.0 has Quadlet, read here for the system manager only (scope = \"system\"): a unit running podman run\n",
            user,
        ),
    ];
    for (version, scope, said, written) in runs {
        let out = sandbox_with_podman(version, scope).run().code(0);
        assert_eq!(unit_section(&out.stdout), format!("{said}{written}"), "{}", out.stdout);
    }
}

/// A rehearsed Quadlet deploy: the configuration checked by the image, the sandbox's own
/// (native, enabled) unit disabled so its file cannot hide the generated one, the `.container`
/// file written into Quadlet's folder, the manager reloaded (the generator then makes the
/// unit), the generated unit restarted (it was running), as a whole report in which `{host}`
/// is this machine's name, `⚓` the sandbox's port, `⏱` a check's optional duration, `⌘` the
/// marker `journal::emit` gives a line.
const QUADLET_REHEARSAL: &str = include_str!("fixtures/podman/quadlet-rehearsal.txt");

#[test]
fn a_quadlet_deploy_rehearsed_writes_the_container_file_reloads_and_restarts_the_generated_unit() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let expected = timed(&QUADLET_REHEARSAL.replace("{host}", host.trim()))
        .replace('⚓', r"\d+")
        .replace('⌘', r"opsbook-\d+-[0-9a-f]+");
    sandbox_with_podman("5.0.1", "system")
        .args(["--set", "container_unit=quadlet"])
        .run()
        .code(0)
        .stdout_matches(&expected);
}

#[test]
fn quadlet_of_podman_4_4_refuses_run_options_it_cannot_pass() {
    let out = sandbox_with_podman("4.4.0", "system").args(["--set", "container_unit=quadlet"]).run().code(1);
    // The module's line is masked: another change to it must not fail this test.
    let expected = "deploy (<built-in>/runbooks/deploy.rhai)  [sandbox: in-process stack]  (dry run: nothing will be changed)\n\n\
         aborted: podman 4.4.0's Quadlet cannot pass podman run options (--runtime runc; PodmanArgs came with podman 4.5): \
         deploy with --set container_unit=podman-run, or upgrade podman (at <built-in>/runbooks/deploy.rhai:LINE; thrown at <built-in>/stdlib/lifecycle.rhai:LINE)\n\n\
         0 passed, 0 failed  ([DUR])\n";
    out.stdout_matches(&regex::escape(expected).replace("LINE", r"\d+:\d+"));
}
