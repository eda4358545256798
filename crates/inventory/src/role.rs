//! The roles a host can play: one per component of the table (`opsbook_base::components`,
//! the built-in four and those a `components.toml` adds), read by opsbook's name or the
//! operators' usual one (`telegraf` for `metrics-agent`).

use std::fmt;

use opsbook_base::components::{self, Component};
use opsbook_base::did_you_mean;

/// A component of the stack a host runs: its place in the table, so roles order as the
/// stack starts (servers first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Role(u16);

impl Role {
    /// Every role, servers first (the order the stack starts in).
    pub fn all() -> impl Iterator<Item = Role> {
        (0..components::all().len()).map(|i| Role(i as u16))
    }

    /// The role of the component named `name` (opsbook's name, exactly).
    pub fn of(name: &str) -> Option<Role> {
        Role::all().find(|r| r.name() == name)
    }

    /// The component playing the role.
    pub fn component(self) -> &'static Component {
        &components::all()[usize::from(self.0)]
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
        Role::all().find(|r| r.name() == wanted || r.alias() == wanted)
    }

    /// Like `parse`, with an operator's error naming the accepted names and the closest one.
    pub fn parse_or_explain(text: &str) -> Result<Role, String> {
        Role::parse(text).ok_or_else(|| {
            let names = Role::all().flat_map(|r| [r.name(), r.alias()]);
            let hint = did_you_mean(&text.to_ascii_lowercase(), names).unwrap_or_default();
            format!("unknown role `{text}`{hint} (roles: {})", Role::listed())
        })
    }

    /// The roles as operators read them: `metrics-db (influxdb), log-store (loki), …`.
    pub fn listed() -> String {
        let each: Vec<String> = Role::all().map(|r| format!("{} ({})", r.name(), r.alias())).collect();
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
        assert_eq!(Role::parse("log-shipper").map(Role::name), Some("log-shipper"));
        assert_eq!(Role::parse("Alloy"), Role::of("log-shipper"));
        assert_eq!(Role::parse("metrics_db"), Role::of("metrics-db"));
        assert_eq!(Role::parse("grafana"), None);
        assert_eq!(
            Role::parse_or_explain("log-shiper").unwrap_err(),
            "unknown role `log-shiper`; did you mean `log-shipper`? (roles: metrics-db (influxdb), \
             log-store (loki), metrics-agent (telegraf), log-shipper (alloy))"
        );
    }

    #[test]
    fn every_component_has_a_role_in_the_tables_order() {
        let names: Vec<&str> = Role::all().map(Role::name).collect();
        assert_eq!(names, components::names());
        assert!(Role::of("metrics-db") < Role::of("log-shipper"));
    }
}
