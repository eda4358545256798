//! A newcomer's first day (issue #48): `serve --sandbox` runs a runbook as `run --sandbox`
//! does, `list` shows each summary's first sentence whole (cut at a word only on a narrow
//! terminal), and a read runbook run on a machine the configured inventory does not name says
//! so in its first line — its checks and exit status as they were.

use std::time::Duration;

use crate::serve::{get, until};
use crate::support::ports::free_port;
use crate::support::{Test, mask, opsbook, repo_dir};

/// Each check of a JSON report as `section › name: outcome`, one a line, the sandbox's ports
/// (new in every run) masked.
fn checks(report: &serde_json::Value) -> String {
    let listed = report["checks"].as_array().expect("the report's checks");
    let line = |c: &serde_json::Value| format!("{} › {}: {}\n", c["section"], c["name"], c["outcome"]);
    let port = regex::Regex::new(r"(127\.0\.0\.1:|admits )\d+").unwrap();
    port.replace_all(&listed.iter().map(line).collect::<String>(), "${1}PORT").into_owned()
}

#[test]
fn serve_in_the_sandbox_runs_the_checklist_as_run_does() {
    let ran = Test::new().args(["run", "checklist", "--sandbox", "--format", "json"]).run().code(0).json();
    let test = Test::new();
    let (listen, state) = (format!("127.0.0.1:{}", free_port()), test.path().join("state"));
    let serve = test
        .args(["serve", "--sandbox", "checklist@30s", "--listen", &listen, "--state-dir", &state.display().to_string()])
        .spawn();
    let base = format!("http://{listen}");
    let (health, _) = until(&format!("{base}/healthz"), 200, Duration::from_secs(60));
    assert_eq!(health, "ok: the latest run of 1 job passed\n");
    let runs: serde_json::Value = serde_json::from_str(&get(&format!("{base}/api/runs")).1).unwrap();
    let id = runs["runs"][0]["id"].as_i64().unwrap();
    let served: serde_json::Value = serde_json::from_str(&get(&format!("{base}/api/runs/{id}")).1).unwrap();
    assert_eq!(checks(&served), checks(&ran), "serve's checklist differs from run's");
    assert_eq!(served["summary"]["failed"], 0, "{served}");
    serve.signal(libc::SIGTERM);
    assert_eq!(serve.wait(Duration::from_secs(30)).0.code, 0);
}

/// Piped, every summary is its runbook's first sentence, whole, after the name and origin.
#[test]
fn list_shows_each_first_sentence_whole() {
    let out = Test::new().args(["list"]).run().code(0).stdout_is_fixture("list/piped.txt");
    let e2e = "e2e-logs              built-in  End-to-end logs flow: emit a uniquely marked line, then poll the \
               `hostname` stream (limit 5) until the line appears (deadline 5 s by default).\n";
    assert!(out.stdout.contains(e2e), "{}", out.stdout);
}

/// On a terminal too narrow for a summary, it is cut at a word and ends with "…".
#[test]
fn list_cuts_at_a_word_only_on_a_narrow_terminal() {
    let test = Test::new();
    // `script` gives opsbook a terminal; COLUMNS says how wide it is.
    let out = std::process::Command::new("script")
        .args(["-qec", &format!("{} list", opsbook()), "/dev/null"])
        .current_dir(test.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", test.path())
        .env("COLUMNS", "100")
        .env("TERM", "dumb")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs");
    let seen = mask(&String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"));
    let path = repo_dir().join("tests/fixtures/list/narrow.txt");
    if std::env::var_os("OPSBOOK_BLESS").is_some() {
        std::fs::write(&path, &seen).unwrap();
    }
    assert_eq!(seen, std::fs::read_to_string(&path).unwrap(), "OPSBOOK_BLESS=1 rewrites {}", path.display());
    assert!(seen.lines().all(|l| l.chars().count() <= 100), "a line is wider than the terminal:\n{seen}");
}

/// Two hosts elsewhere, none of them this machine.
const INVENTORY: &str = "[hosts.monitor1]\naddress = \"10.0.0.1\"\nroles = [\"metrics-db\", \"log-store\"]\n\n\
                         [hosts.monitor2]\naddress = \"10.0.0.2\"\nroles = [\"metrics-agent\", \"log-shipper\"]\n";

fn here() -> String {
    opsbook_world::this_machine()
}

#[test]
fn a_read_runbook_outside_the_inventory_says_so_first_and_suggests_its_hosts() {
    let look = "//! Looks at this machine.\ncheck(\"looked\", true);\ncheck(\"found\", false, \"nothing\");\n";
    let report = "look (runbooks/look.rhai)\n  ok    looked\n  FAIL  found — nothing\n\n1 passed, 1 failed  ([DUR])\n";
    // Without an inventory: the report alone.
    Test::new().runbook("look", look).args(["run", "look"]).run().code(1).stdout_is(report);
    // With one that does not name this machine: the note first, then the same report and status.
    let note = format!(
        "note: this machine ({}) is not in the inventory, so `look` checks it alone; `--hosts all` runs it on \
         the inventory's 2 host(s)\n",
        here()
    );
    let with = || Test::new().config(INVENTORY).runbook("look", look);
    with().args(["run", "look"]).run().code(1).stdout_is(&(note.clone() + report)).stderr_is("");
    // A machine format keeps its document whole: the note goes beside it.
    let json = with().args(["run", "look", "--format", "json"]).run().code(1).stderr_is(&note);
    assert_eq!(json.json()["summary"]["failed"], 1);
    // A runbook named after a role suggests the hosts playing it.
    let role = with().runbook("look-log-store", look).args(["run", "look-log-store"]).run().code(1);
    assert!(
        role.stdout.starts_with(&format!(
            "note: this machine ({}) is not in the inventory, so `look-log-store` checks it alone; `--hosts \
             log-store` runs it on the inventory's 1 host(s)\nlook-log-store (runbooks/look-log-store.rhai)\n",
            here()
        )),
        "{}",
        role.stdout
    );
}

#[test]
fn a_changing_runbook_or_a_machine_the_inventory_names_gets_no_note() {
    let change =
        "//! Changes this machine.\nif param(\"go\", false) { unit::restart(\"loki\"); }\ncheck(\"looked\", true);\n";
    let report = "change (runbooks/change.rhai)\n  ok    looked\n\n1 passed, 0 failed  ([DUR])\n";
    Test::new().config(INVENTORY).runbook("change", change).args(["run", "change"]).run().code(0).stdout_is(report);
    let named = format!("{INVENTORY}\n[hosts.\"{}\"]\nroles = [\"metrics-db\"]\n", here());
    let look = "//! Looks.\ncheck(\"looked\", true);\n";
    let report = "look (runbooks/look.rhai)\n  ok    looked\n\n1 passed, 0 failed  ([DUR])\n";
    Test::new().config(&named).runbook("look", look).args(["run", "look"]).run().code(0).stdout_is(report);
}
