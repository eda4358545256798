//! Reads `iptables-save` (or `ip6tables-save`) output and judges whether its `filter`
//! table's INPUT chain admits a new TCP connection to a port, for hosts whose firewall is
//! iptables rather than nftables. Like the nftables reader it evaluates only simple matches
//! (`-p`, `--dport`/`--dports`, `-s`, `-i` (a loopback source arrives on `lo`, any other
//! not), conntrack/state) and says plainly when a
//! deciding rule depends on anything else.

use super::packet::{Judgement, Packet, Truth, in_net, parse_net};

/// How deep jumps may nest before the rules are called too complex.
const MAX_DEPTH: usize = 16;

/// The `filter` table: chain policies and rules in order.
pub(crate) struct Rules {
    policies: Vec<(String, String)>,
    rules: Vec<(String, Vec<String>)>,
}

enum Flow {
    Accept(String),
    Drop(String),
    Unknown(String),
    Continue,
}

impl Rules {
    /// The filter table of iptables-save output (`None` when it has none).
    pub(crate) fn parse(text: &str) -> Option<Rules> {
        let mut in_filter = false;
        let mut found = None;
        for line in text.lines().map(str::trim) {
            if let Some(table) = line.strip_prefix('*') {
                in_filter = table == "filter";
                if in_filter {
                    found = Some(Rules { policies: Vec::new(), rules: Vec::new() });
                }
                continue;
            }
            let Some(rules) = found.as_mut().filter(|_| in_filter) else { continue };
            if let Some(decl) = line.strip_prefix(':') {
                let mut words = decl.split_whitespace();
                if let (Some(chain), Some(policy)) = (words.next(), words.next()) {
                    rules.policies.push((chain.to_string(), policy.to_string()));
                }
            } else if let Some(rule) = line.strip_prefix("-A ") {
                let words = split(rule);
                if let Some((chain, rest)) = words.split_first() {
                    rules.rules.push((chain.clone(), rest.to_vec()));
                }
            }
        }
        found
    }

    /// Whether the table has any rule, or a policy other than ACCEPT on INPUT.
    pub(crate) fn filters(&self) -> bool {
        !self.rules.is_empty() || self.policies.iter().any(|(c, p)| c == "INPUT" && p != "ACCEPT")
    }

    /// How INPUT treats `packet`.
    pub(crate) fn judge(&self, packet: &Packet, program: &str) -> Judgement {
        let policy = self.policies.iter().find(|(c, _)| c == "INPUT").map_or("ACCEPT", |(_, p)| p.as_str());
        match self.walk("INPUT", packet, 0, program) {
            Flow::Accept(rule) => Judgement::Admitted(rule),
            Flow::Drop(rule) => Judgement::Refused(rule),
            Flow::Unknown(why) => Judgement::Unknown(why),
            Flow::Continue if policy == "ACCEPT" => Judgement::Admitted(format!("{program}: policy ACCEPT of INPUT")),
            Flow::Continue => Judgement::Refused(format!("{program}: policy {policy} of INPUT")),
        }
    }

    fn walk(&self, chain: &str, packet: &Packet, depth: usize, program: &str) -> Flow {
        if depth > MAX_DEPTH {
            return Flow::Unknown(format!("jumps nest deeper than {MAX_DEPTH} chains at {chain}"));
        }
        for (_, words) in self.rules.iter().filter(|(c, _)| c == chain) {
            let shown: Vec<String> = words
                .iter()
                .map(|w| if w.contains(char::is_whitespace) { format!("{w:?}") } else { w.clone() })
                .collect();
            let text = format!("{program}: -A {chain} {}", shown.join(" "));
            let (truth, target, goto) = evaluate(words, packet);
            let doubt = match truth {
                Truth::No => continue,
                Truth::Yes => None,
                Truth::Unknown(why) => Some(why),
            };
            let Some(target) = target else { continue };
            if let Some(why) = doubt {
                return Flow::Unknown(format!("`{text}` depends on {why}"));
            }
            match target.as_str() {
                "ACCEPT" => return Flow::Accept(text),
                "DROP" | "REJECT" => return Flow::Drop(text),
                "RETURN" => return Flow::Continue,
                "LOG" | "NFLOG" => {}
                other if self.policies.iter().any(|(c, _)| c == other) => {
                    match self.walk(other, packet, depth + 1, program) {
                        Flow::Continue if !goto => {}
                        decided => return decided,
                    }
                }
                other => return Flow::Unknown(format!("`{text}` jumps to the target {other}")),
            }
        }
        Flow::Continue
    }
}

/// A rule's matches against the packet, and its target (`-j`/`-g`; true for a goto).
fn evaluate(words: &[String], packet: &Packet) -> (Truth, Option<String>, bool) {
    let mut truth = Truth::Yes;
    let (mut target, mut goto) = (None, false);
    let mut i = 0;
    let mut negate = false;
    let mut note = |t: Truth, negate: bool| {
        let t = if negate { t.negated() } else { t };
        truth = match (std::mem::replace(&mut truth, Truth::Yes), t) {
            (Truth::No, _) | (_, Truth::No) => Truth::No,
            (Truth::Unknown(w), _) | (_, Truth::Unknown(w)) => Truth::Unknown(w),
            _ => Truth::Yes,
        };
    };
    while i < words.len() {
        let word = words[i].as_str();
        let arg = words.get(i + 1).map(String::as_str).unwrap_or_default();
        i += 2;
        match word {
            "!" => {
                negate = true;
                i -= 1;
                continue;
            }
            "-p" | "--protocol" => note(Truth::from_bool(arg == "tcp" || arg == "6" || arg == "all"), negate),
            "--dport" | "--destination-port" => note(port_in(arg, packet.port), negate),
            "--dports" | "--destination-ports" => {
                note(Truth::from_bool(arg.split(',').any(|p| port_in(p, packet.port) == Truth::Yes)), negate)
            }
            "-s" | "--source" => note(
                match packet.source {
                    Some(ip) => Truth::from_bool(parse_net(arg).is_some_and(|(net, len)| in_net(ip, net, len))),
                    None => Truth::Unknown("the source address (ask for one source)".into()),
                },
                negate,
            ),
            // The host's own connection comes on the loopback interface, any other does not.
            "-i" | "--in-interface" if packet.loopback() => note(Truth::from_bool(names_lo(arg)), negate),
            "-i" | "--in-interface" if arg == "lo" => note(Truth::No, negate),
            "-i" | "--in-interface" => note(Truth::Unknown("the incoming interface".into()), negate),
            "--ctstate" | "--state" => note(Truth::from_bool(arg.split(',').any(|s| s == "NEW")), negate),
            "-m" | "--comment" | "--reject-with" | "--log-prefix" => {}
            "-j" | "--jump" => target = Some(arg.to_string()),
            "-g" | "--goto" => {
                target = Some(arg.to_string());
                goto = true;
            }
            other => note(Truth::Unknown(format!("the option {other}")), negate),
        }
        negate = false;
    }
    (truth, target, goto)
}

/// Whether iptables' `-i NAME` matches the loopback interface (`lo`, or a wildcard like `l+`).
fn names_lo(name: &str) -> bool {
    match name.strip_suffix('+') {
        Some(prefix) => "lo".starts_with(prefix),
        None => name == "lo",
    }
}

/// Whether `spec` (`3100` or `8000:8100`) holds `port`.
fn port_in(spec: &str, port: u16) -> Truth {
    let bounds = match spec.split_once(':') {
        Some((low, high)) => low.parse::<u16>().ok().zip(high.parse::<u16>().ok()),
        None => spec.parse::<u16>().ok().map(|p| (p, p)),
    };
    match bounds {
        Some((low, high)) => Truth::from_bool((low..=high).contains(&port)),
        None => Truth::Unknown(format!("the port {spec}")),
    }
}

/// Splits a rule into words as iptables-save quotes them (`--comment "two words"`).
fn split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            '\\' if quoted => word.extend(chars.next()),
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from iptables-save 1.8.9 with the rules of the nftables fixture's kind.
    const CAPTURE: &str = include_str!("../../../../../tests/fixtures/firewall/input-drop.iptables");

    fn judge(port: u16, source: Option<&str>) -> Judgement {
        let packet = Packet { port, source: source.map(|s| s.parse().unwrap()) };
        Rules::parse(CAPTURE).unwrap().judge(&packet, "iptables-save")
    }

    #[test]
    fn ports_sources_and_the_policy() {
        assert_eq!(
            judge(22, None),
            Judgement::Admitted("iptables-save: -A INPUT -p tcp -m tcp --dport 22 -j ACCEPT".into())
        );
        assert_eq!(
            judge(9100, None),
            Judgement::Admitted("iptables-save: -A INPUT -p tcp -m multiport --dports 8000:8100,9100 -j ACCEPT".into())
        );
        assert_eq!(
            judge(3100, Some("10.2.0.9")),
            Judgement::Admitted(
                "iptables-save: -A INPUT -s 10.2.0.0/16 -p tcp -m tcp --dport 3100 -m comment --comment \"log store \
                 from the clients\" -j ACCEPT"
                    .into()
            )
        );
        assert_eq!(
            judge(3100, Some("192.0.2.1")),
            Judgement::Refused(
                "iptables-save: -A INPUT -p tcp -m tcp --dport 3100 -j REJECT --reject-with tcp-reset".into()
            )
        );
        assert_eq!(
            judge(9000, Some("192.0.2.1")),
            Judgement::Unknown("`iptables-save: -A EXTRA -i eth0 -j ACCEPT` depends on the incoming interface".into())
        );
        assert_eq!(judge(5432, Some("192.0.2.1")), Judgement::Refused("iptables-save: policy DROP of INPUT".into()));
    }

    #[test]
    fn the_host_s_own_connections_arrive_on_loopback() {
        let rules = "*filter\n:INPUT DROP [0:0]\n-A INPUT -i lo -j ACCEPT\n-A INPUT -p tcp -m tcp --dport 3100 -j DROP\nCOMMIT\n";
        let judge = |source: &str| {
            Rules::parse(rules)
                .unwrap()
                .judge(&Packet { port: 3100, source: Some(source.parse().unwrap()) }, "iptables-save")
        };
        assert_eq!(judge("127.0.0.1"), Judgement::Admitted("iptables-save: -A INPUT -i lo -j ACCEPT".into()));
        assert_eq!(
            judge("10.0.0.2"),
            Judgement::Refused("iptables-save: -A INPUT -p tcp -m tcp --dport 3100 -j DROP".into())
        );
        // Another interface is not loopback's: the host's own connection passes it by.
        assert_eq!(
            Rules::parse("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -i eth0 -j DROP\n-A INPUT -i l+ -j ACCEPT\nCOMMIT\n")
                .unwrap()
                .judge(&Packet { port: 3100, source: Some("::1".parse().unwrap()) }, "ip6tables-save"),
            Judgement::Admitted("ip6tables-save: -A INPUT -i l+ -j ACCEPT".into())
        );
    }

    #[test]
    fn output_without_a_filter_table_filters_nothing() {
        assert!(Rules::parse("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n").is_none());
        let open = Rules::parse("*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n").unwrap();
        assert!(!open.filters());
    }
}
