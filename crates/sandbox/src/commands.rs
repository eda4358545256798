//! The sandbox's commands: the agent's and the shipper's offline tools (`telegraf --config F
//! --test`, `alloy validate F`) answer in-process from the twin components' own config
//! checks, with the output and exit status the real tools give. Any other command (a
//! runbook's `host::exec`) runs as a real process, as it would on the stack's host.

use std::path::PathBuf;
use std::time::Instant;

use crate::twin::{agent, shipper};
use crate::world::BoxFuture;
use crate::world::commands::{Commands, Completed, Invocation, Processes};

/// The sandbox's `Commands`.
pub(crate) struct SimCommands {
    pub processes: Processes,
}

/// The offline tool an argv asks for, if it is one the sandbox answers.
#[derive(Debug, PartialEq, Eq)]
enum Tool {
    AgentTest(PathBuf),
    ShipperValidate(PathBuf),
}

fn tool(argv: &[String]) -> Option<Tool> {
    let program = argv.first()?.rsplit('/').next()?;
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    match program {
        "telegraf" if args.contains(&"--test") => {
            let at = args.iter().position(|a| *a == "--config")?;
            Some(Tool::AgentTest(args.get(at + 1)?.into()))
        }
        "alloy" if args.first() == Some(&"validate") => Some(Tool::ShipperValidate(args.get(1)?.into())),
        _ => None,
    }
}

impl Commands for SimCommands {
    fn run<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>> {
        Box::pin(async move {
            let Some(tool) = tool(&invocation.argv) else { return self.processes.run(invocation).await };
            let started = Instant::now();
            let (code, stdout, stderr) = tokio::task::spawn_blocking(move || match tool {
                Tool::AgentTest(path) => agent::test_output(&path),
                Tool::ShipperValidate(path) => {
                    let (code, stderr) = shipper::validate_output(&path);
                    (code, String::new(), stderr)
                }
            })
            .await
            .map_err(|e| format!("the sandbox's tool failed: {e}"))?;
            Ok(Completed { code: Some(i32::from(code)), stdout, stderr, duration: started.elapsed(), timed_out: false })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_offline_tools_are_recognised_and_nothing_else() {
        assert_eq!(
            tool(&argv(&["telegraf", "--config", "/x/t.conf", "--test"])),
            Some(Tool::AgentTest("/x/t.conf".into()))
        );
        assert_eq!(
            tool(&argv(&["/usr/bin/alloy", "validate", "/x/a.toml"])),
            Some(Tool::ShipperValidate("/x/a.toml".into()))
        );
        assert_eq!(tool(&argv(&["telegraf", "--config", "/x/t.conf"])), None);
        assert_eq!(tool(&argv(&["stress", "--cpu", "2"])), None);
    }
}
