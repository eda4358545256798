//! Running the stack's own tools: a configured command (argv array, or a string run by
//! `sh -c`) with `{config}` replaced by the component's configuration path. Shared by the
//! `telegraf::` and `alloy::` modules.

use super::context::Context;
use super::result::{VerbResult, fail};
use opsbook_base::config::{Key, keys};
use opsbook_world::{Completed, Invocation};

/// The command configured under `key`, else `default`, with `{config}` filled in.
pub(crate) fn command(cx: &Context, key: &Key, default: &[&str], config_path: &str) -> Vec<String> {
    let argv = cx.config().command(key).unwrap_or_else(|| default.iter().map(|a| a.to_string()).collect());
    argv.iter().map(|a| a.replace("{config}", config_path)).collect()
}

/// Runs a tool; a missing binary says which key to set.
pub(crate) fn run_tool(cx: &Context, argv: Vec<String>, key: &Key) -> VerbResult<Completed> {
    let timeout = cx.config().duration(keys::TOOLS_TIMEOUT);
    let program = argv.first().cloned().unwrap_or_default();
    let done = cx.run_command(Invocation { argv, timeout, ..Invocation::default() })?;
    match done {
        Ok(c) => Ok(c),
        Err(e) if e.ends_with("not found in PATH") => {
            Err(fail(format!("`{program}` not found in PATH (set {} in config)", key.name)))
        }
        Err(e) => Err(fail(e)),
    }
}

/// The last lines of a tool's output, for a failed check's detail.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}
