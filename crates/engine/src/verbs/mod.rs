//! The verbs: the host side of the scripting boundary.
//!
//! One file per namespace, named after it (`unit.rs` is `unit::…`, `pkg.rs` is `pkg::…`,
//! `host.rs` is `host::…`; `core.rs` and `time.rs` are global); a namespace too large for one
//! file keeps its parts in the folder of its name (`firewall/`, `pkg/`, `influx/`, `telegraf/`,
//! `unit/`). Each builds its functions into a module (its `module()`), once for the process.
//!
//! Apart from the namespaces: `context.rs` (what verbs act with, found per call), `ground.rs`
//! (where they act), `config_view.rs` (`config` as scripts read it), `place.rs` (the hosts
//! around), `result.rs` (what they return and raise), `verb.rs` (what a verb says of itself),
//! `values.rs`, `tools.rs`, `diff.rs` (shared helpers), and `registry.rs`, which is the only
//! file that imports every namespace.

pub mod account;
pub mod alloy;
pub mod config_view;
pub mod container;
pub mod context;
pub mod core;
pub mod diff;
pub mod file;
pub mod firewall;
pub mod fleet;
pub mod ground;
pub mod host;
pub mod http;
pub mod influx;
pub mod journal;
pub mod loki;
pub mod pkg;
pub mod place;
pub mod prom;
pub mod registry;
pub mod result;
pub mod telegraf;
pub mod template;
mod template_values;
pub mod time;
pub mod tools;
pub mod unit;
pub mod values;
pub mod verb;
pub mod wait;
pub mod wireguard;

/// Registers one verb into a module, with everything it says of itself: its name, its effect
/// (`Reads` or `Changes`, see `verb::Effect`), its parameters with their types ending with the
/// return type (as `opsbook fns` and editor definitions show them), its doc, an example call
/// (run by the tests), and the function.
#[macro_export]
macro_rules! register {
    ($module:expr, $name:expr, $effect:ident, [$($param:expr),* $(,)?], $doc:expr, $example:expr, $func:expr) => {
        rhai::FuncRegistration::new($name)
            .with_params_info([$($param),*])
            .with_comments([
                $doc.to_string(),
                $crate::verbs::verb::Effect::$effect.doc_line(),
                $crate::verbs::verb::example_line(&$example),
            ])
            .set_into_module($module, $func)
    };
}
