//! Text from outside shown safely (#36, item 3): control characters (ESC, BEL, …) in what a
//! server answered (a decoded JSON value, not only a raw body), a journal line, a file a
//! runbook read or an argument are escaped in human output (`\x1b`), so they cannot retitle
//! or clear the operator's terminal; JSON output carries them as JSON escapes (`\u001b`).

use crate::bad_input::server;
use crate::support::Test;

/// What a hostile server could put in the metrics database's /health `message`.
const HOSTILE: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2J";
const SHOWN: &str = "\\x1b]0;PWNED\\x07\\x1b[2J";

fn hostile_health(stream: &mut std::net::TcpStream) {
    use std::io::Write;
    let body =
        serde_json::json!({"name": "influxdb", "status": "pass", "message": HOSTILE, "version": "v2.7.11"}).to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

#[test]
fn a_servers_decoded_message_and_a_file_read_are_escaped_in_human_output() {
    let base = server(hostile_health);
    let t = Test::new()
        .config(&format!("[metrics_db]\nurl = \"{base}\"\n"))
        .file("hostile.txt", &format!("line one\n{HOSTILE}"))
        .runbook(
            "r",
            "import \"checks\" as checks;\n\
             checks::probe(\"health\", influx::health());\n\
             let text = file::read(param(\"path\", \"\"));\n\
             log(text);\n\
             check(\"file\", #{ ok: false, detail: text, expected: \"calm\", actual: text });\n",
        );
    let path = format!("path={}", t.path().join("hostile.txt").display());
    let out = t.run_in_place(&["run", "r", "--set", &path]);
    assert_eq!(
        (out.0, crate::support::mask(&out.1).as_str(), out.2.as_str()),
        (
            1,
            format!(
                "r (runbooks/r.rhai)
  ok    health — HTTP 200, {SHOWN} (v2.7.11)
  line one
{SHOWN}
  FAIL  file — line one
          {SHOWN}
          expected: calm
          actual:   line one
{SHOWN}

1 passed, 1 failed  ([DUR])
"
            )
            .as_str(),
            ""
        )
    );
    // As JSON the characters are JSON escapes, and nothing raw is printed.
    let out = t.run_in_place(&["run", "r", "--set", &path, "--format", "json"]);
    assert!(!out.1.contains('\u{1b}') && !out.1.contains('\u{7}'), "{}", out.1);
    assert!(out.1.contains("\"detail\": \"HTTP 200, \\u001b]0;PWNED\\u0007\\u001b[2J (v2.7.11)\""), "{}", out.1);
}

#[test]
fn an_argument_echoed_in_a_refusal_is_escaped() {
    let out = Test::new().args(["run", "restart", "--sandbox", "--set", "component=lo\u{1b}]0;PWN\u{7}ki"]).run();
    assert!(!out.stdout.contains('\u{1b}') && !out.stderr.contains('\u{1b}'), "{:?}", out.stdout);
    let out = out.code(1);
    assert_eq!(
        out.stdout.lines().nth(2).unwrap_or_default(),
        "aborted: unknown component `lo\\x1b]0;PWN\\x07ki`: use one of log-shipper, log-store, metrics-agent, \
         metrics-db or a unit name (influxdb.service, loki.service, telegraf.service, alloy.service) (at \
         <built-in>/runbooks/restart.rhai:14:16; thrown at <built-in>/stdlib/stack.rhai:74:5)"
    );
    // A refusal on stderr too: a runbook name that is not one.
    Test::new().args(["run", "no\u{1b}[2Jsuch"]).run().code(2).stderr_is(
        "error: no runbook named `no\\x1b[2Jsuch`\n  help: `opsbook list` shows every runbook and where it comes from\n",
    );
}
