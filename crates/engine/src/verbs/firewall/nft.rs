//! Reads an nftables ruleset (`nft -j list ruleset`) and judges whether it admits a new TCP
//! connection to a port: every base chain on the input hook (of the `inet` family, and `ip`
//! or `ip6` as the source is) is walked rule by rule, following jumps and gotos, until a
//! verdict or the chain's policy.
//!
//! Only simple matches are evaluated — `tcp dport`, `ip saddr`/`ip6 saddr` (addresses,
//! prefixes, ranges, anonymous and named sets), `ct state`, `meta l4proto`/`nfproto`,
//! `iifname` (a loopback source arrives on `lo`, any other not). A rule that also depends on anything else (another interface, a rate
//! limit, an iptables extension) and would decide the packet makes the answer "cannot tell",
//! naming the rule, rather than a guess.

use std::net::IpAddr;

use serde_json::Value;

use super::packet::{Judgement, Packet, Truth, in_net, parse_net};

/// How deep jumps may nest before the ruleset is called too complex.
const MAX_DEPTH: usize = 16;

/// One ruleset, as listed.
pub(crate) struct Ruleset {
    items: Vec<Value>,
}

/// Where a rule or chain lives.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Place<'a> {
    family: &'a str,
    table: &'a str,
}

/// How a rule or a chain ends for the packet.
enum Flow {
    Accept(String),
    Drop(String),
    Unknown(String),
    /// No verdict: the next rule (or, at a chain's end or `return`, the caller) decides.
    Continue,
}

/// What a rule's own statements conclude.
enum Outcome {
    NoMatch,
    Verdict(Flow),
    Jump(String),
    Goto(String),
    Return,
}

/// A packet's value for a match's left side.
enum Val {
    Port(u16),
    Addr(IpAddr),
    Word(&'static str),
}

impl Ruleset {
    /// The ruleset from nft's JSON; an error quotes what was not understood.
    pub(crate) fn parse(text: &str) -> Result<Ruleset, String> {
        let json: Value = serde_json::from_str(text).map_err(|e| format!("nft's JSON did not parse: {e}"))?;
        let items = json
            .get("nftables")
            .and_then(Value::as_array)
            .ok_or_else(|| "nft's JSON has no `nftables` list".to_string())?
            .clone();
        Ok(Ruleset { items })
    }

    /// No tables at all: nftables filters nothing.
    pub(crate) fn is_empty(&self) -> bool {
        !self.items.iter().any(|i| i.get("table").is_some())
    }

    /// Whether iptables-nft's extensions (`xt`) appear: those rules are judged from
    /// iptables-save instead.
    pub(crate) fn uses_iptables_extensions(&self) -> bool {
        self.rules().any(|(place, _, exprs)| is_iptables_table(place) && exprs.iter().any(|e| e.get("xt").is_some()))
    }

    /// How the input path treats `packet`. With `skip_iptables`, the chains iptables-nft
    /// manages (`ip filter`, `ip6 filter`) are left out: the caller judges them from
    /// iptables-save.
    pub(crate) fn judge(&self, packet: &Packet, skip_iptables: bool) -> Judgement {
        let family = if packet.ipv6() { "ip6" } else { "ip" };
        let mut bases: Vec<(Place<'_>, &str, i64, &str)> = self
            .chains()
            .filter(|c| c.get("hook").and_then(Value::as_str) == Some("input"))
            .filter(|c| c.get("type").and_then(Value::as_str).unwrap_or("filter") == "filter")
            .filter_map(|c| {
                let place = place(c)?;
                let name = c.get("name")?.as_str()?;
                let prio = c.get("prio").and_then(Value::as_i64).unwrap_or(0);
                let policy = c.get("policy").and_then(Value::as_str).unwrap_or("accept");
                Some((place, name, prio, policy))
            })
            .filter(|(p, ..)| p.family == "inet" || p.family == family)
            .filter(|(p, ..)| !(skip_iptables && is_iptables_table(*p)))
            .collect();
        bases.sort_by_key(|b| b.2);
        let judgements = bases
            .into_iter()
            .map(|(place, name, _, policy)| match self.walk(place, name, packet, 0) {
                Flow::Accept(how) => Judgement::Admitted(how),
                Flow::Drop(rule) => Judgement::Refused(rule),
                Flow::Unknown(why) => Judgement::Unknown(why),
                Flow::Continue if policy == "drop" => {
                    Judgement::Refused(format!("policy drop of chain {} {} {name}", place.family, place.table))
                }
                Flow::Continue => {
                    Judgement::Admitted(format!("policy accept of chain {} {} {name}", place.family, place.table))
                }
            })
            .collect();
        Judgement::all(judgements)
    }

    fn chains(&self) -> impl Iterator<Item = &Value> {
        self.items.iter().filter_map(|i| i.get("chain"))
    }

    fn rules(&self) -> impl Iterator<Item = (Place<'_>, &str, &[Value])> {
        self.items.iter().filter_map(|i| i.get("rule")).filter_map(|r| {
            let chain = r.get("chain")?.as_str()?;
            let exprs = r.get("expr")?.as_array()?;
            Some((place(r)?, chain, exprs.as_slice()))
        })
    }

    fn walk(&self, at: Place<'_>, chain: &str, packet: &Packet, depth: usize) -> Flow {
        if depth > MAX_DEPTH {
            return Flow::Unknown(format!("jumps nest deeper than {MAX_DEPTH} chains at {chain}"));
        }
        for (place, _, exprs) in self.rules().filter(|(p, c, _)| *p == at && *c == chain) {
            let text = format!("{} {} {chain}: {}", place.family, place.table, render(exprs));
            match self.rule(at, exprs, packet, &text) {
                Outcome::NoMatch => {}
                Outcome::Verdict(flow) => return flow,
                Outcome::Jump(target) => match self.walk(at, &target, packet, depth + 1) {
                    Flow::Continue => {}
                    decided => return decided,
                },
                Outcome::Goto(target) => return self.walk(at, &target, packet, depth + 1),
                Outcome::Return => return Flow::Continue,
            }
        }
        Flow::Continue
    }

    fn rule(&self, at: Place<'_>, exprs: &[Value], packet: &Packet, text: &str) -> Outcome {
        let mut doubt: Option<String> = None;
        for expr in exprs {
            let Some((kind, body)) = expr.as_object().and_then(|o| o.iter().next()) else { continue };
            let decided = match kind.as_str() {
                "match" => {
                    match self.matches(at, body, packet) {
                        Truth::Yes => {}
                        Truth::No => return Outcome::NoMatch,
                        Truth::Unknown(why) => {
                            doubt.get_or_insert(why);
                        }
                    }
                    None
                }
                "counter" | "log" | "mangle" | "notrack" => None,
                "limit" | "quota" => {
                    doubt.get_or_insert_with(|| format!("a {kind}"));
                    None
                }
                "xt" => {
                    let name = body.get("name").and_then(Value::as_str).unwrap_or("?");
                    let target = body.get("type").and_then(Value::as_str) == Some("target");
                    match (target, name) {
                        (false, "comment") => None,
                        (true, "REJECT" | "DROP") => Some(Outcome::Verdict(Flow::Drop(text.to_string()))),
                        (true, "ACCEPT") => Some(Outcome::Verdict(Flow::Accept(text.to_string()))),
                        _ => {
                            doubt.get_or_insert_with(|| format!("an iptables extension ({name})"));
                            None
                        }
                    }
                }
                "accept" => Some(Outcome::Verdict(Flow::Accept(text.to_string()))),
                "drop" | "reject" => Some(Outcome::Verdict(Flow::Drop(text.to_string()))),
                "jump" | "goto" => {
                    let target = body.get("target").and_then(Value::as_str).unwrap_or_default().to_string();
                    Some(if kind == "jump" { Outcome::Jump(target) } else { Outcome::Goto(target) })
                }
                "return" => Some(Outcome::Return),
                "continue" => Some(Outcome::NoMatch),
                other => {
                    doubt.get_or_insert_with(|| format!("a `{other}` statement"));
                    None
                }
            };
            if let Some(outcome) = decided {
                return match doubt {
                    Some(why) => Outcome::Verdict(Flow::Unknown(format!("`{text}` depends on {why}"))),
                    None => outcome,
                };
            }
        }
        Outcome::NoMatch
    }

    fn matches(&self, at: Place<'_>, m: &Value, packet: &Packet) -> Truth {
        let op = m.get("op").and_then(Value::as_str).unwrap_or("==");
        let (left, right) = (m.get("left").unwrap_or(&Value::Null), m.get("right").unwrap_or(&Value::Null));
        let val = match self.value_of(left, right, packet) {
            Ok(v) => v,
            Err(truth) => return truth,
        };
        let Some(hit) = self.contains(at, right, &val) else {
            return Truth::Unknown(format!("a match on {}", render_value(right)));
        };
        match (op, &val) {
            ("==" | "in", _) => Truth::from_bool(hit),
            ("!=", _) => Truth::from_bool(!hit),
            (cmp @ ("<" | ">" | "<=" | ">="), Val::Port(p)) => match right.as_u64() {
                Some(n) => Truth::from_bool(match cmp {
                    "<" => u64::from(*p) < n,
                    ">" => u64::from(*p) > n,
                    "<=" => u64::from(*p) <= n,
                    _ => u64::from(*p) >= n,
                }),
                None => Truth::Unknown(format!("the comparison {cmp} {}", render_value(right))),
            },
            (other, _) => Truth::Unknown(format!("the operator `{other}`")),
        }
    }

    /// The packet's value for `left`, or the match's outcome when that alone decides it.
    fn value_of(&self, left: &Value, right: &Value, packet: &Packet) -> Result<Val, Truth> {
        let v6 = packet.ipv6();
        if let Some(p) = left.get("payload") {
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or_default();
            let field = p.get("field").and_then(Value::as_str).unwrap_or_default();
            return match (proto, field) {
                ("tcp" | "th", "dport") => Ok(Val::Port(packet.port)),
                ("udp" | "udplite" | "sctp" | "dccp" | "icmp" | "icmpv6" | "igmp", _) => Err(Truth::No),
                ("ip", _) if v6 => Err(Truth::No),
                ("ip6", _) if !v6 => Err(Truth::No),
                ("ip" | "ip6", "saddr") => match packet.source {
                    Some(ip) => Ok(Val::Addr(ip)),
                    None => Err(Truth::Unknown("the source address (ask for one source)".into())),
                },
                ("ip", "protocol") | ("ip6", "nexthdr") => Ok(Val::Word("tcp")),
                _ => Err(Truth::Unknown(format!("{proto} {field}"))),
            };
        }
        if let Some(key) = left.get("meta").and_then(|m| m.get("key")).and_then(Value::as_str) {
            return match key {
                "l4proto" => Ok(Val::Word("tcp")),
                "nfproto" => Ok(Val::Word(if v6 { "ipv6" } else { "ipv4" })),
                "pkttype" => Ok(Val::Word("host")),
                // The host's own connection comes on the loopback interface, any other from
                // the network: not on it.
                "iifname" | "iif" if packet.loopback() => Ok(Val::Word("lo")),
                "iifname" | "iif" if right.as_str() == Some("lo") => Ok(Val::Word("not-lo")),
                "iifname" | "iif" => Err(Truth::Unknown(format!("the incoming interface ({key})"))),
                other => Err(Truth::Unknown(format!("meta {other}"))),
            };
        }
        if let Some(key) = left.get("ct").and_then(|c| c.get("key")).and_then(Value::as_str) {
            return match key {
                "state" => Ok(Val::Word("new")),
                other => Err(Truth::Unknown(format!("ct {other}"))),
            };
        }
        Err(Truth::Unknown(render_value(left)))
    }

    /// Whether `right` (a value, set, range, prefix or named set) holds `val`; `None` when it
    /// cannot be read.
    fn contains(&self, at: Place<'_>, right: &Value, val: &Val) -> Option<bool> {
        match right {
            Value::Number(n) => {
                let n = n.as_u64()?;
                Some(match val {
                    Val::Port(p) => u64::from(*p) == n,
                    Val::Word(w) => *w == "tcp" && n == 6,
                    Val::Addr(_) => false,
                })
            }
            Value::String(s) if s.starts_with('@') => {
                let set = self
                    .items
                    .iter()
                    .filter_map(|i| i.get("set"))
                    .find(|s2| place(s2) == Some(at) && s2.get("name").and_then(Value::as_str) == Some(&s[1..]))?;
                let elems = set.get("elem").and_then(Value::as_array).cloned().unwrap_or_default();
                any(elems.iter().map(|e| self.contains(at, e, val)))
            }
            Value::String(s) => Some(match val {
                Val::Port(p) => s.parse::<u16>().ok()? == *p,
                Val::Word(w) => s == w,
                Val::Addr(ip) => parse_net(s).is_some_and(|(net, len)| in_net(*ip, net, len)),
            }),
            Value::Array(items) => any(items.iter().map(|e| self.contains(at, e, val))),
            Value::Object(o) => {
                if let Some(items) = o.get("set").and_then(Value::as_array) {
                    return any(items.iter().map(|e| self.contains(at, e, val)));
                }
                if let Some([low, high]) = o.get("range").and_then(Value::as_array).map(Vec::as_slice) {
                    return match val {
                        Val::Port(p) => Some((low.as_u64()?..=high.as_u64()?).contains(&u64::from(*p))),
                        Val::Addr(ip) => {
                            let (low, high) =
                                (low.as_str()?.parse::<IpAddr>().ok()?, high.as_str()?.parse::<IpAddr>().ok()?);
                            Some(low.is_ipv4() == ip.is_ipv4() && low <= *ip && *ip <= high)
                        }
                        Val::Word(_) => None,
                    };
                }
                if let Some(prefix) = o.get("prefix") {
                    let addr = prefix.get("addr")?.as_str()?.parse::<IpAddr>().ok()?;
                    let len = u8::try_from(prefix.get("len")?.as_u64()?).ok()?;
                    return Some(matches!(val, Val::Addr(ip) if in_net(*ip, addr, len)));
                }
                None
            }
            _ => None,
        }
    }
}

/// True when any is; `None` when none is and one could not be read.
fn any(items: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    let mut unread = false;
    for item in items {
        match item {
            Some(true) => return Some(true),
            Some(false) => {}
            None => unread = true,
        }
    }
    if unread { None } else { Some(false) }
}

fn place(v: &Value) -> Option<Place<'_>> {
    Some(Place { family: v.get("family")?.as_str()?, table: v.get("table")?.as_str()? })
}

/// The tables iptables-nft keeps its rules in.
fn is_iptables_table(p: Place<'_>) -> bool {
    (p.family == "ip" || p.family == "ip6") && p.table == "filter"
}

/// A rule in about nft's own words, for reports: `tcp dport 3100 drop`.
fn render(exprs: &[Value]) -> String {
    let words: Vec<String> = exprs
        .iter()
        .filter_map(|e| {
            let (kind, body) = e.as_object()?.iter().next()?;
            Some(match kind.as_str() {
                "match" => {
                    let op = body.get("op").and_then(Value::as_str).unwrap_or("==");
                    let op = if op == "==" || op == "in" { String::new() } else { format!("{op} ") };
                    let left = body.get("left").map(render_value).unwrap_or_default();
                    let right = body.get("right").map(render_value).unwrap_or_default();
                    format!("{left} {op}{right}")
                }
                "counter" => return None,
                "jump" | "goto" => format!("{kind} {}", body.get("target").and_then(Value::as_str).unwrap_or("?")),
                "xt" => format!("xt {}", body.get("name").and_then(Value::as_str).unwrap_or("?")),
                other => other.to_string(),
            })
        })
        .collect();
    words.join(" ")
}

fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => items.iter().map(render_value).collect::<Vec<_>>().join(","),
        Value::Object(o) => {
            if let Some(p) = o.get("payload") {
                let word = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
                return format!("{} {}", word("protocol"), word("field"));
            }
            if let Some(key) = o.get("meta").and_then(|m| m.get("key")).and_then(Value::as_str) {
                return if key == "iifname" || key == "l4proto" { key.to_string() } else { format!("meta {key}") };
            }
            if let Some(key) = o.get("ct").and_then(|m| m.get("key")).and_then(Value::as_str) {
                return format!("ct {key}");
            }
            if let Some(items) = o.get("set").and_then(Value::as_array) {
                return format!("{{ {} }}", items.iter().map(render_value).collect::<Vec<_>>().join(", "));
            }
            if let Some([low, high]) = o.get("range").and_then(Value::as_array).map(Vec::as_slice) {
                return format!("{}-{}", render_value(low), render_value(high));
            }
            if let Some(p) = o.get("prefix") {
                return format!(
                    "{}/{}",
                    p.get("addr").map(render_value).unwrap_or_default(),
                    p.get("len").map(render_value).unwrap_or_default()
                );
            }
            v.to_string()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from nft 1.0.6 with tests/fixtures/firewall/input-drop.nft loaded.
    const CAPTURE: &str = include_str!("../../../../../tests/fixtures/firewall/input-drop.json");

    fn judge(port: u16, source: Option<&str>) -> Judgement {
        let packet = Packet { port, source: source.map(|s| s.parse().unwrap()) };
        Ruleset::parse(CAPTURE).unwrap().judge(&packet, false)
    }

    #[test]
    fn ports_opened_to_all_pass_and_the_policy_drops_the_rest() {
        assert_eq!(
            judge(22, None),
            Judgement::Admitted("inet filter input: tcp dport { 22, 8000-8100 } accept".into())
        );
        assert_eq!(judge(8086, Some("192.0.2.9")), judge(22, None));
        assert_eq!(judge(5432, Some("192.0.2.9")), Judgement::Refused("policy drop of chain inet filter input".into()));
    }

    #[test]
    fn the_host_s_own_connections_arrive_on_loopback() {
        assert_eq!(judge(5432, Some("127.0.0.1")), Judgement::Admitted("inet filter input: iifname lo accept".into()));
        assert_eq!(judge(9000, Some("::1")), judge(5432, Some("127.0.0.1")));
        // opsbook's table for a host whose clients are its own (`firewall::admit(8086, [])`, as
        // nft 1.0.6 lists it): loopback admitted, every other source dropped.
        let lone =
            Ruleset::parse(include_str!("../../../../../tests/fixtures/firewall/opsbook-loopback.json")).unwrap();
        let judge = |source: &str| lone.judge(&Packet { port: 8086, source: Some(source.parse().unwrap()) }, false);
        assert_eq!(
            judge("127.0.0.1"),
            Judgement::Admitted("inet opsbook input: iifname lo tcp dport 8086 accept".into())
        );
        assert_eq!(judge("10.0.0.3"), Judgement::Refused("inet opsbook input: tcp dport 8086 drop".into()));
        assert_eq!(
            lone.judge(&Packet { port: 8086, source: None }, false),
            Judgement::Refused("inet opsbook input: tcp dport 8086 drop".into())
        );
    }

    #[test]
    fn sources_decide_through_prefixes_and_named_sets() {
        assert_eq!(
            judge(3100, Some("10.2.7.7")),
            Judgement::Admitted("inet filter input: ip saddr 10.2.0.0/16 tcp dport 3100 accept".into())
        );
        assert_eq!(
            judge(3100, Some("10.1.0.5")),
            Judgement::Admitted("inet filter input: ip saddr @clients tcp dport 3100 accept".into())
        );
        assert_eq!(
            judge(3100, Some("192.0.2.9")),
            Judgement::Refused("inet filter input: tcp dport 3100 reject".into())
        );
        assert_eq!(
            judge(3100, None),
            Judgement::Unknown(
                "`inet filter input: ip saddr 10.2.0.0/16 tcp dport 3100 accept` depends on the source address (ask \
                 for one source)"
                    .into()
            )
        );
    }

    #[test]
    fn jumps_are_followed_and_an_unknown_interface_is_said_not_guessed() {
        assert_eq!(
            judge(9000, Some("192.0.2.9")),
            Judgement::Unknown(
                "`inet filter extra: iifname eth0 accept` depends on the incoming interface (iifname)".into()
            )
        );
    }

    #[test]
    fn an_empty_ruleset_filters_nothing() {
        let empty = Ruleset::parse(r#"{"nftables": [{"metainfo": {"version": "1.0.6"}}]}"#).unwrap();
        assert!(empty.is_empty());
        assert_eq!(
            empty.judge(&Packet { port: 3100, source: None }, false),
            Judgement::Admitted("no input chain filters it".into())
        );
        assert_eq!(Ruleset::parse("{}").err(), Some("nft's JSON has no `nftables` list".to_string()));
    }
}
