//! The registry: every verbs namespace built into a module once for the process (`modules`),
//! and registered into each engine with its context (`register_all`). A new namespace is one new
//! file (named after it) and one line here.

use std::sync::{Arc, OnceLock};

use rhai::{Dynamic, Engine, Module, Shared};

use super::context::{Context, EngineTag};
use super::{
    account, alloy, container, core, file, firewall, fleet, host, http, influx, journal, loki, pkg, prom, telegraf,
    template, time, unit, wait,
};
use crate::catalog::Catalog;

type SharedModule = Shared<Module>;

/// The global functions and the namespaces of the verbs, built once for the process (their
/// functions find the context per call), in the order they are registered.
struct Modules {
    global: Vec<SharedModule>,
    namespaces: Vec<(&'static str, SharedModule)>,
}

/// Builds the verbs' modules now (`engine::prepare_in_background`).
pub(crate) fn prepare() {
    modules();
}

fn modules() -> &'static Modules {
    static MODULES: OnceLock<Modules> = OnceLock::new();
    MODULES.get_or_init(|| {
        let namespaces = vec![
            ("wait", wait::module()),
            ("unit", unit::module()),
            ("journal", journal::module()),
            ("host", host::module()),
            ("telegraf", telegraf::module()),
            ("alloy", alloy::module()),
            ("container", container::module()),
            ("http", http::module()),
            ("influx", influx::module()),
            ("loki", loki::module()),
            ("prom", prom::module()),
            ("firewall", firewall::module()),
            ("inventory", fleet::inventory_module()),
            ("fleet", fleet::fleet_module()),
            ("file", file::module()),
            ("template", template::module()),
            ("account", account::module()),
            ("pkg", pkg::module()),
        ];
        Modules {
            global: vec![shared(core::module(), None), shared(time::module(), None)],
            namespaces: namespaces.into_iter().map(|(name, m)| (name, shared(m, Some(name)))).collect(),
        }
    })
}

/// A module ready to be registered into any number of engines without being copied: indexed,
/// and named when it is a namespace.
fn shared(mut module: Module, name: Option<&str>) -> SharedModule {
    if let Some(name) = name {
        module.set_id(name);
    }
    module.build_index();
    module.into()
}

/// Registers every verbs module's functions and types into `engine`, acting with `cx`;
/// templates are found on `catalog`'s search path.
pub(crate) fn register_all(engine: &mut Engine, cx: &Arc<Context>, catalog: &Arc<Catalog>) {
    engine.set_default_tag(Dynamic::from(EngineTag { context: cx.clone(), catalog: catalog.clone() }));
    let modules = modules();
    for module in &modules.global {
        engine.register_global_module(module.clone());
    }
    for (name, module) in &modules.namespaces {
        engine.register_static_module(name, module.clone());
    }
    unit::register_types(engine);
    prom::register_types(engine);
}
