//! What the firewall checks ask about and what they conclude: a new TCP connection to a
//! port (from a source address, or from anywhere; from a loopback address, the host's own
//! connection on the loopback interface), and the judgement of one ruleset —
//! admitted, refused by a named rule, or not decidable here (and why). Shared by the
//! nftables and the iptables readers (firewall/nft.rs, firewall/ipt.rs).

use std::net::IpAddr;

/// A new TCP connection: from the network, or — from a loopback address (127.0.0.0/8, ::1) —
/// the host's own, arriving on the loopback interface `lo`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Packet {
    pub port: u16,
    /// `None`: any source on the network (a rule that depends on it cannot be judged).
    pub source: Option<IpAddr>,
}

impl Packet {
    pub(crate) fn ipv6(&self) -> bool {
        matches!(self.source, Some(IpAddr::V6(_)))
    }

    /// Whether it arrives on `lo`: a connection the host makes to itself, as its own clients do.
    pub(crate) fn loopback(&self) -> bool {
        self.source.is_some_and(|ip| ip.is_loopback())
    }
}

/// How one ruleset treats the packet on the input path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// Nothing drops it; how it gets through.
    Admitted(String),
    /// Dropped or rejected: the rule (or chain policy) that does it.
    Refused(String),
    /// It depends on what is not known here: why, naming the rule.
    Unknown(String),
}

impl Judgement {
    /// Several base chains see the packet one after the other: any refusal refuses it (it
    /// is dropped there if not earlier), otherwise any doubt leaves it undecided.
    pub(crate) fn all(judgements: Vec<Judgement>) -> Judgement {
        if let Some(refused) = judgements.iter().find(|j| matches!(j, Judgement::Refused(_))) {
            return refused.clone();
        }
        if let Some(unknown) = judgements.iter().find(|j| matches!(j, Judgement::Unknown(_))) {
            return unknown.clone();
        }
        let how: Vec<String> = judgements
            .into_iter()
            .filter_map(|j| if let Judgement::Admitted(h) = j { Some(h) } else { None })
            .collect();
        if how.is_empty() {
            Judgement::Admitted("no input chain filters it".into())
        } else {
            Judgement::Admitted(how.join("; "))
        }
    }
}

/// A match's outcome: it holds, it does not, or it depends on something unknown (why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Truth {
    Yes,
    No,
    Unknown(String),
}

impl Truth {
    pub(crate) fn from_bool(b: bool) -> Truth {
        if b { Truth::Yes } else { Truth::No }
    }

    pub(crate) fn negated(self) -> Truth {
        match self {
            Truth::Yes => Truth::No,
            Truth::No => Truth::Yes,
            unknown => unknown,
        }
    }
}

/// An address or network as rules write it: `10.0.0.5`, `10.0.0.0/24`, `fd00::/8`.
pub(crate) fn parse_net(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u8>().ok()?)),
        None => (text.parse::<IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((addr, len))
}

/// Whether `ip` is inside `net/len` (false across address families).
pub(crate) fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len)) };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_contain_their_addresses() {
        let (net, len) = parse_net("10.2.0.0/16").unwrap();
        assert!(in_net("10.2.9.1".parse().unwrap(), net, len));
        assert!(!in_net("10.3.0.1".parse().unwrap(), net, len));
        assert!(!in_net("fd00::1".parse().unwrap(), net, len));
        assert_eq!(parse_net("10.0.0.1/33"), None);
        assert_eq!(parse_net("fd00::/8").map(|(_, l)| l), Some(8));
    }

    #[test]
    fn a_refusal_anywhere_refuses() {
        let all = Judgement::all(vec![
            Judgement::Unknown("iifname".into()),
            Judgement::Refused("policy drop".into()),
            Judgement::Admitted("x".into()),
        ]);
        assert_eq!(all, Judgement::Refused("policy drop".into()));
        assert_eq!(Judgement::all(vec![]), Judgement::Admitted("no input chain filters it".into()));
    }
}
