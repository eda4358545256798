//! A fleet run piped into `head -1` (#36, item 7): the reader goes away after one line, the
//! rest of the report cannot be written, and the `--save-json` file is still written whole —
//! the run's record does not depend on who reads its terminal output. The exit status is the
//! run's, and nothing is said of the closed pipe (as with a single run).

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;

use crate::support::Test;

/// Enough checks that the human report is far larger than a pipe holds (64 KiB).
const MANY: &str = "for i in 0..3000 {\n  check(`check ${i} with a name long enough to fill the pipe`, true);\n}\n";

#[test]
fn a_fleet_run_piped_into_head_keeps_its_saved_json() {
    let t = Test::new().runbook("many", MANY);
    let mut child = t
        .command()
        .args(["--sandbox", "run", "many", "--fleet", "1", "--save-json", "fleet.json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start opsbook");
    // `head -1`: one line, then the pipe is closed.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(first, "many on server (runbooks/many.rhai)  [sandbox: in-process stack]\n");
    assert_eq!((status.code(), stderr.as_str()), (Some(0), ""));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("fleet.json")).expect("the saved report")).unwrap();
    assert_eq!(
        (&doc["fleet"], &doc["outcome"], &doc["summary"]),
        (
            &serde_json::json!(true),
            &serde_json::json!("passed"),
            &serde_json::json!({"hosts": 2, "passed": 2, "failed": 0, "interrupted": 0})
        )
    );
    for run in doc["runs"].as_array().unwrap() {
        assert_eq!(run["summary"]["passed"], 3000, "{}", run["host"]);
    }
}
