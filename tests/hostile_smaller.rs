//! Hostile input, round three (#50, the smaller cases): a `token_command` leaves nothing
//! running behind it; a configuration file or an `OPSBOOK_PATH` entry that is not what it
//! should be is said, not passed over; a line of the REPL that is not UTF-8 is said and the
//! session goes on. Whole outputs compared.

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
