//! The `[serve]` table of the configuration files: what `opsbook serve` schedules and how.
//!
//! The flat key list (`keys.rs`) holds one scalar per key; a service needs arrays of tables
//! (`[[serve.job]]`), so the file loader hands the whole `serve` table of each file here.
//! A later file replaces the scalars it sets and, when it declares jobs, the whole job list
//! (jobs are a list, not keyed settings: merging two files' lists would run jobs twice).
//! Every error names the file, line and column, as the rest of the loader does.

use std::path::PathBuf;
use std::time::Duration;

use toml::de::{DeTable, DeValue};

use crate::diagnostic::Diagnostic;
use crate::error::Error;
use crate::suggest::did_you_mean;

/// The loopback address `opsbook serve` listens on unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// One scheduled runbook.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// How the job is named on the page, in metrics and in the history (default: the runbook).
    pub name: String,
    /// The runbook it runs.
    pub runbook: String,
    /// How often.
    pub every: Duration,
    /// `--set` pairs for each run.
    pub params: Vec<(String, String)>,
    /// A run still going after this long is interrupted (default: the interval, at most 5m).
    pub timeout: Option<Duration>,
    /// Allows a runbook that changes the stack; watching must not, unless the job says so.
    pub mutating: bool,
    /// The inventory hosts each run watches (an Ansible-style pattern, as `--hosts` takes);
    /// `None` is this machine.
    pub hosts: Option<String>,
    /// Where the job was declared (`file:line`, or `command line`).
    pub origin: String,
}

impl Job {
    /// The per-run deadline.
    pub fn deadline(&self) -> Duration {
        self.timeout.unwrap_or_else(|| self.every.clamp(Duration::from_secs(10), Duration::from_secs(300)))
    }
}

/// The `[serve]` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Serve {
    /// The address `serve` listens on.
    pub listen: String,
    /// Where the history database lives (default: the state directory, see `history`).
    pub state_dir: Option<PathBuf>,
    /// Runs older than this are dropped from the history.
    pub retention: Duration,
    /// At most this many runs are kept per job.
    pub retention_runs: usize,
    /// Jobs running at the same time, at most.
    pub parallel: usize,
    /// Each run starts up to this much later than due, at random, so many hosts don't fire
    /// at once (default: a tenth of the interval, at most 30s).
    pub jitter: Option<Duration>,
    /// On SIGTERM, running jobs get this long to finish before they are interrupted.
    pub stop_timeout: Duration,
    /// The scheduled jobs (`[[serve.job]]`).
    pub jobs: Vec<Job>,
}

impl Default for Serve {
    fn default() -> Self {
        Serve {
            listen: DEFAULT_LISTEN.to_string(),
            state_dir: None,
            retention: Duration::from_secs(7 * 24 * 3600),
            retention_runs: 1000,
            parallel: 4,
            jitter: None,
            stop_timeout: Duration::from_secs(20),
            jobs: Vec::new(),
        }
    }
}

const SERVE_KEYS: &[&str] =
    &["listen", "state_dir", "retention", "retention_runs", "parallel", "jitter", "stop_timeout", "job"];
const JOB_KEYS: &[&str] = &["name", "runbook", "every", "params", "timeout", "mutating", "hosts"];

/// Locates problems in one file.
struct At<'a> {
    file: &'a str,
    text: &'a str,
}

impl At<'_> {
    fn error(&self, offset: usize, message: String) -> Error {
        Error::located(Diagnostic::at_offset(message, self.file, self.text, offset))
    }

    fn line(&self, offset: usize) -> usize {
        crate::diagnostic::line_column(self.text, offset).0
    }
}

type Spanned<'a, 'i> = (&'a str, usize, &'a DeValue<'i>);

fn entries<'a, 'i>(table: &'a DeTable<'i>) -> Vec<Spanned<'a, 'i>> {
    table.iter().map(|(k, v)| (k.get_ref().as_ref(), k.span().start, v.get_ref())).collect()
}

fn unknown(at: &At, offset: usize, prefix: &str, name: &str, known: &[&str]) -> Error {
    let full: Vec<String> = known.iter().map(|k| format!("{prefix}{k}")).collect();
    let hint = did_you_mean(&format!("{prefix}{name}"), full.iter().map(String::as_str)).unwrap_or_else(|| {
        format!("; known: {}", full.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))
    });
    at.error(offset, format!("unknown key `{prefix}{name}`{hint}"))
}

fn text(at: &At, offset: usize, key: &str, value: &DeValue) -> Result<String, Error> {
    match value {
        DeValue::String(s) => Ok(s.to_string()),
        other => Err(at.error(offset, format!("`{key}` expects a string, found {}", other.type_str()))),
    }
}

fn duration(at: &At, offset: usize, key: &str, value: &DeValue) -> Result<Duration, Error> {
    let t = text(at, offset, key, value)?;
    match super::duration::parse_duration(&t) {
        Some(d) if !d.is_zero() || key.ends_with("jitter") => Ok(d),
        Some(_) => Err(at.error(offset, format!("`{key}`: `{t}` must be more than zero"))),
        None => Err(at.error(offset, format!("`{key}`: `{t}` is not a duration like `30s` or `5m`"))),
    }
}

fn count(at: &At, offset: usize, key: &str, value: &DeValue) -> Result<usize, Error> {
    match value {
        DeValue::Integer(i) => match i.as_str().replace('_', "").parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(at.error(offset, format!("`{key}` expects a positive integer, found `{}`", i.as_str()))),
        },
        other => Err(at.error(offset, format!("`{key}` expects an integer, found {}", other.type_str()))),
    }
}

impl Serve {
    /// Merges the `serve` value of one file (`source` is the file's text, for locations).
    pub fn merge(&mut self, value: &DeValue, offset: usize, file: &str, source: &str) -> Result<(), Error> {
        let at = At { file, text: source };
        let DeValue::Table(table) = value else {
            return Err(at.error(offset, format!("`serve` must be a table, found {}", value.type_str())));
        };
        for (key, offset, value) in entries(table) {
            let name = format!("serve.{key}");
            match key {
                "listen" => self.listen = text(&at, offset, &name, value)?,
                "state_dir" => self.state_dir = Some(PathBuf::from(text(&at, offset, &name, value)?)),
                "retention" => self.retention = duration(&at, offset, &name, value)?,
                "retention_runs" => self.retention_runs = count(&at, offset, &name, value)?,
                "parallel" => self.parallel = count(&at, offset, &name, value)?,
                "jitter" => self.jitter = Some(duration(&at, offset, &name, value)?),
                "stop_timeout" => self.stop_timeout = duration(&at, offset, &name, value)?,
                "job" => {
                    let DeValue::Array(items) = value else {
                        return Err(at.error(offset, "`serve.job` must be tables: write `[[serve.job]]`".into()));
                    };
                    let mut jobs = Vec::new();
                    for item in items.iter() {
                        let DeValue::Table(job) = item.get_ref() else {
                            return Err(at.error(item.span().start, "`serve.job` items must be tables".into()));
                        };
                        jobs.push(job_of(&at, item.span().start, job)?);
                    }
                    self.jobs = jobs;
                }
                other => return Err(unknown(&at, offset, "serve.", other, SERVE_KEYS)),
            }
        }
        Ok(())
    }
}

fn job_of(at: &At, offset: usize, table: &DeTable) -> Result<Job, Error> {
    let mut job = Job {
        name: String::new(),
        runbook: String::new(),
        every: Duration::ZERO,
        params: Vec::new(),
        timeout: None,
        mutating: false,
        hosts: None,
        origin: format!("{}:{}", at.file, at.line(offset)),
    };
    for (key, offset, value) in entries(table) {
        let name = format!("serve.job.{key}");
        match key {
            "name" => job.name = text(at, offset, &name, value)?,
            "runbook" => job.runbook = text(at, offset, &name, value)?,
            "every" => {
                job.every = duration(at, offset, &name, value)?;
                if job.every < MIN_EVERY {
                    return Err(at.error(offset, too_often(&name, &text(at, offset, &name, value)?)));
                }
            }
            "timeout" => job.timeout = Some(duration(at, offset, &name, value)?),
            "mutating" => match value {
                DeValue::Boolean(b) => job.mutating = *b,
                other => {
                    return Err(at.error(offset, format!("`{name}` expects true or false, found {}", other.type_str())));
                }
            },
            "params" => job.params = params_of(at, offset, &name, value)?,
            // A list is the union of its patterns, as `a,b` is on the command line.
            "hosts" => job.hosts = Some(hosts_of(at, offset, &name, value)?),
            other => return Err(unknown(at, offset, "serve.job.", other, JOB_KEYS)),
        }
    }
    if job.runbook.is_empty() {
        return Err(at.error(offset, "a `[[serve.job]]` needs `runbook = \"NAME\"`".into()));
    }
    if job.every.is_zero() {
        return Err(at.error(offset, format!("job `{}` needs `every = \"1m\"` (how often it runs)", job.runbook)));
    }
    if job.name.is_empty() {
        job.name = job.runbook.clone();
    }
    Ok(job)
}

/// A job's `params` table: each value as the text `--set` would give.
fn params_of(at: &At, offset: usize, name: &str, value: &DeValue<'_>) -> Result<Vec<(String, String)>, Error> {
    let DeValue::Table(params) = value else {
        return Err(at.error(offset, format!("`{name}` expects a table like `{{ wait = \"5s\" }}`")));
    };
    let mut out = Vec::new();
    for (k, o, v) in entries(params) {
        let v = match v {
            DeValue::String(s) => s.to_string(),
            DeValue::Integer(i) => i.as_str().replace('_', ""),
            DeValue::Float(f) => f.as_str().to_string(),
            DeValue::Boolean(b) => b.to_string(),
            DeValue::Array(items) => items
                .iter()
                .map(|i| text(at, o, &format!("{name}.{k}"), i.get_ref()))
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            other => {
                return Err(at.error(o, format!("`{name}.{k}`: a {} is not a parameter value", other.type_str())));
            }
        };
        out.push((k.to_string(), v));
    }
    Ok(out)
}

/// A job's `hosts`: a pattern, or a list of them (their union, as `a,b` is on the command
/// line), checked as a host pattern.
fn hosts_of(at: &At, offset: usize, name: &str, value: &DeValue<'_>) -> Result<String, Error> {
    let pattern = match value {
        DeValue::Array(items) => {
            items.iter().map(|i| text(at, offset, name, i.get_ref())).collect::<Result<Vec<_>, _>>()?.join(",")
        }
        other => text(at, offset, name, other)?,
    };
    if pattern.trim().is_empty() {
        return Err(
            at.error(offset, format!("`{name}` is empty: give a host pattern like \"all\" or [\"web1\", \"db*\"]"))
        );
    }
    crate::pattern::Pattern::parse(&pattern).map_err(|m| at.error(offset, format!("`{name}`: host pattern: {m}")))?;
    Ok(pattern)
}

/// The shortest interval a job may have: more often, runs would follow each other without
/// pause (`quick-check@1ms` ran 2,679 times in 8 s).
pub const MIN_EVERY: Duration = Duration::from_secs(1);

fn too_often(what: &str, every: &str) -> String {
    format!("`{what}`: `{every}` is too often: a job runs at most once a second (`1s`)")
}

/// A job given on the command line: `RUNBOOK@EVERY`, e.g. `quick-check@1m`.
pub fn job_from_arg(arg: &str) -> Result<Job, Error> {
    let (runbook, every) = arg
        .rsplit_once('@')
        .ok_or_else(|| Error::Usage(format!("`{arg}`: expected RUNBOOK@INTERVAL, e.g. `quick-check@1m`")))?;
    let every = match super::duration::parse_duration(every) {
        Some(d) if d.is_zero() => return Err(Error::Usage(format!("`{arg}`: the interval must be more than zero"))),
        Some(d) if d < MIN_EVERY => return Err(Error::Usage(too_often(arg, every))),
        Some(d) => d,
        None => return Err(Error::Usage(format!("`{arg}`: `{every}` is not an interval like `30s` or `5m`"))),
    };
    if runbook.is_empty() {
        return Err(Error::Usage(format!("`{arg}`: the runbook name is missing before `@`")));
    }
    Ok(Job {
        name: runbook.to_string(),
        runbook: runbook.to_string(),
        every,
        params: Vec::new(),
        timeout: None,
        mutating: false,
        hosts: None,
        origin: "command line".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Serve, String> {
        let table = DeTable::parse(text).unwrap();
        let mut serve = Serve::default();
        for (k, v) in table.get_ref().iter() {
            if k.get_ref() == "serve" {
                serve.merge(v.get_ref(), k.span().start, "t.toml", text).map_err(|e| e.to_string())?;
            }
        }
        Ok(serve)
    }

    #[test]
    fn jobs_and_settings_are_read() {
        let s = parse(
            "[serve]\nlisten = \"127.0.0.1:1\"\nparallel = 2\n[[serve.job]]\nrunbook = \"quick-check\"\nevery = \"1m\"\n\
[[serve.job]]\nname = \"logs\"\nrunbook = \"verify-log-store\"\nevery = \"10m\"\ntimeout = \"30s\"\nparams = { wait = \"5s\", n = 3 }\n",
        )
        .unwrap();
        assert_eq!(s.listen, "127.0.0.1:1");
        assert_eq!(s.parallel, 2);
        assert_eq!(s.jobs.len(), 2);
        assert_eq!(s.jobs[0].name, "quick-check");
        assert_eq!(s.jobs[0].origin, "t.toml:4");
        // The loader keeps a table's keys sorted.
        assert_eq!(s.jobs[1].params, vec![("n".into(), "3".into()), ("wait".into(), "5s".into())]);
        assert_eq!(s.jobs[1].deadline(), Duration::from_secs(30));
        let s = parse("[[serve.job]]\nrunbook = \"q\"\nevery = \"1s\"\nhosts = [\"web*\", \"db1\"]\n").unwrap();
        assert_eq!(s.jobs[0].hosts.as_deref(), Some("web*,db1"));
        let s = parse("[[serve.job]]\nrunbook = \"q\"\nevery = \"1s\"\nhosts = \"all:!db1\"\n").unwrap();
        assert_eq!(s.jobs[0].hosts.as_deref(), Some("all:!db1"));
    }

    #[test]
    fn errors_are_located() {
        assert_eq!(
            parse("[serve]\nlisen = \"x\"\n").unwrap_err(),
            "error: unknown key `serve.lisen`; did you mean `serve.listen`?\n --> t.toml:2:1\n  |\n2 | lisen = \"x\"\n  | ^"
        );
        assert_eq!(
            parse("[[serve.job]]\nrunbook = \"q\"\nevery = \"soon\"\n").unwrap_err(),
            "error: `serve.job.every`: `soon` is not a duration like `30s` or `5m`\n --> t.toml:3:1\n  |\n3 | every = \
             \"soon\"\n  | ^"
        );
        assert_eq!(
            parse("[[serve.job]]\nrunbook = \"q\"\nevery = \"1m\"\nhosts = []\n").unwrap_err(),
            "error: `serve.job.hosts` is empty: give a host pattern like \"all\" or [\"web1\", \"db*\"]\n --> \
             t.toml:4:1\n  |\n4 | hosts = []\n  | ^"
        );
        assert_eq!(
            parse("[[serve.job]]\nrunbook = \"q\"\nevery = \"1m\"\nhosts = \"~(\"\n").unwrap_err(),
            "error: `serve.job.hosts`: host pattern: `~(`: invalid regex: regex parse error:\n    ^(?:()\n     ^\nerror: \
             unclosed group\n --> t.toml:4:1\n  |\n4 | hosts = \"~(\"\n  | ^"
        );
    }

    #[test]
    fn command_line_jobs() {
        let j = job_from_arg("quick-check@5s").unwrap();
        assert_eq!((j.runbook.as_str(), j.every), ("quick-check", Duration::from_secs(5)));
        assert_eq!(
            job_from_arg("quick-check").unwrap_err().to_string(),
            "error: `quick-check`: expected RUNBOOK@INTERVAL, e.g. `quick-check@1m`"
        );
        assert_eq!(
            job_from_arg("q@never").unwrap_err().to_string(),
            "error: `q@never`: `never` is not an interval like `30s` or `5m`"
        );
    }
}
