//! Bad input (#28), state: `serve` with no HOME or XDG variable refuses rather than keep its
//! history beside wherever it was started; `serve --sandbox` keeps its rehearsals in a
//! database of their own, under a host name that says so; the page shows durations under
//! 10 ms in milliseconds; SIGTERM while a sandbox fleet is set up ends it with a word and
//! exit status 130.

use std::process::Command;
use std::time::Duration;

use crate::serve::{get, until};
use crate::support::ports::free_port;
use crate::support::{Test, opsbook, skip};

/// `opsbook ARGS` in `dir` with nothing in the environment but PATH, as a user that is not
/// root (root's state directory is /var/lib/opsbook whatever the environment says).
fn without_home(dir: &std::path::Path, args: &[&str]) -> Option<std::process::Output> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        if !std::path::Path::new("/usr/bin/setpriv").exists() {
            skip("setpriv is missing (apt-get install util-linux): cannot run as a user that is not root");
            return None;
        }
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", opsbook()]);
        c
    } else {
        Command::new(opsbook())
    };
    cmd.args(args).current_dir(dir).env_clear().env("PATH", "/usr/bin:/bin");
    Some(cmd.output().unwrap())
}

#[test]
fn serve_and_history_without_home_or_xdg_refuse_rather_than_use_the_working_directory() {
    let t = Test::new();
    // A directory anyone may write to: a relative `./opsbook` would be made here.
    std::fs::set_permissions(t.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let refusal = "error: no state directory: neither XDG_STATE_HOME nor HOME is set to an absolute path
  help: pass --state-dir DIR (or set serve.state_dir), e.g. --state-dir /var/lib/opsbook
";
    for args in [&["serve", "--sandbox", "quick-check@1m", "--listen", "127.0.0.1:0"][..], &["history"][..]] {
        let Some(out) = without_home(t.path(), args) else { return };
        assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()), (Some(2), refusal), "{args:?}");
    }
    assert!(!t.path().join("opsbook").exists(), "a state directory was made in the working directory");
}

#[test]
fn sandbox_rehearsals_are_kept_apart_from_the_real_history_and_short_runs_show_in_ms() {
    let t = Test::new().runbook("ok", "check(\"fine\", true);\n");
    let state = t.path().join("state");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let serve = Test::new()
        .runbook("ok", "check(\"fine\", true);\n")
        .args(["serve", "--sandbox", "--runbooks", "runbooks", "ok@1s", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--state-dir", &state.display().to_string()])
        .spawn();
    until(&format!("{base}/healthz"), 200, Duration::from_secs(20));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let runs: serde_json::Value = serde_json::from_str(&get(&format!("{base}/api/runs")).1).unwrap();
    assert_eq!(runs["runs"][0]["host"], format!("{host} (sandbox)"), "{runs}");
    let (_, page) = get(&format!("{base}/"));
    let took = regex::Regex::new(r"took (\d+\.\d) ms").unwrap();
    let shown = took.captures(&page).unwrap_or_else(|| panic!("no duration in ms on the page:\n{page}"));
    assert!(shown[1].parse::<f64>().unwrap() < 10.0, "{}", &shown[0]);
    assert!(!page.contains("0.00 s"), "{page}");
    serve.signal(libc::SIGTERM);
    assert_eq!(serve.wait(Duration::from_secs(30)).0.code, 0);

    // The real history was never written; the rehearsals are read with --sandbox.
    assert!(!state.join("history.sqlite").exists());
    assert!(state.join("rehearsals.sqlite").exists());
    let dir = state.display().to_string();
    let out = Test::new().args(["history", "--state-dir", &dir]).run().code(2);
    assert_eq!(
        out.stderr,
        format!(
            "error: no history at `{dir}/history.sqlite`: `opsbook serve` has not stored a run there yet\n  \
             help: pass the same `--state-dir` (or `serve.state_dir`) as the service\n"
        )
    );
    // The table shows a run of a few milliseconds in milliseconds too.
    let out = Test::new().args(["history", "--sandbox", "--state-dir", &dir]).run().code(0);
    let row = regex::Regex::new(r"(?m)^ +1  \d{4}-\d\d-\d\dT[\d:.]+Z  ok +passed +(\d+\.\d)ms  $").unwrap();
    let ms = row.captures(&out.stdout).unwrap_or_else(|| panic!("no run in ms:\n{}", out.stdout));
    assert!(ms[1].parse::<f64>().unwrap() < 10.0, "{}", out.stdout);
    let out = Test::new().args(["history", "--sandbox", "--state-dir", &dir, "--format", "json"]).run().code(0);
    let json = out.json();
    assert_eq!(json["database"], format!("{dir}/rehearsals.sqlite"));
    assert_eq!(json["runs"][0]["host"], format!("{host} (sandbox)"));
}

#[test]
fn sigterm_while_a_sandbox_fleet_is_set_up_ends_it_saying_how_far_it_got() {
    // The largest fleet: setting it up takes long enough to be interrupted in the middle.
    let run = Test::new().args(["run", "quick-check", "--sandbox", "--fleet", "200"]).spawn();
    run.wait_for_output("setting up the sandbox", Duration::from_secs(30));
    run.signal(libc::SIGTERM);
    let (out, _) = run.wait(Duration::from_secs(30));
    let said = regex::Regex::new(
        r"^setting up the sandbox: a server and 200 client hosts…\ninterrupted: SIGTERM while the sandbox was set up: \d+ of its 201 simulated hosts (were made, none started|had started|were ready); nothing was run\n$",
    )
    .unwrap();
    assert!(
        out.code == 130 && out.stdout.is_empty() && said.is_match(&out.stderr),
        "exit {}\n{}\n{}",
        out.code,
        out.stdout,
        out.stderr
    );
}
