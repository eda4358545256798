//! Reading an Ansible inventory file: YAML or INI by its extension, then the `group_vars/`
//! and `host_vars/` directories beside it, a loop of groups refused.

use std::path::Path;

use super::inventory::AnsibleInventory;
use super::{ini, vars_dir, yaml};
use opsbook_base::Error;

impl AnsibleInventory {
    /// Reads `path`: YAML (`.yml`, `.yaml`, `.json`) or INI (anything else), then the
    /// `group_vars/` and `host_vars/` directories beside it.
    pub fn load(path: &Path) -> Result<AnsibleInventory, Error> {
        let text = opsbook_base::read_text_or(path, opsbook_base::InputKind::INVENTORY, |source| Error::Io {
            context: format!("cannot read the Ansible inventory `{}`", path.display()),
            source,
        })?;
        let mut inventory = AnsibleInventory::default();
        inventory.group_mut("all");
        inventory.group_mut("ungrouped");
        let is_yaml = matches!(path.extension().and_then(|e| e.to_str()), Some("yml" | "yaml" | "json"));
        if is_yaml {
            yaml::read_inventory(&mut inventory, path, &text)?;
        } else {
            ini::read_inventory(&mut inventory, path, &text)?;
        }
        inventory.reconcile();
        inventory.refuse_cycles(path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for i in 0..inventory.groups.len() {
            let vars = vars_dir::read(&dir.join("group_vars"), &inventory.groups[i].name)?;
            inventory.groups[i].dir_vars = vars;
        }
        for i in 0..inventory.hosts.len() {
            let vars = vars_dir::read(&dir.join("host_vars"), &inventory.hosts[i].name)?;
            inventory.hosts[i].dir_vars = vars;
        }
        Ok(inventory)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value as Json;

    fn load(name: &str, text: &str) -> Result<AnsibleInventory, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        AnsibleInventory::load(&path).map_err(|e| e.to_string().replace(&dir.path().display().to_string(), "DIR"))
    }

    #[test]
    fn a_loop_of_groups_is_refused_naming_it_in_yaml_and_ini() {
        let loop_of = |file: &str| {
            format!(
                "error: DIR/{file}: the groups `a` → `b` → `a` form a loop: each is a child of the one before, so a \
                 host of any of them would be in all of them forever (Ansible: \"creates a recursive dependency \
                 loop\"); remove one of these `children` entries"
            )
        };
        let yaml = "all:\n  children:\n    a:\n      children:\n        b:\n          children:\n            a:\n";
        assert_eq!(load("hosts.yml", yaml).unwrap_err(), loop_of("hosts.yml"));
        let ini = "[a:children]\nb\n[b:children]\na\n[b]\nh1\n";
        assert_eq!(load("hosts", ini).unwrap_err(), loop_of("hosts"));
    }

    #[test]
    fn membership_and_precedence_hold_at_thousands_of_hosts() {
        let mut text = String::from("[clients:children]\nracks\n[racks]\n");
        for i in 0..5000 {
            text.push_str(&format!("c{i} ansible_host=10.0.{}.{}\n", i / 250, i % 250 + 1));
        }
        let inventory = load("hosts", &text).unwrap();
        assert_eq!(inventory.members("clients").len(), 5000);
        assert_eq!(inventory.groups_of("c4999"), ["all", "clients", "racks"]);
        assert_eq!(inventory.host_vars("c4999")["ansible_host"].value, Json::from("10.0.19.250"));
    }
}
