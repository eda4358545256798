//! Running the firewall's programs (`nft`, `iptables-save`) on the host through the world's
//! commands, with a deadline, and saying plainly why one failed.

use std::time::Duration;

use crate::verbs::context::Context;
use crate::verbs::result::VerbResult;
use opsbook_world::{Completed, Invocation};

/// What reading or changing the ruleset may take on the host.
const NFT_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs a firewall command on the host (stdin for `nft -f -`).
pub(crate) fn run(cx: &Context, argv: &[&str], stdin: Option<String>) -> VerbResult<Result<Completed, String>> {
    let invocation = Invocation {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        timeout: NFT_TIMEOUT,
        stdin,
        ..Invocation::default()
    };
    cx.run_command(invocation)
}

/// Why a firewall command failed, quoting it, with the usual remedy.
pub(crate) fn refused(argv: &[&str], stderr: &str) -> String {
    // nft adds a netlink line under the one that matters.
    let said = stderr.trim().lines().next().unwrap_or_default();
    let remedy = if said.contains("Operation not permitted") || said.contains("Permission denied") {
        "; remedy: the firewall can only be read and changed as root (CAP_NET_ADMIN) on the host"
    } else {
        ""
    };
    format!("`{}` failed: it said {said:?}{remedy}", argv.join(" "))
}

/// A firewall command that ran past its deadline.
pub(crate) fn late(argv: &[&str]) -> String {
    format!("`{}` did not answer within {}s", argv.join(" "), NFT_TIMEOUT.as_secs())
}
