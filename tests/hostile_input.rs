//! Hostile input, round three (#50): an inventory runs nothing on this machine, a file opsbook
//! writes never replaces a device or a FIFO, … Whole outputs compared.

use proptest::prelude::*;
use proptest::test_runner::{Config as Cases, TestRunner};

use crate::support::Test;

/// An Ansible inventory whose one host sets `var` to `value`.
fn inventory_setting(var: &str, value: &str) -> String {
    format!("all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      {var}: {value:?}\n")
}

#[test]
fn an_inventory_may_not_set_what_runs_a_program_or_where_the_token_goes() {
    let allowed = "an inventory may set only AddressFamily, CASignatureAlgorithms, CheckHostIP, Ciphers, Compression, \
     ConnectionAttempts, ConnectTimeout, GSSAPIAuthentication, HostbasedAuthentication, HostKeyAlgorithms, \
     HostKeyAlias, IdentitiesOnly, IPQoS, KbdInteractiveAuthentication, KexAlgorithms, LogLevel, MACs, \
     NumberOfPasswordPrompts, PasswordAuthentication, PreferredAuthentications, PubkeyAcceptedAlgorithms, \
     PubkeyAcceptedKeyTypes, PubkeyAuthentication, RekeyLimit, ServerAliveCountMax, ServerAliveInterval, \
     StrictHostKeyChecking, TCPKeepAlive, UpdateHostKeys, VerifyHostKeyDNS";
    let ssh = |name: &str| {
        format!(
            "the ssh option `{name}` may not come from an inventory: ssh options that could run a program or reach \
             a file on this machine are your own to set (`ssh.options` in opsbook.toml, or ~/.ssh/config); {allowed}"
        )
    };
    // Where the operator's token is read from and sent to is the operator's alone (#50, decided).
    let token_goes = |key: &str| {
        format!(
            "`{key}` decides where your API token is read from or sent, so it is allowed only in your own \
             configuration (opsbook.toml, its `[hosts.NAME]` tables, or the environment), never in an inventory"
        )
    };
    let cases = [
        ("opsbook_ssh_options", "ProxyCommand=touch pwned", ssh("ProxyCommand"), 27),
        (
            "opsbook_ssh_options",
            "StrictHostKeyChecking=no,PermitLocalCommand=yes,LocalCommand=touch pwned",
            ssh("PermitLocalCommand"),
            27,
        ),
        ("opsbook_ssh_options", "KnownHostsCommand touch pwned", ssh("KnownHostsCommand"), 27),
        (
            "opsbook_metrics_db_token_command",
            "touch pwned",
            "`metrics_db.token_command` runs a program on this machine, so it comes only from your own \
             configuration (opsbook.toml or the environment), never from an inventory"
                .to_string(),
            40,
        ),
        ("opsbook_metrics_db_url", "http://collector.evil:8086", token_goes("metrics_db.url"), 0),
        ("opsbook_metrics_db_token_file", "/etc/shadow", token_goes("metrics_db.token_file"), 0),
    ];
    for (var, value, refusal, width) in cases {
        let t = Test::new().file("inv.yml", &inventory_setting(var, value));
        for args in [
            &["hosts", "--inventory", "inv.yml"][..],
            &["run", "quick-check", "--inventory", "inv.yml", "--hosts", "h1"],
        ] {
            let out = t.run_in_place(args);
            let line = format!("5 |       {var}: {value:?}");
            let expected =
                format!("error: host `h1`: `{var}`: {refusal}\n --> inv.yml:5:7\n  |\n{line}\n  |       {}\n", "^");
            let _ = width;
            assert_eq!((out.0, out.1.as_str(), out.2.as_str()), (2, "", expected.as_str()), "{value}");
        }
        assert!(!t.path().join("pwned").exists(), "{value}: nothing ran");
    }
    // What only tunes the connection stays the inventory's to set.
    Test::new()
        .file(
            "inv.yml",
            &inventory_setting("opsbook_ssh_options", "StrictHostKeyChecking=accept-new, ServerAliveInterval 5"),
        )
        .args(["hosts", "--inventory", "inv.yml"])
        .run()
        .code(0)
        .stdout_has("h1    ssh.options  StrictHostKeyChecking=accept-new, ServerAliveInterval 5  inv.yml:5 (host var)");
}

/// Runs `script` (`$1`: opsbook) as sh in a private mount namespace with its own /dev (a
/// tmpfs holding a `null` and a `full` device made for it): the real /dev is never touched.
fn in_private_dev(t: &Test, script: &str) -> String {
    let setup = "set -e\nmount -t tmpfs -o size=1m tmpfs /dev\nmknod -m 666 /dev/null c 1 3\nmknod -m 666 /dev/full c 1 7\nset +e\n";
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &format!("{setup}{script}"), "sh"])
        .arg(crate::support::opsbook())
        .current_dir(t.path())
        .env("HOME", t.path())
        .output()
        .expect("unshare");
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unshare") {
        crate::support::skip(format!("no mount namespace: {}", String::from_utf8_lossy(&out.stderr)));
        return String::new();
    }
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn save_json_writes_into_a_device_or_fifo_and_never_replaces_it() {
    let t = Test::new().runbook("one", "check(\"one\", true);\n");
    let script = "\"$1\" run one --sandbox --save-json /dev/null >/dev/null; echo \"null: $? $(stat -c %F /dev/null)\"\n\
                  \"$1\" run one --sandbox --save-json /dev/full >/dev/null; echo \"full: $? $(stat -c %F /dev/full)\"\n\
                  ln -s /proc/self/fd/1 out\n\
                  \"$1\" run one --sandbox --save-json out | grep -c '\"passed\": 1'; echo \"link: $(stat -L -c %F out)\"\n\
                  mkfifo fifo; cat fifo > read & \"$1\" run one --sandbox --save-json fifo >/dev/null; wait\n\
                  echo \"fifo: $(stat -c %F fifo) $(grep -c '\"passed\": 1' read)\"\n\
                  rm fifo; mkfifo fifo; \"$1\" run one --sandbox --save-json fifo >/dev/null; echo \"unread fifo: $? $(stat -c %F fifo)\"\n";
    let seen = in_private_dev(&t, script);
    if seen.is_empty() {
        return;
    }
    assert_eq!(
        seen,
        "null: 0 character special file
full: 2 character special file
1
link: fifo
fifo: fifo 1
unread fifo: 2 fifo
error: cannot write the JSON report to `/dev/full`
  caused by: No space left on device (os error 28)
error: cannot write the JSON report to `fifo`
  caused by: it is a FIFO (named pipe) that nothing reads
"
    );
}

/// Secrets made of what writers escape: quotes, `&`, `<`, `\`, blanks, `%`, `#`, `/`, `?`,
/// sometimes on two lines.
fn secrets() -> impl Strategy<Value = String> {
    let line = "[A-Za-z0-9&<>\"'\\\\ #/?`%-]{5,16}";
    (line, proptest::option::of(line)).prop_map(|(a, b)| {
        let a = format!("Zq{a}");
        match b {
            Some(b) => format!("{a}\nYp{b}"),
            None => a,
        }
    })
}

/// How one output writes a text.
type Writer = fn(&str) -> String;

#[test]
fn a_secret_is_redacted_in_every_encoding_a_writer_applies_and_every_line() {
    use opsbook_base::secret::{Secret, redact};
    let writers: [(&str, Writer); 4] = [
        ("json", |s| serde_json::to_string(s).unwrap()),
        ("junit", opsbook_base::xml_escaped),
        ("page", opsbook_base::html_escaped),
        ("as it is", str::to_string),
    ];
    let cases = Cases { cases: 256, failure_persistence: None, ..Cases::default() };
    TestRunner::new(cases)
        .run(&secrets(), |secret| {
            Secret::new(secret.clone());
            for (writer, write) in writers {
                let written = write(&format!("before {secret} after"));
                // Output is redacted line by line (`RedactingWriter`).
                let shown: Vec<String> = written.lines().map(|l| redact(l).into_owned()).collect();
                let shown = shown.join("\n");
                for line in secret.lines().map(str::trim).filter(|l| l.len() >= 4) {
                    let escaped = write(line);
                    let escaped = if writer == "json" { &escaped[1..escaped.len() - 1] } else { &escaped[..] };
                    prop_assert!(!shown.contains(escaped), "{writer}: {secret:?} shown as {shown:?}");
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_token_escaped_by_a_writer_is_redacted_there() {
    let cases = [
        (
            "junit",
            "S3&cretPW",
            "S3&cretPW",
            "      <failure message=\"the server said <redacted>\">the server said <redacted></failure>",
        ),
        (
            "junit",
            "sec\"ret'PW",
            "sec\\\"ret'PW",
            "      <failure message=\"the server said <redacted>\">the server said <redacted></failure>",
        ),
        ("json", "sec\"ret\\PW", "sec\\\"ret\\\\PW", "      \"detail\": \"the server said <redacted>\","),
    ];
    for (format, token, in_rhai, expected) in cases {
        let runbook = format!("check(\"echo\", false, \"the server said {in_rhai}\");\n");
        let out =
            Test::new().runbook("r", &runbook).env("INFLUX_TOKEN", token).args(["run", "r", "--format", format]).run();
        let line = out.stdout.lines().find(|l| l.contains("the server said")).unwrap_or_default();
        assert_eq!(line, expected, "{format} {token}: {}", out.stdout);
    }
}

#[test]
fn each_line_of_a_two_line_token_file_is_redacted() {
    let t = Test::new().file("influx.token", "first-line-A1\nsecond-line-B2\n");
    let token = t.path().join("influx.token");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let runbook = format!("print(file::read(\"{0}\"));\nprint(\"second-line-B2 alone\");\n", token.display());
    t.config("[metrics_db]\ntoken_file = \"influx.token\"\n")
        .runbook("r", &runbook)
        .args(["run", "r"])
        .run()
        .code(0)
        .stdout_is("r (runbooks/r.rhai)\n  <redacted>\n\n  <redacted> alone\n\n0 passed, 0 failed  ([DUR])\n");
}

#[test]
fn a_url_password_holding_what_ends_a_url_is_never_shown() {
    for password in ["it's-S3c", "two words", "q\\\"uote", "l<t-x", "back`tick", "ha#sh", "sl/ash", "qu?ery"] {
        let out = Test::new()
            .config(&format!("[log_store]\nurl = \"http://bob:{password}@127.0.0.1:9\"\n"))
            .args(["config"])
            .run();
        let line = out.stdout.lines().find(|l| l.starts_with("log_store.url")).unwrap_or(&out.stderr).to_string();
        let expected = if password.contains(['#', '/', '?']) {
            "error: `log_store.url`: `http://bob:<redacted>@127.0.0.1:9`: the user or password holds `/`, `?` or \
             `#`, which end an address's host part; write them as %2F, %3F and %23 --> opsbook.toml:2:1 | 2 | \
             url = \"http://bob:<redacted>@127.0.0.1:9\" | ^"
        } else {
            "log_store.url = \"http://bob:<redacted>@127.0.0.1:9\" # opsbook.toml:2"
        };
        assert_eq!(line.split_whitespace().collect::<Vec<_>>().join(" "), expected, "{password}");
    }
}

/// An inventory whose host names and addresses hold an OSC title sequence, a NUL and a
/// right-to-left override.
const EVIL_INVENTORY: &str = "all:\n  hosts:\n    \"evil\\e]0;PWNED\\a\":\n      ansible_host: \"127.0.0.1\\0\"\n      ansible_port: 1\n    \"txt\\u202Eexe\":\n      ansible_host: 127.0.0.1\n      ansible_port: 1\n";

#[test]
fn hosts_shows_control_and_bidi_characters_of_an_inventory_escaped() {
    Test::new().file("inv.yml", EVIL_INVENTORY).args(["hosts", "--inventory", "inv.yml"]).run().code(0).stdout_is(
        r"HOST                  ADDRESS        ROLES  SCOPE   USER  PORT
evil\x1b]0;PWNED\x07  127.0.0.1\x00  -      system  -     1
txt\u{202e}exe        127.0.0.1      -      system  -     1

where each value came from:
HOST                  WHAT     VALUE          FROM
evil\x1b]0;PWNED\x07  address  127.0.0.1\x00  inv.yml:4 (host var)
evil\x1b]0;PWNED\x07  port     1              inv.yml:5 (host var)
txt\u{202e}exe        address  127.0.0.1      inv.yml:7 (host var)
txt\u{202e}exe        port     1              inv.yml:8 (host var)
",
    );
}

#[test]
fn the_last_line_of_a_fleet_run_shows_host_names_escaped() {
    let out = Test::new()
        .file("inv.yml", &EVIL_INVENTORY.replace("\\0", ""))
        .args(["run", "quick-check", "--inventory", "inv.yml", "--hosts", "all"])
        .run()
        .code(1);
    let remedy = "remedy: check that sshd runs on the host and that its port is reachable from here";
    let refused = "ssh said \"ssh: connect to host 127.0.0.1 port 1: Connection refused\"";
    assert_eq!(
        crate::support::mask(&out.stdout),
        format!(
            r"quick-check on evil\x1b]0;PWNED\x07 (quick-check)
  FAIL  evil\x1b]0;PWNED\x07 reachable over ssh — host `evil\x1b]0;PWNED\x07`: connecting failed: {refused}; {remedy}

0 passed, 1 failed  ([DUR])

quick-check on txt\u{{202e}}exe (quick-check)
  FAIL  txt\u{{202e}}exe reachable over ssh — host `txt\u{{202e}}exe`: connecting failed: {refused}; {remedy}

0 passed, 1 failed  ([DUR])

HOST                  ROLES  PASSED  FAILED  TIME
evil\x1b]0;PWNED\x07  -      0       1       [DUR]
txt\u{{202e}}exe        -      0       1       [DUR]

2 host(s): 2 failed (evil\x1b]0;PWNED\x07, txt\u{{202e}}exe)  ([DUR])
"
        )
    );
}

#[test]
fn hosts_shows_a_value_longer_than_a_format_width_without_panicking() {
    let long = "a".repeat(70_000);
    let out = Test::new()
        .file("inv.yml", &format!("all:\n  hosts:\n    h1:\n      ansible_host: {long}\n"))
        .args(["hosts", "--inventory", "inv.yml"])
        .run()
        .code(0);
    let header = format!("HOST  ADDRESS{}  ROLES  SCOPE   USER  PORT", " ".repeat(70_000 - "ADDRESS".len()));
    assert_eq!(out.stdout.lines().next().unwrap_or_default(), header);
    assert_eq!(out.stdout.lines().nth(1).unwrap_or_default(), format!("h1    {long}  -      system  -     -"));
}

#[test]
fn a_template_value_never_changes_the_structure_of_the_file() {
    let runbook = r#"
for t in ["t.toml.j2", "t.yaml.j2", "t.service.j2"] {
    for v in ["my\"org\\x", "myorg\"\n[[outputs.file]]", "a: b"] {
        try { print(template::render(t, #{org: v})); } catch (e) { print(`${t}: ${e}`); }
    }
}
"#;
    Test::new()
        .file("templates/t.toml.j2", "organization = \"{{ org }}\"\n")
        .file("templates/t.yaml.j2", "organization: {{ org }}\n")
        .file("templates/t.service.j2", "[Service]\nEnvironment=ORG={{ org }}\n")
        .runbook("r", runbook)
        .args(["run", "r"])
        .run()
        .stdout_is(
            r#"r (runbooks/r.rhai)
  organization = "my\"org\\x"

  t.toml.j2: in template `t.toml.j2`: invalid operation: a value holds a line break or a control character: refused, as it would change the file's structure
 --> templates/t.toml.j2:1:20
  |
1 | organization = "{{ org }}"
  |                    ^
  organization = "a: b"

  t.yaml.j2: in template `t.yaml.j2`: invalid operation: a value holds what YAML reads as structure (`: `, ` #`, quotes, brackets): refused, as it would change the file's structure
 --> templates/t.yaml.j2:1:18
  |
1 | organization: {{ org }}
  |                  ^
  t.yaml.j2: in template `t.yaml.j2`: invalid operation: a value holds a line break or a control character: refused, as it would change the file's structure
 --> templates/t.yaml.j2:1:18
  |
1 | organization: {{ org }}
  |                  ^
  t.yaml.j2: in template `t.yaml.j2`: invalid operation: a value holds what YAML reads as structure (`: `, ` #`, quotes, brackets): refused, as it would change the file's structure
 --> templates/t.yaml.j2:1:18
  |
1 | organization: {{ org }}
  |                  ^
  [Service]
Environment=ORG=my"org\x

  t.service.j2: in template `t.service.j2`: invalid operation: a value holds a line break or a control character: refused, as it would change the file's structure
 --> templates/t.service.j2:2:20
  |
2 | Environment=ORG={{ org }}
  |                    ^
  [Service]
Environment=ORG=a: b


0 passed, 0 failed  ([DUR])
"#,
        );
}

#[test]
fn history_refuses_a_limit_of_zero() {
    Test::new().args(["history", "--limit", "0"]).run().code(2).stderr_is(
        "error: invalid value '0' for '--limit <N>': it must be 1 or more (0 runs would show nothing)\n\nFor more information, try '--help'.\n",
    );
}

#[test]
fn a_components_file_that_is_a_fifo_or_a_device_is_refused_naming_it() {
    let t = Test::new();
    let fifo = t.path().join("components.toml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = t.run_in_place(&["run", "quick-check", "--sandbox"]);
    assert_eq!(
        (out.0, out.1.as_str(), out.2.as_str()),
        (
            2,
            "",
            "error: the component table `components.toml` is a FIFO (named pipe), not a regular file: give the path of a file\n"
        )
    );
    std::fs::remove_file(&fifo).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &fifo).unwrap();
    let out = t.run_in_place(&["run", "quick-check", "--sandbox"]);
    assert_eq!(
        (out.0, out.1.as_str(), out.2.as_str()),
        (
            2,
            "",
            "error: the component table `components.toml` is a character device, not a regular file: give the path of a file\n"
        )
    );
}

#[test]
fn a_components_file_beside_the_runbooks_folder_given_as_dot_slash_is_read_once() {
    let t = Test::new();
    let fixture = crate::support::repo_dir().join("tests/fixtures/fifth-component/components.toml");
    std::fs::copy(fixture, t.path().join("components.toml")).unwrap();
    std::fs::create_dir_all(t.path().join("runbooks")).unwrap();
    let out = t.run_in_place(&["--runbooks", "./runbooks", "config"]);
    assert_eq!((out.0, out.2.as_str()), (0, ""), "{}", out.1);
    let roles = out.1.lines().find(|l| l.starts_with("roles ")).unwrap_or_default();
    assert_eq!(
        roles.split_whitespace().collect::<Vec<_>>().join(" "),
        "roles = \"metrics-db,log-store,web,metrics-agent,log-shipper\" # default"
    );
}
