//! `host::wireguard(iface)` — a WireGuard interface of the host and how recently each peer
//! handshook, asked on the host itself in one command (`ip -o link`, `wg show`) through the
//! world's commands, so on a fleet host it runs there over ssh.
//!
//! `wg show IFACE latest-handshakes` means two things: kernel WireGuard prints the handshake's
//! time (epoch seconds, 0 for never), a userspace implementation such as boringtun prints its
//! age in seconds (and 0 for never, or for a handshake this very second). Both are accepted:
//! a value that is a plausible epoch time is one, anything smaller is an age, and a 0 counts
//! as "just now" only when the peer has received traffic (`wg show IFACE transfer`), which
//! no peer has without a handshake. The host's own clock (`date +%s`) turns a time into an
//! age, so a skewed operator clock cannot make a tunnel look stale.

use std::time::Duration;

use rhai::Map;
use serde::Serialize;

use super::context::Context;
use super::result::{VerbResult, fail};
use super::values::record;
use opsbook_world::Invocation;

/// What `wg` may take on the host.
const WG_TIMEOUT: Duration = Duration::from_secs(10);

/// Values below this are ages, at or above it times (2001-09-09: no handshake is older).
const EPOCH_FLOOR: u64 = 1_000_000_000;

/// Splits the two `wg show` listings in one remote command.
const MARK: &str = "--opsbook-transfer--";

/// One peer as scripts see it.
#[derive(Debug, Serialize, PartialEq)]
struct Peer {
    public_key: String,
    /// Seconds since the last handshake; `()` when there has been none.
    handshake_age_s: Option<u64>,
}

#[derive(Serialize)]
struct Tunnel {
    exists: bool,
    up: bool,
    peers: Vec<Peer>,
    /// What was seen, in words (why there are no peers, when there are none).
    detail: String,
}

/// `host::wireguard(iface)`.
pub(crate) fn status(cx: &Context, iface: &str) -> VerbResult<Map> {
    if iface.is_empty() || !iface.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c)) || iface.len() > 15 {
        return Err(fail(format!("host::wireguard: `{iface}` is not an interface name")));
    }
    // One round trip: the link as netlink sees it (not /sys, which shows the namespace that
    // mounted it), then the host's clock and both listings. A missing `wg` must not look like
    // a missing `sh` (exit 127): it says so and exits 3.
    let script = format!(
        "link=$(ip -o link show dev \"$1\" 2>/dev/null) || {{ echo absent; exit 0; }}; echo \"$link\"; \
         command -v wg >/dev/null || {{ echo 'wg: command not found' >&2; exit 3; }}; \
         date +%s && wg show \"$1\" latest-handshakes && echo {MARK} && wg show \"$1\" transfer"
    );
    let invocation = Invocation {
        argv: vec!["sh".into(), "-c".into(), script, "sh".into(), iface.to_string()],
        timeout: WG_TIMEOUT,
        ..Invocation::default()
    };
    let done = cx.run_command(invocation)?.map_err(fail)?;
    if done.timed_out {
        return Err(fail(format!(
            "host::wireguard: `wg show {iface}` did not answer within {}s",
            WG_TIMEOUT.as_secs()
        )));
    }
    let (link, rest) = done.stdout.split_once('\n').unwrap_or((done.stdout.as_str(), ""));
    if link == "absent" || link.is_empty() {
        let detail = format!("no interface {iface} on {}", cx.hostname());
        return record(&Tunnel { exists: false, up: false, peers: Vec::new(), detail });
    }
    let up = link_up(link);
    let (peers, detail) = if done.code != Some(0) {
        (Vec::new(), wg_failed(iface, &done.stderr))
    } else {
        match parse(rest) {
            Ok(peers) if peers.is_empty() => (peers, format!("{iface} has no peers")),
            Ok(peers) => {
                let detail = describe(&peers);
                (peers, detail)
            }
            Err(why) => (Vec::new(), format!("cannot read `wg show {iface}`: {why}")),
        }
    };
    record(&Tunnel { exists: true, up, peers, detail })
}

/// Whether `ip -o link` says the interface is up: the UP flag (tunnels report state UNKNOWN).
fn link_up(line: &str) -> bool {
    let flags = line.split_once('<').and_then(|(_, r)| r.split_once('>')).map_or("", |(f, _)| f);
    flags.split(',').any(|f| f == "UP")
}

/// The peers of `wg show` output: the host's clock, the handshakes, the mark, the transfers.
fn parse(stdout: &str) -> Result<Vec<Peer>, String> {
    let mut lines = stdout.lines();
    let now: u64 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| format!("no clock reading in {:?}", stdout.lines().next().unwrap_or("")))?;
    let mut handshakes = Vec::new();
    for line in lines.by_ref().take_while(|l| *l != MARK) {
        let (key, value) = line.split_once('\t').ok_or_else(|| format!("unexpected line {line:?}"))?;
        let value: u64 = value.trim().parse().map_err(|_| format!("unexpected handshake {value:?}"))?;
        handshakes.push((key.to_string(), value));
    }
    let mut received = std::collections::BTreeMap::new();
    for line in lines {
        let cells: Vec<&str> = line.split('\t').collect();
        if let [key, rx, _tx] = cells[..] {
            received.insert(key.to_string(), rx.trim().parse::<u64>().unwrap_or(0));
        }
    }
    Ok(handshakes
        .into_iter()
        .map(|(public_key, value)| {
            let handshake_age_s = match value {
                0 if received.get(&public_key).copied().unwrap_or(0) > 0 => Some(0),
                0 => None,
                t if t >= EPOCH_FLOOR => Some(now.saturating_sub(t)),
                age => Some(age),
            };
            Peer { public_key, handshake_age_s }
        })
        .collect())
}

fn describe(peers: &[Peer]) -> String {
    let each: Vec<String> = peers
        .iter()
        .map(|p| {
            let short = p.public_key.get(..8).unwrap_or(&p.public_key);
            match p.handshake_age_s {
                Some(age) => format!("peer {short}… handshook {age} s ago"),
                None => format!("peer {short}… never handshook"),
            }
        })
        .collect();
    each.join(", ")
}

/// Why `wg` failed, with a remedy where one is known.
fn wg_failed(iface: &str, stderr: &str) -> String {
    let said = stderr.trim();
    let remedy = if said.contains("not found") {
        "; remedy: install wireguard-tools on the host"
    } else if said.contains("Operation not permitted") || said.contains("Permission denied") {
        "; remedy: reading a tunnel's peers needs root (CAP_NET_ADMIN) on the host"
    } else if said.contains("No such device") || said.contains("Protocol not supported") {
        "; is it a WireGuard interface? If not, set network.tunnel_kind = \"other\""
    } else {
        ""
    };
    format!("`wg show {iface}` failed: wg said {said:?}{remedy}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_up_flag_decides_not_the_state() {
        assert!(link_up("5: wg0: <POINTOPOINT,NOARP,UP,LOWER_UP> mtu 1420 qdisc fq_codel state UNKNOWN mode DEFAULT"));
        assert!(!link_up("5: wg0: <POINTOPOINT,NOARP> mtu 1420 qdisc noop state DOWN mode DEFAULT"));
    }

    const KEY_A: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
    const KEY_B: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";

    fn peer(key: &str, age: Option<u64>) -> Peer {
        Peer { public_key: key.into(), handshake_age_s: age }
    }

    #[test]
    fn kernel_times_become_ages_on_the_hosts_clock() {
        let out = format!("1790000100\n{KEY_A}\t1790000040\n{KEY_B}\t0\n{MARK}\n{KEY_A}\t9000\t8000\n{KEY_B}\t0\t0\n");
        assert_eq!(parse(&out).unwrap(), vec![peer(KEY_A, Some(60)), peer(KEY_B, None)]);
    }

    #[test]
    fn userspace_ages_are_taken_as_ages_and_a_zero_with_traffic_is_now() {
        let out = format!("1790000100\n{KEY_A}\t7\n{KEY_B}\t0\n{MARK}\n{KEY_A}\t9000\t8000\n{KEY_B}\t148\t92\n");
        assert_eq!(parse(&out).unwrap(), vec![peer(KEY_A, Some(7)), peer(KEY_B, Some(0))]);
        assert_eq!(
            describe(&parse(&out).unwrap()),
            "peer xTIBA5rb… handshook 7 s ago, peer HIgo9xNz… handshook 0 s ago"
        );
    }

    #[test]
    fn odd_output_is_an_error_quoting_it() {
        assert_eq!(parse("oops\n").unwrap_err(), "no clock reading in \"oops\"");
        assert_eq!(parse("5\nno tab here\n").unwrap_err(), "unexpected line \"no tab here\"");
    }

    #[test]
    fn wg_failures_say_what_to_do() {
        assert_eq!(
            wg_failed("wg0", "Unable to access interface: Operation not permitted\n"),
            "`wg show wg0` failed: wg said \"Unable to access interface: Operation not permitted\"; remedy: reading a \
             tunnel's peers needs root (CAP_NET_ADMIN) on the host"
        );
    }
}
