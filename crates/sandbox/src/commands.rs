//! The sandbox's commands: no program runs on this machine. The agent's and shipper's
//! offline tools (`telegraf --config F --test`, `alloy validate F`) answer in-process from the
//! twin components' own config checks, with the output and exit status the real tools give;
//! the script the agent's verbs read its configuration files with is answered in-process from
//! the host's folder; `host::cpu_load`'s script runs for real (it burns CPU time the agent
//! samples, with numbers for arguments, and writes nothing); any other command (a runbook's `host::exec`, a package manager, a user
//! or firewall tool) is refused in words. Every path is confined to the host's folder.

use std::path::{Path, PathBuf};
use std::time::Instant;

use opsbook_twin::{agent, shipper};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opsbook_world::BoxFuture;
use opsbook_world::confined;
use opsbook_world::{AGENT_CONFIG_FILES, CPU_LOAD, Commands, Completed, Invocation, Processes};

/// The sandbox's `Commands` for one simulated host, whose `/` is `root`.
pub(crate) struct SimCommands {
    pub root: PathBuf,
    /// Set once the host is lost (fault `lost-mid-change`): nothing answers any more.
    pub lost: Arc<AtomicBool>,
}

/// The command an argv asks for, if it is one the sandbox answers.
#[derive(Debug, PartialEq, Eq)]
enum Tool {
    AgentTest(String),
    ShipperValidate(String),
    /// `sh -c AGENT_CONFIG_FILES sh f:FILE… d:DIR…`.
    AgentConfigFiles(Vec<String>),
}

fn tool(argv: &[String]) -> Option<Tool> {
    if argv.len() >= 4 && argv[0] == "sh" && argv[1] == "-c" && argv[2] == AGENT_CONFIG_FILES {
        return Some(Tool::AgentConfigFiles(argv[4..].to_vec()));
    }
    let program = argv.first()?.rsplit('/').next()?;
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    match program {
        "telegraf" if args.contains(&"--test") => {
            let at = args.iter().position(|a| *a == "--config")?;
            Some(Tool::AgentTest(args.get(at + 1)?.to_string()))
        }
        "alloy" if args.first() == Some(&"validate") => Some(Tool::ShipperValidate(args.get(1)?.to_string())),
        _ => None,
    }
}

/// `sh -c CPU_LOAD sh WORKERS SECONDS`, both numbers: nothing else can ride along.
fn is_cpu_load(argv: &[String]) -> bool {
    let number = |a: &String| !a.is_empty() && a.chars().all(|c| c.is_ascii_digit() || c == '.');
    argv.len() == 6 && argv[..4] == ["sh", "-c", CPU_LOAD, "sh"] && argv[4..].iter().all(number)
}

/// `podman --version` (or docker's), the one question a rehearsed deploy asks the runtime.
fn is_runtime_version(argv: &[String]) -> bool {
    let program = argv.first().and_then(|p| p.rsplit('/').next()).unwrap_or_default();
    argv.len() == 2 && matches!(program, "podman" | "docker") && argv[1] == "--version"
}

/// Why any other command is not run.
fn refusal(argv: &[String]) -> String {
    format!(
        "in the sandbox, `{}` is not run: the sandbox runs no program on this machine (only the agent's and the \
         shipper's offline configuration checks, answered in-process)\n  help: rehearse with --dry-run, or run against a real host",
        argv.first().map(String::as_str).unwrap_or_default()
    )
}

impl Commands for SimCommands {
    fn run<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>> {
        Box::pin(async move {
            // `true`: whether the host answers (a rollout asks while it changes the host).
            if self.lost.load(Ordering::SeqCst) {
                return Err("no answer: the sandbox's host was lost (fault lost-mid-change)".to_string());
            }
            if invocation.argv == ["true"] {
                let (code, duration) = (Some(0), std::time::Duration::ZERO);
                return Ok(Completed {
                    code,
                    stdout: String::new(),
                    stderr: String::new(),
                    duration,
                    timed_out: false,
                });
            }
            if is_cpu_load(&invocation.argv) || is_runtime_version(&invocation.argv) {
                return Processes.run(invocation).await;
            }
            let Some(tool) = tool(&invocation.argv) else { return Err(refusal(&invocation.argv)) };
            let started = Instant::now();
            let root = self.root.clone();
            let (code, stdout, stderr) = tokio::task::spawn_blocking(move || match tool {
                Tool::AgentTest(path) => agent::test_output(&confined(&root, &path)),
                Tool::ShipperValidate(path) => {
                    let (code, stderr) = shipper::validate_output(&confined(&root, &path));
                    (code, String::new(), stderr)
                }
                Tool::AgentConfigFiles(specs) => (0, config_files(&root, &specs), String::new()),
            })
            .await
            .map_err(|e| format!("the sandbox's tool failed: {e}"))?;
            Ok(Completed { code: Some(i32::from(code)), stdout, stderr, duration: started.elapsed(), timed_out: false })
        })
    }
}

/// What `AGENT_CONFIG_FILES` prints for `specs`, read from the host's folder.
fn config_files(root: &Path, specs: &[String]) -> String {
    let mut out = String::new();
    for spec in specs {
        if let Some(file) = spec.strip_prefix("f:") {
            show(root, file, &mut out);
        } else if let Some(dir) = spec.strip_prefix("d:") {
            if !confined(root, dir).is_dir() {
                out.push_str(&format!("\u{1}M {dir}\n"));
                continue;
            }
            let mut found = Vec::new();
            walk(&confined(root, dir), dir, &mut found);
            // As `tr '/' '\001' | sort` orders them: a folder's files before its subfolders'.
            found.sort_by_key(|f| f.replace('/', "\u{1}"));
            found.iter().for_each(|f| show(root, f, &mut out));
        }
    }
    out
}

/// The `*.conf` files (not folders) under `at`, named as the host sees them (`shown/...`);
/// folders named `..*` are skipped and links are not followed, as `find` does.
fn walk(at: &Path, shown: &str, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(at) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{}/{name}", shown.trim_end_matches('/'));
        match entry.file_type() {
            Ok(t) if t.is_dir() && !name.starts_with("..") => walk(&entry.path(), &path, found),
            Ok(t) if t.is_dir() => {}
            Ok(_) if name.len() > ".conf".len() && name.ends_with(".conf") => found.push(path),
            _ => {}
        }
    }
}

fn show(root: &Path, path: &str, out: &mut String) {
    let at = confined(root, path);
    match opsbook_base::read_text(&at, opsbook_base::InputKind::FILE) {
        Ok(text) => out.push_str(&format!("\u{1}F {path}\n{text}\n")),
        Err(_) if at.exists() => out.push_str(&format!("\u{1}U {path}\n")),
        Err(_) => out.push_str(&format!("\u{1}M {path}\n")),
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
        assert_eq!(tool(&argv(&["sh", "-c", "touch /tmp/x", "sh"])), None);
        assert!(is_cpu_load(&argv(&["sh", "-c", CPU_LOAD, "sh", "2", "3.5"])));
        assert!(!is_cpu_load(&argv(&["sh", "-c", CPU_LOAD, "sh", "2", "1; touch /tmp/x"])));
        assert!(is_runtime_version(&argv(&["/usr/bin/podman", "--version"])));
        assert!(!is_runtime_version(&argv(&["podman", "rm", "-f", "loki"])));
        assert_eq!(
            tool(&argv(&["sh", "-c", AGENT_CONFIG_FILES, "sh", "f:/etc/telegraf/telegraf.conf"])),
            Some(Tool::AgentConfigFiles(argv(&["f:/etc/telegraf/telegraf.conf"])))
        );
    }

    #[test]
    fn the_agents_files_are_read_from_the_hosts_folder_as_the_script_prints_them() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc/telegraf");
        std::fs::create_dir_all(etc.join("telegraf.d/sub")).unwrap();
        std::fs::create_dir_all(etc.join("telegraf.d/..hidden")).unwrap();
        std::fs::write(etc.join("telegraf.conf"), "[agent]\n").unwrap();
        std::fs::write(etc.join("telegraf.d/b.conf"), "b").unwrap();
        std::fs::write(etc.join("telegraf.d/sub/a.conf"), "a").unwrap();
        std::fs::write(etc.join("telegraf.d/..hidden/h.conf"), "h").unwrap();
        std::fs::write(etc.join("telegraf.d/.conf"), "no name").unwrap();
        let specs = argv(&[
            "f:/../../../etc/telegraf/telegraf.conf",
            "d:/etc/telegraf/telegraf.d",
            "f:/etc/none.conf",
            "d:/etc/nodir",
        ]);
        assert_eq!(
            config_files(root.path(), &specs),
            "\u{1}F /../../../etc/telegraf/telegraf.conf\n[agent]\n\n\u{1}F /etc/telegraf/telegraf.d/b.conf\nb\n\
             \u{1}F /etc/telegraf/telegraf.d/sub/a.conf\na\n\u{1}M /etc/none.conf\n\u{1}M /etc/nodir\n"
        );
    }
}
