//! The verbs lifecycle runbooks change a host with — `file::`, `template::`, `unit::install`
//! and friends, `account::` — through `opsbook run`: on this machine (writes, diffs with
//! secrets masked, the one backup, dry runs that write nothing, a write that fails half-way
//! leaving the old file), in the sandbox (its private directory; accounts refused), and on a
//! real host of the test fleet over ssh (a unit installed, enabled and running there, a
//! system user created there, and none of it seen on the other host or on this machine).

use std::os::unix::fs::PermissionsExt;

use crate::support::fleet::Fleet;
use crate::support::private_host::PrivateHost;
use crate::support::{Test, run_in};

const CONFIG: &str = "[metrics_db]\ntoken = \"cfg-token-9f3e\"\n";

const WRITES: &str = r#"
let dir = param("dir", "");
file::mkdir(dir, #{mode: "0750"});
let path = `${dir}/agent.conf`;
let text = "url = \"http://db:8086\"\ntoken = \"cfg-token-9f3e\"\nbucket = \"telegraf\"\n";
let first = file::write(path, text, #{mode: "0640"});
check("created, nothing to back up", first.changed && first.backup == ());
print(first.diff);
let same = file::write(path, text, #{mode: "0640"});
check("the same text is no change", !same.changed && same.diff == "" && same.backup == ());
let changed = "url = \"http://db:8087\"\ntoken = \"cfg-token-9f3e\"\nbucket = \"metrics\"\npassword = \"pw-77aa\"\n";
let second = file::write(path, changed, #{secrets: ["pw-77aa"]});
print(second.diff);
check("the old version is kept", second.backup == `${path}.opsbook-backup` && file::read(second.backup) == text);
let mode = file::write(path, file::read(path), #{mode: "0600"});
print(mode.diff);
check("a mode change alone is a change", mode.changed && mode.backup == ());
"#;

fn expected_writes(dir: &str) -> String {
    format!(
        "writes (runbooks/writes.rhai)
  changed {dir}: directory created (mode 0750)
  changed {dir}/agent.conf: created (3 lines, mode 0640)
  ok    created, nothing to back up
  --- /dev/null
+++ {dir}/agent.conf (mode 0640)
@@ -0,0 +1,3 @@
+url = \"http://db:8086\"
+token = \"********\"
+bucket = \"telegraf\"

  ok    the same text is no change
  changed {dir}/agent.conf: 3 lines added, 2 removed (previous version kept as {dir}/agent.conf.opsbook-backup)
  --- {dir}/agent.conf
+++ {dir}/agent.conf
@@ -1,3 +1,4 @@
-url = \"http://db:8086\"
+url = \"http://db:8087\"
 token = \"********\"
-bucket = \"telegraf\"
+bucket = \"metrics\"
+password = \"********\"

  ok    the old version is kept
  changed {dir}/agent.conf: mode 0640 → 0600
  --- {dir}/agent.conf
+++ {dir}/agent.conf (mode 0640 → 0600)

  ok    a mode change alone is a change

4 passed, 0 failed  ([DUR])
"
    )
}

#[track_caller]
fn mode_of(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o7777
}

#[test]
fn a_write_shows_a_masked_diff_keeps_one_backup_and_an_unchanged_file_is_left_alone() {
    let t = Test::new().config(CONFIG).runbook("writes", WRITES);
    let dir = t.path().join("etc/agent");
    let set = format!("dir={}", dir.display());
    let out = run_in(t.path(), &["run", "writes", "--set", &set], None);
    out.code(0).stdout_is(&expected_writes("[TMP]/etc/agent"));
    let file = dir.join("agent.conf");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "url = \"http://db:8087\"\ntoken = \"cfg-token-9f3e\"\nbucket = \"metrics\"\npassword = \"pw-77aa\"\n"
    );
    assert_eq!((mode_of(&file), mode_of(&dir.join("agent.conf.opsbook-backup")), mode_of(&dir)), (0o600, 0o640, 0o750));
    // No temporary file is left beside them.
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["agent.conf", "agent.conf.opsbook-backup"]);

    let removal = "let p = param(\"dir\", \"\") + \"/agent.conf\";\nlet r = file::remove(p);\n\
                   check(\"removed with its backup\", r.changed && !file::exists(p + \".opsbook-backup\") && file::read(p) == ());\n\
                   check(\"removing again is no change\", !file::remove(p).changed);\n";
    std::fs::write(t.path().join("runbooks/removal.rhai"), removal).unwrap();
    run_in(t.path(), &["run", "removal", "--set", &set], None).code(0).stdout_is(
        "removal (runbooks/removal.rhai)
  changed [TMP]/etc/agent/agent.conf: removed
  ok    removed with its backup
  ok    removing again is no change

2 passed, 0 failed  ([DUR])
",
    );
}

#[test]
fn a_dry_run_shows_the_diff_and_writes_nothing() {
    let t = Test::new().config(CONFIG).runbook(
        "dry",
        "let dir = param(\"dir\", \"\");\nlet r = file::write(`${dir}/app.conf`, \"token = \\\"cfg-token-9f3e\\\"\\n\", #{mode: \"0640\"});\n\
         check(\"would change\", r.changed && r.dry_run);\nlet d = file::mkdir(`${dir}/state`);\ncheck(\"would make it\", d.changed && d.dry_run);\n",
    );
    std::fs::create_dir(t.path().join("etc")).unwrap();
    let set = format!("dir={}", t.path().join("etc").display());
    run_in(t.path(), &["run", "dry", "--dry-run", "--set", &set], None).code(0).stdout_is(
        "dry (runbooks/dry.rhai)  (dry run: nothing will be changed)
  plan: would write [TMP]/etc/app.conf: created (1 line, mode 0640)
--- /dev/null
+++ [TMP]/etc/app.conf (mode 0640)
@@ -0,0 +1 @@
+token = \"********\"
  ok    would change
  plan: would make directory [TMP]/etc/state: created
  ok    would make it

2 passed, 0 failed  ([DUR])
",
    );
    assert_eq!(std::fs::read_dir(t.path().join("etc")).unwrap().count(), 0, "the dry run wrote something");
}

#[test]
fn a_write_that_fails_half_way_leaves_the_old_file_and_no_temporary_one() {
    // A 64 KiB tmpfs in a mount namespace of its own: the 200 KB write runs out of space
    // after the temporary file was created and partly written.
    let t = Test::new().runbook(
        "big",
        "let line = \"a line of a configuration file that is much too big\\n\";\nlet text = \"\";\n\
         for i in 0..4000 { text += line; }\nfile::write(param(\"dir\", \"\") + \"/app.conf\", text);\n",
    );
    let dir = t.path().join("full");
    std::fs::create_dir(&dir).unwrap();
    let script = "set -e\nmount -t tmpfs -o size=64k tmpfs \"$1\"\nprintf 'old = 1\\n' > \"$1/app.conf\"\n\
                  \"$2\" run big --set \"dir=$1\" || echo \"exit status $?\"\nls -A \"$1\"\ncat \"$1/app.conf\"\n";
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&dir)
        .arg(crate::support::opsbook())
        .current_dir(t.path())
        .env("HOME", t.path())
        // This test's own lock of this machine, as `Test::command` gives every run.
        .env("OPSBOOK_LOCK_DIR", t.path().join(".lock"))
        .output()
        .expect("unshare");
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unshare") {
        return crate::support::skip(format!("no mount namespace: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let seen = crate::support::mask(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        seen,
        "big (runbooks/big.rhai)

aborted: cannot write [TMP]/full/app.conf: No space left on device (os error 28)

0 passed, 0 failed  ([DUR])
exit status 1
app.conf
old = 1
",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn templates_are_found_beside_the_runbooks_and_an_undefined_variable_is_pointed_at() {
    let t = Test::new()
        .file("templates/agent/telegraf.conf.j2", "[agent]\n  interval = \"{{ interval }}\"\n{% for u in urls %}\nurl = \"{{ u }}\"\n{% endfor %}\n")
        .runbook(
            "render",
            "let text = template::render(\"agent/telegraf.conf.j2\", #{interval: \"1m\", urls: [\"http://a:8086\", \"http://b:8086\"]});\n\
             print(text);\nprint(template::render_string(\"{{ name | upper }}\", #{name: \"loki\"}));\n\
             print(template::list());\ntemplate::render(\"agent/telegraf.conf.j2\", #{interval: \"1m\"});\n",
        );
    t.args(["run", "render"]).run().code(1).stdout_is(
        "render (runbooks/render.rhai)
  [agent]
  interval = \"1m\"
url = \"http://a:8086\"
url = \"http://b:8086\"

  LOKI
  [#{\"name\": \"agent/telegraf.conf.j2\", \"origin\": \"templates/agent/telegraf.conf.j2\"}, #{\"name\": \"log-shipper/config.alloy.j2\", \"origin\": \"built-in\"}, #{\"name\": \"log-store/config.yaml.j2\", \"origin\": \"built-in\"}, #{\"name\": \"metrics-agent/telegraf.conf.j2\", \"origin\": \"built-in\"}, #{\"name\": \"metrics-db/config.toml.j2\", \"origin\": \"built-in\"}, #{\"name\": \"units/dropin.conf.j2\", \"origin\": \"built-in\"}, #{\"name\": \"units/native.service.j2\", \"origin\": \"built-in\"}, #{\"name\": \"units/podman-run.service.j2\", \"origin\": \"built-in\"}, #{\"name\": \"units/quadlet.container.j2\", \"origin\": \"built-in\"}]

aborted: template variable `urls` is not defined
 --> templates/agent/telegraf.conf.j2:3:13
  |
3 | {% for u in urls %}
  |             ^
  = help: pass it in the variables map: template::render(…, #{urls: …})

0 passed, 0 failed  ([DUR])
",
    );
}

#[test]
fn opsbook_templates_lists_each_template_with_where_it_is_found_and_prints_one() {
    let t = Test::new()
        .file("templates/log-store/config.yaml.j2", "port: {{ port }}\n")
        .file("elsewhere/templates/log-store/config.yaml.j2", "shadowed\n")
        .file("elsewhere/templates/agent/telegraf.conf.j2", "[agent]\n");
    let elsewhere = t.path().join("elsewhere/runbooks");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let dir = elsewhere.display().to_string();
    run_in(t.path(), &["--runbooks", &dir, "templates"], None).code(0).stdout_is(
        "NAME                            FROM
agent/telegraf.conf.j2          [TMP]/elsewhere/templates/agent/telegraf.conf.j2
log-shipper/config.alloy.j2     <built-in>/templates/log-shipper/config.alloy.j2
log-store/config.yaml.j2        [TMP]/elsewhere/templates/log-store/config.yaml.j2
metrics-agent/telegraf.conf.j2  <built-in>/templates/metrics-agent/telegraf.conf.j2
metrics-db/config.toml.j2       <built-in>/templates/metrics-db/config.toml.j2
units/dropin.conf.j2            <built-in>/templates/units/dropin.conf.j2
units/native.service.j2         <built-in>/templates/units/native.service.j2
units/podman-run.service.j2     <built-in>/templates/units/podman-run.service.j2
units/quadlet.container.j2      <built-in>/templates/units/quadlet.container.j2
",
    );
    run_in(t.path(), &["templates", "log-store/config.yaml.j2"], None).code(0).stdout_is("port: {{ port }}\n");
    run_in(t.path(), &["templates", "nope.j2"], None)
        .code(2)
        .stderr_is("error: no template `nope.j2` (`opsbook templates` lists them)\n");
}

#[test]
fn in_the_sandbox_files_stay_in_its_private_directory_and_accounts_are_refused() {
    let t = Test::new().runbook(
        "sbx",
        "file::mkdir(\"/etc/opsbook-sandbox-test\");\nlet r = file::write(\"/etc/opsbook-sandbox-test/app.conf\", \"x = 1\\n\");\n\
         check(\"written there\", r.changed && file::read(\"/etc/opsbook-sandbox-test/app.conf\") == \"x = 1\\n\");\n\
         let u = unit::install(\"demo\", \"[Service]\\nExecStart=/bin/true\\n\");\ncheck(\"unit file written\", u.path == \"/etc/systemd/system/demo.service\");\n\
         try { unit::enable(\"demo\"); } catch (e) { print(e); }\naccount::ensure_user(\"demo\");\n",
    );
    t.args(["run", "sbx", "--sandbox"]).run().code(1).stdout_is(
        "sbx (runbooks/sbx.rhai)  [sandbox: in-process stack]
  changed /etc/opsbook-sandbox-test: directory created
  changed /etc/opsbook-sandbox-test/app.conf: created (1 line, mode 0644)
  ok    written there
  changed /etc/systemd/system/demo.service: created (2 lines, mode 0644)
  ok    unit file written
  the sandbox runs only the stack's own units (alloy.service, influxdb.service, loki.service, telegraf.service); `demo.service` is not one of them, so it cannot be enabled

aborted: account::ensure_user is not available in the sandbox: it has no user database of its own, and this machine's is not the sandbox's to change
  help: run the runbook against a real host (without --sandbox)

2 passed, 0 failed  ([DUR])
",
    );
    assert!(!std::path::Path::new("/etc/opsbook-sandbox-test").exists(), "the sandbox wrote to this machine's /etc");
    assert!(!std::path::Path::new("/etc/systemd/system/demo.service").exists());
}

const DEPLOY: &str = r#"
let g = account::ensure_group("opsdemo");
let u = account::ensure_user("opsdemo", #{group: "opsdemo", home: "/var/lib/opsdemo"});
check("account created", g.changed && u.changed);
check("asking again changes nothing", !account::ensure_user("opsdemo", #{group: "opsdemo", home: "/var/lib/opsdemo"}).changed);
file::mkdir("/var/lib/opsdemo", #{mode: "0750", owner: "opsdemo", group: "opsdemo"});
file::mkdir("/etc/opsdemo");
file::write("/etc/opsdemo/app.conf", template::render_string("greeting = {{ greeting }}\n", #{greeting: "hello from " + hostname()}),
    #{mode: "0640", group: "opsdemo"});
let i = unit::install("opsdemo", "[Unit]\nDescription=opsbook demo\n[Service]\nExecStart=/bin/sh -c 'cat /etc/opsdemo/app.conf; exec sleep infinity'\n[Install]\nWantedBy=default.target\n");
check("unit file installed", i.changed && i.path == "/run/user/0/home/.config/systemd/user/opsdemo.service", i.path);
unit::install_dropin("opsdemo", "limits", "[Service]\nLimitNOFILE=4096\n");
unit::daemon_reload();
let e = unit::enable("opsdemo", #{now: true});
check("enabled and started", e.changed && unit::is_active("opsdemo") && unit::is_enabled("opsdemo"), e.changes);
check("enabling again changes nothing", !unit::enable("opsdemo", #{now: true}).changed);
let wanted = [
    #{path: "/etc/opsdemo", dir: true},
    #{path: "/etc/opsdemo/app.conf", content: "greeting = hello from c1\n", mode: "0640", group: "opsdemo"},
    #{path: unit::path("opsdemo") + ".d/limits.conf", content: "[Service]\nLimitNOFILE=4096\n", mode: "0644"},
    #{path: "/var/lib/opsdemo", dir: true, mode: "0750", owner: "opsdemo", group: "opsdemo"},
];
let same = file::compare(wanted);
check("all as written, read in one call", same.same && same.differing.is_empty(), same.differing);
wanted[1].content = "greeting = changed\n";
wanted[1].mode = "0600";
wanted.push(#{path: "/etc/opsdemo/absent.conf", content: ""});
wanted.push(#{path: "/etc/opsdemo", content: "x"});
let differs = file::compare(wanted);
check("what differs is named", !differs.same, differs.differing);
"#;

const REMOVE: &str = r#"
let d = unit::disable("opsdemo", #{now: true});
check("stopped and disabled", d.changed && !unit::is_active("opsdemo"), d.changes);
let u = unit::uninstall("opsdemo");
unit::daemon_reload();
check("uninstalled", u.changed && unit::status("opsdemo").load_state == "not-found", unit::status("opsdemo"));
check("uninstalling again changes nothing", !unit::uninstall("opsdemo").changed);
"#;

/// What `deploy` reports on c1; `⏱` marks where a slow check shows its time.
const DEPLOYED: &str = "deploy on c1 (runbooks/deploy.rhai)
  changed group opsdemo: created (system group)
  changed user opsdemo: created (system user, group opsdemo, home /var/lib/opsdemo, shell /usr/sbin/nologin)
  ok    account created⏱
  ok    asking again changes nothing⏱
  changed /var/lib/opsdemo: directory created (mode 0750, owner opsdemo, group opsdemo)
  changed /etc/opsdemo: directory created
  changed /etc/opsdemo/app.conf: created (1 line, mode 0640, group opsdemo)
  changed /run/user/0/home/.config/systemd/user: directory created
  changed /run/user/0/home/.config/systemd/user/opsdemo.service: created (6 lines, mode 0644)
  ok    unit file installed — /run/user/0/home/.config/systemd/user/opsdemo.service⏱
  changed /run/user/0/home/.config/systemd/user/opsdemo.service.d: directory created
  changed /run/user/0/home/.config/systemd/user/opsdemo.service.d/limits.conf: created (2 lines, mode 0644)
  changed: the service manager re-read its unit files (daemon-reload)
  changed: created symlink /run/user/0/home/.config/systemd/user/default.target.wants/opsdemo.service → /run/user/0/home/.config/systemd/user/opsdemo.service
  changed: started opsdemo.service
  ok    enabled and started — [\"created symlink /run/user/0/home/.config/systemd/user/default.target.wants/opsdemo.service → /run/user/0/home/.config/systemd/user/opsdemo.service\", \"started opsdemo.service\"]⏱
  ok    enabling again changes nothing⏱
  ok    all as written, read in one call — []⏱
  ok    what differs is named — [\"/etc/opsdemo/app.conf: content, mode 0640 → 0600\", \"/etc/opsdemo/absent.conf: absent\", \"/etc/opsdemo: a directory\"]⏱

7 passed, 0 failed  ([DUR])

HOST  ROLES  PASSED  FAILED  TIME
c1    -      7       0       [DUR]

1 host(s): all passed  ([DUR])
ssh connections: № reused, № new
";

const REMOVED: &str = "remove on c1 (runbooks/remove.rhai)
  changed: stopped opsdemo.service
  changed: removed /run/user/0/home/.config/systemd/user/default.target.wants/opsdemo.service
  ok    stopped and disabled — [\"stopped opsdemo.service\", \"removed /run/user/0/home/.config/systemd/user/default.target.wants/opsdemo.service\"]⏱
  changed /run/user/0/home/.config/systemd/user/opsdemo.service: removed
  changed /run/user/0/home/.config/systemd/user/opsdemo.service.d: directory removed
  changed: the service manager re-read its unit files (daemon-reload)
  ok    uninstalled — opsdemo.service - not installed (load state not-found)⏱
  ok    uninstalling again changes nothing⏱

3 passed, 0 failed  ([DUR])

HOST  ROLES  PASSED  FAILED  TIME
c1    -      3       0       [DUR]

1 host(s): all passed  ([DUR])
ssh connections: № reused, № new
";

/// `expected` as a whole-text pattern in which each `⏱` may be a check's `  ([DUR])`.
fn timed(expected: &str) -> String {
    // How many ssh connections a run reused depends on the runs before it (`№`: a count).
    regex::escape(expected).replace('⏱', r"(?:  \(\[DUR\]\))?").replace('№', r"\d+")
}

#[test]
fn on_a_fleet_host_a_unit_is_installed_enabled_and_running_and_a_system_user_made_there_only() {
    let fleet = match Fleet::boot(&["c1", "c2"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let (c1, c2) = (fleet.host("c1"), fleet.host("c2"));
    let t = Test::new().runbook("deploy", DEPLOY).runbook("remove", REMOVE).config(&format!(
        "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n\
         [hosts.c1]\naddress = \"{}\"\nuser = \"root\"\nkey = \"{}\"\n",
        c1.address(),
        c1.key().display()
    ));
    run_in(t.path(), &["run", "deploy", "--hosts", "c1"], None).code(0).stdout_matches(&timed(DEPLOYED));
    assert_eq!(c1.read_file("/etc/opsdemo/app.conf").as_deref(), Some("greeting = hello from c1\n"));
    assert_eq!(
        c1.ok(&["stat", "-c", "%a %U %G", "/etc/opsdemo/app.conf", "/var/lib/opsdemo"]),
        "640 root opsdemo\n750 opsdemo opsdemo\n"
    );
    assert_eq!(c1.ok(&["systemctl", "--user", "is-active", "opsdemo"]), "active\n");
    assert_eq!(c1.ok(&["systemctl", "--user", "show", "opsdemo", "-p", "LimitNOFILE"]), "LimitNOFILE=4096\n");
    let user = c1.ok(&["getent", "passwd", "opsdemo"]);
    assert!(user.ends_with(":/var/lib/opsdemo:/usr/sbin/nologin\n"), "{user}");
    // Nothing of it on the other host, nor on this machine.
    assert_eq!(c2.read_file("/etc/opsdemo/app.conf"), None);
    assert!(!c2.exec(&["getent", "passwd", "opsdemo"]).status.success());
    assert!(!std::path::Path::new("/etc/opsdemo").exists());
    assert!(!std::process::Command::new("getent").args(["passwd", "opsdemo"]).status().unwrap().success());

    run_in(t.path(), &["run", "remove", "--hosts", "c1"], None).code(0).stdout_matches(&timed(REMOVED));
    assert_eq!(c1.read_file("/run/user/0/home/.config/systemd/user/opsdemo.service"), None);
    assert!(!c1.exec(&["test", "-e", "/run/user/0/home/.config/systemd/user/opsdemo.service.d"]).status.success());
}

const LOCAL_UNIT: &str = r#"
let i = unit::install("localdemo", "[Unit]\nDescription=local demo\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=default.target\n");
unit::install_dropin("localdemo", "env.conf", "[Service]\nEnvironment=GREETING=hello\n");
unit::daemon_reload();
let e = unit::enable(["localdemo"], #{now: true});
check("running with its drop-in", e.changed && unit::is_active("localdemo"), e.changes);
let again = unit::install("localdemo", "[Unit]\nDescription=local demo\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=default.target\n");
check("the same unit file is no change", !again.changed);
let d = unit::disable("localdemo", #{now: true});
let u = unit::uninstall("localdemo");
unit::daemon_reload();
check("gone", d.changed && u.changed && unit::status("localdemo").load_state == "not-found");
"#;

#[test]
fn on_this_machine_a_user_unit_is_installed_in_the_users_unit_folder_and_removed_again() {
    let host = match PrivateHost::boot() {
        Ok(h) => h,
        Err(why) => return crate::support::skip(why),
    };
    let t = Test::new().runbook("local", LOCAL_UNIT);
    host.opsbook(t.path(), &["run", "local"]).code(0).stdout_matches(&timed(
        "local (runbooks/local.rhai)
  changed /run/user/0/home/.config/systemd/user: directory created
  changed /run/user/0/home/.config/systemd/user/localdemo.service: created (6 lines, mode 0644)
  changed /run/user/0/home/.config/systemd/user/localdemo.service.d: directory created
  changed /run/user/0/home/.config/systemd/user/localdemo.service.d/env.conf: created (2 lines, mode 0644)
  changed: the service manager re-read its unit files (daemon-reload)
  changed: created symlink /run/user/0/home/.config/systemd/user/default.target.wants/localdemo.service → /run/user/0/home/.config/systemd/user/localdemo.service
  changed: started localdemo.service
  ok    running with its drop-in — [\"created symlink /run/user/0/home/.config/systemd/user/default.target.wants/localdemo.service → /run/user/0/home/.config/systemd/user/localdemo.service\", \"started localdemo.service\"]⏱
  ok    the same unit file is no change⏱
  changed: stopped localdemo.service
  changed: removed /run/user/0/home/.config/systemd/user/default.target.wants/localdemo.service
  changed /run/user/0/home/.config/systemd/user/localdemo.service: removed
  changed /run/user/0/home/.config/systemd/user/localdemo.service.d: directory removed
  changed: the service manager re-read its unit files (daemon-reload)
  ok    gone⏱

3 passed, 0 failed  ([DUR])
",
    ));
}
