//! How the metrics agent is really started, and where it logs: read from its unit and its
//! files as Telegraf reads them. Checked in the source of Telegraf v1.32.0 and v1.39.3
//! (docs/upstream-checked.md §1–§2):
//!
//! - The packaged unit (`scripts/telegraf.service`, both tags) runs `/usr/bin/telegraf -config
//!   /etc/telegraf/telegraf.conf -config-directory /etc/telegraf/telegraf.d $TELEGRAF_OPTS`
//!   with `EnvironmentFile=-/etc/default/telegraf`. Flags take one dash or two, and `=value`.
//! - `cmd/telegraf/telegraf.go` `getConfigFiles` loads every `--config` file, then each
//!   `--config-directory` walked recursively (`config.WalkDirectory`: names ending in `.conf`,
//!   at least 6 characters; directories named `..*` skipped), in the walk's lexical order. So a
//!   test with `--config FILE` alone never reads `telegraf.d`.
//! - `[agent] logfile = "…"` sends every line logged once logging is set up to that file
//!   **instead of** stderr (the journal); `logtarget = "stderr"` (deprecated in v1.32.0)
//!   overrides it (`logger/logger.go` `SetupLogging`). The configuration is TOML after
//!   `$VAR`/`${VAR}` environment substitution; the last file setting a key wins.

use std::collections::BTreeMap;

use crate::verbs::context::Context;
use crate::verbs::result::VerbResult;
use opsbook_base::config::keys;
use opsbook_world::Invocation;
use opsbook_world::units::full_name;

/// The flags that decide which configuration Telegraf loads, as its CLI names them.
const LOADING_FLAGS: [&str; 7] = [
    "config",
    "config-directory",
    "section-filter",
    "input-filter",
    "output-filter",
    "aggregator-filter",
    "processor-filter",
];

/// The agent's program and the flags that choose its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AgentCommand {
    pub program: String,
    /// `(name, value)` in the order given, names without dashes (`config-directory`).
    pub flags: Vec<(String, String)>,
    /// Where the flags were read (`telegraf.service's ExecStart`, `metrics_agent.exec`…).
    pub from: String,
    /// The program's environment file (`agent_environment`) when it was read to expand its
    /// unit's ExecStart: read once, not again for its log target.
    pub environment: Option<BTreeMap<String, String>>,
}

impl AgentCommand {
    /// The program, its loading flags (as `--name value`) and `extra`.
    pub(super) fn argv(&self, extra: &[&str]) -> Vec<String> {
        let mut argv = vec![self.program.clone()];
        for (name, value) in &self.flags {
            argv.push(format!("--{name}"));
            argv.push(value.clone());
        }
        argv.extend(extra.iter().map(|e| e.to_string()));
        argv
    }

    fn values(&self, flag: &str) -> impl Iterator<Item = &str> {
        self.flags.iter().filter(move |(n, _)| n == flag).map(|(_, v)| v.as_str())
    }

    fn names_a_config(&self) -> bool {
        self.values("config").chain(self.values("config-directory")).next().is_some()
    }
}

/// The loading flags of an argv (without its program): `-config F`, `--config=F`, ….
pub(super) fn loading_flags(args: &[String]) -> Vec<(String, String)> {
    let mut flags = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let Some(bare) = word.strip_prefix("--").or_else(|| word.strip_prefix('-')) else { continue };
        let (name, inline) = match bare.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (bare, None),
        };
        if !LOADING_FLAGS.contains(&name) {
            continue;
        }
        if let Some(value) = inline.or_else(|| words.next().cloned()) {
            flags.push((name.to_string(), value));
        }
    }
    flags
}

/// Words of a command line written in the configuration (double or single quotes group).
pub(super) fn split_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut open) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => (quote, open) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if open || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                open = false;
            }
            (None, c) => word.push(c),
        }
    }
    if open || !word.is_empty() {
        words.push(word);
    }
    words
}

/// `NAME=value` lines of an environment file (`/etc/default/telegraf`), quotes removed.
pub(super) fn environment_file(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("export ").unwrap_or(l).split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches(|c| c == '"' || c == '\'').to_string()))
        .collect()
}

/// An ExecStart argv with its `$NAME` words split from the environment (as systemd does; an
/// unset one vanishes), and `${NAME}` inside words replaced.
pub(super) fn expand(argv: &[String], env: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for word in argv {
        if let Some(name) = word.strip_prefix('$').filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            out.extend(env.get(name).map(|v| split_words(v)).unwrap_or_default());
            continue;
        }
        let mut word = word.clone();
        for (name, value) in env {
            word = word.replace(&format!("${{{name}}}"), value);
        }
        out.push(word);
    }
    out
}

/// Reads a file of the host through the files seam; `None` when absent or unreadable.
fn read_text(cx: &Context, path: &str) -> VerbResult<Option<String>> {
    let files = cx.world().files.clone();
    let path = path.to_string();
    Ok(cx.block_on(|| async move { files.read(&path).await })?.ok().flatten().map(|(text, _)| text))
}

/// The environment the agent's unit gives it: the packaged `EnvironmentFile`,
/// `/etc/default/<program>` (absent: empty).
pub(super) fn agent_environment(cx: &Context, program: &str) -> VerbResult<BTreeMap<String, String>> {
    let name = program.rsplit('/').next().unwrap_or(program);
    Ok(read_text(cx, &format!("/etc/default/{name}"))?.map(|t| environment_file(&t)).unwrap_or_default())
}

/// How the agent is started: its unit's ExecStart when the service manager knows it and it
/// names a configuration; else `metrics_agent.exec`'s flags (what deploy installs); else
/// `--config metrics_agent.config`. The program is the unit's, else `telegraf` from PATH.
pub(super) fn agent_command(cx: &Context) -> VerbResult<AgentCommand> {
    let config = cx.config();
    let unit = full_name(&config.text(keys::METRICS_AGENT_UNIT));
    let units = cx.world().units.clone();
    let asked = unit.clone();
    let exec = cx.block_on(|| async move { units.status(&asked).await })?.map(|s| s.exec_start).unwrap_or_default();
    let mut program = "telegraf".to_string();
    let mut environment = None;
    if let Some(first) = exec.first() {
        let env = agent_environment(cx, first)?;
        let argv = expand(&exec, &env);
        let command = AgentCommand {
            program: first.clone(),
            flags: loading_flags(&argv[1..]),
            from: format!("{unit}'s ExecStart"),
            environment: Some(env),
        };
        if command.names_a_config() {
            return Ok(command);
        }
        program = command.program;
        environment = command.environment;
    }
    let path = config.text(keys::METRICS_AGENT_CONFIG);
    let line = split_words(&config.text(keys::METRICS_AGENT_EXEC).replace("{config}", &path));
    let command = AgentCommand {
        program: program.clone(),
        flags: loading_flags(line.get(1..).unwrap_or_default()),
        from: keys::METRICS_AGENT_EXEC.name.to_string(),
        environment: environment.clone(),
    };
    if command.names_a_config() {
        return Ok(command);
    }
    Ok(AgentCommand {
        program,
        flags: vec![("config".into(), path)],
        from: keys::METRICS_AGENT_CONFIG.name.into(),
        environment,
    })
}

// The script printing each file Telegraf would load (the sandbox answers it in-process).
use opsbook_world::AGENT_CONFIG_FILES as CONFIG_FILES;

/// Where the agent logs, as its configuration says.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct LogTarget {
    /// The file lines go to once logging is set up; `None`: stderr, the journal.
    pub file: Option<String>,
    /// The configuration files read, in order.
    pub read: Vec<String>,
    /// Files that could not be read (unreadable or missing), with why.
    pub unread: Vec<String>,
    /// The `[agent]` table's string settings (`interval`, `flush_interval`, …), the last
    /// file's winning, as Telegraf merges them.
    pub agent: BTreeMap<String, String>,
}

/// The agent's log target from its files, read over the host's commands (one round trip).
pub(super) fn log_target(cx: &Context, command: &AgentCommand) -> VerbResult<Result<LogTarget, String>> {
    let mut argv: Vec<String> = vec!["sh".into(), "-c".into(), CONFIG_FILES.into(), "sh".into()];
    argv.extend(command.values("config").map(|f| format!("f:{f}")));
    argv.extend(command.values("config-directory").map(|d| format!("d:{d}")));
    let timeout = cx.config().duration(keys::TOOLS_TIMEOUT);
    let done = match cx.run_command(Invocation { argv, timeout, ..Invocation::default() })? {
        Ok(done) if done.code == Some(0) => done,
        Ok(done) => {
            return Ok(Err(format!("reading its files failed: {}", done.failure())));
        }
        Err(e) => return Ok(Err(format!("reading its files failed: {e}"))),
    };
    let env = match &command.environment {
        Some(env) => env.clone(),
        None => agent_environment(cx, &command.program)?,
    };
    Ok(Ok(target_of(&done.stdout, &env)))
}

/// The log target the files printed by `CONFIG_FILES` set (the last setting wins).
pub(super) fn target_of(printed: &str, env: &BTreeMap<String, String>) -> LogTarget {
    let mut target = LogTarget::default();
    let (mut logfile, mut logtarget) = (None, None);
    let mut in_agent = false;
    for line in printed.lines() {
        if let Some(rest) = line.strip_prefix('\u{1}') {
            let (kind, path) = rest.split_at(1.min(rest.len()));
            let path = path.trim().to_string();
            match kind {
                "F" => target.read.push(path),
                "U" => target.unread.push(format!("{path} (not readable)")),
                _ => target.unread.push(format!("{path} (missing)")),
            }
            in_agent = false;
            continue;
        }
        let line = line.trim();
        if line.starts_with('[') {
            in_agent = line.starts_with("[agent]");
            continue;
        }
        if !in_agent {
            continue;
        }
        match toml_string(line) {
            Some(("logfile", v)) => logfile = Some(substitute(v, env)),
            Some(("logtarget", v)) => logtarget = Some(v.to_string()),
            Some((key, v)) => {
                target.agent.insert(key.to_string(), substitute(v, env));
            }
            None => {}
        }
    }
    target.file = match logtarget.as_deref() {
        Some("stderr" | "eventlog") => None,
        _ => logfile.filter(|f| !f.is_empty()),
    };
    target
}

/// `key = "value"` or `key = 'value'` (a comment may follow).
fn toml_string(line: &str) -> Option<(&str, &str)> {
    let (key, rest) = line.split_once('=')?;
    let rest = rest.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &rest[1..];
    Some((key.trim(), &value[..value.find(quote)?]))
}

/// `$NAME` and `${NAME}` replaced from the agent's environment, as Telegraf substitutes them.
fn substitute(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = value.to_string();
    for (name, v) in env {
        out = out.replace(&format!("${{{name}}}"), v).replace(&format!("${name}"), v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_packaged_units_flags_and_other_spellings() {
        let packaged =
            words(&["-config", "/etc/telegraf/telegraf.conf", "-config-directory", "/etc/telegraf/telegraf.d"]);
        let flags = loading_flags(&packaged);
        assert_eq!(
            flags,
            [
                ("config".to_string(), "/etc/telegraf/telegraf.conf".to_string()),
                ("config-directory".to_string(), "/etc/telegraf/telegraf.d".to_string())
            ]
        );
        let command =
            AgentCommand { program: "/usr/bin/telegraf".into(), flags, from: "unit".into(), environment: None };
        assert_eq!(
            command.argv(&["--test"]).join(" "),
            "/usr/bin/telegraf --config /etc/telegraf/telegraf.conf --config-directory /etc/telegraf/telegraf.d --test"
        );
        let other = words(&["--config=/a.conf", "--pidfile", "/run/t.pid", "--input-filter", "cpu:mem", "--debug"]);
        assert_eq!(
            loading_flags(&other),
            [("config".to_string(), "/a.conf".to_string()), ("input-filter".to_string(), "cpu:mem".to_string())]
        );
    }

    #[test]
    fn environment_words_expand_as_systemd_expands_them() {
        let env = environment_file("# options\nTELEGRAF_OPTS=\"--config-directory /srv/t.d --debug\"\nexport X='y'\n");
        assert_eq!(env.get("X").map(String::as_str), Some("y"));
        let argv = words(&["/usr/bin/telegraf", "-config", "/c", "$TELEGRAF_OPTS", "$UNSET", "--x=${X}"]);
        assert_eq!(
            expand(&argv, &env),
            words(&["/usr/bin/telegraf", "-config", "/c", "--config-directory", "/srv/t.d", "--debug", "--x=y"])
        );
        assert_eq!(
            split_words("/usr/bin/telegraf --config '/a b.conf' \"\""),
            words(&["/usr/bin/telegraf", "--config", "/a b.conf", ""])
        );
    }

    #[test]
    fn the_log_target_is_the_last_logfile_unless_logtarget_says_stderr() {
        let env = BTreeMap::from([("LOGDIR".to_string(), "/var/log/telegraf".to_string())]);
        let printed = "\u{1}F /etc/telegraf/telegraf.conf\n[agent]\n  interval = \"10s\"\n  logfile = \"\"\n[[outputs.file]]\n  logfile = \"/not/agent\"\n\
\u{1}F /etc/telegraf/telegraf.d/log.conf\n[agent] # logging\n  logfile = \"${LOGDIR}/telegraf.log\" # here\n\u{1}U /etc/telegraf/telegraf.d/secret.conf\n";
        let t = target_of(printed, &env);
        assert_eq!(t.file.as_deref(), Some("/var/log/telegraf/telegraf.log"));
        assert_eq!(t.read, ["/etc/telegraf/telegraf.conf", "/etc/telegraf/telegraf.d/log.conf"]);
        assert_eq!(t.unread, ["/etc/telegraf/telegraf.d/secret.conf (not readable)"]);
        let stderr = format!("{printed}\u{1}F /x.conf\n[agent]\nlogtarget = 'stderr'\n");
        assert_eq!(target_of(&stderr, &env).file, None);
        assert_eq!(
            target_of("\u{1}M /etc/telegraf/telegraf.conf\n", &env).unread,
            ["/etc/telegraf/telegraf.conf (missing)"]
        );
    }
}
