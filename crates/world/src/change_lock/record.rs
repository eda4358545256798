//! What a change lock says of its holder, as Terraform's "Lock Info" does: who (user@machine),
//! the run (`this_run`: an id made once per process), the runbook and the component it changes, the
//! process on the operator's machine, and since when (UTC). Kept as one line of JSON beside
//! the lock file (`change.json`), and read back from a host's answer (`Answer::parse`).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The holder of a host's change lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// `user@machine` of the operator whose run holds it.
    pub who: String,
    /// The run's id (`Record::this_run`): every host of one run carries the same.
    pub run: String,
    /// The runbook that changes the host (`configure`), and the component when it names one.
    pub runbook: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    /// The component the runbook was given, empty when none.
    pub component: String,
    /// The opsbook process on the operator's machine.
    pub pid: u32,
    /// Since when, in seconds since the epoch (UTC).
    pub since: u64,
}

impl Record {
    /// The record this process writes for `runbook` changing `component` (empty: the host).
    pub fn this_run(runbook: &str, component: &str) -> Record {
        Record {
            who: crate::this_run::who(),
            run: crate::this_run::id(),
            runbook: runbook.to_string(),
            component: component.to_string(),
            pid: std::process::id(),
            since: now(),
        }
    }

    /// Whether this record is this process's own.
    pub fn is_this_run(&self) -> bool {
        self.run == crate::this_run::id() && self.pid == std::process::id()
    }

    /// One line of JSON (never a line break inside: the host's script reads it as one argument
    /// and prints it back on one line).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// `root@op1 — run 20261128T210307Z-ab12, configure metrics-agent, pid 4242, since
    /// 21:03:07 UTC` (the date too when it is not today's).
    pub fn holder(&self) -> String {
        self.holder_on(now())
    }

    fn holder_on(&self, today: u64) -> String {
        let what = if self.component.is_empty() {
            self.runbook.clone()
        } else {
            format!("{} {}", self.runbook, self.component)
        };
        format!("{} — run {}, {what}, pid {}, since {}", self.who, self.run, self.pid, since(self.since, today))
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `21:03:07 UTC` on `today`'s date, else `2026-11-27 21:03:07 UTC`.
fn since(at: u64, today: u64) -> String {
    let stamp = humantime::format_rfc3339_seconds(UNIX_EPOCH + std::time::Duration::from_secs(at)).to_string();
    let (date, time) = stamp.trim_end_matches('Z').split_once('T').unwrap_or((&stamp, ""));
    if at / 86_400 == today / 86_400 { format!("{time} UTC") } else { format!("{date} {time} UTC") }
}

/// Who holds a lock, as far as its record tells: a record that cannot be read (cut short,
/// written by something else) is quoted, not guessed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A run, as its record names it.
    Known(Record),
    /// The lock file is locked but its record says nothing readable (quoted, maybe empty).
    Unreadable(String),
}

impl Holder {
    /// The holder a record's text names, or the text quoted when it is not a record.
    pub fn from_text(text: &str) -> Holder {
        match serde_json::from_str::<Record>(text.trim()) {
            Ok(record) => Holder::Known(record),
            Err(_) => Holder::Unreadable(text.trim().chars().take(200).collect()),
        }
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::Known(record) => write!(f, "{}", record.holder()),
            Holder::Unreadable(text) if text.is_empty() => write!(f, "a run whose record is not written yet"),
            Holder::Unreadable(text) => write!(f, "a run whose record cannot be read ({text:?})"),
        }
    }
}

/// What a host's lock script answers (`remote.rs`), one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Taken; no record was left behind.
    Taken,
    /// Taken; the record a holder that is gone left behind (its lock was free).
    TookOver(Holder),
    /// Held by a live holder.
    Held(Holder),
    /// The lock could not be tried (no `flock`, a folder that cannot be written).
    Error(String),
}

impl Answer {
    /// Reads the first line of the script's answer: `taken`, `taken-over RECORD`,
    /// `held RECORD` or `error WHY`.
    pub fn parse(text: &str) -> Result<Answer, String> {
        let line = text.lines().next().unwrap_or("").trim_end();
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "taken" if rest.is_empty() => Ok(Answer::Taken),
            "taken-over" => Ok(Answer::TookOver(Holder::from_text(rest))),
            "held" => Ok(Answer::Held(Holder::from_text(rest))),
            "error" => Ok(Answer::Error(rest.to_string())),
            _ if text.trim().is_empty() => Err("the host's lock script answered nothing".into()),
            _ => {
                Err(format!("the host's lock script answered {:?}", text.trim().chars().take(200).collect::<String>()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            who: "root@op1".into(),
            run: "20261128T210307Z-abcd".into(),
            runbook: "configure".into(),
            component: "metrics-agent".into(),
            pid: 4242,
            since: 1_795_899_787,
        }
    }

    #[test]
    fn a_record_is_one_line_of_json_and_reads_back() {
        let line = record().to_line();
        assert_eq!(
            line,
            r#"{"who":"root@op1","run":"20261128T210307Z-abcd","runbook":"configure","component":"metrics-agent","pid":4242,"since":1795899787}"#
        );
        assert_eq!(Holder::from_text(&line), Holder::Known(record()));
        let host_wide = Record { component: String::new(), ..record() };
        assert!(!host_wide.to_line().contains("component"), "no empty component is written");
    }

    #[test]
    fn the_holder_is_said_as_an_operator_reads_it() {
        let at = record().since;
        assert_eq!(since(at, at + 60), "21:03:07 UTC");
        assert_eq!(since(at, at + 86_400), "2026-11-28 21:03:07 UTC");
        assert_eq!(
            record().holder_on(at + 5),
            "root@op1 — run 20261128T210307Z-abcd, configure metrics-agent, pid 4242, since 21:03:07 UTC"
        );
        let host_wide = Record { runbook: "restart-all".into(), component: String::new(), ..record() };
        assert_eq!(
            host_wide.holder_on(at + 86_400),
            "root@op1 — run 20261128T210307Z-abcd, restart-all, pid 4242, since 2026-11-28 21:03:07 UTC"
        );
    }

    #[test]
    fn this_runs_record_names_this_process() {
        let mine = Record::this_run("deploy", "log-shipper");
        assert!(mine.is_this_run());
        assert_eq!(mine.pid, std::process::id());
        assert!(mine.who.contains('@'), "{}", mine.who);
        assert_eq!(Record::this_run("stop", "").run, mine.run, "one id for the whole run");
        assert!(!record().is_this_run());
    }

    #[test]
    fn every_answer_of_the_script_is_read_and_anything_else_quoted() {
        let line = record().to_line();
        assert_eq!(Answer::parse("taken\n"), Ok(Answer::Taken));
        assert_eq!(Answer::parse(&format!("held {line}\n")), Ok(Answer::Held(Holder::Known(record()))));
        assert_eq!(Answer::parse(&format!("taken-over {line}")), Ok(Answer::TookOver(Holder::Known(record()))));
        assert_eq!(Answer::parse("held \n"), Ok(Answer::Held(Holder::Unreadable(String::new()))));
        assert_eq!(Answer::parse("held {\"who\":"), Ok(Answer::Held(Holder::Unreadable("{\"who\":".into()))));
        assert_eq!(
            Answer::parse("error flock(1) is not installed"),
            Ok(Answer::Error("flock(1) is not installed".into()))
        );
        assert_eq!(Answer::parse(""), Err("the host's lock script answered nothing".into()));
        assert_eq!(
            Answer::parse("sh: 1: flock: not found\n"),
            Err("the host's lock script answered \"sh: 1: flock: not found\"".into())
        );
        assert_eq!(
            Holder::Unreadable("{\"who\":".into()).to_string(),
            "a run whose record cannot be read (\"{\\\"who\\\":\")"
        );
    }
}
