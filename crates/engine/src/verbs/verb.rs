//! What a verb says of itself: its effect on the host and an example call.
//!
//! Every host function is registered once (`register!`), with its parameters, its doc, whether
//! it only reads the host or changes it, and an example a runbook could contain. The effect and
//! the example travel in the function's doc comments (`/// Effect: …`, `/// Example: …`), so
//! Rhai's own metadata is the one table that `opsbook fns`, the REPL, the editor definitions,
//! `serve`'s refusal of changing runbooks and the test running every example all read
//! (`crate::functions`).

/// Whether calling a verb can change the host it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Reads only: safe in `serve`'s watching jobs and under `--dry-run`.
    Reads,
    /// Changes the host (units, files, accounts, firewall, commands, the journal, the load):
    /// planned under `--dry-run`, refused in a watching job.
    Changes,
}

const EFFECT_PREFIX: &str = "/// Effect: ";
const EXAMPLE_PREFIX: &str = "/// Example: ";

impl Effect {
    /// The doc line carrying the effect.
    pub fn doc_line(self) -> String {
        let words = match self {
            Effect::Reads => "reads the host",
            Effect::Changes => "changes the host",
        };
        format!("{EFFECT_PREFIX}{words}.")
    }

    /// The effect a doc line states, if it is the effect line.
    pub(crate) fn from_doc_line(line: &str) -> Option<Effect> {
        match line.trim().strip_prefix(EFFECT_PREFIX.trim_start_matches("/// "))? {
            "reads the host." => Some(Effect::Reads),
            "changes the host." => Some(Effect::Changes),
            _ => None,
        }
    }
}

/// The doc line carrying an example call.
pub(crate) fn example_line(example: &str) -> String {
    format!("{EXAMPLE_PREFIX}`{example}`")
}

/// The example a doc line gives, if it is the example line.
pub(crate) fn example_from_doc_line(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix(EXAMPLE_PREFIX.trim_start_matches("/// "))?;
    Some(rest.strip_prefix('`')?.strip_suffix('`')?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_and_example_lines_read_back() {
        for effect in [Effect::Reads, Effect::Changes] {
            let line = effect.doc_line();
            assert_eq!(Effect::from_doc_line(line.trim_start_matches("/// ")), Some(effect), "{line}");
        }
        let line = example_line("unit::status(\"loki\")");
        assert_eq!(line, "/// Example: `unit::status(\"loki\")`");
        assert_eq!(
            example_from_doc_line("Example: `unit::status(\"loki\")`").as_deref(),
            Some("unit::status(\"loki\")")
        );
        assert_eq!(example_from_doc_line("Examples follow"), None);
    }
}
