//! The orchestrator scripts as an operator calls them: installed with `opsbook scripts
//! --install DIR`, then run with no terminal (setsid) against the sandbox's simulated fleet
//! (`--sandbox --fleet 1`: a `server` and a client `c1`) — verify in both argument orders, a
//! restart refused without a terminal and applied with `-y`, failed runs keeping their
//! command, plan and report in the state directory, deploy/remove/prepare mapped onto their
//! runbooks — and against the test fleet over real ssh. shellcheck checks both scripts and
//! the body they share (`lib/opsbook-scripts.sh`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::{Test, mask, skip};

const NAMES: [&str; 2] = ["manage-svc.sh", "svc-exec.sh"];
/// The body both scripts source.
const LIB: &str = "lib/opsbook-scripts.sh";

/// Installs the scripts into `DIR/bin` as an operator would; that directory.
#[track_caller]
pub(crate) fn installed(t: &Test) -> PathBuf {
    let bin = t.path().join("bin");
    let out = crate::support::run_in(t.path(), &["scripts", "--install", "bin"], None).code(0);
    assert_eq!(
        out.stdout,
        "wrote bin/manage-svc.sh (mode 0755)\nwrote bin/svc-exec.sh (mode 0755)\nwrote bin/lib/opsbook-scripts.sh (mode \
         0644)\n"
    );
    bin
}

/// What a script run gave: its exit code and its two outputs.
pub(crate) struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a script with no terminal (its own session, stdin from /dev/null), as from cron or CI,
/// with `$OPSBOOK` naming the opsbook under test.
#[track_caller]
pub(crate) fn script(t: &Test, bin: &Path, name: &str, args: &[&str]) -> Ran {
    run_script(t, bin, name, args, true)
}

/// `script`, without `$OPSBOOK` when `!named` (the script then finds the opsbook beside it).
#[track_caller]
fn run_script(t: &Test, bin: &Path, name: &str, args: &[&str], named: bool) -> Ran {
    let mut command = Command::new("setsid");
    command.env_clear();
    if named {
        command.env("OPSBOOK", crate::support::opsbook());
    }
    let out = command
        .arg("-w")
        .arg(bin.join(name))
        .args(args)
        .current_dir(t.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path())
        .env("XDG_STATE_HOME", t.path().join(".state"))
        .stdin(Stdio::null())
        .output()
        .expect("run the script");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ran { code: out.status.code().unwrap_or(-1), stdout: text(&out.stdout), stderr: text(&out.stderr) }
}

/// What varies from run to run: durations and temporary paths (`mask`), dates and times.
fn masked(text: &str) -> String {
    let when = regex::Regex::new(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC|\d{8}T\d{6}Z").unwrap();
    let benign = regex::Regex::new(r" — ignored \d+ known-benign line\(s\) \(stdlib/benign\.rhai\)").unwrap();
    // A check's own duration is shown only when it took long enough to notice.
    let slow = regex::Regex::new(r"(?m)^(  (?:ok|FAIL|warn|skip) .*)  \(\[DUR\]\)$").unwrap();
    let text = mask(text);
    let text = slow.replace_all(&text, "$1");
    let text = when.replace_all(&text, "[WHEN]");
    benign.replace_all(&text, "").into_owned()
}

/// `verify` of the metrics database on the host `server` (`sandbox`: the sandbox's banner).
fn verify_server(sandbox: &str) -> String {
    format!(
        "verify-metrics-db on server (<built-in>/runbooks/verify-metrics-db.rhai){sandbox}

== metrics database
  ok    influxdb.service active — active (running)
  ok    metrics database /health answers 200 — HTTP 200, ready for queries and writes (v2.7.11)
  ok    authenticated bucket listing
  ok    recent data in telegraf (last 5m) — the newest point [DUR] old
  ok    storage backend — local disk: engine at /var/lib/influxdb2/engine

5 passed, 0 failed  ([DUR])

HOST    ROLES                  PASSED  FAILED  TIME
server  metrics-db, log-store  5       0       [DUR]

1 host(s): all passed  ([DUR])
"
    )
}

#[test]
fn installed_scripts_verify_a_service_in_either_argument_order_and_shellcheck_accepts_them() {
    let t = Test::new();
    let bin = installed(&t);
    for (name, mode) in [(NAMES[0], 0o755), (NAMES[1], 0o755), (LIB, 0o644)] {
        let path = bin.join(name);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, mode, "{name}");
        let shipped = std::fs::read_to_string(crate::support::repo_dir().join("scripts").join(name)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), shipped, "{name}");
    }
    let ran = script(&t, &bin, "svc-exec.sh", &["verify", "server:influxdb", "--sandbox", "--fleet", "1"]);
    let sandbox = verify_server("  [sandbox: in-process stack]");
    assert_eq!((ran.code, masked(&ran.stdout), ran.stderr.as_str()), (0, sandbox.clone(), ""));
    // The Ansible-era order and an operator's role name: the same run, here by the opsbook
    // installed beside the script.
    std::os::unix::fs::symlink(crate::support::opsbook(), bin.join("opsbook")).unwrap();
    let args = ["-h", "server", "metrics_db", "verify", "--sandbox", "--fleet", "1"];
    let ran = run_script(&t, &bin, "svc-exec.sh", &args, false);
    assert_eq!((ran.code, masked(&ran.stdout), ran.stderr.as_str()), (0, sandbox, ""));
    // Nothing kept from runs that passed.
    assert!(!t.path().join(".state/opsbook/runs").exists());

    match ["/usr/bin/shellcheck", "/bin/shellcheck"].iter().find(|p| Path::new(p).exists()) {
        None => skip("shellcheck is missing (apt-get install shellcheck)"),
        Some(shellcheck) => {
            let out = Command::new(shellcheck).args([NAMES[0], NAMES[1], LIB].map(|n| bin.join(n))).output().unwrap();
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && said.is_empty(), "shellcheck: {said}");
        }
    }
}

const PLAN: &str = "plan: restart of log-store on server (the same run with --dry-run; nothing changes yet)
restart on server (<built-in>/runbooks/restart.rhai)  [sandbox: in-process stack]  (dry run: nothing will be changed)

== restart loki.service
  plan: would restart loki.service
  ok    loki.service active — active (running)
  ok    loki.service ready — after [DUR]

== logs since the restart
  ok    loki.service logged no errors since [WHEN]

== log-store: evidence made after the change
  skip  log-store delivers after the change — a dry run changes nothing: nothing to prove

3 passed, 0 failed, 1 skipped  ([DUR])

HOST    ROLES                  PASSED  FAILED  TIME
server  metrics-db, log-store  3       0       [DUR]

1 host(s): all passed  ([DUR])
";

#[test]
fn a_restart_shows_its_plan_is_refused_without_a_terminal_and_applied_with_yes() {
    let t = Test::new();
    let bin = installed(&t);
    let args = ["restart", "server:loki", "--sandbox", "--fleet", "1"];
    let ran = script(&t, &bin, "svc-exec.sh", &args);
    assert_eq!(
        (ran.code, masked(&ran.stdout), ran.stderr.as_str()),
        (
            2,
            PLAN.to_string(),
            "svc-exec.sh: not applied: there is no terminal to ask \"Apply these changes to server?\"; run again \
             with --yes to apply\n"
        )
    );
    let ran = script(&t, &bin, "svc-exec.sh", &[&["-y"], &args[..]].concat());
    let applied = "restart on server (<built-in>/runbooks/restart.rhai)  [sandbox: in-process stack]

== restart loki.service
  ok    loki.service active — active (running)
  ok    loki.service ready — after [DUR]

== logs since the restart
  ok    loki.service logged no errors since [WHEN]

== log-store: evidence made after the change
  ok    a line pushed after the change is taken — accepted
  ok    the line is read back from {opsbook_probe=\"server\"} — after [DUR]

5 passed, 0 failed  ([DUR])

HOST    ROLES                  PASSED  FAILED  TIME
server  metrics-db, log-store  5       0       [DUR]

1 host(s): all passed  ([DUR])
";
    assert_eq!((ran.code, masked(&ran.stdout), ran.stderr.as_str()), (0, format!("{PLAN}{applied}"), ""));
}

/// The one run directory kept under the state directory, and its files.
#[track_caller]
fn kept(t: &Test) -> (String, Vec<String>) {
    let runs = t.path().join(".state/opsbook/runs");
    let dirs: Vec<PathBuf> = std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let mut files: Vec<String> =
        std::fs::read_dir(&dirs[0]).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    (dirs[0].display().to_string(), files)
}

#[test]
fn failed_runs_keep_their_command_plan_and_report_in_the_state_directory() {
    let t = Test::new();
    let bin = installed(&t);
    let ran = script(
        &t,
        &bin,
        "svc-exec.sh",
        &["-h", "server", "loki", "verify", "--sandbox", "--fleet", "1", "--fault", "server:log-store:down"],
    );
    let (dir, files) = kept(&t);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        masked(&ran.stderr),
        "svc-exec.sh: verify of log-store on server failed (exit 1): kept command report.json report.txt in \
         [TMP]/.state/opsbook/runs/[WHEN]-verify-server-log-store\n"
    );
    assert_eq!(files, ["command", "report.json", "report.txt"]);
    let dir = Path::new(&dir);
    assert_eq!(std::fs::read_to_string(dir.join("report.txt")).unwrap(), ran.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        (report["runbook"].as_str(), report["hosts"][0]["host"].as_str(), report["hosts"][0]["outcome"].as_str()),
        (Some("verify-log-store"), Some("server"), Some("failed")),
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("command")).unwrap(),
        format!(
            "{} run verify-log-store --host server --sandbox --fleet 1 --fault server:log-store:down \n",
            crate::support::opsbook()
        )
    );

    // A change that fails keeps its plan too.
    std::fs::remove_dir_all(t.path().join(".state")).unwrap();
    let ran = script(
        &t,
        &bin,
        "svc-exec.sh",
        &[
            "-y",
            "restart",
            "server:influxdb",
            "--sandbox",
            "--fleet",
            "1",
            "--fault",
            "metrics-db:fail-start",
            "--set",
            "deadline=1s",
        ],
    );
    let (dir, files) = kept(&t);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(files, ["command", "plan.txt", "report.json", "report.txt"]);
    let plan = std::fs::read_to_string(Path::new(&dir).join("plan.txt")).unwrap();
    assert!(
        ran.stdout.starts_with(&format!(
            "plan: restart of metrics-db on server (the same run with --dry-run; nothing changes yet)\n{plan}"
        )),
        "{}",
        ran.stdout
    );
}

#[test]
fn unknown_actions_and_roles_get_a_suggestion_and_help_is_the_usage() {
    let t = Test::new();
    let bin = installed(&t);
    let cases: [(&str, &[&str], &str); 6] = [
        (
            "svc-exec.sh",
            &["veriffy", "c1:alloy"],
            "svc-exec.sh: unknown action `veriffy`; did you mean `verify`? (actions: verify restart configure)\n",
        ),
        (
            "svc-exec.sh",
            &["-h", "c1", "alloyy", "verify"],
            "svc-exec.sh: unknown role `alloyy`; did you mean `alloy`? (roles: metrics-db (influxdb), log-store \
             (loki), metrics-agent (telegraf), log-shipper (alloy))\n",
        ),
        ("svc-exec.sh", &["verify", "c1"], "svc-exec.sh: `c1` is not HOST:ROLE (e.g. `monitor3:log-shipper`)\n"),
        (
            "manage-svc.sh",
            &["deplyo", "c1:alloy"],
            "manage-svc.sh: unknown action `deplyo`; did you mean `deploy`? (actions: deploy remove prepare)\n",
        ),
        (
            "manage-svc.sh",
            &["-h", "c1", "lokki", "remove"],
            "manage-svc.sh: unknown role `lokki`; did you mean `loki`? (roles: metrics-db (influxdb), log-store \
             (loki), metrics-agent (telegraf), log-shipper (alloy))\n",
        ),
        ("manage-svc.sh", &["deploy", "c1:alloy", "--purge"], "manage-svc.sh: `--purge` goes with `remove` only\n"),
    ];
    for (name, args, said) in cases {
        let ran = script(&t, &bin, name, args);
        assert_eq!(
            (ran.code, ran.stdout.as_str(), ran.stderr),
            (2, "", format!("{said}  (see `{name} --help`)\n")),
            "{name} {args:?}"
        );
    }
    // What the scripts rely on in opsbook: `--host` picks among the sandbox's simulated hosts
    // with `--fleet`, and is refused without it rather than reaching for a real host.
    crate::support::run_in(t.path(), &["run", "verify", "--sandbox", "--fleet", "1", "--host", "c9"], None)
        .code(2)
        .stderr_is("error: no host named `c9` in the inventory (hosts: server, c1)\n");
    crate::support::run_in(t.path(), &["run", "verify", "--sandbox", "--host", "c1"], None).code(2).stderr_is(
        "error: `--host`/`--hosts` pick inventory hosts, which `--sandbox` never touches\n  help: add `--fleet N` to \
         pick among simulated hosts (server, c1…cN)\n",
    );
    // The usage: the script's actions, the roles as opsbook names them, its plan, then what
    // both scripts say alike.
    let heredocs = |path: PathBuf| -> Vec<String> {
        let source = std::fs::read_to_string(path).unwrap();
        source.split("cat <<'EOF'\n").skip(1).map(|h| h.split("\nEOF\n").next().unwrap().to_string()).collect()
    };
    let shared = heredocs(bin.join(LIB)).remove(0);
    for name in NAMES {
        let [actions, plan] = <[String; 2]>::try_from(heredocs(bin.join(name))).unwrap();
        let usage = format!(
            "{actions}\n\nRoles: metrics-db (influxdb), log-store (loki), metrics-agent (telegraf), log-shipper \
             (alloy).\n\n{plan}\n{shared}\n"
        );
        let ran = script(&t, &bin, name, &["--help"]);
        assert_eq!((ran.code, ran.stdout, ran.stderr.as_str()), (0, usage, ""), "{name}");
    }
}

#[test]
fn scripts_install_refuses_to_overwrite_a_different_script_without_force() {
    let t = Test::new();
    let bin = installed(&t);
    let again = crate::support::run_in(t.path(), &["scripts", "--install", "bin"], None).code(0);
    assert_eq!(
        again.stdout,
        "rewrote (unchanged) bin/manage-svc.sh (mode 0755)\nrewrote (unchanged) bin/svc-exec.sh (mode 0755)\nrewrote \
         (unchanged) bin/lib/opsbook-scripts.sh (mode 0644)\n"
    );
    std::fs::write(bin.join("svc-exec.sh"), "#!/bin/sh\necho mine\n").unwrap();
    crate::support::run_in(t.path(), &["scripts", "--install", "bin"], None).code(2).stderr_is(
        "error: `bin/svc-exec.sh` exists and differs from this opsbook's svc-exec.sh: nothing written\n  help: \
         compare them (`diff`), then add `--force` to replace it\n",
    );
    assert_eq!(std::fs::read_to_string(bin.join("svc-exec.sh")).unwrap(), "#!/bin/sh\necho mine\n");
    let forced = crate::support::run_in(t.path(), &["scripts", "--install", "bin", "--force"], None).code(0);
    assert_eq!(
        forced.stdout,
        "rewrote (unchanged) bin/manage-svc.sh (mode 0755)\nreplaced bin/svc-exec.sh (mode 0755)\nrewrote (unchanged) \
         bin/lib/opsbook-scripts.sh (mode 0644)\n"
    );
    let listing = crate::support::run_in(t.path(), &["scripts"], None).code(0);
    // Where opsbook really is (its target directory may be a link, as CI's cache is).
    let real = std::fs::canonicalize(crate::support::opsbook()).unwrap();
    let dir = real.parent().unwrap().display().to_string();
    assert_eq!(
        listing.stdout,
        format!(
            "The orchestrator scripts, shipped inside this opsbook:
  manage-svc.sh           deploy or remove one service (HOST:ROLE); prepare the hosts of an environment
                          not installed beside opsbook ({dir})
  svc-exec.sh             verify, restart or reconfigure one service (HOST:ROLE)
                          not installed beside opsbook ({dir})
  lib/opsbook-scripts.sh  what both scripts share (sourced)
                          not installed beside opsbook ({dir})
Install them with `opsbook scripts --install DIR` (beside opsbook is best); `SCRIPT --help` explains each.
"
        )
    );
}

#[test]
fn manage_svc_maps_deploy_remove_and_prepare_onto_their_runbooks() {
    // Runbooks of the test's own stand in for the lifecycle ones, saying what they were given.
    let t = Test::new()
        .runbook("deploy", "//! Says what it deploys.\ncheck(`deploy ${param(\"service\", \"\")}`, true);\n")
        .runbook(
            "remove",
            "//! Says what it removes.\ncheck(`remove ${param(\"service\", \"\")} purge=${param(\"purge\", false)}`, true);\n",
        )
        .runbook("prepare", "//! Says what it prepares.\ncheck(`prepare ${param(\"environment\", \"\")}`, true);\n");
    let bin = installed(&t);
    let cases: [(&[&str], &str, &str, &str); 4] = [
        (&["deploy", "c1:alloy"], "deploy of log-shipper on c1", "deploy", "deploy c1:log-shipper"),
        (
            &["-h", "db1", "influxdb", "remove"],
            "remove of metrics-db on db1",
            "remove",
            "remove db1:metrics-db purge=false",
        ),
        (&["remove", "db1:loki", "--purge"], "remove of log-store on db1", "remove", "remove db1:log-store purge=true"),
        (&["prepare", "lab"], "prepare of the hosts of lab", "prepare", "prepare lab"),
    ];
    for (args, what, runbook, check) in cases {
        let args = [&["-y"], args, &["--sandbox", "--runbooks", "runbooks"]].concat();
        let ran = script(&t, &bin, "manage-svc.sh", &args);
        let run = |dry: &str| {
            format!(
                "{runbook} (runbooks/{runbook}.rhai)  [sandbox: in-process stack]{dry}\n  ok    {check}\n\n1 passed, 0 failed  ([DUR])\n"
            )
        };
        let expected = format!(
            "plan: {what} (the same run with --dry-run; nothing changes yet)\n{}{}",
            run("  (dry run: nothing will be changed)"),
            run("")
        );
        assert_eq!((ran.code, masked(&ran.stdout), ran.stderr.as_str()), (0, expected, ""), "{args:?}");
    }
}

#[test]
fn on_the_fleet_over_ssh_a_restart_is_applied_with_yes_and_a_verify_passes() {
    let Some(fleet) = crate::fleet_runs::boot(&["server", "c1"]) else { return };
    let t = Test::new();
    crate::fleet_runs::install(&t, &fleet);
    crate::support::run_in(t.path(), &["run", "start", "--hosts", "log-shipper"], None).code(0);
    let bin = installed(&t);
    let ran = script(&t, &bin, "svc-exec.sh", &["-y", "restart", "server:loki"]);
    let on_server = |dry: &str, plan: &str, evidence: &str, passed: &str, connections: &str| {
        format!(
            "restart on server (<built-in>/runbooks/restart.rhai){dry}\n\n== restart loki.service\n{plan}  ok    \
             loki.service active — active (running)\n  ok    loki.service ready — after [DUR]\n\n== logs since the \
             restart\n  ok    loki.service logged no errors since [WHEN]\n\n== log-store: evidence made after the \
             change\n{evidence}\n{passed}  ([DUR])\n\nHOST    ROLES                  PASSED  FAILED  TIME\nserver  \
             metrics-db, log-store  {}       0       [DUR]\n\n1 host(s): all passed  ([DUR])\nssh connections: \
             {connections}\n",
            &passed[..1]
        )
    };
    // The dry run opens the connection; the run itself reuses it, and proves the log store
    // takes and gives back a line pushed after the restart.
    let expected = format!(
        "plan: restart of log-store on server (the same run with --dry-run; nothing changes yet)\n{}{}",
        on_server(
            "  (dry run: nothing will be changed)",
            "  plan: would restart loki.service\n",
            "  skip  log-store delivers after the change — a dry run changes nothing: nothing to prove\n",
            "3 passed, 0 failed, 1 skipped",
            "0 reused, 1 new"
        ),
        on_server(
            "",
            "",
            "  ok    a line pushed after the change is taken — accepted\n  ok    the line is read back from \
             {opsbook_probe=\"server\"} — after [DUR]\n",
            "5 passed, 0 failed",
            "1 reused, 0 new"
        )
    );
    assert_eq!((ran.code, masked(&ran.stdout), ran.stderr.as_str()), (0, expected, ""));
    let ran = script(&t, &bin, "svc-exec.sh", &["-h", "server", "influxdb", "verify"]);
    let over_ssh = verify_server("") + "ssh connections: 1 reused, 0 new\n";
    assert_eq!((ran.code, masked(&ran.stdout), ran.stderr.as_str()), (0, over_ssh, ""));
}

/// The screen of a tmux session running `command` once it shows `text` (within 30 s): its
/// non-empty lines.
#[track_caller]
fn tmux_until(socket: &str, text: &str) -> Vec<String> {
    crate::support::wait_until(&format!("`{text}` on the screen"), std::time::Duration::from_secs(30), || {
        let out = Command::new("tmux").args(["-L", socket, "capture-pane", "-p", "-J"]).output().unwrap();
        let screen = String::from_utf8_lossy(&out.stdout).into_owned();
        if screen.contains(text) {
            Ok(screen.lines().filter(|l| !l.trim().is_empty()).map(|l| l.trim_end().to_string()).collect())
        } else {
            Err(format!("the screen\n{screen}"))
        }
    })
}

#[test]
fn on_a_terminal_the_question_is_asked_and_the_answer_decides() {
    if Command::new("tmux").arg("-V").output().is_err() {
        return skip("tmux is not installed");
    }
    let t = Test::new();
    let bin = installed(&t);
    for (answer, last) in
        [("n", "svc-exec.sh: not applied (answered \"n\")\nEXIT=1"), ("y", "1 host(s): all passed  ([DUR])\nEXIT=0")]
    {
        let socket = format!("opsbook-scripts-{}-{answer}", std::process::id());
        // The shell stays a minute after the script (`sleep 60`) so its last lines can be read
        // from the pane; the session is killed once they are.
        let command = format!(
            "env -i PATH=/usr/bin:/bin HOME={d} XDG_STATE_HOME={d}/.state OPSBOOK={o} {s} restart server:loki --sandbox \
             --fleet 1; echo EXIT=$?; sleep 60",
            d = t.path().display(),
            o = crate::support::opsbook(),
            s = bin.join("svc-exec.sh").display()
        );
        let ok = Command::new("tmux")
            .args(["-L", &socket, "new-session", "-d", "-x", "200", "-y", "80", "-c"])
            .arg(t.path())
            .arg(command)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "tmux new-session failed");
        let screen = tmux_until(&socket, "Apply these changes to server? [y/N]");
        assert_eq!(screen.last().map(String::as_str), Some("Apply these changes to server? [y/N]"));
        Command::new("tmux").args(["-L", &socket, "send-keys", answer, "Enter"]).status().unwrap();
        let screen = tmux_until(&socket, "EXIT=");
        let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
        let tail = masked(&screen[screen.len() - 2..].join("\n"));
        assert_eq!(tail, last, "{}", screen.join("\n"));
        // The answer as typed, then what it led to.
        let at = screen.iter().position(|l| l.starts_with("Apply these changes")).unwrap();
        let next = if answer == "y" {
            "restart on server (<built-in>/runbooks/restart.rhai)  [sandbox: in-process stack]"
        } else {
            "svc-exec.sh: not applied (answered \"n\")"
        };
        assert_eq!(
            (screen[at].as_str(), screen[at + 1].as_str()),
            (format!("Apply these changes to server? [y/N] {answer}").as_str(), next),
            "{}",
            screen.join("\n")
        );
    }
}
