//! Debian 13 test hosts (tests/support/debian13.rs) are what operators run: each one boots
//! Debian 13 with systemd 257 as PID 1 and is reached as root over ssh. These tests prove it
//! on the hosts themselves, each through a real login: their own names, addresses and machine
//! ids, a finished boot with nothing failed, a system unit logging to the system journal, a
//! Quadlet container from an image made on the host running as a system unit, and opsbook
//! reading each host's system manager. Skipped, saying why, without root or without the root
//! filesystem (bash tests/support/debian13-root.sh; .ci/run makes it).

use std::time::Instant;

// The hosts' support lives with the others' in tests/support/, declared here so that
// tests/support/mod.rs stays as it is (`crate::debian13::host` until it moves there).
#[path = "support/debian13.rs"]
pub(crate) mod host;

use crate::support::Test;
use host::{Debian13Fleet, Debian13Host};

fn boot(names: &[&str]) -> Option<Debian13Fleet> {
    let started = Instant::now();
    match Debian13Fleet::boot(names) {
        Ok(f) => {
            eprintln!("{} Debian 13 host(s) booted in {:?}", names.len(), started.elapsed());
            Some(f)
        }
        Err(why) => {
            crate::support::skip(why);
            None
        }
    }
}

/// `expected` as a whole-text pattern in which each `⏱` may be a check's `  ([DUR])`.
fn timed(expected: &str) -> String {
    // How many ssh connections a run reused depends on the runs before it (`№`: a count).
    regex::escape(expected).replace('⏱', r"(?:  \(\[DUR\]\))?").replace('№', r"\d+")
}

/// `seen` matches `pattern` whole (anchored at both ends), or the test fails showing both.
fn assert_matches(pattern: &str, seen: &str, what: &str) {
    let re = regex::Regex::new(&format!("^(?:{pattern})$")).expect("a valid pattern");
    assert!(re.is_match(seen), "{what} does not match\n--- pattern\n{pattern}\n--- seen\n{seen}");
}

#[test]
fn three_hosts_boot_debian_13_with_systemd_257_as_their_system_manager_and_take_root_over_ssh() {
    let Some(fleet) = boot(&["d13srv", "d13c1", "d13c2"]) else { return };
    let mut machine_ids = Vec::new();
    for host in fleet.hosts() {
        // One login per host; every line is the host's own answer. A boot with nothing failed
        // is `running`; `degraded` is allowed only for systemd-modules-load (this kernel keeps
        // module loading to itself), which debian13-root.sh masks.
        let seen = host.ssh_ok(
            "hostname; id -un; . /etc/os-release; echo \"$ID $VERSION_ID\"; ip -4 -o addr show eth0 | \
             awk '{print $4}'; systemctl is-system-running; systemctl --failed --plain --no-legend | \
             awk '{print $1}'; systemctl --version | head -n 1 | cut -d ' ' -f 1,2; ps -o comm= -p 1; \
             systemctl show -P Virtualization; cat /etc/machine-id",
        );
        let (state, failed) = if seen.contains("\ndegraded\n") {
            ("degraded", "systemd-modules-load.service\n")
        } else {
            ("running", "")
        };
        let lines: Vec<&str> = seen.lines().collect();
        machine_ids.push(lines.last().copied().unwrap_or_default().to_string());
        assert_matches(
            &format!(
                "{name}\nroot\ndebian 13\n{address}/24\n{state}\n{failed}systemd 257\nsystemd\ncontainer-other\n[0-9a-f]{{32}}\n",
                name = host.name(),
                address = regex::escape(&host.address().to_string()),
                failed = regex::escape(failed)
            ),
            &seen,
            &format!("what {} says about itself", host.name()),
        );
        // The same from inside the host, without ssh: PID 1 is systemd, and on the system bus
        // is its manager, version 257.
        let seen = host.ok(&[
            "sh",
            "-c",
            "cat /proc/1/comm; busctl --system get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 \
             org.freedesktop.systemd1.Manager Version",
        ]);
        assert_matches("systemd\ns \"257\\.[^\"]+\"\n", &seen, &format!("PID 1 of {}", host.name()));
    }
    let mut distinct = machine_ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "each host has a machine id of its own: {machine_ids:?}");
    // The hosts reach each other by name, as hosts of one site do.
    let srv = fleet.host("d13srv");
    let seen = fleet.host("d13c1").ssh_ok("getent hosts d13srv; bash -c 'exec 3<>/dev/tcp/d13srv/22' && echo ssh open");
    assert_eq!(seen, format!("{:<15} d13srv\nssh open\n", srv.address().to_string()));
}

#[test]
fn a_system_unit_started_over_ssh_logs_to_the_system_journal() {
    let Some(fleet) = boot(&["d13srv"]) else { return };
    let host = fleet.host("d13srv");
    // A transient system unit (systemd-run, as an operator runs one), waited for; then the
    // system journal read by unit, as `journalctl -u` on any Debian host. `--sync` makes
    // journald store what it was sent before. The unit's output (a stream) and the manager's
    // messages about it (datagrams) reach journald in either order: sorted.
    let seen = host.ssh_ok(
        "systemd-run --quiet --wait --unit=opsbook-hello sh -c 'echo hello from the system manager' && \
         journalctl --sync && journalctl -u opsbook-hello --no-pager -o cat | sort && \
         journalctl -u opsbook-hello --no-pager -o json | grep -F '\"MESSAGE\":\"hello from' | \
         sed -E 's/.*\"_HOSTNAME\":\"([^\"]*)\".*/\\1/'",
    );
    assert_eq!(
        seen,
        "Started opsbook-hello.service - [systemd-run] /usr/bin/sh -c \"echo hello from the system manager\".\n\
         hello from the system manager\n\
         opsbook-hello.service: Deactivated successfully.\n\
         d13srv\n"
    );
    // The unit was the system manager's, and its log is in the system journal, not a user's.
    assert_eq!(
        host.ssh_ok(
            "journalctl --system -u opsbook-hello --no-pager -o json | grep -F '\"MESSAGE\":\"hello from' | \
             grep -o '\"_SYSTEMD_UNIT\":\"[^\"]*\"\\|\"_TRANSPORT\":\"[^\"]*\"\\|\"_UID\":\"[^\"]*\"' | sort"
        ),
        "\"_SYSTEMD_UNIT\":\"opsbook-hello.service\"\n\"_TRANSPORT\":\"stdout\"\n\"_UID\":\"0\"\n"
    );
}

/// Makes the image `localhost/opsbook-sleep:test` on the host from the host's own files:
/// `sleep` and the libraries it loads, imported (no registry is reachable from a test host).
const MAKE_IMAGE: &str = "set -e
dir=$(mktemp -d)
for f in /usr/bin/sleep $(ldd /usr/bin/sleep | grep -o '/[^ ]*'); do
  mkdir -p \"$dir$(dirname \"$f\")\"
  cp -L \"$f\" \"$dir$f\"
done
tar -C \"$dir\" -c . | podman import --quiet - localhost/opsbook-sleep:test >/dev/null
rm -rf \"$dir\"
";

#[test]
fn a_quadlet_container_from_an_image_made_on_the_host_runs_as_a_system_unit() {
    // Containers change the machine's cgroups, which other tests' private hosts use: none of
    // those run meanwhile (`support::cgroups_exclusive`).
    let _cgroups = crate::support::cgroups_exclusive();
    let Some(fleet) = boot(&["d13c1"]) else { return };
    let host: &Debian13Host = fleet.host("d13c1");
    host.ssh_ok(MAKE_IMAGE);
    // A Quadlet unit as an operator writes one: Quadlet's generator makes the system service
    // at daemon-reload. No network: the image needs none, and no bridge is to be made. An init
    // in the container (catatonit) passes the stop's SIGTERM on (`sleep` as PID 1 would
    // ignore it until podman's SIGKILL 10 s later), and the container then exits 143, which
    // is a clean stop here (Quadlet does not say so itself).
    let unit = "[Unit]\nDescription=opsbook test sleeper\n[Container]\nImage=localhost/opsbook-sleep:test\n\
                Exec=/usr/bin/sleep infinity\nNetwork=none\nRunInit=true\n[Service]\nSuccessExitStatus=143\n\
                [Install]\nWantedBy=multi-user.target\n";
    host.ssh_ok(&format!(
        "mkdir -p /etc/containers/systemd && printf '%s' '{unit}' > /etc/containers/systemd/opsbook-sleeper.container && \
         systemctl daemon-reload && systemctl start opsbook-sleeper.service"
    ));
    let seen = host.ssh_ok(
        "systemctl is-active opsbook-sleeper.service; systemctl show -P SourcePath opsbook-sleeper.service; \
         systemctl show -P ControlGroup opsbook-sleeper.service; \
         podman ps --format '{{.Names}} {{.Image}} {{.State}}'; \
         podman inspect --format '{{.Config.Labels.PODMAN_SYSTEMD_UNIT}}' systemd-opsbook-sleeper; \
         podman info --format '{{.Host.OCIRuntime.Name}} cgroups {{.Host.CgroupsVersion}}'; podman --version",
    );
    assert_matches(
        "active\n/etc/containers/systemd/opsbook-sleeper\\.container\n/system\\.slice/opsbook-sleeper\\.service\n\
         systemd-opsbook-sleeper localhost/opsbook-sleep:test running\nopsbook-sleeper\\.service\n\
         crun cgroups v2\npodman version 5\\.4\\.[0-9]+\n",
        &seen,
        "the Quadlet unit and its container",
    );
    // Its container's process is the unit's: stopping the unit ends the container.
    assert_eq!(
        host.ssh_ok(
            "systemctl stop opsbook-sleeper.service; systemctl is-active opsbook-sleeper.service; \
             podman ps --all --format '{{.Names}}' | wc -l"
        ),
        "inactive\n0\n"
    );
}

#[test]
fn opsbook_reads_each_host_s_system_manager_over_ssh() {
    let Some(fleet) = boot(&["d13srv", "d13c1", "d13c2"]) else { return };
    let t = Test::new().config(&fleet.config_toml("", |_| Vec::new())).runbook(
        "sshd",
        "check(`ssh.service on ${hostname()}`, unit::is_active(\"ssh\"), \"\");\n\
             check(\"the system journal's daemon\", unit::is_active(\"systemd-journald\"), \"\");\n",
    );
    // The system units of each host, as its system manager tells them over ssh; a check that
    // took long shows its time (`⏱`).
    let section = |h: &str| {
        format!(
            "sshd on {h} (runbooks/sshd.rhai)\n  ok    ssh.service on {h}⏱\n  ok    the system journal's daemon⏱\n\n\
             2 passed, 0 failed  ([DUR])\n\n"
        )
    };
    t.args(["run", "sshd", "--hosts", "debian13"]).run().code(0).stdout_matches(&timed(&format!(
        "{}{}{}HOST    ROLES  PASSED  FAILED  TIME\nd13c1   -      2       0       [DUR]\n\
         d13c2   -      2       0       [DUR]\nd13srv  -      2       0       [DUR]\n\n3 host(s): all passed  ([DUR])\nssh connections: № reused, № new\n",
        section("d13c1"),
        section("d13c2"),
        section("d13srv")
    )));
}
