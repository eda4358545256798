//! Failures on one host of a real fleet, through `opsbook run checklist --hosts all` (the
//! fleet of tests/fleet_runs.rs: a server and client hosts over ssh, each its own network
//! namespace, sshd, `systemd --user` and journald): a wrong key, a client firewalled from the
//! server's 3100, a unit failed on one client, the server's firewall dropping 3100 from a
//! client, and a WireGuard tunnel reported up, then down once its peer is gone. Each run exits
//! 1 and its whole report is compared: the failing host and check named, the others passing.
//! Skipped, saying why, without root or sshd (and boringtun for the tunnel).

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::fleet_runs::{boot, install, opsbook};
use crate::support::fleet::Fleet;
use crate::support::{Test, wait_until};

/// A report as a pattern: each line as written, `…` standing for any text (a check that
/// waited for data says `— after 2s`), and the time a slow check took (`  ([DUR])`) allowed
/// after any line.
fn pattern(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let line = regex::escape(l).replace('…', ".*");
            if l.is_empty() || l.starts_with(char::is_alphanumeric) {
                line
            } else {
                format!(r"{line}(?:  \(\[DUR\]\))?")
            }
        })
        .collect();
    lines.join("\n") + "\n"
}

/// Replaces the line that starts with `at` by `with` (any number of lines).
fn swap(text: String, at: &str, with: &str) -> String {
    let found = text.lines().filter(|l| l.starts_with(at)).count();
    assert_eq!(found, 1, "{at:?} in\n{text}");
    text.lines().map(|l| if l.starts_with(at) { with } else { l }).collect::<Vec<_>>().join("\n") + "\n"
}

/// A healthy client host's section of the checklist (the agent's points: one per mounted
/// disk of the machine, so any number).
fn client(name: &str, server: Ipv4Addr) -> String {
    format!(
        "checklist on {name} (<built-in>/runbooks/checklist.rhai)

== client
  ok    telegraf.service active — active (running)
  ok    agent configuration test passes — … points from cpu, mem, disk
  ok    telegraf.service logged no errors since 1 hour ago
  ok    metrics in database…
  ok    alloy.service active — active (running)
  ok    shipper validation passes — [TMP]/alloy.toml is valid
  ok    alloy.service logged no errors since 1 hour ago
  ok    logs in log store…

== network
  ok    TCP reach of {server}:8086 — connected in … ms
  ok    TCP reach of {server}:3100 — connected in … ms
  skip  tunnel active — no tunnel configured (network.tunnel, or --set tunnel=IFACE)
  ok    port 8086 answers HTTP (firewall allows it) — HTTP 204
  ok    port 3100 answers HTTP (firewall allows it) — HTTP 200

12 passed, 0 failed, 1 skipped  ([DUR])

"
    )
}

/// The server host's healthy section, its firewall judged for `clients` client hosts.
fn server(address: Ipv4Addr, clients: usize) -> String {
    format!(
        "checklist on server (<built-in>/runbooks/checklist.rhai)

== server
  ok    influxdb.service active — active (running)
  ok    metrics database health 200 — HTTP 200, ready for queries and writes (v2.7.11)
  ok    token API access works — 3 bucket(s)
  ok    recent data in buckets…
  ok    influxdb.service logged no errors since 1 hour ago
  ok    loki.service active — active (running)
  ok    log store ready returns ready — ready
  ok    loki.service logged no errors since 1 hour ago…
  ok    labels returned…
  ok    recent logs present…

== network
  ok    TCP reach of {address}:8086 — connected in … ms
  ok    TCP reach of {address}:3100 — connected in … ms
  skip  tunnel active — no tunnel configured (network.tunnel, or --set tunnel=IFACE)
  ok    firewall admits 8086 from the client hosts — TCP 8086 from all {clients} sources: no nftables ruleset and no iptables rules filter it
  ok    firewall admits 3100 from the client hosts — TCP 3100 from all {clients} sources: no nftables ruleset and no iptables rules filter it
  ok    port 8086 answers HTTP (firewall allows it) — HTTP 204
  ok    port 3100 answers HTTP (firewall allows it) — HTTP 200

16 passed, 0 failed, 1 skipped  ([DUR])

"
    )
}

/// The fleet summary: (host, roles, passed, failed) rows and the closing line.
fn summary(rows: &[(&str, &str, usize, usize)], closing: &str) -> String {
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
    let mut out = format!("{:<width$}  ROLES                       PASSED  FAILED  TIME\n", "HOST");
    for (host, roles, passed, failed) in rows {
        out.push_str(&format!("{host:<width$}  {roles:<26}  {passed:<6}  {failed:<6}  [DUR]\n"));
    }
    // How many of the run's ssh connections were reused depends on the runs before.
    out + "\n" + closing + "  ([DUR])\nssh connections: … reused, … new\n"
}

const CLIENT: &str = "metrics-agent, log-shipper";
const SERVER: &str = "metrics-db, log-store";

/// The four hosts' rows, `failing` with one failed check of its usual count.
fn rows(failing: &[&str]) -> Vec<(&'static str, &'static str, usize, usize)> {
    [("c1", CLIENT, 12), ("c2", CLIENT, 12), ("c3", CLIENT, 12), ("server", SERVER, 16)]
        .into_iter()
        .map(|(h, r, n)| if failing.contains(&h) { (h, r, n - 1, 1) } else { (h, r, n, 0) })
        .collect()
}

#[track_caller]
fn checklist(t: &Test, hosts: &str) -> crate::support::Output {
    opsbook(t, &["run", "checklist", "--hosts", hosts]).code(1)
}

/// Sets the `[hosts.NAME]` table of the test's opsbook.toml through `edit` (the key line, or
/// a config line after it); returns the file as it was.
#[track_caller]
fn edit_host(t: &Test, fleet: &Fleet, name: &str, edit: impl Fn(&str) -> String) -> String {
    let path = t.path().join("opsbook.toml");
    let original = std::fs::read_to_string(&path).unwrap();
    let key = format!("key = \"{}\"\n", fleet.host(name).key().display());
    let table = format!("[hosts.{name}]\naddress = \"{}\"\n", fleet.host(name).address());
    let at = original.find(&table).unwrap_or_else(|| panic!("no {table} in\n{original}"));
    let end = at + original[at..].find(&key).expect("the host's key line") + key.len();
    let edited = format!("{}{}{}", &original[..end - key.len()], edit(&key), &original[end..]);
    std::fs::write(&path, edited).unwrap();
    original
}

#[test]
fn a_broken_host_fails_alone_naming_the_check() {
    let Some(fleet) = boot(&["server", "c1", "c2", "c3"]) else { return };
    let t = Test::new();
    install(&t, &fleet);
    opsbook(&t, &["run", "start", "--hosts", "log-shipper"]).code(0);
    let s = fleet.host("server").address();
    let (c1, c2, c3) = (fleet.host("c1"), fleet.host("c2"), fleet.host("c3"));

    // A key c1 does not accept: its one check names ssh's refusal; the others finish.
    let unknown = fleet.unknown_key().display().to_string();
    let original = edit_host(&t, &fleet, "c1", |_| format!("key = \"{unknown}\"\n"));
    let c1_refused = format!(
        "checklist on c1 (checklist)
  FAIL  c1 reachable over ssh — host `c1`: connecting failed: ssh said \"root@{}: Permission denied (publickey).\"; remedy: check the key given for this host and that its public half is in the host's authorized_keys; opsbook never prompts, so a key with a passphrase must be loaded in ssh-agent

0 passed, 1 failed  ([DUR])

",
        c1.address()
    );
    let rows_1 = [("c1", CLIENT, 0, 1), ("c2", CLIENT, 12, 0), ("c3", CLIENT, 12, 0), ("server", SERVER, 16, 0)];
    checklist(&t, "all").stdout_matches(&pattern(
        &[c1_refused, client("c2", s), client("c3", s), server(s, 3), summary(&rows_1, "4 host(s): 1 failed (c1)")]
            .concat(),
    ));
    std::fs::write(t.path().join("opsbook.toml"), original).unwrap();

    // c2's outbound TCP to the server's 3100 refused by nftables in its namespace: its reach
    // check fails, and so do the log store's answers, which opsbook asks from c2 (through c2's
    // ssh connection), as c2 sees them.
    c2.block_tcp_to(s, 3100);
    let blocked = swap(
        client("c2", s),
        &format!("  ok    TCP reach of {s}:3100"),
        &format!("  FAIL  TCP reach of {s}:3100 — connection refused"),
    );
    let blocked =
        swap(blocked, "  ok    logs in log store", "  FAIL  logs in log store — GET …/loki/api/v1/query_range…: …");
    let blocked =
        swap(blocked, "  ok    port 3100 answers HTTP", "  FAIL  port 3100 answers HTTP (firewall allows it) — …")
            .replace("12 passed, 0 failed", "9 passed, 3 failed");
    let mut c2_rows = rows(&[]);
    c2_rows[1] = ("c2", CLIENT, 9, 3);
    checklist(&t, "all").stdout_matches(&pattern(
        &[client("c1", s), blocked, client("c3", s), server(s, 3), summary(&c2_rows, "4 host(s): 1 failed (c2)")]
            .concat(),
    ));
    c2.ok(&["nft", "delete", "table", "inet", "opsbook_test"]);

    // The agent killed on c3: its unit has failed.
    c3.ok(&["systemctl", "--user", "kill", "--kill-whom=main", "--signal=KILL", "telegraf"]);
    wait_until("telegraf.service failed on c3", Duration::from_secs(15), || {
        let out = c3.exec(&["systemctl", "--user", "is-failed", "telegraf"]);
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stdout).trim().to_string()) }
    });
    let failed = swap(
        client("c3", s),
        "  ok    telegraf.service active",
        "  FAIL  telegraf.service active — failed (failed); result signal
          expected: active (running)
          actual:   failed (failed)",
    )
    .replace("12 passed, 0 failed", "11 passed, 1 failed");
    checklist(&t, "all").stdout_matches(&pattern(
        &[client("c1", s), client("c2", s), failed, server(s, 3), summary(&rows(&["c3"]), "4 host(s): 1 failed (c3)")]
            .concat(),
    ));
    c3.ok(&["systemctl", "--user", "reset-failed", "telegraf"]);
    c3.ok(&["systemctl", "--user", "start", "telegraf"]);

    // The server's own firewall drops 3100 from c1: the server's firewall check names c1 and
    // the rule; c1's reach of 3100 times out (a drop, not a refusal).
    fleet.host("server").nft(&format!(
        "table inet operator {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n    \
         ip saddr {} tcp dport 3100 drop\n  }}\n}}\n",
        c1.address()
    ));
    let dropped = swap(
        server(s, 3),
        "  ok    firewall admits 8086",
        "  ok    firewall admits 8086 from the client hosts — TCP 8086 from all 3 sources: policy accept of chain inet \
         operator input",
    );
    let dropped = swap(
        dropped,
        "  ok    firewall admits 3100",
        &format!(
            "  FAIL  firewall admits 3100 from the client hosts — c1: TCP 3100 from {0} is dropped by `inet operator \
             input: ip saddr {0} tcp dport 3100 drop`",
            c1.address()
        ),
    )
    .replace("16 passed, 0 failed", "15 passed, 1 failed");
    let timed_out = swap(
        client("c1", s),
        &format!("  ok    TCP reach of {s}:3100"),
        &format!("  FAIL  TCP reach of {s}:3100 — timed out after [DUR]"),
    );
    let timed_out = swap(timed_out, "  ok    logs in log store", "  FAIL  logs in log store — …");
    let timed_out =
        swap(timed_out, "  ok    port 3100 answers HTTP", "  FAIL  port 3100 answers HTTP (firewall allows it) — …")
            .replace("12 passed, 0 failed", "9 passed, 3 failed");
    let mut dropped_rows = rows(&["server"]);
    dropped_rows[0] = ("c1", CLIENT, 9, 3);
    checklist(&t, "all").stdout_matches(&pattern(
        &[
            timed_out,
            client("c2", s),
            client("c3", s),
            dropped,
            summary(&dropped_rows, "4 host(s): 2 failed (c1, server)"),
        ]
        .concat(),
    ));
}

#[test]
fn a_wireguard_tunnel_is_reported_up_then_down_once_its_peer_is_gone() {
    let Some(fleet) = boot(&["server", "c1"]) else { return };
    let t = Test::new();
    install(&t, &fleet);
    opsbook(&t, &["run", "start", "--hosts", "log-shipper"]).code(0);
    let (server, c1) = (fleet.host("server"), fleet.host("c1"));
    if let Err(why) = server.wireguard_with(c1) {
        crate::support::skip(why);
        return;
    }
    // c1 reaches the server through wg0. WireGuard handshakes again every 2 minutes while the
    // peer lives, hence the 180 s default; 10 s here keeps the test short.
    edit_host(&t, &fleet, "c1", |key| {
        format!("{key}config = {{ network = {{ tunnel = \"wg0\", handshake_max_age = \"10s\" }} }}\n")
    });
    // Seconds since c1's latest handshake with its peer, as WireGuard tells: kernel WireGuard
    // gives the handshake's time, boringtun its age (both say 0 for none yet).
    let handshake_age = || {
        let out = c1.ok(&["wg", "show", "wg0", "latest-handshakes"]);
        let said: u64 = out.split_whitespace().nth(1).and_then(|n| n.parse().ok()).filter(|&n| n != 0).ok_or(out)?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        Ok::<u64, String>(if said >= 1_000_000_000 { now.saturating_sub(said) } else { said })
    };
    wait_until("a handshake through c1's wg0", Duration::from_secs(15), handshake_age);
    let since = Instant::now();
    let tunnel = |line: &str| {
        let section = swap(client("c1", server.address()), "  skip  tunnel active", line);
        section.replace(", 1 skipped", "")
    };
    let up = tunnel("  ok    WireGuard tunnel wg0 up, a handshake within [DUR] — peer … handshook … s ago")
        .replace("12 passed, 0 failed", "13 passed, 0 failed");
    opsbook(&t, &["run", "checklist", "--hosts", "c1"])
        .code(0)
        .stdout_matches(&pattern(&[up, summary(&[("c1", CLIENT, 13, 0)], "1 host(s): all passed")].concat()));
    assert!(since.elapsed() < Duration::from_secs(8), "the up check came too late to prove anything");

    // The server's end is gone: no handshake any more, so once the latest is older than the
    // window (by a second, as `wg` counts whole seconds) the tunnel is down.
    server.stop_wireguard();
    wait_until("c1's latest handshake 11 s old", Duration::from_secs(30), || match handshake_age()? {
        age if age >= 11 => Ok(()),
        age => Err(format!("{age} s")),
    });
    let down = tunnel(
        "  FAIL  WireGuard tunnel wg0 up, a handshake within [DUR] — peer … handshook … s ago: none within [DUR]",
    )
    .replace("12 passed, 0 failed", "12 passed, 1 failed");
    checklist(&t, "c1")
        .stdout_matches(&pattern(&[down, summary(&[("c1", CLIENT, 12, 1)], "1 host(s): 1 failed (c1)")].concat()));
}
