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
//!
//! Other crates see what a session and the command line need (below): the context verbs act
//! with, the ground and the place among hosts, a verb's effect, a value as text, reaching
//! another host; and `template`, the templates found and rendered (`opsbook templates`). Every
//! other module is private.

mod account;
mod alloy;
mod config_view;
mod container;
pub(crate) mod context;
pub(crate) mod core;
mod diff;
mod file;
mod firewall;
mod fleet;
mod ground;
mod host;
mod http;
mod influx;
mod journal;
mod loki;
mod pkg;
mod place;
mod prom;
pub(crate) mod registry;
pub(crate) mod result;
mod telegraf;
pub mod template;
mod template_values;
mod time;
mod tools;
mod unit;
pub(crate) mod values;
pub(crate) mod verb;
mod wait;
mod wireguard;

pub use context::Context;
pub use core::{text, time_text};
pub use fleet::reach;
pub use ground::Ground;
pub use place::Place;
pub use verb::Effect;

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
