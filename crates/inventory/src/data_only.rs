//! An inventory is data, not the operator's code: the settings an Ansible inventory may not
//! make, because they would run a program (or reach a file) on the operator's own machine.
//!
//! Inventories are not always ours (a shared repository, a generated file), so a key that
//! runs something here comes only from the operator's own configuration — opsbook.toml (its
//! `[hosts.NAME]` tables included), the environment, `~/.ssh/config`. From an inventory it is
//! refused in words:
//! - `metrics_db.token_command` (run on this machine to print the token);
//! - `metrics_db.url` and `metrics_db.token_file`: together they decide where the operator's
//!   API token is read from and sent to, so an inventory setting them could send the token to a
//!   server of its choosing (or have opsbook read another file as the token);
//! - `ssh.options` other than the ones below, which only tune the connection: an allow-list,
//!   not a deny-list, because ssh grows options that run programs (`ProxyCommand`,
//!   `LocalCommand`, `KnownHostsCommand`, `Match exec`, `PKCS11Provider`, …).
//!
//! What runs on the host itself (a unit's `exec`, a component's check command) is the host's
//! business and stays the inventory's to set.

use opsbook_base::config::{self, Value, keys};

/// ssh options (lower case, as ssh compares them) an inventory may set: each only tunes how
/// the connection is made or how the host's key is checked.
const SAFE_SSH_OPTIONS: &[&str] = &[
    "addressfamily",
    "casignaturealgorithms",
    "checkhostip",
    "ciphers",
    "compression",
    "connectionattempts",
    "connecttimeout",
    "gssapiauthentication",
    "hostbasedauthentication",
    "hostkeyalgorithms",
    "hostkeyalias",
    "identitiesonly",
    "ipqos",
    "kbdinteractiveauthentication",
    "kexalgorithms",
    "loglevel",
    "macs",
    "numberofpasswordprompts",
    "passwordauthentication",
    "preferredauthentications",
    "pubkeyacceptedalgorithms",
    "pubkeyacceptedkeytypes",
    "pubkeyauthentication",
    "rekeylimit",
    "serveralivecountmax",
    "serveraliveinterval",
    "stricthostkeychecking",
    "tcpkeepalive",
    "updatehostkeys",
    "verifyhostkeydns",
];

/// The names, as written in messages.
const SAFE_SSH_OPTIONS_SHOWN: &str = "AddressFamily, CASignatureAlgorithms, CheckHostIP, Ciphers, Compression, \
     ConnectionAttempts, ConnectTimeout, GSSAPIAuthentication, HostbasedAuthentication, HostKeyAlgorithms, \
     HostKeyAlias, IdentitiesOnly, IPQoS, KbdInteractiveAuthentication, KexAlgorithms, LogLevel, MACs, \
     NumberOfPasswordPrompts, PasswordAuthentication, PreferredAuthentications, PubkeyAcceptedAlgorithms, \
     PubkeyAcceptedKeyTypes, PubkeyAuthentication, RekeyLimit, ServerAliveCountMax, ServerAliveInterval, \
     StrictHostKeyChecking, TCPKeepAlive, UpdateHostKeys, VerifyHostKeyDNS";

/// Keys whose value is a program opsbook runs on this machine.
const RUN_HERE: &[&str] = &[keys::METRICS_DB_TOKEN_COMMAND.name];

/// Keys that decide where the operator's API token is read from or sent to.
const TOKEN_GOES: &[&str] = &[keys::METRICS_DB_URL.0, keys::METRICS_DB_TOKEN_FILE.name];

/// Why an inventory may not set `key` to `value`, or `None` when it may.
pub(crate) fn refusal(key: &keys::Key, value: &Value) -> Option<String> {
    if TOKEN_GOES.contains(&key.name) {
        return Some(format!(
            "`{}` decides where your API token is read from or sent, so it is allowed only in your own \
             configuration (opsbook.toml, its `[hosts.NAME]` tables, or the environment), never in an inventory",
            key.name
        ));
    }
    if RUN_HERE.contains(&key.name) {
        return Some(format!(
            "`{}` runs a program on this machine, so it comes only from your own configuration \
             (opsbook.toml or the environment), never from an inventory",
            key.name
        ));
    }
    if key.name != keys::SSH_OPTIONS.name {
        return None;
    }
    let text = match value {
        Value::Text(t) => t.clone(),
        Value::Argv(items) => items.join(","),
    };
    config::list(&text).into_iter().find_map(|option| ssh_option_refusal(&option))
}

/// Why one `Name=value` (or `Name value`) ssh option may not come from an inventory.
fn ssh_option_refusal(option: &str) -> Option<String> {
    if option.chars().any(char::is_control) {
        return Some(format!("the ssh option {option:?} contains control characters"));
    }
    let name: String = option.chars().take_while(|c| !c.is_whitespace() && *c != '=').collect();
    if SAFE_SSH_OPTIONS.contains(&name.to_ascii_lowercase().as_str()) {
        return None;
    }
    Some(format!(
        "the ssh option `{name}` may not come from an inventory: ssh options that could run a program or \
         reach a file on this machine are your own to set (`ssh.options` in opsbook.toml, or ~/.ssh/config); \
         an inventory may set only {SAFE_SSH_OPTIONS_SHOWN}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_names_are_the_allowed_ones() {
        let shown: Vec<String> = SAFE_SSH_OPTIONS_SHOWN.split(", ").map(str::to_ascii_lowercase).collect();
        assert_eq!(shown, SAFE_SSH_OPTIONS);
    }

    #[test]
    fn options_that_run_programs_are_refused_however_they_are_spelled() {
        let options = keys::SSH_OPTIONS;
        for bad in [
            "ProxyCommand=touch x",
            "proxycommand touch x",
            " PROXYCOMMAND=x",
            "StrictHostKeyChecking=no,LocalCommand=x",
            "PermitLocalCommand=yes",
            "KnownHostsCommand=x",
            "Match=exec x",
            "PKCS11Provider=/tmp/x.so",
            "Include=/tmp/x",
            "ControlPath=/tmp/x",
            "ServerAliveInterval=5\nProxyCommand=x",
        ] {
            assert!(refusal(options, &Value::Text(bad.into())).is_some(), "{bad}");
        }
        for good in ["StrictHostKeyChecking=accept-new", "ServerAliveInterval 5, connecttimeout=3"] {
            assert_eq!(refusal(options, &Value::Text(good.into())), None, "{good}");
        }
        assert!(refusal(keys::METRICS_DB_TOKEN_COMMAND, &Value::Argv(vec!["true".into()])).is_some());
        assert_eq!(refusal(keys::SCOPE, &Value::Text("user".into())), None);
    }
}
