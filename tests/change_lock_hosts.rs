//! A host's change lock on Debian 13 hosts over ssh (tests/support/debian13.rs): two operators'
//! rollouts over the same hosts — the second refuses naming the holder (exit 75), a third
//! with `--lock-timeout` waits for it and then runs, and each host's journal shows the runs'
//! changes one after another, never two at once; and a holder SIGKILLed mid-change leaves a
//! lock the next run has within 5 s, with no step by hand, saying what the gone holder left.
//! The lock rides each run's own ssh master: a held host has one ssh connection, the run's; a
//! run of its own connections holds it in its master's own session, and frees it when killed.

use std::time::{Duration, Instant};

use crate::debian13::host::{Debian13Fleet, Debian13Host};
use crate::support::Test;

/// A test's change: its start and end in the host's journal, `hold` apart or, given `until`,
/// once that file is on the host (at most 2 minutes).
const HOLD: &str = "//! Change the host for a while: its start and end in the host's journal.
//!
//! Changes the host: a run holds the host's change lock while it runs.
let run = param(\"run\", \"r\");
journal::emit(\"opsbook-lock-test\", `begin ${run}`, \"info\");
let go_file = param(\"until\", \"\");
if go_file == \"\" {
    sleep(param(\"hold\", \"2s\"));
} else {
    let looked = 0;
    while !file::exists(go_file) && looked < 1200 {
        sleep(\"100ms\");
        looked += 1;
    }
}
journal::emit(\"opsbook-lock-test\", `end ${run}`, \"info\");
check(`${run} on ${hostname()}`, true, \"\");
";

fn boot() -> Option<Debian13Fleet> {
    match Debian13Fleet::boot(&["d13c1", "d13c2"]) {
        Ok(fleet) => Some(fleet),
        Err(why) => {
            crate::support::skip(why);
            None
        }
    }
}

/// The test's directory: the fleet's configuration, `hold` declaring that it changes the
/// host, and `hold-undeclared` the same change without saying so (locked at its first change).
fn test(fleet: &Debian13Fleet) -> Test {
    let undeclared: String = HOLD.lines().filter(|l| !l.starts_with("//!")).map(|l| format!("{l}\n")).collect();
    Test::new()
        .config(&fleet.config_toml("", |_| Vec::new()))
        .runbook("hold", HOLD)
        .runbook("hold-undeclared", &undeclared)
}

/// What varies from run to run: run ids, pids, times, this machine's name, durations.
fn masked(text: &str) -> String {
    let rules = [
        (r"at most [^)]* more", "at most [LEFT] more"),
        (r"run \d{8}T\d{6}Z-[0-9a-f]{4}", "run [RUN]"),
        (r"pid \d+", "pid [PID]"),
        (r"since \d\d:\d\d:\d\d UTC", "since [TIME] UTC"),
        (r"root@\S+ —", "root@[MACHINE] —"),
        (r"\d+(\.\d+)?(ms|s)\b", "[DUR]"),
    ];
    let mut text = text.to_string();
    for (pattern, with) in rules {
        text = regex::Regex::new(pattern).unwrap().replace_all(&text, with).into_owned();
    }
    text
}

/// Waits until every host's lock record names `runbook`'s run (the run holds them all).
fn wait_until_held(fleet: &Debian13Fleet, what: &str) {
    let started = Instant::now();
    while !fleet.hosts().iter().all(|h| record(h).contains(what)) {
        assert!(started.elapsed() < Duration::from_secs(60), "the hosts were never locked by {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The lock's record on the host (empty when there is none).
fn record(host: &Debian13Host) -> String {
    String::from_utf8_lossy(&host.exec(&["cat", "/run/opsbook/change.json"]).stdout).into_owned()
}

/// The test's changes on the host, in the journal's order (each line's marker left out).
fn changes(host: &Debian13Host) -> String {
    let lines = host.ok(&["journalctl", "-q", "-t", "opsbook-lock-test", "-o", "cat"]);
    regex::Regex::new(r" \[opsbook-\d+-[0-9a-f]+\]").unwrap().replace_all(&lines, "").into_owned()
}

#[test]
fn a_second_rollout_refuses_naming_the_holder_and_one_that_waits_runs_after_it() {
    let Some(fleet) = boot() else { return };
    let t = test(&fleet);
    // The go file: the first rollout holds each host until the test writes it.
    const GO: &str = "/run/opsbook-lock-test-go";
    for host in fleet.hosts() {
        host.ok(&["rm", "-f", GO]);
    }
    let rollout = |run: &str, hold: &str| {
        let mut cmd = t.command();
        cmd.args(["run", "hold", "--hosts", "debian13", "--serial", "1", "--set"]);
        cmd.args([format!("run={run}"), "--set".into(), format!("hold={hold}")]);
        cmd
    };
    let first = rollout("first", "0s")
        .args(["--set", &format!("until={GO}")])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start opsbook");
    wait_until_held(&fleet, "\"runbook\":\"hold\"");
    // The lock rides the run's own master: one ssh connection to each host, the run's.
    for host in fleet.hosts() {
        let connections = host.ok(&["ss", "-Htn", "state", "established", "( sport = :22 )"]);
        assert_eq!(connections.lines().count(), 1, "{}: {connections}", host.name());
    }
    let second = rollout("second", "0s").output().expect("run opsbook");
    let stdout = masked(&String::from_utf8_lossy(&second.stdout));
    assert_eq!(second.status.code(), Some(75), "{stdout}\n{}", String::from_utf8_lossy(&second.stderr));
    let held = |h: &str| {
        format!(
            "locked: {h}: held by root@[MACHINE] — run [RUN], hold, pid [PID], since [TIME] UTC; `--lock-timeout 10m` \
             waits for it"
        )
    };
    assert_eq!(
        stdout,
        format!(
            "rollout of hold: 2 host(s) in 2 batch(es), 1 at a time; stop once more than 0 host(s) fail (--max-fail 0); \
             a host whose gate fails is rolled back\nBATCH  HOSTS  OUTCOME        TIME\n1      d13c1  not attempted\n\
             2      d13c2  not attempted\n\nHOST   ROLES  BATCH  OUTCOME        WHY\n\
             d13c1  -      1      not attempted  {}\nd13c2  -      2      not attempted  {}\n\n\
             2 host(s): 2 not attempted (d13c1, d13c2); refused: 2 of 2 host(s) could not be locked (another run \
             changes them); nothing was changed  ([DUR])\n",
            held("d13c1"),
            held("d13c2")
        )
    );
    // A third operator waits for the first: once it says so for both hosts, the first is let go.
    let waiting = |h: &str| {
        format!(
            "waiting for {h}: held by root@[MACHINE] — run [RUN], hold, pid [PID], since [TIME] UTC (at most [LEFT] more)"
        )
    };
    let mut third = rollout("third", "0s");
    third.args(["--lock-timeout", "2m"]);
    let (third, said) = waits_then_runs(third, &fleet, &["d13c1", "d13c2"].map(waiting), GO);
    let first = first.wait_with_output().expect("the first rollout ends");
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stdout));
    assert_eq!(third.status.code(), Some(0), "{}", String::from_utf8_lossy(&third.stdout));
    assert_eq!(said, ["d13c1", "d13c2"].map(waiting));
    // Each host's changes, in the journal's order: one run's, then the other's; the refused
    // run changed nothing; and the last run let its lock go.
    for host in fleet.hosts() {
        assert_eq!(changes(host), "begin first\nend first\nbegin third\nend third\n", "{}", host.name());
        assert_eq!(record(host), "", "{}: the lock's record is removed when the run ends", host.name());
    }
}

/// Runs `cmd`, which waits for a lock: once its stderr said each of `waiting` (masked), writes
/// the file `go` on every host (the holder's signal to end). Its output, and the distinct
/// masked lines its stderr said, sorted.
fn waits_then_runs(
    mut cmd: std::process::Command,
    fleet: &Debian13Fleet,
    waiting: &[String],
    go: &str,
) -> (std::process::Output, Vec<String>) {
    use std::io::BufRead;
    let mut child =
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("start opsbook");
    let (lines, said_so_far) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in stderr.lines().map_while(Result::ok) {
            let line = masked(&line);
            let _ = lines.send(line.clone());
            all.push(line);
        }
        all
    });
    let mut seen = std::collections::BTreeSet::new();
    let started = Instant::now();
    while !waiting.iter().all(|w| seen.contains(w)) {
        assert!(started.elapsed() < Duration::from_secs(60), "it never said it waits for them all: {seen:?}");
        if let Ok(line) = said_so_far.recv_timeout(Duration::from_millis(100)) {
            seen.insert(line);
        }
    }
    for host in fleet.hosts() {
        host.ok(&["touch", go]);
    }
    let output = child.wait_with_output().expect("it ends");
    let mut said = reader.join().expect("its stderr is read");
    said.sort();
    said.dedup();
    (output, said)
}

#[test]
fn a_killed_holders_lock_is_free_for_the_next_run_within_5s_which_names_what_it_left() {
    let Some(fleet) = boot() else { return };
    let t = test(&fleet);
    // Locked at its first change (the runbook does not declare it): the lazy lock.
    let holder = t
        .command()
        .args(["run", "hold-undeclared", "--hosts", "debian13", "--set", "run=killed", "--set", "hold=60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start opsbook");
    wait_until_held(&fleet, "\"runbook\":\"hold-undeclared\"");
    // SAFETY: kill(2) on our own child's pid: opsbook alone, as an OOM kill or a closed laptop ends it.
    unsafe { libc::kill(holder.id() as i32, libc::SIGKILL) };
    let killed = Instant::now();
    let mut holder = holder;
    holder.wait().expect("reaped");
    // The next run on connections of its own (a master of this run alone, `ssh.persist = "0"`).
    let cold = fleet.config_toml("", |_| Vec::new()).replacen("[ssh]\n", "[ssh]\npersist = \"0\"\n", 1);
    std::fs::write(t.path().join("cold.toml"), cold).unwrap();
    let mut next = t.command();
    next.args(["--config", "cold.toml", "run", "hold", "--hosts", "debian13", "--set", "run=next", "--set", "hold=0s"]);
    next.args(["--lock-timeout", "5s"]);
    let next = next.output().expect("run opsbook");
    let took = killed.elapsed();
    // A check's own time is shown only when it was slow: a loaded machine's, not the verdict's.
    let stdout = regex::Regex::new(r"(?m)^(  ok    next on [^\n]*?)  \(\[DUR\]\)$")
        .expect("a pattern")
        .replace_all(&masked(&String::from_utf8_lossy(&next.stdout)), "$1")
        .into_owned();
    assert_eq!(next.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&next.stderr));
    assert!(took < Duration::from_secs(8), "the next run had the locks {took:?} after the kill");
    let section = |h: &str| {
        format!(
            "hold on {h} (runbooks/hold.rhai)\n  warning: {h}: took over the change lock left by root@[MACHINE] — run [RUN], \
             hold-undeclared, pid [PID], since [TIME] UTC: its holder is gone\n  ok    next on {h}\n\n\
             1 passed, 0 failed  ([DUR])\n\n"
        )
    };
    assert_eq!(
        stdout,
        format!(
            "{}{}HOST   ROLES  PASSED  FAILED  TIME\nd13c1  -      1       0       [DUR]\nd13c2  -      1       0       [DUR]\n\n\
             2 host(s): all passed  ([DUR])\nssh connections: 0 reused, 2 new\n",
            section("d13c1"),
            section("d13c2")
        )
    );
    for host in fleet.hosts() {
        assert_eq!(changes(host), "begin killed\nbegin next\nend next\n", "{}", host.name());
        assert_eq!(record(host), "", "{}", host.name());
    }
}

/// What runs each host's lock holder (`sh -c SCRIPT opsbook-lock …`): its parent's command line.
fn holders_parent(host: &Debian13Host) -> String {
    // `loc[k]`: this shell's own command line does not match itself.
    let script = r#"for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" in *opsbook-loc[k]*)
    read -r _ _ _ pp _ <"$p/stat"; tr '\0' ' ' <"/proc/$pp/cmdline"; echo;;
  esac
done"#;
    host.ok(&["sh", "-c", script])
}

#[test]
fn a_run_of_its_own_connections_holds_the_lock_in_its_masters_session_and_frees_it_when_killed() {
    let Some(fleet) = boot() else { return };
    let t = test(&fleet);
    let cold = fleet.config_toml("", |_| Vec::new()).replacen("[ssh]\n", "[ssh]\npersist = \"0\"\n", 1);
    std::fs::write(t.path().join("cold.toml"), cold).unwrap();
    let holder = t
        .command()
        .args(["--config", "cold.toml", "run", "hold", "--hosts", "debian13", "--set", "run=cold", "--set", "hold=60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start opsbook");
    wait_until_held(&fleet, "\"runbook\":\"hold\"");
    for host in fleet.hosts() {
        // The master's own session (it runs each line it is sent) runs the holder: no session
        // of the master was opened for it.
        assert_eq!(holders_parent(host), "sh -c while read -r c; do eval \"$c\"; done \n", "{}", host.name());
    }
    // SAFETY: kill(2) on our own child's pid: opsbook alone; its masters see their input end.
    unsafe { libc::kill(holder.id() as i32, libc::SIGKILL) };
    let killed = Instant::now();
    let mut holder = holder;
    holder.wait().expect("reaped");
    let next = t
        .command()
        .args(["run", "hold", "--hosts", "debian13", "--set", "run=next", "--set", "hold=0s", "--lock-timeout", "5s"])
        .output()
        .expect("run opsbook");
    let took = killed.elapsed();
    let stdout = masked(&String::from_utf8_lossy(&next.stdout));
    assert_eq!(next.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&next.stderr));
    assert!(took < Duration::from_secs(8), "the next run had the locks {took:?} after the kill");
    for host in fleet.hosts() {
        let h = host.name();
        assert!(
            stdout.contains(&format!(
                "  warning: {h}: took over the change lock left by root@[MACHINE] — run [RUN], hold, pid [PID], \
                 since [TIME] UTC: its holder is gone\n"
            )),
            "{stdout}"
        );
        assert_eq!(changes(host), "begin cold\nbegin next\nend next\n", "{h}");
        assert_eq!(record(host), "", "{h}");
        assert_eq!(holders_parent(host), "", "{h}: no holder is left");
    }
}
