//! The container seam: the server units when they run as Podman containers (a Quadlet file or
//! a unit running `podman run`). The real implementation runs `podman … --format json` through
//! the `Commands` seam and parses its JSON (and its `--version`); restarts belong to the
//! service manager, so none is offered here.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::commands::{Commands, Invocation};
use crate::future::BoxFuture;

/// One container, from `podman ps`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Container {
    /// The container's name.
    pub name: String,
    /// Its id.
    pub id: String,
    /// Its image.
    pub image: String,
    /// `running`, `exited`, `created`…
    pub state: String,
    /// Podman's text: "Up 2 hours", "Exited (0) 5 minutes ago".
    pub status: String,
    /// Its labels; podman records the systemd unit that started it as `PODMAN_SYSTEMD_UNIT`.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// One row of a `ps`-style table: (column, value) pairs in column order.
pub type Row = Vec<(String, String)>;

/// Resource use, from `podman stats`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// The container's name.
    pub name: String,
    /// CPU use, as podman writes it (`1.23%`).
    pub cpu_percent: String,
    /// Memory used and its limit, as podman writes them.
    pub mem_usage: String,
    /// Memory used, in percent of the limit.
    pub mem_percent: String,
    /// Network bytes in and out.
    pub net_io: String,
    /// Block device bytes read and written.
    pub block_io: String,
    /// How many processes it runs.
    pub pids: String,
}

/// The host's containers (podman).
pub trait Containers: Send + Sync {
    /// `podman ps` (`all`: stopped ones too).
    fn list(&self, all: bool) -> BoxFuture<'_, Result<Vec<Container>, String>>;
    /// `podman inspect` of one container, as JSON.
    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Value, String>>;
    /// The last `tail` lines the container logged (`since`: from that time on).
    fn logs<'a>(
        &'a self,
        name: &'a str,
        tail: usize,
        since: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<String>, String>>;
    /// `podman stats` of one container.
    fn stats<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Stats, String>>;
    /// `podman top`: the header's column names and one row per process.
    fn top<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<Row>, String>>;
    /// Restarts the container.
    fn restart<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// Podman (or a compatible runtime) on this machine.
pub struct Podman {
    /// The runtime's program (`container_runtime`: `podman`).
    pub program: String,
    /// How it is run.
    pub commands: Arc<dyn Commands>,
    /// How long one call may take.
    pub timeout: Duration,
}

impl Podman {
    async fn podman(&self, args: &[&str]) -> Result<String, String> {
        self.podman_output(args).await.map(|done| done.stdout)
    }

    /// Runs the runtime; a failure quotes its first line of stderr.
    async fn podman_output(&self, args: &[&str]) -> Result<super::commands::Completed, String> {
        let mut argv = vec![self.program.clone()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let inv = Invocation { argv, timeout: self.timeout, ..Invocation::default() };
        let done = self.commands.run(&inv).await.map_err(|e| {
            if e.ends_with("not found in PATH") { format!("{e} (set container.runtime in config)") } else { e }
        })?;
        if done.timed_out {
            return Err(format!(
                "`{} {}` did not finish within {}",
                self.program,
                args.join(" "),
                humantime::format_duration(self.timeout)
            ));
        }
        if done.code != Some(0) {
            let first = done.stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            return Err(format!("`{} {}` failed: {first}", self.program, args.join(" ")));
        }
        Ok(done)
    }
}

/// `podman logs --timestamps` prints the container's stdout on stdout and its stderr on stderr
/// (where Loki and InfluxDB log), each line after an RFC 3339 time: merged back into one log
/// in time order, without the times.
pub(crate) fn merge_logs(stdout: &str, stderr: &str) -> Vec<String> {
    // RFC 3339 with trimmed nanoseconds does not sort as text: pad the fraction to 9 digits.
    fn key(time: &str) -> String {
        let Some((head, rest)) = time.split_once('.') else { return time.to_string() };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        format!("{head}.{digits:0<9}{}", &rest[digits.len()..])
    }
    let mut lines: Vec<(String, &str)> = stdout
        .lines()
        .chain(stderr.lines())
        .map(|l| match l.split_once(' ') {
            Some((t, rest)) if t.len() >= 20 && t.as_bytes()[4] == b'-' && t.contains('T') => (key(t), rest),
            _ => (String::new(), l),
        })
        .collect();
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    lines.into_iter().map(|(_, l)| l.to_string()).collect()
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// The version `podman --version` prints (`podman version 4.3.1`, `podman version 5.2.0-dev`):
/// major, minor and patch, or `None` when the text names none.
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let word = text.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut numbers = word.split(['.', '-', '+']).map(|n| n.parse::<u64>().ok());
    let major = numbers.next()??;
    let minor = numbers.next().flatten().unwrap_or(0);
    let patch = numbers.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// `podman ps --format json`.
pub(crate) fn parse_ps(json: &str) -> Result<Vec<Container>, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("podman ps did not print JSON: {e}"))?;
    let list = v.as_array().ok_or("podman ps did not print a list")?;
    Ok(list
        .iter()
        .map(|c| Container {
            name: text(c, "Names"),
            id: text(c, "Id").chars().take(12).collect(),
            image: text(c, "Image"),
            state: text(c, "State"),
            status: text(c, "Status"),
            // Absent or null when the container has no label.
            labels: c
                .get("Labels")
                .and_then(Value::as_object)
                .map(|l| l.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                .unwrap_or_default(),
        })
        .collect())
}

/// `podman stats --no-stream --format json NAME`.
pub(crate) fn parse_stats(json: &str) -> Result<Stats, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| format!("podman stats did not print JSON: {e}"))?;
    let s = v.as_array().and_then(|a| a.first()).ok_or("podman stats printed no container")?;
    Ok(Stats {
        name: text(s, "name"),
        cpu_percent: text(s, "cpu_percent"),
        mem_usage: text(s, "mem_usage"),
        mem_percent: text(s, "mem_percent"),
        net_io: text(s, "net_io"),
        block_io: text(s, "block_io"),
        pids: text(s, "pids"),
    })
}

/// A `ps`-style table (podman top): columns split on whitespace, the last one takes the rest.
pub(crate) fn parse_table(text: &str) -> Vec<Row> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(header) = lines.next() else { return Vec::new() };
    let columns: Vec<&str> = header.split_whitespace().collect();
    lines
        .map(|line| {
            let mut rest = line.trim_start();
            let mut row = Vec::new();
            for (i, col) in columns.iter().enumerate() {
                if i + 1 == columns.len() {
                    row.push((col.to_string(), rest.trim().to_string()));
                } else {
                    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                    row.push((col.to_string(), rest[..end].to_string()));
                    rest = rest[end..].trim_start();
                }
            }
            row
        })
        .collect()
}

impl Containers for Podman {
    fn list(&self, all: bool) -> BoxFuture<'_, Result<Vec<Container>, String>> {
        Box::pin(async move {
            let args: &[&str] = if all { &["ps", "--all", "--format", "json"] } else { &["ps", "--format", "json"] };
            parse_ps(&self.podman(args).await?)
        })
    }

    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let out = self.podman(&["inspect", "--format", "json", name]).await?;
            let v: Value = serde_json::from_str(&out).map_err(|e| format!("podman inspect did not print JSON: {e}"))?;
            v.as_array().and_then(|a| a.first()).cloned().ok_or_else(|| format!("no container named `{name}`"))
        })
    }

    fn logs<'a>(
        &'a self,
        name: &'a str,
        tail: usize,
        since: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            let tail = tail.to_string();
            let mut args = vec!["logs", "--timestamps", "--tail", tail.as_str()];
            if let Some(s) = since {
                args.extend(["--since", s]);
            }
            args.push(name);
            let done = self.podman_output(&args).await?;
            Ok(merge_logs(&done.stdout, &done.stderr))
        })
    }

    fn stats<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Stats, String>> {
        Box::pin(async move { parse_stats(&self.podman(&["stats", "--no-stream", "--format", "json", name]).await?) })
    }

    fn top<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<Row>, String>> {
        Box::pin(async move { Ok(parse_table(&self.podman(&["top", name]).await?)) })
    }

    fn restart<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { self.podman(&["restart", name]).await.map(|_| ()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/podman/{name}",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ))
        .unwrap()
    }

    #[test]
    fn real_podman_json_parses() {
        let ps = parse_ps(&fixture("ps-a.json")).unwrap();
        assert_eq!(ps[0].name, "loki-test");
        assert_eq!(ps[0].state, "created");
        assert_eq!(ps[0].id.len(), 12);
        let stats = parse_stats(&fixture("stats.json")).unwrap();
        assert_eq!((stats.name.as_str(), stats.cpu_percent.as_str()), ("loki-test", "0.00%"));
        let inspect: Value = serde_json::from_str(&fixture("inspect.json")).unwrap();
        assert_eq!(inspect[0]["State"]["Status"], "created");
        assert_eq!(parse_ps("<html>").unwrap_err(), "podman ps did not print JSON: expected value at line 1 column 1");
        assert_eq!(parse_stats("[]").unwrap_err(), "podman stats printed no container");
    }

    #[test]
    fn versions_as_podman_prints_them() {
        assert_eq!(parse_version("podman version 4.3.1\n"), Some((4, 3, 1)));
        assert_eq!(parse_version("podman version 5.2.0-dev"), Some((5, 2, 0)));
        assert_eq!(parse_version("podman version 4.4"), Some((4, 4, 0)));
        assert_eq!(parse_version("podman: command not found"), None);
        assert_eq!(parse_version(""), None);
    }

    #[test]
    fn logs_of_both_streams_merge_in_time_order() {
        let out = "2026-11-22T09:00:01.5+00:00 out two\n2026-11-22T09:00:03+00:00 out four\n";
        let err = "2026-11-22T09:00:01.123456789+00:00 err one\n2026-11-22T09:00:02.25+00:00 err three\n";
        assert_eq!(merge_logs(out, err), ["err one", "out two", "err three", "out four"]);
    }

    #[test]
    #[allow(clippy::disallowed_macros, reason = "a test says why it skipped")]
    fn ps_style_tables_keep_the_command_whole() {
        let out =
            std::process::Command::new("ps").args(["-o", "user,pid,ppid,pcpu,etime,tty,time,args", "-p", "1"]).output();
        let Ok(out) = out else { return println!("skipped: no ps") };
        let rows = parse_table(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][1], ("PID".to_string(), "1".to_string()));
        assert_eq!(rows[0].last().unwrap().0, "COMMAND");
        let rows = parse_table("USER PID COMMAND\nroot 7 sleep 1000 now\n");
        assert_eq!(rows[0][2], ("COMMAND".into(), "sleep 1000 now".into()));
    }
}
