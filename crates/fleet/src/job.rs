//! What a run over several hosts runs, and how: the runbook with its parameters, how many
//! hosts act at once, how the report is written. `run::run` (every host at once) and
//! `rollout::run` (batch by batch) take the same `Job`, built once from the command line.

use std::path::Path;

use opsbook_base::report::Format;

/// One runbook run over a fleet.
pub struct Job<'a> {
    /// The runbook's name.
    pub runbook: &'a str,
    /// Its parameters (`--set KEY=VALUE`), in the order given.
    pub params: &'a [(String, String)],
    /// How many hosts run at once (`--forks`).
    pub forks: usize,
    /// The report's format.
    pub format: Format,
    /// `--save-json FILE`: the JSON document, whatever `format` prints.
    pub save_json: Option<&'a Path>,
    /// Whether changing verbs only say what they would do.
    pub dry_run: bool,
    /// `--timeout`: every host's run stops there with its partial report (`run::run`; a
    /// rollout takes none). `None`: the configuration's `limits.run_timeout`, if any.
    pub timeout: Option<std::time::Duration>,
}
