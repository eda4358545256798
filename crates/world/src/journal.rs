//! The journal seam: reading, following and writing log entries. The real implementation
//! runs `journalctl -o json` (it understands `--since "1 hour ago"` texts, both
//! scopes, and later SSH) and writes through journald's native socket; the sandbox keeps an
//! in-memory journal behind the same trait.

use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::future::BoxFuture;

/// What to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Matches `_SYSTEMD_UNIT`, `_SYSTEMD_USER_UNIT`, `UNIT` or `USER_UNIT`.
    pub unit: Option<String>,
    /// The newest `lines` entries (all when `None`).
    pub lines: Option<usize>,
    /// journalctl time texts: "1 hour ago", "09:00", "2026-11-22 09:00:00", "today".
    pub since: Option<String>,
    /// Up to this time (same texts as `since`).
    pub until: Option<String>,
    /// Highest priority number kept: 3 keeps emerg..err.
    pub max_priority: Option<u8>,
    /// A regular expression the message must match (journalctl --grep).
    pub grep: Option<String>,
    /// Entries with this `SYSLOG_IDENTIFIER` only.
    pub identifier: Option<String>,
    /// Entries of this process only (`_PID`): a process that died at once may have lines
    /// journald could not attribute to its unit.
    pub pid: Option<u32>,
    /// Entries of one run of `unit` only (systemd's invocation ID): its process's lines and the
    /// manager's lines about it. Implementations that cannot tell runs apart read by `unit`.
    pub invocation: Option<String>,
}

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Microseconds since the epoch.
    pub realtime_us: u64,
    /// The syslog priority (0 emerg … 7 debug).
    pub priority: u8,
    /// The unit it came from, empty when none.
    pub unit: String,
    /// Its `SYSLOG_IDENTIFIER`.
    pub identifier: String,
    /// The process that wrote it.
    pub pid: u32,
    /// The message.
    pub message: String,
}

/// Entries arriving while following.
pub type Feed = mpsc::Receiver<Result<Entry, String>>;

/// The host's journal.
pub trait Journal: Send + Sync {
    /// The entries `query` selects, oldest first.
    fn read<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Entry>, String>>;
    /// The entries of each query, in order, as `read` gives them; a remote host answers them
    /// all in one round trip.
    fn read_each<'a>(&'a self, queries: &'a [Query]) -> BoxFuture<'a, Result<Vec<Vec<Entry>>, String>> {
        Box::pin(read_in_turn(self, queries))
    }
    /// Starts following: new entries matching `query` arrive on the feed until it is dropped.
    fn follow<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Feed, String>>;
    /// Writes an entry tagged with `identifier` at `priority`.
    fn emit<'a>(&'a self, identifier: &'a str, message: &'a str, priority: u8) -> BoxFuture<'a, Result<(), String>>;
}

/// Each query read after the other (`read_each` where reads cost no round trip).
async fn read_in_turn<J: Journal + ?Sized>(journal: &J, queries: &[Query]) -> Result<Vec<Vec<Entry>>, String> {
    let mut all = Vec::with_capacity(queries.len());
    for query in queries {
        all.push(journal.read(query).await?);
    }
    Ok(all)
}

/// syslog priority names.
pub const PRIORITIES: [&str; 8] = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"];

/// A priority given as a number (`3`) or a name (`err`, `warning`).
pub fn priority_number(text: &str) -> Option<u8> {
    text.parse::<u8>().ok().filter(|p| *p < 8).or_else(|| {
        let t = text.to_ascii_lowercase();
        let t = match t.as_str() {
            "error" => "err",
            "warn" => "warning",
            "emergency" => "emerg",
            "critical" => "crit",
            other => other,
        }
        .to_string();
        PRIORITIES.iter().position(|p| *p == t).map(|p| p as u8)
    })
}

/// journalctl and the native journal socket.
pub struct Journalctl {
    /// `--user` for an unprivileged user's own journal.
    pub user: bool,
    /// How long one read may take.
    pub timeout: Duration,
    /// Another host's journal, read over its shared ssh connection.
    pub via: Option<std::sync::Arc<crate::transport::Ssh>>,
}

impl Journalctl {
    /// `journalctl ARGS`, here or on the host over ssh.
    fn journalctl(&self, args: Vec<String>) -> tokio::process::Command {
        let mut argv = vec!["journalctl".to_string()];
        argv.extend(args);
        if let Some(ssh) = &self.via {
            argv = ssh.command(&argv);
        }
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }

    /// `journalctl ARGS` run to its end, here or on the host (as a session of its connection,
    /// ended by the host's `timeout` if ours passes): exit status, stdout, stderr.
    async fn run_to_end(&self, args: Vec<String>) -> Result<(Option<i32>, String, String), String> {
        let late = || not_finished(self.timeout);
        if let Some(ssh) = &self.via {
            let secs = format!("{:.1}s", self.timeout.as_secs_f64().max(0.1));
            let mut argv = ["timeout", "-k", "2", &secs, "journalctl"].map(str::to_string).to_vec();
            argv.extend(args);
            let done = ssh.exec(&argv, None, self.timeout + Duration::from_secs(5)).await?;
            if done.timed_out || done.code == Some(124) {
                return Err(late());
            }
            return Ok((done.code, done.stdout, done.stderr));
        }
        let mut cmd = self.journalctl(args);
        cmd.kill_on_drop(true).stdin(std::process::Stdio::null());
        let out = match tokio::time::timeout(self.timeout, cmd.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err("`journalctl` not found in PATH".into());
            }
            Ok(Err(e)) => return Err(format!("cannot run journalctl: {e}")),
            Err(_) => return Err(late()),
        };
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        Ok((out.status.code(), text(&out.stdout), text(&out.stderr)))
    }

    fn args(&self, query: &Query) -> Vec<String> {
        let mut args: Vec<String> = vec!["--no-pager".into(), "-o".into(), "json".into()];
        args.push(
            "--output-fields=MESSAGE,PRIORITY,_SYSTEMD_UNIT,_SYSTEMD_USER_UNIT,UNIT,USER_UNIT,SYSLOG_IDENTIFIER,_COMM,_PID"
                .into(),
        );
        if self.user {
            args.push("--user".into());
        }
        if let Some(n) = query.lines {
            args.push(format!("--lines={n}"));
        }
        if let Some(s) = &query.since {
            args.push(format!("--since={s}"));
        }
        if let Some(u) = &query.until {
            args.push(format!("--until={u}"));
        }
        if let Some(p) = query.max_priority {
            args.push(format!("--priority={p}"));
        }
        if let Some(g) = &query.grep {
            args.push(format!("--grep={g}"));
        }
        if let Some(pid) = query.pid {
            args.push(format!("_PID={pid}"));
        }
        if let (Some(id), None) = (&query.identifier, &query.unit) {
            args.push(format!("SYSLOG_IDENTIFIER={id}"));
        }
        if let Some(id) = &query.invocation {
            // An invocation belongs to one unit: its lines carry the ID in one of these fields.
            for (i, field) in ["_SYSTEMD_INVOCATION_ID", "INVOCATION_ID", "USER_INVOCATION_ID"].iter().enumerate() {
                if i > 0 {
                    args.push("+".into());
                }
                args.push(format!("{field}={id}"));
            }
        } else if let Some(unit) = &query.unit {
            // OR of the four fields that attribute a line to a unit, as `journalctl -u` does.
            for (i, field) in ["_SYSTEMD_UNIT", "_SYSTEMD_USER_UNIT", "UNIT", "USER_UNIT"].iter().enumerate() {
                if i > 0 {
                    args.push("+".into());
                }
                args.push(format!("{field}={unit}"));
            }
        }
        args
    }
}

/// A journal field's text: strings as they are, byte arrays decoded, multi-valued joined.
fn field_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) if items.iter().all(Value::is_u64) => {
            let bytes: Vec<u8> = items.iter().filter_map(Value::as_u64).map(|b| b as u8).collect();
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(|i| field_text(Some(i))).collect();
            Some(parts.join("\n"))
        }
        Value::Null => Some("[value larger than 4096 bytes not shown]".into()),
        other => Some(other.to_string()),
    }
}

/// One line of `journalctl -o json`.
pub(crate) fn parse_entry(line: &str) -> Result<Entry, String> {
    let v: Value =
        serde_json::from_str(line).map_err(|e| format!("journalctl printed something that is not JSON ({e})"))?;
    let get = |k: &str| field_text(v.get(k));
    let unit =
        ["_SYSTEMD_UNIT", "_SYSTEMD_USER_UNIT", "UNIT", "USER_UNIT"].iter().find_map(|k| get(k)).unwrap_or_default();
    Ok(Entry {
        realtime_us: get("__REALTIME_TIMESTAMP").and_then(|t| t.parse().ok()).unwrap_or(0),
        priority: get("PRIORITY").and_then(|p| p.parse().ok()).unwrap_or(6),
        unit,
        identifier: get("SYSLOG_IDENTIFIER").or_else(|| get("_COMM")).unwrap_or_default(),
        pid: get("_PID").and_then(|p| p.parse().ok()).unwrap_or(0),
        message: get("MESSAGE").unwrap_or_default(),
    })
}

fn journalctl_error(stderr: &str, code: Option<i32>) -> String {
    let first = stderr.lines().next().unwrap_or("").trim();
    format!("journalctl failed ({}): {first}", code.map_or("killed".into(), |c| format!("status {c}")))
}

/// What one journalctl printed, as `read` answers it: its JSON lines' entries that `query`
/// selects, or its failure.
fn entries_of(query: &Query, code: Option<i32>, stdout: &str, stderr: &str) -> Result<Vec<Entry>, String> {
    // --grep with no match exits 1 with nothing on stderr: that is an empty result.
    let no_match = stdout.is_empty() && stderr.trim().is_empty();
    if code != Some(0) && !no_match {
        return Err(journalctl_error(stderr, code));
    }
    let mut entries = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let e = parse_entry(line)?;
        if query.identifier.as_ref().is_none_or(|id| &e.identifier == id) {
            entries.push(e);
        }
    }
    Ok(entries)
}

/// Why a journalctl was given up on: it ran past `timeout`.
fn not_finished(timeout: Duration) -> String {
    format!("journalctl did not finish within {}", humantime::format_duration(timeout))
}

/// What ends each journalctl's part of `read_each`'s one session, with its exit status: a line
/// of its own, which no entry can be (journalctl prints each as one line of JSON, `{`…).
const PART_END: &str = "\nopsbook-journal-end:";

impl Journalctl {
    /// Several queries as one session of the host's connection: each journalctl's output (its
    /// stderr among it: journalctl's own lines are JSON, its complaints are not), then
    /// `PART_END` and its exit status.
    async fn read_remote_each(
        &self,
        ssh: &crate::transport::Ssh,
        queries: &[Query],
    ) -> Result<Vec<Vec<Entry>>, String> {
        use crate::transport::shell_quote;
        let secs = format!("{:.1}s", self.timeout.as_secs_f64().max(0.1));
        let script: String = queries
            .iter()
            .map(|q| {
                let mut argv = ["timeout", "-k", "2", &secs, "journalctl"].map(str::to_string).to_vec();
                argv.extend(self.args(q));
                let end = PART_END.trim_start();
                format!("{} 2>&1; s=$?; echo; echo \"{end}$s\"\n", shell_quote::join(&argv))
            })
            .collect();
        let argv = ["sh", "-c", &script].map(str::to_string);
        let done = ssh.exec(&argv, None, self.timeout * queries.len() as u32 + Duration::from_secs(5)).await?;
        if done.timed_out {
            return Err(not_finished(self.timeout));
        }
        let mut parts = Vec::with_capacity(queries.len());
        let mut rest = done.stdout.as_str();
        for query in queries {
            let Some((part, after)) = rest.split_once(PART_END) else {
                return Err(format!("journalctl's answer was cut short: \"{}\"", done.stderr.trim()));
            };
            let (status, after) = after.split_once('\n').unwrap_or((after, ""));
            rest = after;
            let code = status.trim().parse::<i32>().ok();
            if code == Some(124) {
                return Err(not_finished(self.timeout));
            }
            let (json, said): (Vec<&str>, Vec<&str>) =
                part.lines().filter(|l| !l.trim().is_empty()).partition(|l| l.starts_with('{'));
            parts.push(entries_of(query, code, &json.join("\n"), &said.join("\n"))?);
        }
        Ok(parts)
    }
}

impl Journal for Journalctl {
    fn read<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Entry>, String>> {
        Box::pin(async move {
            let (code, stdout, stderr) = self.run_to_end(self.args(query)).await?;
            entries_of(query, code, &stdout, &stderr)
        })
    }

    fn read_each<'a>(&'a self, queries: &'a [Query]) -> BoxFuture<'a, Result<Vec<Vec<Entry>>, String>> {
        Box::pin(async move {
            match &self.via {
                Some(ssh) => self.read_remote_each(ssh, queries).await,
                None => read_in_turn(self, queries).await,
            }
        })
    }

    fn follow<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Feed, String>> {
        Box::pin(async move {
            let mut args = self.args(&Query { lines: Some(query.lines.unwrap_or(0)), ..query.clone() });
            args.push("--follow".into());
            let mut child = self
                .journalctl(args)
                .kill_on_drop(true)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run journalctl: {e}"))?;
            let stdout = child.stdout.take().ok_or("journalctl has no stdout")?;
            let (tx, rx) = mpsc::channel(1024);
            let identifier = query.identifier.clone();
            tokio::spawn(async move {
                let mut child = child;
                let mut lines = tokio::io::BufReader::new(stdout).lines();
                loop {
                    tokio::select! {
                        _ = tx.closed() => break,
                        line = lines.next_line() => match line {
                            Ok(Some(l)) if l.starts_with('{') => {
                                let e = parse_entry(&l);
                                if let Ok(entry) = &e && identifier.as_ref().is_some_and(|id| &entry.identifier != id) {
                                    continue;
                                }
                                if tx.send(e).await.is_err() { break; }
                            }
                            Ok(Some(_)) => {}
                            _ => break,
                        }
                    }
                }
                // Killed and reaped here, not left to exit on its own: a service following the
                // journal must leave no process behind when it stops, or its manager waits for
                // the unit's cgroup to empty.
                let _ = child.kill().await;
            });
            Ok(rx)
        })
    }

    fn emit<'a>(&'a self, identifier: &'a str, message: &'a str, priority: u8) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Some(ssh) = &self.via else { return native_send(identifier, message, priority) };
            // journald's socket is the host's: its own `systemd-cat` writes there.
            let argv = ["systemd-cat", "-t", identifier, "-p", &priority.to_string()].map(str::to_string);
            let done = ssh.exec(&argv, Some(message.to_string()), self.timeout).await?;
            let host = &ssh.target().name;
            match (done.code, done.stderr.trim()) {
                (Some(0), _) => Ok(()),
                (_, said) if done.timed_out => Err(format!("systemd-cat on host {host} did not finish: {said}")),
                (code, "") => Err(format!(
                    "systemd-cat on host {host} failed: {}, with nothing on stderr",
                    code.map_or("killed by a signal".to_string(), |c| format!("exit status {c}"))
                )),
                (_, said) => Err(format!("systemd-cat on host {host} failed: {said}")),
            }
        })
    }
}

/// Sends one entry over journald's native protocol (a datagram of `FIELD=value` lines;
/// values with a newline use the length-prefixed binary form).
pub(crate) fn native_send(identifier: &str, message: &str, priority: u8) -> Result<(), String> {
    const SOCKET: &str = "/run/systemd/journal/socket";
    let mut datagram = Vec::new();
    for (field, value) in [("MESSAGE", message), ("SYSLOG_IDENTIFIER", identifier), ("PRIORITY", &priority.to_string())]
    {
        if value.contains('\n') {
            datagram.extend_from_slice(field.as_bytes());
            datagram.push(b'\n');
            datagram.extend_from_slice(&(value.len() as u64).to_le_bytes());
            datagram.extend_from_slice(value.as_bytes());
            datagram.push(b'\n');
        } else {
            datagram.extend_from_slice(format!("{field}={value}\n").as_bytes());
        }
    }
    let socket = std::os::unix::net::UnixDatagram::unbound().map_err(|e| e.to_string())?;
    socket.send_to(&datagram, SOCKET).map_err(|e| format!("cannot write to the journal at {SOCKET}: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_handle_binary_multi_valued_and_null_fields() {
        let e = parse_entry(r#"{"__REALTIME_TIMESTAMP":"1795338824104597","PRIORITY":"3","_SYSTEMD_UNIT":"loki.service","SYSLOG_IDENTIFIER":"loki","_PID":"42","MESSAGE":"boom"}"#).unwrap();
        assert_eq!(
            (e.realtime_us, e.priority, e.unit.as_str(), e.pid, e.message.as_str()),
            (1795338824104597, 3, "loki.service", 42, "boom")
        );
        let e = parse_entry(r#"{"MESSAGE":[104,105,255],"_SYSTEMD_USER_UNIT":"a.service"}"#).unwrap();
        assert_eq!((e.message.as_str(), e.unit.as_str()), ("hi\u{fffd}", "a.service"));
        let e = parse_entry(r#"{"MESSAGE":["one","two"],"SYSLOG_IDENTIFIER":["x","y"]}"#).unwrap();
        assert_eq!(e.message, "one\ntwo");
        assert!(parse_entry(r#"{"MESSAGE":null}"#).unwrap().message.contains("4096"));
        assert_eq!(
            parse_entry("not json").unwrap_err(),
            "journalctl printed something that is not JSON (expected ident at line 1 column 2)"
        );
    }

    #[test]
    fn priorities_by_name_or_number() {
        assert_eq!(priority_number("err"), Some(3));
        assert_eq!(priority_number("warning"), Some(4));
        assert_eq!(priority_number("error"), Some(3));
        assert_eq!(priority_number("6"), Some(6));
        assert_eq!(priority_number("loud"), None);
    }
}
