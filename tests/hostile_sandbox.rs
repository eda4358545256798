//! Hostile input, round three (#50, the sandbox's smaller cases): the sandbox's scratch folder
//! is made fresh and never a folder someone else made (a root run deleted another user's
//! `/tmp/opsbook-sandbox-PID`), and a sandbox run reaches no server outside its own stack.
//! Whole outputs compared.

use std::path::Path;
use std::process::Command;

use crate::support::{Test, opsbook};

/// Every file under `dir`, as `path: content` lines (sorted), with pids shown as their names.
fn listing(dir: &Path, pids: &[(&str, &str)]) -> String {
    fn walk(dir: &Path, under: &Path, into: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let shown = path.strip_prefix(under).unwrap().display().to_string();
            if path.is_dir() {
                into.push(format!("{shown}/"));
                walk(&path, under, into);
            } else {
                into.push(format!("{shown}: {}", std::fs::read_to_string(&path).unwrap_or_default().trim_end()));
            }
        }
    }
    let mut lines = Vec::new();
    walk(dir, dir, &mut lines);
    let mut lines: Vec<String> =
        lines.into_iter().map(|l| pids.iter().fold(l, |l, (pid, name)| l.replace(pid, name))).collect();
    lines.sort();
    lines.iter().map(|l| l.clone() + "\n").collect()
}

/// A pid no process has now.
fn a_dead_pid() -> u32 {
    (4_000_000..4_194_000).rev().find(|pid| !Path::new(&format!("/proc/{pid}")).exists()).unwrap()
}

/// `dir` with a file `file` holding `text`, owned by `nobody` when we are root.
fn plant(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join("kept")).unwrap();
    std::fs::write(dir.join("kept/file"), text).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(Command::new("chown").args(["-R", "nobody"]).arg(dir).status().unwrap().success());
    }
}

#[test]
fn the_sandbox_makes_its_folder_fresh_and_removes_no_folder_it_did_not_make() {
    let t = Test::new();
    let tmp = t.path().join("tmp");
    let dead = a_dead_pid();
    // Another user's folders at the names the old scheme used (this run's pid and a gone
    // process's) and at the new scheme's (a gone process's): all three stay.
    plant(&tmp.join(format!("opsbook-sandbox-{dead}")), "another user's, old name");
    plant(&tmp.join(format!("opsbook-sandbox-{dead}-00112233aabbccdd")), "another user's, new name");
    // A leftover of one of this user's own sandboxes, killed: swept.
    std::fs::create_dir_all(tmp.join(format!("opsbook-sandbox-{dead}-ffeeddccbbaa9988/h1"))).unwrap();
    // The shell plants a folder at the name of its own pid, which opsbook then runs as (`exec`).
    let script = "d=\"$TMPDIR/opsbook-sandbox-$$\"; mkdir -p \"$d/kept\" && echo \"another user's, this pid\" > \
                  \"$d/kept/file\" && { [ \"$(id -u)\" != 0 ] || chown -R nobody \"$d\"; } && exec \"$0\" \"$@\"";
    let base = t.command();
    let mut cmd = Command::new("sh");
    cmd.current_dir(t.path()).env_clear();
    for (key, value) in base.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let out =
        cmd.env("TMPDIR", &tmp).args(["-c", script, opsbook(), "run", "quick-check", "--sandbox"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let pid = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_prefix("opsbook-sandbox-").map(str::to_string))
        .find(|rest| rest.parse::<u32>().is_ok_and(|pid| pid != dead))
        .expect("the folder planted at the run's own pid");
    assert_eq!(
        listing(&tmp, &[(&pid, "[PID]"), (&dead.to_string(), "[DEAD]")]),
        "opsbook-sandbox-[DEAD]-00112233aabbccdd/
opsbook-sandbox-[DEAD]-00112233aabbccdd/kept/
opsbook-sandbox-[DEAD]-00112233aabbccdd/kept/file: another user's, new name
opsbook-sandbox-[DEAD]/
opsbook-sandbox-[DEAD]/kept/
opsbook-sandbox-[DEAD]/kept/file: another user's, old name
opsbook-sandbox-[PID]/
opsbook-sandbox-[PID]/kept/
opsbook-sandbox-[PID]/kept/file: another user's, this pid
"
    );
}
