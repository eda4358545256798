//! The process seam: running a command (argv, no shell) with a deadline. The real
//! implementation is the one process runner (`opsbook_base::process`): its own process group, killed
//! whole on timeout or when the caller gives up, so nothing it started lingers.

use crate::future::BoxFuture;
pub use opsbook_base::process::{Completed, Invocation};

/// The agent's verbs read its configuration files with this script (`sh -c`, arguments `f:FILE`
/// and `d:DIR`): it prints each file Telegraf would load, in its order: `\x01F PATH` then the text, or
/// `\x01U PATH` (unreadable) / `\x01M PATH` (missing). Arguments `f:FILE` and `d:DIR`; a
/// directory is walked as `config.WalkDirectory` walks it (`/` sorts first, as in a walk).
pub const AGENT_CONFIG_FILES: &str = r#"show() {
  if [ -r "$1" ]; then printf '\001F %s\n' "$1"; cat "$1"; echo
  elif [ -e "$1" ]; then printf '\001U %s\n' "$1"
  else printf '\001M %s\n' "$1"; fi
}
for spec do
  case $spec in
    f:*) show "${spec#f:}" ;;
    d:*) d=${spec#d:}
      [ -d "$d" ] || { printf '\001M %s\n' "$d"; continue; }
      find "$d" -type d -name '..*' -prune -o ! -type d -name '?*.conf' -print | tr '/' '\001' | LC_ALL=C sort | tr '\001' '/' |
        while IFS= read -r f; do show "$f"; done ;;
  esac
done"#;

/// `$1` workers, each `timeout $2 dd …`, between two readings of the host's CPU counters.
/// `timeout` bounds each process on the host itself, so a lost connection leaves no load
/// behind; the clock ticks per second come first, to turn the counters into seconds.
pub const CPU_LOAD: &str = r#"getconf CLK_TCK; head -n 1 /proc/stat
i=0
while [ "$i" -lt "$1" ]; do timeout "$2" dd if=/dev/zero of=/dev/null bs=64k 2>/dev/null & i=$((i + 1)); done
wait
head -n 1 /proc/stat"#;

/// Running programs on the host: this machine's processes, or commands over ssh.
pub trait Commands: Send + Sync {
    /// Runs the command; `Err` when it could not start (e.g. not in PATH: "`x` not found in PATH").
    fn run<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>>;
}

/// Real child processes.
pub struct Processes;

impl Commands for Processes {
    fn run<'a>(&'a self, inv: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>> {
        Box::pin(opsbook_base::process::run(inv))
    }
}
