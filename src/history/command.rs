//! `opsbook history`: the runs `opsbook serve` stored, read from the command line.
//!
//! A table (or `--format json`) of the runs in the window, oldest first, each with its
//! failed checks, then the checks that flapped in that window. Stored text (job, host, check
//! and error wording) came from runbooks and hosts: the table shows it through `shown::escaped`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};

use super::flapping::flapping;
use super::store::{Filter, History, Run, database_path, now_ms, rehearsals_path, rfc3339};
use opsbook_base::Error;
use opsbook_base::report::Format;
use opsbook_base::{escaped, padded};

// Arguments of `opsbook history` (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only this job's runs.
    pub job: Option<String>,

    /// Only runs on this host (of a job watching other hosts).
    #[arg(long = "on", value_name = "HOST")]
    pub on: Option<String>,

    /// Only runs that started within this long (e.g. `1h`, `2d`).
    #[arg(long, value_name = "DURATION", value_parser = parse_since)]
    pub since: Option<Duration>,

    /// Only runs that did not pass.
    #[arg(long)]
    pub failed: bool,

    /// A check flaps when its outcome changed more than this many times in the window.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(crate) flap: usize,

    /// At most this many runs, the newest (1 or more).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = parse_limit)]
    pub limit: usize,

    /// The state directory holding `history.sqlite` (default: `serve.state_dir`, else
    /// /var/lib/opsbook for root, else $XDG_STATE_HOME/opsbook or ~/.local/state/opsbook).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// `--limit`: a count of runs, one or more (`0` would show nothing, which is no answer).
fn parse_limit(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("it must be 1 or more (0 runs would show nothing)".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a whole number of runs")),
    }
}

fn parse_since(text: &str) -> Result<Duration, String> {
    opsbook_base::config::parse_duration(text).ok_or_else(|| format!("`{text}` is not a duration like `1h` or `30m`"))
}

/// The names of a report's failed checks, `section › name`.
pub(crate) fn failed_checks(report: &Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .map(|checks| {
            checks
                .iter()
                .filter(|c| c["outcome"] == "fail")
                .map(|c| match c["section"].as_str() {
                    Some(s) => format!("{s} › {}", c["name"].as_str().unwrap_or_default()),
                    None => c["name"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `opsbook history`.
/// With `sandbox`, the rehearsals of `serve --sandbox` are read instead of the real runs.
pub(crate) fn run(args: &HistoryArgs, state_dir: PathBuf, format: Format, sandbox: bool) -> Result<u8, Error> {
    let path = if sandbox { rehearsals_path(&state_dir) } else { database_path(&state_dir) };
    let history = History::open_read_only(path.clone()).map_err(Error::Usage)?;
    let since_ms = args.since.map(|d| now_ms() - d.as_millis() as i64);
    let filter = Filter {
        job: args.job.clone(),
        host: args.on.clone(),
        since_ms,
        failed_only: args.failed,
        limit: Some(args.limit),
    };
    let runs = history.list(&filter).map_err(Error::Usage)?;
    // Flapping looks at every run of the window, not only the failed ones.
    let window = if args.failed {
        history.list(&Filter { failed_only: false, ..filter }).map_err(Error::Usage)?
    } else {
        runs.clone()
    };
    let flaps = flapping(&window, args.flap);
    let several_hosts = window.iter().any(|r| r.host != window[0].host);
    let mut out = opsbook_base::secret::stdout();
    if format == Format::Json {
        let runs: Vec<Value> = runs.iter().map(run_json).collect();
        let doc = json!({
            "database": path.display().to_string(),
            "runs": runs,
            "flapping": flaps,
            "flap_threshold": args.flap,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default()).ok();
        return Ok(0);
    }
    let filtered = args.job.is_some() || args.on.is_some() || since_ms.is_some() || args.failed;
    write_runs(&mut out, &runs, several_hosts, filtered);
    writeln!(out).ok();
    write_flapping(&mut out, &flaps, args.flap, several_hosts);
    Ok(0)
}

/// The runs as a table (or says there are none), each with its failed checks and error.
fn write_runs(out: &mut impl Write, runs: &[Run], several_hosts: bool, filtered: bool) {
    if runs.is_empty() {
        writeln!(out, "no runs stored{}", if filtered { " match" } else { "" }).ok();
    } else {
        // A job watching other hosts is shown with its host (`quick-check on c1`); runs all
        // from one machine keep the plain job name.
        // Stored text came from runbooks and hosts: shown with its control characters escaped.
        let job_of = |r: &Run| {
            let job = if several_hosts { format!("{} on {}", r.job, r.host) } else { r.job.clone() };
            escaped(&job).into_owned()
        };
        let job_width = runs.iter().map(|r| job_of(r).chars().count()).max().unwrap_or(3).max(3);
        writeln!(
            out,
            "{:>6}  {:24}  {}  {:11}  {:>8}  DETAIL",
            "ID",
            "STARTED",
            padded("JOB", job_width),
            "OUTCOME",
            "DURATION"
        )
        .ok();
        for r in runs {
            let report: Value = serde_json::from_str(&r.report).unwrap_or(Value::Null);
            let mut detail = failed_checks(&report).join("; ");
            if let Some(message) = report["error"]["message"].as_str() {
                detail = if detail.is_empty() { message.to_string() } else { format!("{detail}; {message}") };
            }
            if let Some(note) = &r.note {
                detail = if detail.is_empty() { note.clone() } else { format!("{note}; {detail}") };
            }
            writeln!(
                out,
                "{:>6}  {:24}  {}  {:11}  {:>8}  {}",
                r.id,
                rfc3339(r.started_ms),
                padded(&job_of(r), job_width),
                escaped(&r.outcome),
                duration(r.duration_s),
                escaped(&detail)
            )
            .ok();
        }
    }
}

/// A run's duration in the table: `3.2ms` under 10 ms (where `0.00s` would say nothing), else
/// `1.25s`.
fn duration(seconds: f64) -> String {
    if seconds < 0.01 { format!("{:.1}ms", seconds.max(0.0) * 1000.0) } else { format!("{seconds:.2}s") }
}

/// The checks that changed outcome more than `threshold` times in the window, or says none did.
fn write_flapping(out: &mut impl Write, flaps: &[super::flapping::Flap], threshold: usize, several_hosts: bool) {
    if flaps.is_empty() {
        writeln!(out, "no flapping checks (none changed outcome more than {} times)", threshold).ok();
    } else {
        writeln!(out, "flapping checks (changed outcome more than {} times, p=pass f=fail w=warn s=skip):", threshold)
            .ok();
        for f in flaps {
            let name = match &f.section {
                Some(s) => format!("{s} › {}", f.check),
                None => f.check.clone(),
            };
            let job = if several_hosts { format!("{} on {}", f.job, f.host) } else { f.job.clone() };
            writeln!(out, "  {}: {}: {} changes ({})", escaped(&job), escaped(&name), f.changes, f.sequence).ok();
        }
    }
}

fn run_json(r: &Run) -> Value {
    let mut v = r.to_json();
    v["failed_checks"] = json!(failed_checks(&v["report"]));
    v
}
