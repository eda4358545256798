//! Every read bounded (#36, item 5): `file::read` of a device or a FIFO, the REPL's `:load`
//! of them, `http.ca_file = "/dev/zero"` and a `token_command` printing a gigabyte are each
//! refused in words naming the path, at once, never read until memory runs out or for ever.
//! A property test feeds the one reader every kind of file that is not a regular one.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config as Cases, TestRunner};

use crate::support::Test;

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
}

#[test]
fn file_read_refuses_a_device_and_a_fifo_naming_them() {
    let t = Test::new();
    let fifo = t.path().join("pipe");
    mkfifo(&fifo);
    let runbook = format!(
        "for p in [\"/dev/zero\", \"{}\"] {{\n  try {{ file::read(p); check(p, true); }} catch (e) {{ check(\"read\", false, e); }}\n}}\n",
        fifo.display()
    );
    let started = Instant::now();
    t.runbook("r", &runbook).args(["run", "r"]).run().code(1).stdout_is(
        "r (runbooks/r.rhai)
  FAIL  read — the file `/dev/zero` is a character device, not a regular file: give the path of a file
  FAIL  read — the file `[TMP]/pipe` is a FIFO (named pipe), not a regular file: give the path of a file

0 passed, 2 failed  ([DUR])
",
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn the_repl_refuses_to_load_a_device_or_a_fifo_and_goes_on() {
    let t = Test::new();
    let fifo = t.path().join("pipe");
    mkfifo(&fifo);
    let lines = format!(":load /dev/zero\n:load {}\nprint(6 * 7);\n", fifo.display());
    t.args(["repl"]).stdin(&lines).run().stderr_is(
        "error: the script `/dev/zero` is a character device, not a regular file: give the path of a file
error: the script `[TMP]/pipe` is a FIFO (named pipe), not a regular file: give the path of a file
42
",
    );
}

#[test]
fn a_ca_file_that_is_a_device_is_refused_in_words() {
    Test::new()
        .config("[http]\nca_file = \"/dev/zero\"\n")
        .runbook("t", "let p = http::probe(\"https://127.0.0.1:1/\");\ncheck(\"tls\", p.ok, p.detail);")
        .args(["run", "t"])
        .run()
        .code(1)
        .stdout_is(
            "t (runbooks/t.rhai)
  FAIL  tls — http.ca_file: the CA file `/dev/zero` is a character device, not a regular file: give the path of a file

0 passed, 1 failed  ([DUR])
",
        );
}

#[test]
fn a_token_command_printing_a_gigabyte_is_stopped_and_refused() {
    let started = Instant::now();
    Test::new()
        .config("[metrics_db]\ntoken_command = [\"sh\", \"-c\", \"head -c 1000000000 /dev/zero\"]\n")
        .runbook("t", "try { influx::buckets(); } catch (e) { check(\"token\", false, e); }")
        .args(["run", "t"])
        .run()
        .code(1)
        .stdout_is(
            "t (runbooks/t.rhai)
  FAIL  token — error: API token: token_command failed: `sh` printed more than 16 MiB on stdout: it was stopped

0 passed, 1 failed  ([DUR])
",
        );
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
}

/// Files that are not regular: a folder, a FIFO, devices, a socket, and links to each.
fn special_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let socket = dir.join("socket");
    // The socket's file stays once its listener is closed.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let mut files = vec![
        (dir.to_path_buf(), "directory"),
        (fifo, "FIFO (named pipe)"),
        (PathBuf::from("/dev/zero"), "character device"),
        (PathBuf::from("/dev/null"), "character device"),
        (PathBuf::from("/dev/urandom"), "character device"),
        (socket, "socket"),
    ];
    for (i, (target, kind)) in files.clone().into_iter().enumerate() {
        let link = dir.join(format!("link{i}"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        files.push((link, kind));
    }
    files
}

#[test]
fn the_reader_refuses_every_file_that_is_not_a_regular_one_naming_it() {
    use opsbook_base::InputKind;
    let dir = tempfile::tempdir().unwrap();
    let files = special_files(dir.path());
    let kinds = [
        InputKind::CONFIG,
        InputKind::COMPONENTS,
        InputKind::INVENTORY,
        InputKind::RUNBOOK,
        InputKind::TEMPLATE,
        InputKind::TOKEN,
        InputKind::SCRIPT,
        InputKind::CA_FILE,
        InputKind::FILE,
    ];
    let cases = Cases { cases: 64, failure_persistence: None, ..Cases::default() };
    TestRunner::new(cases)
        .run(&(0..files.len(), 0..kinds.len()), |(f, k)| {
            let ((path, found), kind) = (&files[f], kinds[k]);
            let started = Instant::now();
            let refused = opsbook_base::read_text_or_explain(path, kind).unwrap_err();
            prop_assert!(started.elapsed() < Duration::from_secs(1));
            let expected = format!(
                "the {} `{}` is a {found}, not a regular file: give the path of a file",
                kind.what,
                path.display()
            );
            prop_assert_eq!(refused, expected);
            Ok(())
        })
        .unwrap();
}
