//! A fifth component beside the stack's four, added as an operator adds one: an entry in a
//! `components.toml`, a template and a stdlib module of its own beside a runbook folder
//! (`tests/fixtures/fifth-component/`), no other file — goes through deploy, verify, configure
//! and remove on a real host over ssh (its own systemd, network and sshd) with the stack's
//! runbooks as they are. Its program is Python's `http.server` serving the page deploy renders.
//! Skipped, saying why, without root or sshd.

use std::path::Path;

use crate::fleet_runs::{boot, opsbook};
use crate::support::{Test, mask, repo_dir};

/// `text` masked, without the time a slow check took (`  ([DUR])`, shown only past a threshold).
fn masked(text: &str) -> String {
    mask(text).replace("  ([DUR])", "")
}

/// The fixture's files copied under `to`, with the (empty) runbook folder beside them.
fn copy_fixture(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_fixture(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_component_added_by_one_table_entry_is_deployed_verified_and_removed() {
    let Some(fleet) = boot(&["web1"]) else { return };
    let host = fleet.host("web1");
    let t = Test::new();
    let added = t.path().join("added");
    copy_fixture(&repo_dir().join("tests/fixtures/fifth-component"), &added);
    std::fs::create_dir_all(added.join("runbooks")).unwrap();
    std::fs::write(
        t.path().join("opsbook.toml"),
        format!(
            "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n\
             [hosts.web1]\naddress = \"{}\"\nroles = [\"static-site\"]\nuser = \"root\"\nkey = \"{}\"\n",
            host.address(),
            host.key().display()
        ),
    )
    .unwrap();
    let runbooks = added.join("runbooks").display().to_string();
    let run = |args: &[&str]| {
        let mut all = vec!["--runbooks", &runbooks];
        all.extend_from_slice(args);
        opsbook(&t, &all)
    };

    // Its keys are the table's, as every component's.
    let config = run(&["config"]).code(0);
    for line in [
        "roles                        = \"metrics-db,log-store,web,metrics-agent,log-shipper\"  # default",
        "web.url                      = \"http://127.0.0.1:8480\"                   # default",
        "web.unit                     = \"web.service\"                             # default",
    ] {
        assert!(config.stdout.contains(line), "config lacks {line:?}:\n{}", config.stdout);
    }

    let deployed = run(&["run", "deploy", "--set", "service=web1:web"]).code(0);
    assert_eq!(masked(&deployed.stdout), DEPLOYED, "{}", deployed.stdout);
    assert_eq!(host.ok(&["systemctl", "--user", "is-active", "web"]), "active\n");

    let verified = run(&["--host", "web1", "run", "verify"]).code(0);
    assert_eq!(masked(&verified.stdout), VERIFIED, "{}", verified.stdout);

    // A new page: configure renders it, shows the difference, writes it and restarts the
    // server (its reload rule), then proves the page served is the new one.
    let template = added.join("templates/web/index.html.j2");
    let page = std::fs::read_to_string(&template).unwrap();
    std::fs::write(&template, page.replace("deployed by opsbook", "configured by opsbook")).unwrap();
    let configured = run(&["run", "configure", "--set", "service=web1:web"]).code(0);
    assert_eq!(masked(&configured.stdout), CONFIGURED, "{}", configured.stdout);
    assert!(host.ok(&["cat", "/var/lib/web/index.html"]).contains("configured by opsbook"));

    // Its plan while it is stopped: nothing applied, so readiness is the real run's to judge
    // (the plan used to wait out the minute's deadline for it).
    host.ok(&["systemctl", "--user", "stop", "web"]);
    std::fs::write(&template, page.replace("deployed by opsbook", "planned by opsbook")).unwrap();
    let planned = run(&["run", "configure", "--dry-run", "--set", "service=web1:web"]).code(0);
    assert_eq!(masked(&planned.stdout), PLANNED, "{}", planned.stdout);

    let removed = run(&["run", "remove", "--set", "service=web1:static-site"]).code(0);
    assert_eq!(masked(&removed.stdout), REMOVED, "{}", removed.stdout);
    assert_eq!(
        host.ok(&["sh", "-c", "ls /var/lib/web; systemctl --user list-unit-files --no-legend 'web*' | wc -l"]),
        "0\n"
    );
}

const DEPLOYED: &str = "deploy on web1 (<built-in>/runbooks/deploy.rhai)

== configuration of web
  ok    configuration rendered from web/index.html.j2
  skip  configuration validated offline — the web server has no offline check: its health after the start is the check
  changed /var/lib/web: directory created (mode 0750)
  changed /var/lib/web: mode 0750 → 0755
  changed /var/lib/web/index.html: created (3 lines, mode 0640)

== unit web.service
  changed /run/user/0/home/.config/systemd/user: directory created
  changed /run/user/0/home/.config/systemd/user/web.service: created (14 lines, mode 0644)
  changed: the service manager re-read its unit files (daemon-reload)
  changed: created symlink /run/user/0/home/.config/systemd/user/default.target.wants/web.service → /run/user/0/home/.config/systemd/user/web.service
  changed=5: data directory /var/lib/web, configuration /var/lib/web/index.html, unit web.service, enabled, started

== readiness
  ok    web ready
  ok    web.service active — active (running)
  ok    web server answers — 200

== web: evidence made after the change
  ok    the page served is the file written by the change

5 passed, 0 failed, 1 skipped

HOST  ROLES  PASSED  FAILED  TIME
web1  web    5       0       [DUR]

1 host(s): all passed
ssh connections: 0 reused, 1 new
";
const VERIFIED: &str = "verify on web1 (<built-in>/runbooks/verify.rhai)

== web server
  ok    web.service active — active (running)
  ok    its page names web1

2 passed, 0 failed

HOST  ROLES  PASSED  FAILED  TIME
web1  web    2       0       [DUR]

1 host(s): all passed
ssh connections: 1 reused, 0 new
";
const CONFIGURED: &str = "configure on web1 (<built-in>/runbooks/configure.rhai)

== configuration of web
  ok    configuration rendered from web/index.html.j2
  --- /var/lib/web/index.html
+++ /var/lib/web/index.html
@@ -1,3 +1,3 @@
 <!doctype html>
 <html><head><title>web1</title></head>
-<body><p>static web server on web1, deployed by opsbook</p></body></html>
+<body><p>static web server on web1, configured by opsbook</p></body></html>

  skip  configuration validated offline — the web server has no offline check: its health after the start is the check
  changed /var/lib/web/index.html: 1 line added, 1 removed (previous version kept as /var/lib/web/index.html.opsbook-backup)

== apply to web.service
  changed=1: configuration /var/lib/web/index.html
  ok    web ready
  ok    web.service active — active (running)
  ok    web server answers — 200

== web: evidence made after the change
  ok    the page served is the file written by the change

5 passed, 0 failed, 1 skipped

HOST  ROLES  PASSED  FAILED  TIME
web1  web    5       0       [DUR]

1 host(s): all passed
ssh connections: 1 reused, 0 new
";
const PLANNED: &str = "configure on web1 (<built-in>/runbooks/configure.rhai)  (dry run: nothing will be changed)

== configuration of web
  ok    configuration rendered from web/index.html.j2
  skip  configuration validated offline — the web server has no offline check: its health after the start is the check
  plan: would write /var/lib/web/index.html: 1 line added, 1 removed
--- /var/lib/web/index.html
+++ /var/lib/web/index.html
@@ -1,3 +1,3 @@
 <!doctype html>
 <html><head><title>web1</title></head>
-<body><p>static web server on web1, configured by opsbook</p></body></html>
+<body><p>static web server on web1, planned by opsbook</p></body></html>

== apply to web.service
  plan: would restart web.service
  would change 1: configuration /var/lib/web/index.html
  skip  web ready — not answering now, and a dry run applies nothing: the real run waits up to [DUR] for it

1 passed, 0 failed, 2 skipped

HOST  ROLES  PASSED  FAILED  TIME
web1  web    1       0       [DUR]

1 host(s): all passed
ssh connections: 1 reused, 0 new
";
const REMOVED: &str = "remove on web1 (<built-in>/runbooks/remove.rhai)

== stop web.service
  changed: removed /run/user/0/home/.config/systemd/user/default.target.wants/web.service

== files
  changed /run/user/0/home/.config/systemd/user/web.service: removed
  changed: the service manager re-read its unit files (daemon-reload)
  changed /var/lib/web/index.html: removed
  data kept in /var/lib/web (--set purge=true removes it)
  changed=3: disabled, unit web.service, configuration /var/lib/web/index.html

== gone
  ok    web.service unknown to the service manager
  ok    /var/lib/web/index.html removed
  ok    port 8480 closed

3 passed, 0 failed

HOST  ROLES  PASSED  FAILED  TIME
web1  web    3       0       [DUR]

1 host(s): all passed
ssh connections: 1 reused, 0 new
";
