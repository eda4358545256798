//! Each crate a face: a crate root declares at most five public modules, and whatever else
//! other crates name is re-exported by the `pub use` lines of its façade, so the file layout is
//! not the API (ARCHITECTURE.md, "Code map").

use std::path::Path;

use super::{ROOT, assert_none, crate_sources, reading, shown};

/// The most public modules a crate root may declare.
const MOST_PUBLIC_MODULES: usize = 5;

/// Invariant: each crate root (`src/lib.rs`, `crates/*/src/lib.rs`) declares at most five
/// public modules (`pub mod`); its other modules are private (or `pub(crate)`) behind `pub use`.
#[test]
fn each_crate_root_declares_at_most_five_public_modules() {
    let found = crate_roots_with_too_many_public_modules(Path::new(ROOT));
    assert_none(found, "crate roots with more public modules than five");
}

/// Each crate root declaring more than five public modules, naming them.
pub(super) fn crate_roots_with_too_many_public_modules(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for src in crate_sources(root) {
        let lib = src.join("lib.rs");
        let Ok(text) = std::fs::read_to_string(&lib) else { continue };
        let public: Vec<String> =
            reading::read(&text).code.iter().filter_map(|(_, line)| public_module(line)).collect();
        if public.len() > MOST_PUBLIC_MODULES {
            found.push(format!(
                "{}: {} public modules (at most {MOST_PUBLIC_MODULES}): {}; make the others private behind `pub use`",
                shown(root, &lib),
                public.len(),
                public.join(", ")
            ));
        }
    }
    found
}

/// The module a line of code declares public (`pub mod name;`, `pub mod name {`), if any.
fn public_module(line: &str) -> Option<String> {
    let at = line
        .match_indices("pub mod ")
        .map(|(at, _)| at)
        .find(|&at| !line[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_'))?;
    let rest = line[at + "pub mod ".len()..].trim_start();
    let name: String = rest.chars().take_while(|&c| c.is_alphanumeric() || c == '_').collect();
    (!name.is_empty()).then_some(name)
}
