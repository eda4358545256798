//! The roles a host can play: one per component of the table (`opsbook_base::components`),
//! read by opsbook's name or the operators' usual one (`telegraf` for `metrics-agent`).

use std::fmt;

use opsbook_base::components::{COMPONENTS, Component};
use opsbook_base::suggest::did_you_mean;

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

    /// The component playing the role.
    pub fn component(self) -> &'static Component {
        &COMPONENTS[self as usize]
    }

    /// opsbook's name for the role.
    pub fn name(self) -> &'static str {
        self.component().name
    }

    /// The operators' usual name for the component playing the role.
    pub fn alias(self) -> &'static str {
        self.component().alias
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
            format!("unknown role `{text}`{hint} (roles: {})", Role::listed())
        })
    }

    /// The roles as operators read them: `metrics-db (influxdb), log-store (loki), …`.
    pub fn listed() -> String {
        let each: Vec<String> = Role::ALL.iter().map(|r| format!("{} ({})", r.name(), r.alias())).collect();
        each.join(", ")
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

    #[test]
    fn every_component_has_a_role() {
        // The table is in `Role::ALL` order, one role per component.
        assert_eq!(Role::ALL.len(), COMPONENTS.len());
        assert!(Role::ALL.iter().all(|&r| r.component().name == COMPONENTS[r as usize].name));
    }
}
