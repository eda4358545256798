//! Bad input (#28), messages: a bad address, a server that does not speak HTTP, an answer that
//! does not parse and a value that makes no sense each get a message naming the address or
//! value, what is wrong and what to do — compared whole.

use crate::bad_input::server;
use crate::support::Test;

const HOW: &str = "write it as http://HOST:PORT/PATH or https://HOST:PORT/PATH";

#[test]
fn bad_addresses_name_the_address_what_is_wrong_and_how_to_write_one() {
    let runbook = r#"for u in ["not a url", "http://", "http://127.0.0.1:99999/", "ftp://x/", "http://exa mple.com/"] {
    let p = http::probe(u);
    check(`probe ${u}`, p.ok, p.detail);
    try { http::get(u); } catch (e) { check(`get ${u}`, false, e); }
}"#;
    let lines = [
        ("not a url", "it is not an address (no http:// or https://)"),
        ("http://", "it names no host"),
        ("http://127.0.0.1:99999/", "its port is not a number from 1 to 65535 (`99999`)"),
        ("ftp://x/", "opsbook speaks http:// and https:// only, not ftp://"),
        ("http://exa mple.com/", "its host name holds a character no host name can (a space?)"),
    ];
    let mut expected = "urls (runbooks/urls.rhai)\n".to_string();
    for (url, what) in lines {
        for verb in ["probe", "get"] {
            expected += &format!("  FAIL  {verb} {url} — `{url}` is not a usable address: {what}; {HOW}\n");
        }
    }
    expected += "\n0 passed, 10 failed  ([DUR])\n";
    Test::new().runbook("urls", runbook).args(["run", "urls"]).run().code(1).stdout_is(&expected);
}

fn ssh_banner(stream: &mut std::net::TcpStream) {
    let _ = std::io::Write::write_all(stream, b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
}

#[test]
fn a_server_that_does_not_speak_http_is_quoted() {
    let base = server(ssh_banner);
    let port = base.rsplit(':').next().unwrap();
    let tls = base.replace("http://", "https://");
    let runbook = format!(
        "let p = http::probe(\"{base}/ready\");\ncheck(\"probe\", p.ok, p.detail);\n\
         let s = prom::scrape(\"{base}/metrics\");\ncheck(\"scrape\", s.ok, s.detail);\n\
         let t = http::probe(\"{tls}/ready\");\ncheck(\"tls\", t.ok, t.detail);\n"
    );
    let said = |path: &str| {
        format!(
            "the server at 127.0.0.1:{port} does not speak HTTP: it answered \"SSH-2.0-OpenSSH_9.2p1 Debian-2\" \
             to GET {path}; is this the right port?"
        )
    };
    let not_tls = format!(
        "the server at 127.0.0.1:{port} does not speak TLS: it answered \"SSH-2.0-OpenSSH_9.2p1 Debian-2\" to a \
         plain GET /ready; is it http://, or the wrong port?"
    );
    Test::new().runbook("garbled", &runbook).args(["run", "garbled"]).run().code(1).stdout_is(&format!(
        "garbled (runbooks/garbled.rhai)\n  FAIL  probe — {}\n  FAIL  scrape — {}\n  FAIL  tls — {not_tls}\n\n\
         0 passed, 3 failed  ([DUR])\n",
        said("/ready"),
        said("/metrics")
    ));
}

fn not_what_you_wanted(stream: &mut std::net::TcpStream) {
    let body = "not what you wanted {oops";
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = std::io::Write::write_all(stream, answer.as_bytes());
}

#[test]
fn an_answer_that_does_not_parse_is_quoted() {
    let base = server(not_what_you_wanted);
    let runbook = r#"try { loki::labels(); } catch (e) { check("labels", false, e); }
try { influx::query(`from(bucket: "x")`); } catch (e) { check("flux", false, e); }
try { parse_json("{oops"); } catch (e) { check("json", false, e); }
let s = prom::scrape(`${config.log_store.url}/metrics`);
check("scrape", s.ok, s.detail);
"#;
    Test::new()
        .config(&format!(
            "[log_store]\nurl = \"{base}\"\n[metrics_db]\nurl = \"{base}\"\ntoken = \"tok-abcdefgh\"\norg = \"o\"\n"
        ))
        .runbook("parse", runbook)
        .args(["run", "parse"])
        .run()
        .code(1)
        .stdout_is(
            "parse (runbooks/parse.rhai)
  FAIL  labels — log store: not JSON (expected ident at line 1 column 2): not what you wanted {oops
  FAIL  flux — the metrics database's answer is not annotated CSV: HTTP 200: not what you wanted {oops
  FAIL  json — not JSON (key must be a string at line 1 column 2): {oops
  FAIL  scrape — not exposition text (line 1: `what` is not a number): HTTP 200: not what you wanted {oops

0 passed, 4 failed  ([DUR])
",
        );
}

#[test]
fn nonsense_configuration_values_are_refused_when_read() {
    let cases = [
        ("[http]\ntimeout = \"0s\"\n", "`http.timeout`: `0s` must be more than zero", "timeout = \"0s\""),
        (
            "[limits]\nmax_operations = -1\n",
            "`limits.max_operations`: `-1` must be more than zero",
            "max_operations = -1",
        ),
        ("[http]\nmax_body = 0\n", "`http.max_body`: `0` must be more than zero", "max_body = 0"),
        ("[journal]\ntimeout = \"0s\"\n", "`journal.timeout`: `0s` must be more than zero", "timeout = \"0s\""),
        (
            "[metrics_db]\nurl = \"http://\"\n",
            "`metrics_db.url`: `http://` names no host; write it as http://HOST:PORT or https://HOST:PORT",
            "url = \"http://\"",
        ),
        (
            "[metrics_db]\nurl = \"http://127.0.0.1:99999\"\n",
            "`metrics_db.url`: `http://127.0.0.1:99999`: the port `99999` is not a number from 1 to 65535; write it as http://HOST:PORT or https://HOST:PORT",
            "url = \"http://127.0.0.1:99999\"",
        ),
    ];
    // Compared unmasked: `0s` is the value refused, not a duration that varies.
    for (toml, message, line) in cases {
        let out = Test::new().config(toml).args(["config"]).run().code(2);
        assert_eq!(out.stderr, format!("error: {message}\n --> opsbook.toml:2:1\n  |\n2 | {line}\n  | ^\n"));
    }
    let out =
        Test::new().config("[[serve.job]]\nrunbook = \"quick-check\"\nevery = \"0s\"\n").args(["config"]).run().code(2);
    assert_eq!(
        out.stderr,
        "error: `serve.job.every`: `0s` must be more than zero\n --> opsbook.toml:3:1\n  |\n3 | every = \"0s\"\n  | ^\n"
    );
    let out = Test::new().args(["serve", "quick-check@0s", "--sandbox"]).run().code(2);
    assert_eq!(out.stderr, "error: `quick-check@0s`: the interval must be more than zero\n");
    // Zero is a choice for these: no shared connection kept, no settling watch.
    Test::new().config("[ssh]\npersist = \"0s\"\n[units]\nsettle = \"0s\"\n").args(["config"]).run().code(0);
}

#[test]
fn nonsense_verb_options_are_refused_when_called() {
    let runbook = r#"try { journal::read(#{ unit: "x", lines: -5 }); } catch (e) { check("lines", false, e); }
try { http::get("http://127.0.0.1:9/", #{ timeout: "0s" }); } catch (e) { check("timeout", false, e); }
try { wait::until(|| true, #{ timeout: "1s", every: "0s" }); } catch (e) { check("every", false, e); }
try { loki::query(`{a="b"}`, #{ limit: -1 }); } catch (e) { check("limit", false, e); }
"#;
    let out = Test::new().runbook("opts", runbook).args(["run", "opts"]).run().code(1);
    let (checks, _summary) = out.stdout.split_once("\n\n").unwrap();
    assert_eq!(
        checks,
        "opts (runbooks/opts.rhai)
  FAIL  lines — journal: `lines` is -5: how many lines, zero or more
  FAIL  timeout — `timeout` is 0s: it must be more than zero
  FAIL  every — `every` is 0s: it must be more than zero
  FAIL  limit — loki::query: `limit` is -1: it must be more than zero"
    );
}

#[test]
fn a_rollout_batch_of_no_hosts_is_refused_not_obeyed() {
    for serial in ["0", "0%"] {
        let out =
            Test::new().args(["run", "quick-check", "--sandbox", "--fleet", "3", "--serial", serial]).run().code(2);
        assert_eq!(
            out.stderr,
            format!(
                "error: invalid value '{serial}' for '--serial <N|P%>': `{serial}`: a batch of no hosts changes nothing; \
                 give 1 or more hosts, or a share above 0%\n\nFor more information, try '--help'.\n"
            )
        );
    }
}
