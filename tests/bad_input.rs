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
