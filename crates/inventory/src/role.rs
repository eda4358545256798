//! The four roles a host can play in the stack, and the names operators give them.
//!
//! opsbook's own names (`metrics-db`, `log-store`, `metrics-agent`, `log-shipper`) are what
//! reports print; inventories written for Ansible usually say `influxdb`, `loki`, `telegraf`
//! and `alloy`, so those are accepted as aliases wherever a role is read.

use std::fmt;

use crate::suggest::did_you_mean;

/// A component of the stack a host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    MetricsDb,
    LogStore,
    MetricsAgent,
    LogShipper,
}

impl Role {
    /// Every role, servers first (the order the stack starts in).
    pub const ALL: [Role; 4] = [Role::MetricsDb, Role::LogStore, Role::MetricsAgent, Role::LogShipper];

    /// opsbook's name for the role.
    pub fn name(self) -> &'static str {
        match self {
            Role::MetricsDb => "metrics-db",
            Role::LogStore => "log-store",
            Role::MetricsAgent => "metrics-agent",
            Role::LogShipper => "log-shipper",
        }
    }

    /// The operators' usual name for the component playing the role.
    pub fn alias(self) -> &'static str {
        match self {
            Role::MetricsDb => "influxdb",
            Role::LogStore => "loki",
            Role::MetricsAgent => "telegraf",
            Role::LogShipper => "alloy",
        }
    }

    /// A role by its name or alias (case-insensitive; `_` taken as `-`).
    pub fn parse(text: &str) -> Option<Role> {
        let wanted = text.trim().to_ascii_lowercase().replace('_', "-");
        Role::ALL.into_iter().find(|r| r.name() == wanted || r.alias() == wanted)
    }

    /// Like `parse`, with an operator's error naming the accepted names and the closest one.
    pub fn parse_or_explain(text: &str) -> Result<Role, String> {
        Role::parse(text).ok_or_else(|| {
            let names = Role::ALL.iter().flat_map(|r| [r.name(), r.alias()]);
            let hint = did_you_mean(&text.to_ascii_lowercase(), names).unwrap_or_default();
            let accepted: Vec<String> = Role::ALL.iter().map(|r| format!("{} ({})", r.name(), r.alias())).collect();
            format!("unknown role `{text}`{hint} (roles: {})", accepted.join(", "))
        })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_parse_to_the_same_role() {
        assert_eq!(Role::parse("log-shipper"), Some(Role::LogShipper));
        assert_eq!(Role::parse("Alloy"), Some(Role::LogShipper));
        assert_eq!(Role::parse("metrics_db"), Some(Role::MetricsDb));
        assert_eq!(Role::parse("grafana"), None);
        assert_eq!(
            Role::parse_or_explain("log-shiper").unwrap_err(),
            "unknown role `log-shiper`; did you mean `log-shipper`? (roles: metrics-db (influxdb), \
             log-store (loki), metrics-agent (telegraf), log-shipper (alloy))"
        );
    }
}
