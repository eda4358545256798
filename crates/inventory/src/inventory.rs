//! The fleet (`Inventory`): its hosts and groups, and the one place a host pattern is applied
//! (`select`, `targets`), with the roles each host plays (`services`). Reading it from its
//! sources is `build`'s.

use std::collections::{BTreeMap, BTreeSet};

use super::host::{Host, Service};
use super::role::Role;
use opsbook_base::Error;
use opsbook_base::did_you_mean;

/// The fleet.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub(crate) hosts: Vec<Host>,
    /// Group → member host names (children's included), from both sources.
    pub(crate) groups: BTreeMap<String, BTreeSet<String>>,
}

impl Inventory {
    /// Every host, in the order the inventory names them.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The host named `name`, or an error naming the closest (or, in a small inventory, all).
    pub fn host(&self, name: &str) -> Result<&Host, Error> {
        self.hosts.iter().find(|h| h.name == name).ok_or_else(|| {
            let names = self.hosts.iter().map(|h| h.name.as_str());
            let hint = did_you_mean(name, names.clone()).unwrap_or_else(|| match self.hosts.len() {
                1..=8 => format!(" (hosts: {})", names.collect::<Vec<_>>().join(", ")),
                _ => String::new(),
            });
            Error::Usage(format!("no host named `{name}` in the inventory{hint}"))
        })
    }

    /// The hosts an Ansible-style pattern selects (see `pattern.rs`): a name is a group, else
    /// a host, else a role. A name that is none of these is an error with a suggestion.
    pub fn select(&self, pattern: &str) -> Result<Vec<&Host>, Error> {
        let parsed = opsbook_base::Pattern::parse(pattern).map_err(|m| Error::Usage(format!("host pattern: {m}")))?;
        let selected = parsed.evaluate(|m| self.matching(m))?;
        Ok(selected.into_iter().map(|i| &self.hosts[i]).collect())
    }

    fn matching(&self, matcher: &opsbook_base::Matcher) -> Result<BTreeSet<usize>, Error> {
        let index = |names: &BTreeSet<String>| -> BTreeSet<usize> {
            self.hosts.iter().enumerate().filter(|(_, h)| names.contains(&h.name)).map(|(i, _)| i).collect()
        };
        if let opsbook_base::Matcher::Name(name) = matcher {
            if let Some(members) = self.groups.get(name) {
                return Ok(index(members));
            }
            if let Some(i) = self.hosts.iter().position(|h| &h.name == name) {
                return Ok([i].into());
            }
            if let Some(role) = Role::parse(name) {
                return Ok(self.hosts.iter().enumerate().filter(|(_, h)| h.has(role)).map(|(i, _)| i).collect());
            }
            let names = self.groups.keys().map(String::as_str).chain(self.hosts.iter().map(|h| h.name.as_str()));
            let names = names.chain(Role::all().map(|r| -> &str { r.name() }));
            let hint = did_you_mean(name, names).unwrap_or_default();
            return Err(Error::Usage(format!("`{name}` is no group, host or role of the inventory{hint}")));
        }
        let mut names: BTreeSet<String> = BTreeSet::new();
        for (group, members) in &self.groups {
            if matcher.matches(group) {
                names.extend(members.iter().cloned());
            }
        }
        names.extend(self.hosts.iter().filter(|h| matcher.matches(&h.name)).map(|h| h.name.clone()));
        Ok(index(&names))
    }

    /// Every host playing `role`.
    pub(crate) fn hosts_with(&self, role: Role) -> Vec<&Host> {
        self.hosts.iter().filter(|h| h.has(role)).collect()
    }

    /// `HOST:ROLE` is that one service (the host must play the role); a role alone is the
    /// role on every host playing it.
    pub fn services(&self, spec: &str) -> Result<Vec<Service<'_>>, Error> {
        let (host, role) = match spec.rsplit_once(':') {
            Some((h, r)) => (Some(h), r),
            None => (None, spec),
        };
        let role = Role::parse_or_explain(role).map_err(|m| Error::Usage(format!("service `{spec}`: {m}")))?;
        let Some(name) = host else {
            return Ok(self.hosts_with(role).into_iter().map(|host| Service { host, role }).collect());
        };
        let host = self.host(name)?;
        if !host.has(role) {
            let plays: Vec<&str> = host.roles.iter().map(|r| r.value.name()).collect();
            let plays = if plays.is_empty() { "no role".to_string() } else { plays.join(", ") };
            return Err(Error::Usage(format!("host `{name}` does not play `{role}` (it plays {plays})")));
        }
        Ok(vec![Service { host, role }])
    }

    /// The hosts `--host NAME` or `--hosts PATTERN` ask for (`None` when neither is given).
    /// A pattern selecting nothing is an error; a host with unresolved values is selected (a
    /// run reports it as that host's failure, see `resolved`).
    pub fn targets(&self, host: Option<&str>, hosts: Option<&str>) -> Result<Option<Vec<&Host>>, Error> {
        let selected = match (host, hosts) {
            (Some(_), Some(_)) => return Err(Error::Usage("give either `--host` or `--hosts`, not both".into())),
            (Some(name), None) => vec![self.host(name)?],
            (None, Some(pattern)) => self.select(pattern)?,
            (None, None) => return Ok(None),
        };
        if selected.is_empty() {
            let pattern = hosts.unwrap_or_default();
            return Err(Error::Usage(format!(
                "the host pattern `{pattern}` selects no host; `opsbook hosts` lists them"
            )));
        }
        Ok(Some(selected))
    }

    /// Refuses a host with values that could not be resolved (for one-host uses: the REPL).
    pub fn resolved(host: &Host) -> Result<&Host, Error> {
        match host.problems.first() {
            Some(p) => Err(Error::Usage(format!(
                "host `{}`: `{}` ({}) cannot be resolved: {}",
                host.name, p.var, p.from, p.reason
            ))),
            None => Ok(host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsbook_base::config::Sources;
    use opsbook_base::config::{Config, keys};

    /// Three clients in an INI inventory, a server only opsbook.toml knows, roles by group.
    fn fleet() -> (tempfile::TempDir, Inventory) {
        let dir = tempfile::tempdir().unwrap();
        let ini = "[clients]\nc1 ansible_host=10.0.0.1 opsbook_log_shipper_unit=shipper.service\nc2:2201\nc3\n";
        std::fs::write(dir.path().join("hosts.ini"), ini).unwrap();
        let toml = "inventory = \"hosts.ini\"\n[hosts.srv]\naddress = \"10.0.0.10\"\nroles = [\"influxdb\", \"loki\"]\n\
                    [groups.clients]\nroles = [\"telegraf\", \"alloy\"]\n[groups.edge]\nhosts = [\"c3\"]\n\
                    config = { scope = \"user\" }\n";
        std::fs::write(dir.path().join("opsbook.toml"), toml).unwrap();
        let sources = Sources { explicit: Some(dir.path().join("opsbook.toml")), user_scope: false };
        let config = Config::load(&sources).unwrap();
        let inventory = Inventory::load(&config, None).unwrap();
        (dir, inventory)
    }

    fn names(hosts: Vec<&Host>) -> Vec<&str> {
        hosts.into_iter().map(|h| h.name.as_str()).collect()
    }

    #[test]
    fn patterns_select_groups_hosts_roles_and_wildcards_in_inventory_order() {
        let (_dir, inv) = fleet();
        assert_eq!(names(inv.select("all").unwrap()), ["c1", "c2", "c3", "srv"]);
        assert_eq!(names(inv.select("clients:!c2").unwrap()), ["c1", "c3"]);
        assert_eq!(names(inv.select("srv,c[23]").unwrap()), ["c2", "c3", "srv"]);
        assert_eq!(names(inv.select("log-store").unwrap()), ["srv"]);
        assert_eq!(names(inv.select("alloy:&edge").unwrap()), ["c3"]);
        assert_eq!(names(inv.hosts_with(Role::parse("telegraf").unwrap())), ["c1", "c2", "c3"]);
        assert_eq!(
            inv.select("client").unwrap_err().to_string(),
            "error: `client` is no group, host or role of the inventory; did you mean `clients`?"
        );
    }

    #[test]
    fn services_are_a_role_on_a_host_or_on_every_host_with_it() {
        let (_dir, inv) = fleet();
        let s = inv.services("c2:log-shipper").unwrap();
        assert_eq!((s[0].host.name.as_str(), s[0].role), ("c2", Role::parse("alloy").unwrap()));
        let all: Vec<&str> = inv.services("loki").unwrap().iter().map(|s| s.host.name.as_str()).collect();
        assert_eq!(all, ["srv"]);
        assert_eq!(
            inv.services("c2:metrics-db").unwrap_err().to_string(),
            "error: host `c2` does not play `metrics-db` (it plays metrics-agent, log-shipper)"
        );
    }

    #[test]
    fn each_host_has_its_own_config_and_ssh_details() {
        let (_dir, inv) = fleet();
        let c1 = inv.host("c1").unwrap();
        assert_eq!(c1.config().text(keys::LOG_SHIPPER_UNIT), "shipper.service");
        assert_eq!(inv.host("c2").unwrap().config().text(keys::LOG_SHIPPER_UNIT), "alloy.service");
        assert_eq!(inv.host("c2").unwrap().port.as_ref().map(|p| p.value), Some(2201));
        assert_eq!(inv.host("c3").unwrap().scope(), "user");
        assert_eq!(
            inv.host("c3").unwrap().address.as_ref().map(|a| (a.value.as_str(), a.from.to_string())),
            Some(("c3", "its inventory name (no ansible_host)".to_string()))
        );
        assert!(!inv.host("srv").unwrap().is_local());
    }

    #[test]
    fn targets_come_from_host_or_hosts_never_both_never_empty() {
        let (_dir, inv) = fleet();
        assert!(inv.targets(None, None).unwrap().is_none());
        assert_eq!(names(inv.targets(Some("c1"), None).unwrap().unwrap()), ["c1"]);
        assert_eq!(
            inv.targets(None, Some("nothing*")).unwrap_err().to_string(),
            "error: the host pattern `nothing*` selects no host; `opsbook hosts` lists them"
        );
        assert_eq!(
            inv.targets(Some("c1"), Some("all")).unwrap_err().to_string(),
            "error: give either `--host` or `--hosts`, not both"
        );
    }
}
