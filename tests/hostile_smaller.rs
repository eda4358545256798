//! Hostile input, round three (#50, the smaller cases): a `token_command` leaves nothing
//! running behind it; a configuration file or an `OPSBOOK_PATH` entry that is not what it
//! should be is said, not passed over; a line of the REPL that is not UTF-8 is said and the
//! session goes on. Whole outputs compared.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::{Test, mask};

/// Whether process `pid` is gone (or a zombie its new parent has not reaped yet).
fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    !exists || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

#[test]
fn a_token_commands_background_child_ends_with_it() {
    let t = Test::new();
    let pid_file = t.path().join("pid");
    let config = format!(
        "[metrics_db]\nurl = \"http://127.0.0.1:9/\"\ntoken_command = [\"sh\", \"-c\", \"sleep 300 & echo $! > {}; echo \
         tok\"]\n",
        pid_file.display()
    );
    let out = t
        .config(&config)
        .runbook("t", "try { influx::buckets(); } catch (e) { check(\"token\", false, e); }\n")
        .args(["run", "t"])
        .run()
        .code(1);
    assert_eq!(
        mask(&out.stdout),
        "t (runbooks/t.rhai)\n  FAIL  token — GET http://127.0.0.1:9/api/v2/buckets?limit=100: connection refused\n\n0 \
         passed, 1 failed  ([DUR])\n"
    );
    let pid: i32 = std::fs::read_to_string(out.test.path().join("pid")).unwrap().trim().parse().unwrap();
    // Killed when the command ended; its new parent reaps it a moment later.
    crate::support::wait_until("the background child gone", Duration::from_secs(5), || {
        if gone(pid) { Ok(()) } else { Err(format!("pid {pid} still runs")) }
    });
}

/// Makes at `path` a thing that is not a regular file: `folder`, `fifo`, or a `device` (a link
/// to `/dev/null`).
fn make_special(path: &Path, kind: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    match kind {
        "folder" => std::fs::create_dir(path).unwrap(),
        "fifo" => assert!(Command::new("mkfifo").arg(path).status().unwrap().success()),
        _ => std::os::unix::fs::symlink("/dev/null", path).unwrap(),
    }
}

/// What the refusal calls each kind `make_special` makes.
fn named(kind: &str) -> &'static str {
    match kind {
        "folder" => "directory",
        "fifo" => "FIFO (named pipe)",
        _ => "character device",
    }
}

#[test]
fn a_configuration_file_that_is_a_fifo_or_a_folder_is_refused_naming_it() {
    // Every place a configuration file is looked for, with every kind of non-file there: each
    // refused in the same words, and a FIFO never opened (it would hang the run).
    let places = ["opsbook.toml", ".config/opsbook/config.toml"];
    for place in places {
        for kind in ["folder", "fifo", "device"] {
            let t = Test::new();
            make_special(&t.path().join(place), kind);
            let (code, stdout, stderr) = t.run_in_place(&["run", "quick-check", "--sandbox"]);
            let shown = if place.starts_with('.') { t.path().join(place).display().to_string() } else { place.into() };
            assert_eq!(
                (code, stdout.as_str(), stderr),
                (
                    2,
                    "",
                    format!(
                        "error: the configuration file `{shown}` is a {}, not a regular file: give the path of a file\n",
                        named(kind)
                    )
                ),
                "{place} as a {kind}"
            );
        }
    }
}

#[test]
fn an_opsbook_path_entry_that_is_not_a_folder_is_refused_naming_it() {
    let t = Test::new().file("afile", "x").runbook("mine", "check(\"mine\", true);\n");
    make_special(&t.path().join("fifo"), "fifo");
    let cases = [("afile", "a regular file"), ("fifo", "a FIFO (named pipe)"), ("/dev/null", "a character device")];
    for (entry, what) in cases {
        let path = format!("{}/runbooks:{entry}", t.path().display());
        let out = t.command().env("OPSBOOK_PATH", &path).args(["list"]).output().unwrap();
        assert_eq!(
            (out.status.code(), String::from_utf8_lossy(&out.stdout).as_ref(), String::from_utf8_lossy(&out.stderr)),
            (
                Some(2),
                "",
                format!(
                    "error: $OPSBOOK_PATH entry `{entry}`: is {what}, not a folder: give folders holding NAME.rhai files, \
                     separated by `:`\n"
                )
                .into()
            ),
            "{entry}"
        );
    }
    // A folder that is not there is passed over, as `$PATH`'s are.
    let path = format!("{}/missing:{}/runbooks", t.path().display(), t.path().display());
    let out = t.command().env("OPSBOOK_PATH", &path).args(["run", "mine"]).output().unwrap();
    assert_eq!(
        (out.status.code(), mask(&String::from_utf8_lossy(&out.stdout))),
        (Some(0), "mine ([TMP]/runbooks/mine.rhai)\n  ok    mine\n\n1 passed, 0 failed  ([DUR])\n".to_string())
    );
}
