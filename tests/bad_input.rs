//! Bad input (#28): what a careless or hostile operator can feed opsbook — tokens in odd
//! places, servers that answer too much or in another language, values that make no sense —
//! is refused or reported in words, whole messages compared, and the token is never shown.

use crate::support::Test;

const TOKEN: &str = "CANARY-bad1nput-9e2d";

const LOOKUP_INVENTORY: &str = "all:
  hosts:
    h1:
      ansible_host: \"{{ lookup('env', 'INFLUX_TOKEN') }}\"
";

#[test]
fn the_token_looked_up_by_an_inventory_is_never_shown_by_hosts() {
    Test::new()
        .file("inv.yml", LOOKUP_INVENTORY)
        .env("INFLUX_TOKEN", TOKEN)
        .args(["hosts", "--inventory", "inv.yml"])
        .run()
        .code(0)
        .stdout_is(
            "HOST  ADDRESS     ROLES  SCOPE   USER  PORT
h1    <redacted>  -      system  -     -

where each value came from:
HOST  WHAT     VALUE       FROM
h1    address  <redacted>  inv.yml:4 (host var)
",
        );
    let out = Test::new()
        .file("inv.yml", LOOKUP_INVENTORY)
        .env("INFLUX_TOKEN", TOKEN)
        .args(["hosts", "--inventory", "inv.yml", "--format", "json"])
        .run()
        .code(0);
    assert_eq!(out.json()["hosts"][0]["address"]["value"], "<redacted>", "{}", out.stdout);
    assert!(!out.stdout.contains(TOKEN));
}

#[test]
fn the_token_looked_up_as_an_address_is_not_in_ssh_s_error() {
    Test::new()
        .file("inv.yml", LOOKUP_INVENTORY)
        .env("INFLUX_TOKEN", TOKEN)
        .args(["run", "quick-check", "--inventory", "inv.yml", "--hosts", "h1"])
        .run()
        .code(1)
        .stdout_has("ssh: Could not resolve hostname <redacted>: Name or service not known")
        .stdout_lacks(TOKEN)
        .stderr_lacks(TOKEN);
}

#[test]
fn config_shows_only_the_program_of_token_command() {
    let out = Test::new()
        .config(&format!("[metrics_db]\ntoken_command = [\"echo\", \"{TOKEN}\"]\n"))
        .args(["config"])
        .run()
        .code(0)
        .stdout_lacks(TOKEN);
    let line = out.stdout.lines().find(|l| l.starts_with("metrics_db.token_command")).unwrap_or_default();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>().join(" "),
        r#"metrics_db.token_command = "[\"echo\",\"<redacted>\"]" # opsbook.toml:2"#
    );
}

#[test]
fn a_syntax_error_on_the_token_s_line_does_not_echo_it() {
    Test::new().config(&format!("[metrics_db]\ntoken = \"{TOKEN}\n")).args(["config"]).run().code(2).stderr_is(
        "error: invalid TOML: invalid basic string, expected `\"`
 --> opsbook.toml:2:30
  |
2 | token = \"<redacted>
  |                    ^
",
    );
}

#[test]
fn a_token_file_s_token_echoed_anywhere_is_redacted() {
    // The token a file holds, pasted into the inventory by hand.
    let test = Test::new();
    let file = test.path().join("influx.token");
    std::fs::write(&file, TOKEN).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    test.config(&format!("[metrics_db]\ntoken_file = \"{}\"\n", file.display()))
        .file("inv.yml", &format!("all:\n  hosts:\n    h1:\n      ansible_host: {TOKEN}\n"))
        .args(["hosts", "--inventory", "inv.yml"])
        .run()
        .code(0)
        .stdout_has("h1    <redacted>  -")
        .stdout_lacks(TOKEN);
}

/// A server on a loopback port answering every connection with `answer` (given the writer),
/// until the test ends. Its address, `http://127.0.0.1:PORT`.
pub(crate) fn server(answer: fn(&mut std::net::TcpStream)) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut request = [0u8; 4096];
                let _ = std::io::Read::read(&mut stream, &mut request);
                answer(&mut stream);
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// An answer that never ends: a 200 with no length, then `x` for ever (until the reader goes).
fn endless(stream: &mut std::net::TcpStream) {
    use std::io::Write;
    let chunk = vec![b'x'; 64 << 10];
    if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n").is_ok() {
        while stream.write_all(&chunk).is_ok() {}
    }
}

const BIG: &str = r#"let base = param("base", "");
let r = http::get(`${base}/page`);
check("http::get answered", r.ok, `HTTP ${r.status}: ${r.error}`);
let s = prom::scrape(`${base}/metrics`);
check("scraped", s.ok, s.detail);
let p = http::probe(`${base}/ready`);
check("probed", p.ok, p.detail);
check("a later check", true, "still ran");
"#;

#[test]
fn an_endless_answer_is_a_failed_check_and_later_checks_run() {
    let base = server(endless);
    let too_large =
        |path: &str| format!("answer larger than 1 MB from {base}{path} (not read on; `http.max_body` sets the limit)");
    let out = Test::new()
        .config("[http]\nmax_body = 1\n")
        .runbook("big", BIG)
        .args(["run", "big", "--set", &format!("base={base}")])
        .run()
        .code(1);
    let expected = format!(
        "big (runbooks/big.rhai)
  FAIL  http::get answered — HTTP 200: {}
  FAIL  scraped — {}
  FAIL  probed — {}
  ok    a later check — still ran

1 passed, 3 failed  ([DUR])
",
        too_large("/page"),
        too_large("/metrics"),
        too_large("/ready")
    );
    out.stdout_is(&expected);
}

#[test]
fn verify_log_store_reports_an_endless_answer_per_check() {
    let base = server(endless);
    let out = Test::new()
        .config(&format!("[http]\nmax_body = 1\n[log_store]\nurl = \"{base}\"\n"))
        .args(["run", "verify-log-store"])
        .run()
        .code(1);
    let lines: Vec<&str> =
        out.stdout.lines().filter(|l| l.contains("answer larger") && !l.contains("log entries")).collect();
    let too_large =
        |path: &str| format!("answer larger than 1 MB from {base}{path} (not read on; `http.max_body` sets the limit)");
    assert_eq!(
        lines,
        [
            format!("  FAIL  log store /ready says ready — {}", too_large("/ready")),
            format!("  FAIL  loki_ingester_chunks_created_total readable — {}", too_large("/metrics")),
            format!("  FAIL  labels listed — {}", too_large("/loki/api/v1/labels")),
            format!("  FAIL  storage backend — {}", too_large("/config")),
        ],
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("FAIL  log entries for {service_type=~\".+\"} — answer larger than 1 MB from"));
}
