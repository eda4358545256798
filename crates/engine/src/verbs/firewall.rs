//! `firewall::` — whether the host's firewall admits a port, and opsbook's own nftables table
//! that opens a port to some sources only (firewall/table.rs). Everything runs on the host
//! through the world's commands, so on a fleet host it is that host's firewall.
//!
//! Reading: `nft -j list ruleset` (firewall/nft.rs); where nftables has no ruleset,
//! `iptables-save` (firewall/ipt.rs); where the nft ruleset holds iptables-nft's extension
//! matches, iptables-save judges those tables and nft the others. A ruleset too complex to
//! judge (a deciding rule that depends on an interface, a rate, an extension) is said so,
//! naming the rule: `judged` is false then, and a checklist skips rather than guesses.

pub(crate) mod command;
pub(crate) mod ipt;
pub(crate) mod nft;
pub(crate) mod packet;
pub(crate) mod table;

use std::net::IpAddr;

use opsbook_world::{Resolved, resolve_name};
use std::time::Duration;

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};
use serde::Serialize;

use self::command::{late, refused, run};
use self::ipt::Rules;
use self::nft::Ruleset;
use self::packet::{Judgement, Packet};
use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::values::record;
use crate::register;

/// How long resolving a source's host name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The `firewall::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "admits",
        Reads,
        ["port: i64", "Map"],
        "/// Whether the host's firewall lets a new TCP connection to `port` in from anywhere:\n\
         /// `#{ok, judged, detail, rule, source}`. `judged` is false when the rules cannot be judged here\n\
         /// (they depend on the source address, an interface, a rate…): `detail` says why.",
        "firewall::admits(8086)",
        |call: NativeCallContext, port: i64| admits(&context(&call), port, &[])
    );
    register!(
        &mut m,
        "admits",
        Reads,
        ["port: i64", "sources: ?", "Map"],
        "/// The same from a source address, or from each of an array of them (`ok` when all are).\n\
         /// A loopback address (`127.0.0.1`, `::1`) is the host's own connection, on `lo`.",
        "firewall::admits(8086, [\"10.0.0.0/24\"])",
        |call: NativeCallContext, port: i64, sources: Dynamic| admits(&context(&call), port, &sources_arg(&sources)?)
    );
    register!(
        &mut m,
        "admit",
        Changes,
        ["port: i64", "sources: ?", "Map"],
        "/// Opens TCP `port` to these sources only (an address, a network, or an array of them), in\n\
         /// opsbook's own nftables table `inet opsbook`: connections from elsewhere to that port\n\
         /// are dropped, the host's own (loopback) ones pass; no sources (`[]`): loopback only.\n\
         /// Idempotent: `#{changed}`. Needs root;\n\
         /// honours --dry-run. It cannot open what another table drops: see `admits`.",
        "firewall::admit(8086, [\"10.0.0.0/24\"])",
        |call: NativeCallContext, port: i64, sources: Dynamic| table::admit(
            &context(&call),
            port_arg(port)?,
            &sources_arg(&sources)?
        )
    );
    register!(
        &mut m,
        "revoke",
        Changes,
        ["port: i64", "Map"],
        "/// Removes opsbook's rules for `port` from its table: `#{changed}`.",
        "firewall::revoke(8086)",
        |call: NativeCallContext, port: i64| table::revoke(&context(&call), port_arg(port)?)
    );
    register!(
        &mut m,
        "remove_table",
        Changes,
        ["Map"],
        "/// Deletes opsbook's table `inet opsbook` (never the operator's rules): `#{changed}`.",
        "firewall::remove_table()",
        |call: NativeCallContext| table::remove_table(&context(&call))
    );
    m
}

pub(crate) fn port_arg(port: i64) -> VerbResult<u16> {
    u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| fail(format!("firewall: {port} is not a TCP port")))
}

/// Sources as given: a string or an array of strings.
pub(crate) fn sources_arg(value: &Dynamic) -> VerbResult<Vec<String>> {
    if let Some(array) = value.read_lock::<Array>() {
        return Ok(array.iter().map(super::values::text).collect());
    }
    if value.is_string() {
        return Ok(vec![super::values::text(value)]);
    }
    Err(fail(format!("firewall: sources must be an address or an array of them, got {}", value.type_name())))
}

/// What `admits` answers.
#[derive(Serialize)]
struct Admits {
    ok: bool,
    judged: bool,
    detail: String,
    /// The deciding rule (or chain policy), when one decided.
    rule: String,
    /// The source that was refused or could not be judged (empty when all were admitted).
    source: String,
}

fn admits(cx: &Context, port: i64, sources: &[String]) -> VerbResult<Map> {
    let port = port_arg(port)?;
    let sources: Vec<Option<&str>> =
        if sources.is_empty() { vec![None] } else { sources.iter().map(|s| Some(s.trim())).collect() };
    let mut reader = Reader { cx, nft: None, iptables: [None, None] };
    let mut admitted = Vec::new();
    for source in sources {
        let (from, judgement) = match source {
            None => ("anywhere".to_string(), reader.judge(&Packet { port, source: None })?),
            Some(text) => match address_of(cx, text)? {
                Ok(ip) => {
                    let from = if text == ip.to_string() { text.to_string() } else { format!("{text} ({ip})") };
                    (from, reader.judge(&Packet { port, source: Some(ip) })?)
                }
                Err(why) => (text.to_string(), Judgement::Unknown(why)),
            },
        };
        let source = source.unwrap_or_default().to_string();
        match judgement {
            Judgement::Admitted(how) => admitted.push((from, how)),
            Judgement::Refused(rule) => {
                let detail = format!("TCP {port} from {from} is dropped by `{rule}`");
                return record(&Admits { ok: false, judged: true, detail, rule, source });
            }
            Judgement::Unknown(why) => {
                let detail = format!("cannot tell whether TCP {port} from {from} is admitted: {why}");
                return record(&Admits { ok: false, judged: false, detail, rule: String::new(), source });
            }
        }
    }
    let rule = admitted.first().map(|(_, how)| how.clone()).unwrap_or_default();
    let same = admitted.iter().all(|(_, how)| *how == rule);
    let detail = match admitted.as_slice() {
        [(from, how)] => format!("TCP {port} from {from}: {}", shown(how)),
        _ if same => format!("TCP {port} from all {} sources: {}", admitted.len(), shown(&rule)),
        _ => {
            let each: Vec<String> = admitted.iter().map(|(from, how)| format!("from {from}: {}", shown(how))).collect();
            format!("TCP {port} {}", each.join("; "))
        }
    };
    // "no … filters it" is no rule.
    let rule = if rule.starts_with("no ") { String::new() } else { rule };
    record(&Admits { ok: true, judged: true, detail, rule, source: String::new() })
}

/// A source as rules see it: an IP address as written, or a host name resolved here (on
/// the operator's machine, which names the fleet's hosts as the inventory does), within 3 s.
fn address_of(cx: &Context, text: &str) -> VerbResult<Result<IpAddr, String>> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Ok(ip));
    }
    let name = text.to_string();
    let found = cx.block_on(|| async move { resolve_name(&name, RESOLVE_TIMEOUT).await })?;
    Ok(match found {
        Resolved::To(ip) => Ok(ip),
        Resolved::Nothing => Err(format!("`{text}` resolves to no address, and rules match addresses")),
        Resolved::Failed(e) => Err(format!("`{text}` is not an IP address and does not resolve ({e})")),
        Resolved::TimedOut => Err(format!("resolving `{text}` took longer than {}s", RESOLVE_TIMEOUT.as_secs())),
    })
}

/// How an admission reads: each chain's rule quoted, a policy or "nothing filters" as words.
fn shown(how: &str) -> String {
    let each: Vec<String> =
        how.split("; ")
            .map(|h| {
                if h.contains(": ") && !h.starts_with("policy ") { format!("accepted by `{h}`") } else { h.to_string() }
            })
            .collect();
    each.join("; ")
}

/// Reads each ruleset once for all the packets of one call.
struct Reader<'a> {
    cx: &'a Context,
    nft: Option<Source<Ruleset>>,
    /// iptables-save's and ip6tables-save's filter tables (`None` inside: no filter table).
    iptables: [Option<Source<Option<Rules>>>; 2],
}

/// A ruleset as read from the host.
enum Source<T> {
    Missing,
    Failed(String),
    Read(T),
}

impl Reader<'_> {
    fn judge(&mut self, packet: &Packet) -> VerbResult<Judgement> {
        if self.nft.is_none() {
            self.nft = Some(match read(self.cx, &["nft", "-j", "list", "ruleset"])? {
                Read::Missing => Source::Missing,
                Read::Failed(why) => Source::Failed(why),
                Read::Text(text) => Source::Read(Ruleset::parse(&text).map_err(fail)?),
            });
        }
        let (slot, program) = if packet.ipv6() { (1, "ip6tables-save") } else { (0, "iptables-save") };
        let needs_iptables = match &self.nft {
            Some(Source::Failed(why)) => return Ok(Judgement::Unknown(why.clone())),
            Some(Source::Read(ruleset)) if !ruleset.is_empty() => ruleset.uses_iptables_extensions(),
            _ => true,
        };
        if needs_iptables && self.iptables[slot].is_none() {
            self.iptables[slot] = Some(match read(self.cx, &[program])? {
                Read::Missing => Source::Missing,
                Read::Failed(why) => Source::Failed(why),
                Read::Text(text) => Source::Read(Rules::parse(&text)),
            });
        }
        let iptables = match &self.iptables[slot] {
            Some(Source::Read(Some(rules))) if rules.filters() => Some(rules.judge(packet, program)),
            Some(Source::Failed(why)) => Some(Judgement::Unknown(why.clone())),
            _ => None,
        };
        Ok(match (&self.nft, iptables) {
            (Some(Source::Read(ruleset)), None) if !ruleset.is_empty() => ruleset.judge(packet, false),
            (Some(Source::Read(ruleset)), Some(ipt)) if !ruleset.is_empty() => {
                Judgement::all(vec![ruleset.judge(packet, true), ipt])
            }
            (_, Some(ipt)) => ipt,
            (Some(Source::Missing), None) if matches!(self.iptables[slot], Some(Source::Missing)) => {
                Judgement::Unknown(format!(
                    "neither nft nor {program} is installed on {}, so its firewall cannot be read",
                    self.cx.hostname()
                ))
            }
            _ => Judgement::Admitted("no nftables ruleset and no iptables rules filter it".into()),
        })
    }
}

/// What reading a ruleset came to.
enum Read {
    Text(String),
    Missing,
    Failed(String),
}

fn read(cx: &Context, argv: &[&str]) -> VerbResult<Read> {
    let done = match run(cx, argv, None)? {
        Ok(done) => done,
        Err(e) if e.contains("not found") => return Ok(Read::Missing),
        Err(e) => return Ok(Read::Failed(e)),
    };
    if done.timed_out {
        return Ok(Read::Failed(late(argv)));
    }
    if done.code != Some(0) {
        return Ok(Read::Failed(refused(argv, &done.stderr)));
    }
    Ok(Read::Text(done.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admissions_read_as_words() {
        assert_eq!(
            shown("inet filter input: tcp dport 3100 accept"),
            "accepted by `inet filter input: tcp dport 3100 accept`"
        );
        assert_eq!(shown("policy accept of chain inet filter input"), "policy accept of chain inet filter input");
        assert_eq!(
            shown("inet opsbook input: tcp dport 3100 accept; policy accept of chain inet operator input"),
            "accepted by `inet opsbook input: tcp dport 3100 accept`; policy accept of chain inet operator input"
        );
        assert_eq!(
            refused(&["nft", "-j", "list", "ruleset"], "Error: Operation not permitted (you must be root)\n"),
            "`nft -j list ruleset` failed: it said \"Error: Operation not permitted (you must be root)\"; remedy: the \
             firewall can only be read and changed as root (CAP_NET_ADMIN) on the host"
        );
    }
}
