//! Modules importing each other in a circle: `a` importing `b` importing `a`, or a module
//! importing itself. Evaluating such an import would recurse until the stack overflows, so
//! the module resolver refuses the import that closes the circle (`ImportCycle`, naming it
//! `a → b → a`), and `opsbook check` finds the same circles without running anything
//! (`find`, over the imports each module declares).

use std::collections::HashSet;

/// A circle of imports, its first module repeated at the end: `[a, b, a]`, or `[a, a]` for a
/// module importing itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportCycle(pub Vec<String>);

impl ImportCycle {
    /// The circle closed by importing `path` while `importing` (outermost first) are being
    /// evaluated, if `path` is one of them.
    pub fn closed_by(importing: &[String], path: &str) -> Option<ImportCycle> {
        let start = importing.iter().position(|m| m == path)?;
        let mut circle = importing[start..].to_vec();
        circle.push(path.to_string());
        Some(ImportCycle(circle))
    }

    /// `a → b → a`.
    pub fn path(&self) -> String {
        self.0.join(" → ")
    }
}

impl std::fmt::Display for ImportCycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_slice() {
            [only, _] => write!(f, "module `{only}` imports itself ({}): remove that import", self.path()),
            _ => write!(
                f,
                "modules import each other in a circle ({}): move what they share into a module of its own",
                self.path()
            ),
        }
    }
}

impl std::error::Error for ImportCycle {}

/// The first circle reachable from `start`, following `imports_of` (the modules a module
/// imports, in the order it imports them); `None` when every import path ends.
pub fn find(start: &str, imports_of: &mut dyn FnMut(&str) -> Vec<String>) -> Option<ImportCycle> {
    let mut finished = HashSet::new();
    let mut importing = Vec::new();
    walk(start, imports_of, &mut importing, &mut finished)
}

fn walk(
    module: &str,
    imports_of: &mut dyn FnMut(&str) -> Vec<String>,
    importing: &mut Vec<String>,
    finished: &mut HashSet<String>,
) -> Option<ImportCycle> {
    if let Some(cycle) = ImportCycle::closed_by(importing, module) {
        return Some(cycle);
    }
    if finished.contains(module) {
        return None;
    }
    importing.push(module.to_string());
    for next in imports_of(module) {
        if let Some(cycle) = walk(&next, imports_of, importing, finished) {
            return Some(cycle);
        }
    }
    importing.pop();
    finished.insert(module.to_string());
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph<'a>(edges: &'a [(&'a str, &'a str)]) -> impl FnMut(&str) -> Vec<String> + 'a {
        move |m| edges.iter().filter(|(from, _)| *from == m).map(|(_, to)| to.to_string()).collect()
    }

    #[test]
    fn circles_are_named_from_where_they_close() {
        let found = find("r", &mut graph(&[("r", "a"), ("a", "b"), ("b", "a")])).unwrap();
        assert_eq!(found.path(), "a → b → a");
        assert_eq!(
            found.to_string(),
            "modules import each other in a circle (a → b → a): move what they share into a module of its own"
        );
        let own = find("a", &mut graph(&[("a", "a")])).unwrap();
        assert_eq!(own.to_string(), "module `a` imports itself (a → a): remove that import");
        assert_eq!(find("a", &mut graph(&[("a", "b"), ("a", "c"), ("b", "c")])), None);
    }
}
