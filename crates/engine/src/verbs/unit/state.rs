//! What the `unit::` verbs share about a unit's state: its status read through the world, whether
//! a unit-file state means it starts at boot, and the unit names a script gives (one or many).

use rhai::{Array, Dynamic};

use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use opsbook_world::units::{UnitStatus, full_name};

pub(super) fn enabled_state(state: &str) -> bool {
    matches!(state, "enabled" | "enabled-runtime" | "static" | "indirect" | "generated" | "alias")
}

pub(super) fn status(cx: &Context, name: &str) -> VerbResult<UnitStatus> {
    let unit = full_name(name);
    let units = cx.world().units.clone();
    cx.block_on(|| async move { units.status(&unit).await })?.map_err(|e| fail(e.to_string()))
}

/// Unit names from a string or an array of strings.
pub(super) fn names(value: &Dynamic) -> VerbResult<Vec<String>> {
    if let Ok(s) = value.clone().into_immutable_string() {
        return Ok(vec![full_name(&s)]);
    }
    if let Some(list) = value.read_lock::<Array>() {
        return list
            .iter()
            .map(|v| {
                v.clone().into_immutable_string().map(|s| full_name(&s)).map_err(|_| fail("unit names must be strings"))
            })
            .collect();
    }
    Err(fail(format!("expected a unit name or an array of names, got {}", value.type_name())))
}
