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

/// The REPL on a terminal (a pseudo-terminal this test holds the other end of), fed `lines`
/// one at a time as each prompt comes: what the terminal showed (escape sequences and carriage
/// returns taken out) and the exit status.
fn repl_on_a_terminal(t: &Test, lines: &[&[u8]]) -> (String, i32) {
    use std::io::{Read, Write};
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the integers it is given.
    let opened =
        unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(opened, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = t.command();
    cmd.arg("repl")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap());
    // SAFETY: setsid and the TIOCSCTTY ioctl are async-signal-safe; the terminal becomes the
    // child's controlling one, as a login shell's is.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(slave);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut reader = std::fs::File::from(master.try_clone().unwrap());
    let into = seen.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = reader.read(&mut chunk) {
            into.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    let mut writer = std::fs::File::from(master);
    let prompts = |seen: &[u8]| seen.windows(9).filter(|w| *w == b"opsbook> ").count();
    for (n, line) in lines.iter().enumerate() {
        crate::support::wait_until("the prompt", Duration::from_secs(20), || {
            let got = seen.lock().unwrap().clone();
            if prompts(&got) > n { Ok(()) } else { Err(String::from_utf8_lossy(&got).into_owned()) }
        });
        writer.write_all(line).unwrap();
    }
    let status = child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let seen = seen.lock().unwrap().clone();
    let escapes = regex::bytes::Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").unwrap();
    let shown = escapes.replace_all(&seen, &b""[..]).into_owned();
    (String::from_utf8_lossy(&shown).replace('\r', ""), status.code().unwrap_or(-1))
}

#[test]
fn a_line_typed_into_the_repl_that_is_not_utf8_is_said_and_the_session_goes_on() {
    let t = Test::new();
    let (shown, code) = repl_on_a_terminal(&t, &[b"let a = 1;\r", b"\xff\xfe bad\r", b"a + 1\r", b"\x04"]);
    assert_eq!(
        (shown, code),
        (
            format!(
                "opsbook {} — :help for help, Ctrl-D to leave\nopsbook> let a = 1;\nopsbook> \nerror: input line 2 \
                 is not UTF-8 text: it was skipped\nopsbook> a + 1\n2\nopsbook> \n",
                env!("CARGO_PKG_VERSION")
            ),
            0
        )
    );
    // Every position of a bad line among good ones: said, skipped, the session goes on to the
    // end and leaves with 0 (the operator saw it; piped input keeps exit 2, `bad_sources`).
    for at in 0..3 {
        let mut lines: Vec<&[u8]> = vec![b"let a = 1;\r", b"a + 1\r", b"a + 2\r"];
        lines.insert(at, b"\xc3\x28 x\r");
        lines.push(b"\x04");
        let (shown, code) = repl_on_a_terminal(&t, &lines);
        let said = format!("error: input line {} is not UTF-8 text: it was skipped\n", at + 1);
        assert_eq!((shown.matches(&said).count(), shown.ends_with("3\nopsbook> \n"), code), (1, true, 0), "{shown}");
    }
}

#[test]
fn a_failed_command_says_how_it_ended_even_when_it_said_nothing() {
    // A failed process call's words end in its exit status and what it said, or that it said
    // nothing — never in a bare colon (`systemd-cat … failed: `).
    let cases = [
        ("exit 3", "exit status 3, nothing on stderr"),
        ("echo '  ' >&2; exit 4", "exit status 4, nothing on stderr"),
        ("echo first >&2; echo 'E! bad plugin' >&2; exit 1", "exit status 1: first\nE! bad plugin"),
        ("kill -9 $$", "ended by a signal, nothing on stderr"),
    ];
    for (script, said) in cases {
        let out = Test::new()
            .config(&format!("[metrics_agent]\ntest_command = [\"sh\", \"-c\", \"{script}\"]\n"))
            .runbook("t", "let r = telegraf::config_test();\ncheck(\"test\", r.ok, r.detail);\n")
            .args(["run", "t"])
            .run()
            .code(1);
        let said = said.replace('\n', "\n          ");
        assert_eq!(
            mask(&out.stdout),
            format!("t (runbooks/t.rhai)\n  FAIL  test — {said}\n\n0 passed, 1 failed  ([DUR])\n")
        );
    }
}
