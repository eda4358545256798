//! The few properties opsbook reads of a unit, as typed structs read straight from systemd's
//! `Properties.GetAll` answer.
//!
//! `GetAll` is one round trip per interface, but its answer carries every property (about a
//! hundred for `Unit`, two hundred and fifty for `Service`). Read into a map of owned values,
//! each one is a value built and dropped; read into these structs, the properties no field
//! names are skipped as they are parsed, and only the named ones are kept.

use serde::Deserialize;
use zbus::zvariant::{Type, as_value};

/// `org.freedesktop.systemd1.Unit`: what a unit's status and its current run are made of.
#[derive(Debug, Default, Deserialize, Type)]
#[zvariant(signature = "a{sv}", crate = "zbus::zvariant")]
#[serde(default, rename_all = "PascalCase")]
pub(crate) struct UnitProperties {
    #[serde(with = "as_value::optional")]
    pub(crate) id: Option<String>,
    #[serde(with = "as_value::optional")]
    pub(crate) description: Option<String>,
    #[serde(with = "as_value::optional")]
    pub(crate) load_state: Option<String>,
    #[serde(with = "as_value::optional")]
    pub(crate) active_state: Option<String>,
    #[serde(with = "as_value::optional")]
    pub(crate) sub_state: Option<String>,
    #[serde(with = "as_value::optional")]
    pub(crate) unit_file_state: Option<String>,
    #[serde(with = "as_value::optional")]
    pub(crate) state_change_timestamp: Option<u64>,
    #[serde(with = "as_value::optional")]
    pub(crate) can_reload: Option<bool>,
    #[serde(with = "as_value::optional", rename = "InvocationID")]
    pub(crate) invocation_id: Option<Vec<u8>>,
    #[serde(with = "as_value::optional")]
    pub(crate) inactive_exit_timestamp: Option<u64>,
    #[serde(with = "as_value::optional")]
    pub(crate) active_enter_timestamp: Option<u64>,
    #[serde(with = "as_value::optional")]
    pub(crate) inactive_enter_timestamp: Option<u64>,
}

/// One command of an `ExecStart`-like property (`(sasbttttuii)`): path, argv,
/// ignore-failure, start and exit timestamps, pid, exit code and status.
type ExecCommand = (String, Vec<String>, bool, u64, u64, u64, u64, u32, i32, i32);

/// `org.freedesktop.systemd1.Service`: its processes and how the last run ended.
#[derive(Debug, Default, Deserialize, Type)]
#[zvariant(signature = "a{sv}", crate = "zbus::zvariant")]
#[serde(default, rename_all = "PascalCase")]
pub(crate) struct ServiceProperties {
    #[serde(with = "as_value::optional", rename = "MainPID")]
    pub(crate) main_pid: Option<u32>,
    #[serde(with = "as_value::optional")]
    pub(crate) result: Option<String>,
    #[serde(with = "as_value::optional")]
    pub(crate) exec_main_status: Option<i32>,
    #[serde(with = "as_value::optional", rename = "ExecMainPID")]
    pub(crate) exec_main_pid: Option<u32>,
    #[serde(with = "as_value::optional")]
    exec_start: Option<Vec<ExecCommand>>,
}

impl ServiceProperties {
    /// The argv of the first `ExecStart` command; empty when there is none.
    pub(crate) fn exec_start(&self) -> Vec<String> {
        self.exec_start.as_ref().and_then(|commands| commands.first()).map(|c| c.1.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use zbus::zvariant::{Value, serialized::Context, to_bytes};

    use super::*;

    #[test]
    fn named_properties_are_read_and_the_others_skipped_whatever_their_type() {
        let argv = vec!["/usr/bin/loki".to_string(), "-config.file=/etc/loki.yaml".into()];
        let command: ExecCommand = ("/usr/bin/loki".into(), argv.clone(), false, 1, 2, 3, 4, 42, 0, 0);
        let mut all: HashMap<&str, Value<'_>> = HashMap::new();
        all.insert("Id", Value::from("loki.service"));
        all.insert("ActiveState", Value::from("active"));
        all.insert("StateChangeTimestamp", Value::from(1_700_000_000_000_000u64));
        all.insert("InvocationID", Value::from(vec![1u8, 2, 3]));
        all.insert("MainPID", Value::from(42u32));
        all.insert("ExecStart", Value::from(vec![command]));
        // Properties no field names, of every shape systemd answers with.
        all.insert("Names", Value::from(vec!["loki.service"]));
        all.insert("Conditions", Value::from(vec![("ConditionPathExists", false, true, "/x", 0i32)]));
        all.insert("CPUWeight", Value::from(100u64));
        let bytes = to_bytes(Context::new_dbus(zbus::zvariant::LE, 0), &all).unwrap();
        let (unit, _): (UnitProperties, _) = bytes.deserialize().unwrap();
        assert_eq!(unit.id.as_deref(), Some("loki.service"));
        assert_eq!(unit.active_state.as_deref(), Some("active"));
        assert_eq!(unit.state_change_timestamp, Some(1_700_000_000_000_000));
        assert_eq!(unit.invocation_id, Some(vec![1, 2, 3]));
        assert_eq!((unit.sub_state, unit.can_reload), (None, None));
        let (service, _): (ServiceProperties, _) = bytes.deserialize().unwrap();
        assert_eq!((service.main_pid, service.exec_main_pid), (Some(42), None));
        assert_eq!(service.exec_start(), argv);
    }
}
