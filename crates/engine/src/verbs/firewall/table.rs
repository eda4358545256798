//! opsbook's own nftables table, `inet opsbook`: what `firewall::admit`, `revoke` and
//! `remove_table` change. Keeping every rule there means removing it never touches the
//! operator's rules.
//!
//! How it opens a port to some sources only: nftables gives every base chain on the input
//! hook its say, and an `accept` in one chain does not override a `drop` in another. So the
//! table cannot open a port another table drops (`firewall::admits` names that rule); what
//! it does is make the port *exclusive* on a host whose policy admits it: its input chain
//! (policy accept, priority -10) accepts the port from loopback (the host's own clients and
//! opsbook's forwarded ports) and from the given sources, and drops it from everywhere else.
//! Each port's rules carry the comment `opsbook port P sources H` (H a hash of the sorted
//! sources), which is how `admit` sees it has nothing to change.

use std::fmt::Write as _;

use rhai::Map;
use serde::Serialize;
use serde_json::Value;

use super::command::{late, refused, run};
use super::packet::parse_net;
use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::record;

/// The table's family and name, as nft commands take them.
pub(crate) const TABLE: &str = "inet opsbook";

/// The table with its one chain, declared idempotently.
const DECLARE: &str =
    "table inet opsbook {\n  chain input {\n    type filter hook input priority -10; policy accept;\n  }\n}\n";

#[derive(Serialize)]
struct Changed {
    changed: bool,
    /// Under --dry-run: nothing was changed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

/// Our rules now: (handle, comment) of each rule in `inet opsbook input`; `None`: no table.
fn current(cx: &Context) -> VerbResult<Option<Vec<(u64, String)>>> {
    let argv = ["nft", "-j", "list", "table", "inet", "opsbook"];
    let done = run(cx, &argv, None)?.map_err(fail)?;
    if done.timed_out {
        return Err(fail(late(&argv)));
    }
    if done.code != Some(0) {
        if done.stderr.contains("No such file or directory") {
            return Ok(None);
        }
        return Err(fail(refused(&argv, &done.stderr)));
    }
    let json: Value = serde_json::from_str(&done.stdout).map_err(|e| fail(format!("nft's JSON did not parse: {e}")))?;
    let items = json.get("nftables").and_then(Value::as_array).cloned().unwrap_or_default();
    Ok(Some(
        items
            .iter()
            .filter_map(|i| i.get("rule"))
            .filter(|r| r.get("chain").and_then(Value::as_str) == Some("input"))
            .filter_map(|r| {
                let handle = r.get("handle")?.as_u64()?;
                Some((handle, r.get("comment").and_then(Value::as_str).unwrap_or_default().to_string()))
            })
            .collect(),
    ))
}

fn port_prefix(port: u16) -> String {
    format!("opsbook port {port} ")
}

/// The rules that open `port` to `sources` only, in nft's syntax, each with its comment. No
/// sources: the host's own connections only (loopback), as on a host whose clients are all
/// its own (a server that is its only client).
fn rules(port: u16, sources: &[String]) -> Result<(String, Vec<String>), String> {
    let mut nets = Vec::new();
    for s in sources {
        let (addr, len) =
            parse_net(s.trim()).ok_or_else(|| format!("firewall::admit: `{s}` is not an address or network"))?;
        nets.push((addr.is_ipv6(), format!("{addr}/{len}")));
    }
    nets.sort();
    nets.dedup();
    let all: Vec<&str> = nets.iter().map(|(_, n)| n.as_str()).collect();
    let comment = format!("{}sources {:016x}", port_prefix(port), fnv(&all.join(",")));
    let mut out = vec![format!("iifname \"lo\" tcp dport {port} accept")];
    for (v6, family) in [(false, "ip"), (true, "ip6")] {
        let these: Vec<&str> = nets.iter().filter(|(six, _)| *six == v6).map(|(_, n)| n.as_str()).collect();
        if !these.is_empty() {
            out.push(format!("tcp dport {port} {family} saddr {{ {} }} accept", these.join(", ")));
        }
    }
    out.push(format!("tcp dport {port} drop"));
    Ok((comment, out))
}

/// FNV-1a: a stable short fingerprint of the sources (not a security measure).
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Applies an nft script atomically (`nft -f -`).
fn apply(cx: &Context, script: String) -> VerbResult<()> {
    let argv = ["nft", "-f", "-"];
    let done = run(cx, &argv, Some(script))?.map_err(fail)?;
    if done.timed_out {
        return Err(fail(late(&argv)));
    }
    if done.code != Some(0) {
        return Err(fail(refused(&argv, &done.stderr)));
    }
    Ok(())
}

/// The sandbox simulates no firewall, and this machine's is not the sandbox's to change.
fn refuse_in_sandbox(cx: &Context, call: &str) -> VerbResult<()> {
    if cx.world().sandbox {
        return Err(fail(format!(
            "{call} is not available in the sandbox: it has no firewall of its own, and this machine's is not the sandbox's to change\n  help: run the runbook against a real host (without --sandbox)"
        )));
    }
    Ok(())
}

/// `firewall::admit(port, sources)`.
pub(crate) fn admit(cx: &Context, port: u16, sources: &[String]) -> VerbResult<Map> {
    refuse_in_sandbox(cx, "firewall::admit")?;
    let (comment, wanted) = rules(port, sources).map_err(fail)?;
    let ours = current(cx)?.unwrap_or_default();
    let for_port: Vec<&(u64, String)> = ours.iter().filter(|(_, c)| c.starts_with(&port_prefix(port))).collect();
    if for_port.len() == wanted.len() && for_port.iter().all(|(_, c)| *c == comment) {
        return record(&Changed { changed: false, dry_run: false });
    }
    let whom =
        if sources.is_empty() { "this host's own connections (loopback)".to_string() } else { sources.join(", ") };
    let action = format!("open TCP port {port} on {} to {whom} only (nftables table {TABLE})", cx.hostname());
    if cx.plan(&action) {
        return record(&Changed { changed: true, dry_run: cx.dry_run });
    }
    let mut script = DECLARE.to_string();
    for (handle, _) in &for_port {
        let _ = writeln!(script, "delete rule {TABLE} input handle {handle}");
    }
    for rule in &wanted {
        let _ = writeln!(script, "add rule {TABLE} input {rule} comment \"{comment}\"");
    }
    apply(cx, script)?;
    record(&Changed { changed: true, dry_run: false })
}

/// `firewall::revoke(port)`.
pub(crate) fn revoke(cx: &Context, port: u16) -> VerbResult<Map> {
    refuse_in_sandbox(cx, "firewall::revoke")?;
    let ours = current(cx)?.unwrap_or_default();
    let handles: Vec<u64> = ours.iter().filter(|(_, c)| c.starts_with(&port_prefix(port))).map(|(h, _)| *h).collect();
    if handles.is_empty() {
        return record(&Changed { changed: false, dry_run: false });
    }
    if cx.plan(&format!("remove opsbook's rules for TCP port {port} on {} (nftables table {TABLE})", cx.hostname())) {
        return record(&Changed { changed: true, dry_run: cx.dry_run });
    }
    let script: String = handles.iter().map(|h| format!("delete rule {TABLE} input handle {h}\n")).collect();
    apply(cx, script)?;
    record(&Changed { changed: true, dry_run: false })
}

/// `firewall::remove_table()`.
pub(crate) fn remove_table(cx: &Context) -> VerbResult<Map> {
    refuse_in_sandbox(cx, "firewall::remove_table")?;
    if current(cx)?.is_none() {
        return record(&Changed { changed: false, dry_run: false });
    }
    if cx.plan(&format!("delete the nftables table {TABLE} on {}", cx.hostname())) {
        return record(&Changed { changed: true, dry_run: cx.dry_run });
    }
    apply(cx, format!("delete table {TABLE}\n"))?;
    record(&Changed { changed: true, dry_run: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_opened_to_some_sources_drops_the_rest_and_keeps_loopback() {
        let (comment, wanted) =
            rules(3100, &["10.0.0.3".into(), "fd00::/64".into(), "10.0.0.2".into(), "10.0.0.3".into()]).unwrap();
        assert_eq!(comment, format!("opsbook port 3100 sources {:016x}", fnv("10.0.0.2/32,10.0.0.3/32,fd00::/64")));
        assert_eq!(
            wanted,
            [
                "iifname \"lo\" tcp dport 3100 accept",
                "tcp dport 3100 ip saddr { 10.0.0.2/32, 10.0.0.3/32 } accept",
                "tcp dport 3100 ip6 saddr { fd00::/64 } accept",
                "tcp dport 3100 drop",
            ]
        );
        // The same sources in another order are the same rules.
        assert_eq!(rules(3100, &["fd00::/64".into(), "10.0.0.3".into(), "10.0.0.2".into()]).unwrap().0, comment);
    }

    #[test]
    fn nonsense_sources_are_refused() {
        assert_eq!(
            rules(3100, &["db.example".into()]).unwrap_err(),
            "firewall::admit: `db.example` is not an address or network"
        );
        // No sources: loopback only.
        let (_, lone) = rules(3100, &[]).unwrap();
        assert_eq!(lone, ["iifname \"lo\" tcp dport 3100 accept", "tcp dport 3100 drop"]);
    }
}
