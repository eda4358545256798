//! `config` as scripts read it: the configuration's script view (`Config::script_view`, the
//! token left out) as a read-only Rhai map.
//!
//! Turning the view into script values is the largest part of an engine's set-up on each host
//! of a fleet run, and the hosts of a fleet mostly read the same: so the views made are kept for the process, and a host whose view reads the same as one made
//! already gets a copy of it (its strings shared) instead of having it made again.

use std::sync::Mutex;

use rhai::Dynamic;

use opsbook_base::config::Config;

/// How many different views are kept: a fleet's hosts differ in a few groups at most; past
/// that, the oldest is forgotten (and made again if asked for).
const KEPT: usize = 16;

/// The views made so far, by what they read, oldest first.
static VIEWS: Mutex<Vec<(serde_json::Value, Dynamic)>> = Mutex::new(Vec::new());

/// `config` for scripts acting with `config`.
pub(crate) fn of(config: &Config) -> Dynamic {
    let reads = config.script_view();
    let mut views = VIEWS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, view)) = views.iter().find(|(kept, _)| *kept == reads) {
        return view.clone();
    }
    let view = rhai::serde::to_dynamic(&reads).unwrap_or_default().into_read_only();
    if views.len() == KEPT {
        views.drain(..1);
    }
    views.push((reads, view.clone()));
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsbook_base::config::{Origin, Value, keys};

    fn unit_of(view: &Dynamic) -> String {
        let map = view.read_lock::<rhai::Map>().expect("the view is a map");
        let section = map["metrics_db"].read_lock::<rhai::Map>().expect("a section is a map").clone();
        section["unit"].to_string()
    }

    #[test]
    fn hosts_reading_alike_share_a_view_and_others_get_their_own() {
        let mut a = Config::defaults();
        a.set(keys::METRICS_DB_UNIT, Value::Text("view-test-a.service".into()), Origin::Flag("test")).unwrap();
        let mut b = Config::defaults();
        b.set(keys::METRICS_DB_UNIT, Value::Text("view-test-b.service".into()), Origin::Flag("test")).unwrap();
        let (first, again, other) = (of(&a), of(&a.clone()), of(&b));
        assert_eq!(unit_of(&first), "view-test-a.service");
        assert_eq!(unit_of(&again), "view-test-a.service");
        assert_eq!(unit_of(&other), "view-test-b.service");
    }

    #[test]
    fn the_token_stays_out_of_every_view() {
        let mut c = Config::defaults();
        c.set(keys::METRICS_DB_TOKEN, Value::Text("view-test-sekrit".into()), Origin::Flag("test")).unwrap();
        let shown = format!("{:?}", of(&c));
        assert!(!shown.contains("view-test-sekrit"), "{shown}");
        assert!(shown.contains("telegraf"), "{shown}");
    }
}
