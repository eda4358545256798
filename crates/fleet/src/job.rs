//! What a run over several hosts runs, and how: the runbook with its parameters, how many
//! hosts act at once, how the report is written. `run::run` (every host at once) and
//! `rollout::run` (batch by batch) take the same `Job`, built once from the command line.

use std::path::Path;

use opsbook_base::report::Format;

/// One runbook run over a fleet.
pub struct Job<'a> {
    pub runbook: &'a str,
    pub params: &'a [(String, String)],
    pub forks: usize,
    pub format: Format,
    /// `--save-json FILE`: the JSON document, whatever `format` prints.
    pub save_json: Option<&'a Path>,
    pub dry_run: bool,
}
