//! Passwords in URLs (#36, item 2): `log_store.url = "http://bob:S3CRET@host"` is known to
//! the redactor like the token, so no writer shows or stores the password — the terminal
//! (`opsbook config`, a failed check's detail, log lines), `--save-json`, the service's page and
//! `/api/runs`, `opsbook history` — and the files that keep runs are created 0600.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::serve::{get, until};
use crate::support::Test;
use crate::support::ports::free_port;

const PASSWORD: &str = "S3CRET";

/// A runbook that shows the URL every way a runbook can: a log line, a check's detail, a
/// request's error, and the password on its own.
const SHOWS_THE_URL: &str = r#"log(`asking ${config.log_store.url}`);
check("typed", false, `GET ${config.log_store.url}`);
try { http::get(config.log_store.url); } catch (e) { check("asked", false, e); }
log("the password alone: S3CRET");
"#;

fn config(port: u16) -> String {
    format!("[log_store]\nurl = \"http://bob:{PASSWORD}@127.0.0.1:{port}/\"\n")
}

#[track_caller]
fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn a_password_in_a_url_is_redacted_on_the_terminal_in_logs_and_in_saved_reports() {
    let port = free_port();
    let t = Test::new().config(&config(port)).runbook("c", SHOWS_THE_URL);
    let (code, stdout, stderr) = t.run_in_place(&["config"]);
    let line = stdout.lines().find(|l| l.starts_with("log_store.url ")).unwrap_or_default();
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        (code, line.as_str(), stderr.as_str()),
        (
            0,
            "log_store.url = \"http://bob:<redacted>@127.0.0.1:[PORT]/\" # opsbook.toml:2"
                .replace("[PORT]", &port.to_string())
                .as_str(),
            ""
        )
    );
    let (_, json, _) = t.run_in_place(&["config", "--format", "json"]);
    assert!(
        json.contains(&format!("\"http://bob:<redacted>@127.0.0.1:{port}/\"")) && !json.contains(PASSWORD),
        "{json}"
    );

    let run = crate::support::run_in(t.path(), &["run", "c", "--save-json", "report.json", "-v"], None).code(1);
    let at = format!("127.0.0.1:{port}");
    assert_eq!(
        crate::support::mask(&run.stdout).replace(&at, "[AT]"),
        "c (runbooks/c.rhai)
  asking http://bob:<redacted>@[AT]/
  FAIL  typed — GET http://bob:<redacted>@[AT]/
  FAIL  asked — GET http://bob:<redacted>@[AT]/: connection refused
  the password alone: <redacted>

0 passed, 2 failed  ([DUR])
"
    );
    let saved = std::fs::read_to_string(t.path().join("report.json")).unwrap();
    assert!(saved.contains("\"detail\": \"GET http://bob:<redacted>@127.0.0.1:"), "{saved}");
    assert!(!saved.contains(PASSWORD), "{saved}");
    assert_eq!(mode(&t.path().join("report.json")), 0o600);

    let traced = t.command().args(["run", "c", "--format", "json"]).env("RUST_LOG", "trace").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&traced.stdout), String::from_utf8_lossy(&traced.stderr));
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD), "{stdout}\n{stderr}");
    assert!(stdout.contains("\"message\": \"asking http://bob:<redacted>@127.0.0.1:"), "{stdout}");
}

#[test]
fn a_password_in_a_url_never_reaches_the_page_the_api_or_the_history_and_its_files_are_0600() {
    let (port, listen) = (free_port(), free_port());
    let base = format!("http://127.0.0.1:{listen}");
    let t = Test::new()
        .config(&format!(
            "{}[serve]\nlisten = \"127.0.0.1:{listen}\"\nstate_dir = \"state\"\n[[serve.job]]\nrunbook = \"c\"\nevery = \"1s\"\n",
            config(port)
        ))
        .runbook("c", SHOWS_THE_URL);
    let dir = t.path().to_path_buf();
    let serve = t.args(["serve", "--runbooks", "runbooks"]).spawn();
    let (runs, _) = until(&format!("{base}/api/runs/1"), 200, Duration::from_secs(20));
    let (_, list) = get(&format!("{base}/api/runs"));
    let (_, page) = get(&format!("{base}/"));
    let (_, health) = get(&format!("{base}/healthz"));
    for (what, text) in [("/api/runs/1", &runs), ("/api/runs", &list), ("the page", &page), ("/healthz", &health)] {
        assert!(!text.contains(PASSWORD), "{what}: {text}");
    }
    assert!(runs.contains("\"detail\":\"GET http://bob:<redacted>@127.0.0.1:"), "{runs}");
    assert!(page.contains("GET http://bob:&lt;redacted&gt;@127.0.0.1:"), "{page}");
    // While the service runs: the database and SQLite's companions are this user's alone, and
    // hold no password.
    let state = dir.join("state");
    let mut names: Vec<String> =
        std::fs::read_dir(&state).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["history.sqlite", "history.sqlite-shm", "history.sqlite-wal"]);
    for entry in std::fs::read_dir(&state).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(PASSWORD.len()).any(|w| w == PASSWORD.as_bytes()),
            "{} holds the password",
            path.display()
        );
    }
    serve.signal(libc::SIGTERM);
    let (out, _) = serve.wait(Duration::from_secs(30));
    assert!(!out.stderr.contains(PASSWORD), "{}", out.stderr);

    let history = crate::support::run_in(&dir, &["history", "--format", "json", "--state-dir", "state"], None).code(0);
    assert!(history.stdout.contains("GET http://bob:<redacted>@127.0.0.1:"), "{}", history.stdout);
    assert!(!history.stdout.contains(PASSWORD), "{}", history.stdout);
}
