//! The history's database: the runs kept in SQLite (`History`), where it lives, and the
//! clock and time text its rows use.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

/// One stored run.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub id: i64,
    pub job: String,
    /// The host the run watched: this machine's name, or an inventory host's for a job with
    /// `hosts`.
    pub host: String,
    pub runbook: String,
    /// Start, in milliseconds since the Unix epoch.
    pub(crate) started_ms: i64,
    pub duration_s: f64,
    /// `passed`, `failed`, `error` or `interrupted`, as in the report.
    pub outcome: String,
    /// Why the run is special: late, timed out, refused.
    pub note: Option<String>,
    /// The JSON report (`--format json`), compact.
    pub report: String,
}

impl Run {
    /// The run as `/api/runs` and `opsbook history --format json` list it, its report included.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "job": self.job,
            "host": self.host,
            "runbook": self.runbook,
            "started_at": rfc3339(self.started_ms),
            "duration_s": self.duration_s,
            "outcome": self.outcome,
            "note": self.note,
            "report": serde_json::from_str::<serde_json::Value>(&self.report).unwrap_or(serde_json::Value::Null),
        })
    }
}

/// Where state lives unless configured: `/var/lib/opsbook` for root, else
/// `$XDG_STATE_HOME/opsbook`, else `~/.local/state/opsbook`; with none of these known (no
/// `HOME` in the environment) it is refused, never guessed relative to where opsbook started.
pub(crate) fn default_state_dir() -> Result<PathBuf, opsbook_base::Error> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(PathBuf::from("/var/lib/opsbook"));
    }
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_STATE_HOME")
        .and_then(absolute)
        .or_else(|| std::env::var_os("HOME").and_then(absolute).map(|h| h.join(".local/state")))
        .map(|base| base.join("opsbook"))
        .ok_or_else(|| {
            opsbook_base::Error::Usage(
                "no state directory: neither XDG_STATE_HOME nor HOME is set to an absolute path\n  \
                 help: pass --state-dir DIR (or set serve.state_dir), e.g. --state-dir /var/lib/opsbook"
                    .into(),
            )
        })
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The text of a time, as RFC 3339 with milliseconds.
pub(crate) fn rfc3339(ms: i64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)).to_string()
}

/// The database file in a state directory.
pub(crate) fn database_path(state_dir: &Path) -> PathBuf {
    state_dir.join("history.sqlite")
}

/// The database of `serve --sandbox`'s rehearsals, beside the real one and never mixed with
/// it: a rehearsed failure is not a failure of this machine.
pub(crate) fn rehearsals_path(state_dir: &Path) -> PathBuf {
    state_dir.join("rehearsals.sqlite")
}

/// How long to keep runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retention {
    pub age: Duration,
    pub(crate) runs_per_job: usize,
}

/// The store; every method reports failure as text and never panics.
pub(crate) struct History {
    path: PathBuf,
    conn: Mutex<Option<Connection>>,
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    job TEXT NOT NULL,
    runbook TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    duration_s REAL NOT NULL,
    outcome TEXT NOT NULL,
    note TEXT,
    report TEXT NOT NULL,
    host TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_by_job ON runs (job, id);
CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_ms);";

/// Whether the table has the `host` column (databases of earlier versions do not).
fn has_host(conn: &Connection) -> Result<bool, String> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('runs')").map_err(|e| e.to_string())?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok(names.iter().any(|n| n == "host"))
}

/// Adds the `host` column to a database of an earlier version: its runs were all made on this
/// machine (a job could not watch another then), so they get this machine's name.
fn upgrade(conn: &Connection) -> Result<(), String> {
    if has_host(conn)? {
        return Ok(());
    }
    conn.execute_batch("ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT ''")
        .and_then(|()| conn.execute("UPDATE runs SET host = ?1", params![opsbook_world::this_machine()]).map(drop))
        .map_err(|e| format!("cannot add the host column: {e}"))
}

fn open(path: &Path, create: bool) -> Result<Connection, String> {
    use rusqlite::OpenFlags;
    if create && let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    if create {
        keep_private(path)?;
    }
    let flags = if create {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    };
    let conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| format!("cannot open `{}`: {e}", path.display()))?;
    // A locked database waits a little, never long: the service must keep answering.
    conn.busy_timeout(Duration::from_secs(2)).map_err(|e| e.to_string())?;
    if create {
        conn.execute_batch(&format!("PRAGMA journal_mode = WAL; {SCHEMA}"))
            .map_err(|e| format!("`{}` is not a usable history database: {e}", path.display()))
            .and_then(|()| upgrade(&conn))
            .map_err(|e| format!("`{}` is not a usable history database: {e}", path.display()))?;
    } else {
        conn.query_row("SELECT count(*) FROM runs", [], |_| Ok(()))
            .map_err(|e| format!("`{}` is not a usable history database: {e}", path.display()))?;
    }
    Ok(conn)
}

/// Creates the database file readable by this user alone (0600) before SQLite opens it, so
/// its `-wal` and `-shm` files, which SQLite gives the database's mode, are too; an existing
/// one readable by others loses that (its group, the service's, keeps what it has).
fn keep_private(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot open `{}`: {e}", path.display()))?;
    let mode = file.metadata().map_err(|e| format!("cannot read `{}`: {e}", path.display()))?.permissions().mode();
    if mode & 0o007 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o770))
            .map_err(|e| format!("cannot make `{}` private: {e}", path.display()))?;
    }
    Ok(())
}

fn row(r: &rusqlite::Row) -> rusqlite::Result<Run> {
    Ok(Run {
        id: r.get(0)?,
        job: r.get(1)?,
        runbook: r.get(2)?,
        started_ms: r.get(3)?,
        duration_s: r.get(4)?,
        outcome: r.get(5)?,
        note: r.get(6)?,
        report: r.get(7)?,
        host: r.get(8)?,
    })
}

const COLUMNS: &str = "id, job, runbook, started_ms, duration_s, outcome, note, report, host";

/// The columns to select: a database of an earlier version opened read-only (not upgraded)
/// has no `host`, and its runs were made on this machine.
fn columns(conn: &Connection) -> Result<String, String> {
    if has_host(conn)? {
        return Ok(COLUMNS.to_string());
    }
    let here = opsbook_world::this_machine().replace('\'', "''");
    Ok(COLUMNS.replace(", host", &format!(", '{here}' AS host")))
}

/// What `list` selects.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub job: Option<String>,
    /// Only the runs on this host.
    pub host: Option<String>,
    pub(crate) since_ms: Option<i64>,
    pub(crate) failed_only: bool,
    /// The newest this many runs (all when `None`), returned oldest first.
    pub limit: Option<usize>,
}

impl History {
    /// Opens (creating) the database; `Err` carries the store anyway, with the reason.
    pub(crate) fn open(path: PathBuf) -> (History, Result<(), String>) {
        let opened = open(&path, true);
        let status = opened.as_ref().map(|_| ()).map_err(Clone::clone);
        (History { path, conn: Mutex::new(opened.ok()) }, status)
    }

    /// Opens an existing database to read it (`opsbook history`).
    pub(crate) fn open_read_only(path: PathBuf) -> Result<History, String> {
        if !path.exists() {
            let (serve, sandbox) =
                if path.ends_with("rehearsals.sqlite") { ("serve --sandbox", " --sandbox") } else { ("serve", "") };
            return Err(format!(
                "no history at `{}`: `opsbook {serve}` has not stored a run there yet\n  help: pass the same \
                 `--state-dir` (or `serve.state_dir`){sandbox} as the service",
                path.display()
            ));
        }
        let conn = open(&path, false)?;
        Ok(History { path, conn: Mutex::new(Some(conn)) })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, String>) -> Result<T, String> {
        let mut guard = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(open(&self.path, true)?);
        }
        let conn = guard.as_mut().expect("opened just above");
        let result = f(conn);
        if result.is_err() {
            // Reopened on the next call: a replaced or repaired file is picked up.
            *guard = None;
        }
        result
    }

    /// Stores one run and applies the retention, in one transaction.
    pub(crate) fn insert(&self, run: &Run, retention: Retention) -> Result<(), String> {
        let cutoff = now_ms() - retention.age.as_millis() as i64;
        self.with(|conn| {
            let tx = conn.transaction().map_err(|e| e.to_string())?;
            tx.execute(
                &format!("INSERT INTO runs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                params![
                    run.id,
                    run.job,
                    run.runbook,
                    run.started_ms,
                    run.duration_s,
                    run.outcome,
                    run.note,
                    run.report,
                    run.host
                ],
            )
            .map_err(|e| e.to_string())?;
            tx.execute("DELETE FROM runs WHERE started_ms < ?1", params![cutoff]).map_err(|e| e.to_string())?;
            // The last N runs of the job on each host: a host's runs never push out another's.
            tx.execute(
                "DELETE FROM runs WHERE job = ?1 AND host = ?3 AND id <= (SELECT id FROM runs WHERE job = ?1 AND \
                 host = ?3 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                params![run.job, retention.runs_per_job as i64, run.host],
            )
            .map_err(|e| e.to_string())?;
            tx.commit().map_err(|e| e.to_string())
        })
        .map_err(|e| format!("cannot store run {} of `{}` in `{}`: {e}", run.id, run.job, self.path.display()))
    }

    /// The highest run id stored (new runs continue from it).
    pub(crate) fn last_id(&self) -> Result<i64, String> {
        self.with(|conn| {
            conn.query_row("SELECT coalesce(max(id), 0) FROM runs", [], |r| r.get(0)).map_err(|e| e.to_string())
        })
    }

    /// One run by id.
    pub(crate) fn get(&self, id: i64) -> Result<Option<Run>, String> {
        self.with(|conn| {
            conn.query_row(&format!("SELECT {} FROM runs WHERE id = ?1", columns(conn)?), params![id], row)
                .optional()
                .map_err(|e| e.to_string())
        })
    }

    /// Runs matching `filter`, oldest first.
    pub(crate) fn list(&self, filter: &Filter) -> Result<Vec<Run>, String> {
        self.with(|conn| {
            let mut sql = format!("SELECT {} FROM runs WHERE 1 = 1", columns(conn)?);
            let mut args: Vec<rusqlite::types::Value> = Vec::new();
            if let Some(job) = &filter.job {
                sql.push_str(" AND job = ?");
                args.push(job.clone().into());
            }
            if let Some(host) = &filter.host {
                sql.push_str(" AND host = ?");
                args.push(host.clone().into());
            }
            if let Some(since) = filter.since_ms {
                sql.push_str(" AND started_ms >= ?");
                args.push(since.into());
            }
            if filter.failed_only {
                sql.push_str(" AND outcome <> 'passed'");
            }
            sql.push_str(" ORDER BY id DESC");
            if let Some(limit) = filter.limit {
                sql.push_str(&format!(" LIMIT {limit}"));
            }
            let mut stmt = conn.prepare(&sql).map_err(|e| e.to_string())?;
            let mut runs = stmt
                .query_map(rusqlite::params_from_iter(args), row)
                .map_err(|e| e.to_string())?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            runs.reverse();
            Ok(runs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, job: &str, started_ms: i64, outcome: &str) -> Run {
        Run {
            id,
            job: job.into(),
            host: "here".into(),
            runbook: "quick-check".into(),
            started_ms,
            duration_s: 0.5,
            outcome: outcome.into(),
            note: None,
            report: "{}".into(),
        }
    }

    #[test]
    fn stores_reads_and_applies_the_retention() {
        let dir = tempfile::tempdir().unwrap();
        let (h, status) = History::open(database_path(dir.path()));
        status.unwrap();
        let keep = Retention { age: Duration::from_secs(3600), runs_per_job: 3 };
        for i in 1..=5 {
            h.insert(&run(i, "a", now_ms() - 10_000 + i * 1000, if i == 4 { "failed" } else { "passed" }), keep)
                .unwrap();
        }
        h.insert(&run(6, "b", 0, "passed"), keep).unwrap();
        let all = h.list(&Filter::default()).unwrap();
        // Job a keeps its last three; job b's run is older than an hour.
        assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), vec![3, 4, 5]);
        let failed = h.list(&Filter { failed_only: true, ..Filter::default() }).unwrap();
        assert_eq!(failed.iter().map(|r| r.id).collect::<Vec<_>>(), vec![4]);
        assert_eq!(h.last_id().unwrap(), 5);
        assert_eq!(h.get(4).unwrap().unwrap().outcome, "failed");
        assert!(h.get(1).unwrap().is_none());
    }

    #[test]
    fn a_database_without_hosts_gets_this_machines_name_and_retention_is_per_host() {
        let dir = tempfile::tempdir().unwrap();
        let path = database_path(dir.path());
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE runs (id INTEGER PRIMARY KEY, job TEXT NOT NULL, runbook TEXT NOT NULL, started_ms \
                 INTEGER NOT NULL, duration_s REAL NOT NULL, outcome TEXT NOT NULL, note TEXT, report TEXT NOT NULL);\
                 INSERT INTO runs VALUES (1, 'a', 'quick-check', 1, 0.5, 'passed', NULL, '{}');",
            )
            .unwrap();
        }
        let here = opsbook_world::this_machine();
        // Read-only, it is read as it is; opened by the service, it is upgraded.
        let old = History::open_read_only(path.clone()).unwrap();
        assert_eq!(old.get(1).unwrap().unwrap().host, here);
        drop(old);
        let (h, status) = History::open(path);
        status.unwrap();
        assert_eq!(h.get(1).unwrap().unwrap().host, here);
        let keep = Retention { age: Duration::from_secs(3600), runs_per_job: 1 };
        for (id, host) in [(2, "c1"), (3, "c2"), (4, "c1")] {
            h.insert(&Run { host: host.into(), ..run(id, "a", now_ms(), "passed") }, keep).unwrap();
        }
        let on = |host: &str| {
            let filter = Filter { host: Some(host.into()), ..Filter::default() };
            h.list(&filter).unwrap().iter().map(|r| r.id).collect::<Vec<_>>()
        };
        assert_eq!((on("c1"), on("c2")), (vec![4], vec![3]));
    }

    #[test]
    fn a_corrupt_file_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let path = database_path(dir.path());
        std::fs::write(&path, "this is not a database, it is a text file long enough to be read as one").unwrap();
        let (h, status) = History::open(path.clone());
        let e = status.unwrap_err();
        assert!(e.contains("is not a usable history database"), "{e}");
        let e = h.insert(&run(1, "a", 1, "passed"), Retention { age: Duration::from_secs(60), runs_per_job: 9 });
        assert!(e.unwrap_err().contains("cannot store run 1 of `a`"));
        assert!(History::open_read_only(path).is_err());
    }
}
