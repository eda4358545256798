//! This machine's change lock: opsbook itself holds the `flock(2)` (`File::try_lock`) on
//! `change.lock` for as long as the run changes the machine, so the kernel frees it however
//! the process ends; the record beside it is written through the one atomic writer and
//! removed when the run lets the lock go. The host's own lock script (`remote.rs`) uses the
//! same files and the same kind of lock: a run over ssh to this machine and a local run see
//! each other.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::backend::{Backend, Holding, Try};
use super::record::{Holder, Record};

/// The lock file's name; the record is `change.json` beside it.
pub(super) const LOCK_FILE: &str = "change.lock";
pub(super) const RECORD_FILE: &str = "change.json";
/// Records are a few hundred bytes; a larger file is not one of ours and is quoted cut short.
const MAX_RECORD: u64 = 4096;

/// Where this machine's lock lives: `/run/opsbook` guards the system's service manager (when
/// this process may write there: root); a user's manager, and a user who cannot write
/// `/run`, have theirs in `$XDG_RUNTIME_DIR/opsbook` (else `/tmp/opsbook-UID`).
/// `OPSBOOK_LOCK_DIR` puts it elsewhere: runs that must see each other give the same folder
/// (the tests give each test its own, as each has its own machine state).
pub fn lock_dir(user_scope: bool) -> PathBuf {
    if let Some(dir) = std::env::var_os("OPSBOOK_LOCK_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !user_scope && uid == 0 {
        return PathBuf::from("/run/opsbook");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => Path::new(&dir).join("opsbook"),
        None => PathBuf::from(format!("/tmp/opsbook-{uid}")),
    }
}

/// The lock of this machine, in `dir`.
pub struct LocalLock {
    /// The folder of the lock file and its record.
    pub dir: PathBuf,
}

struct LocalHolding {
    /// Holds the lock while open.
    file: Option<File>,
    record: PathBuf,
}

impl Holding for LocalHolding {
    fn begin_release(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.record);
        }
        self.file = None;
    }

    fn finish_release(self: Box<Self>) {}
}

impl Backend for LocalLock {
    fn try_take(&self, record: &Record) -> Result<Try, String> {
        let failed = |what: &str, path: &Path, e: std::io::Error| format!("cannot {what} {}: {e}", path.display());
        std::fs::create_dir_all(&self.dir).map_err(|e| failed("create", &self.dir, e))?;
        let path = self.dir.join(LOCK_FILE);
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| failed("open", &path, e))?;
        let beside = self.dir.join(RECORD_FILE);
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(Try::Held(read_record(&beside))),
            Err(std::fs::TryLockError::Error(e)) => return Err(failed("lock", &path, e)),
        }
        let took_over = beside.exists().then(|| read_record(&beside));
        let line = record.to_line() + "\n";
        opsbook_base::write_atomically(&beside, line.as_bytes(), 0o644).map_err(|e| failed("write", &beside, e))?;
        Ok(Try::Taken { holding: Box::new(LocalHolding { file: Some(file), record: beside }), took_over })
    }
}

/// The holder a record names (an unreadable one quoted).
fn read_record(path: &Path) -> Holder {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(file) = File::open(path) {
        let _ = file.take(MAX_RECORD).read_to_string(&mut text);
    }
    Holder::from_text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change_lock::{HostLock, LockError, Taken};
    use opsbook_base::Cancel;
    use std::time::Duration;

    fn other() -> Record {
        Record {
            who: "alice@laptop".into(),
            run: "20261128T210307Z-abcd".into(),
            runbook: "stop".into(),
            component: "log-shipper".into(),
            pid: 7,
            since: 0,
        }
    }

    #[test]
    fn the_local_lock_is_exclusive_names_its_holder_and_is_free_once_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let lock = |name| HostLock::new(name, Box::new(LocalLock { dir: dir.path().join("opsbook") }));
        let (first, second) = (lock("here"), lock("here"));
        let mine = Record::this_run("deploy", "log-store");
        let take = |l: &HostLock, r: &Record| l.take(r, Duration::ZERO, &Cancel::default(), &mut |_| {});
        assert_eq!(take(&first, &mine), Ok(Taken::Now { took_over: None }));
        let written = std::fs::read_to_string(dir.path().join("opsbook/change.json")).unwrap();
        assert_eq!(written, mine.to_line() + "\n");
        // A second holder (another open file description, as another process has) is refused.
        assert_eq!(
            take(&second, &other()),
            Err(LockError::Held { host: "here".into(), holder: Box::new(Holder::Known(mine.clone())), waited: None })
        );
        first.let_go();
        first.confirm_release();
        assert!(!dir.path().join("opsbook/change.json").exists(), "a run that ends removes its record");
        assert_eq!(take(&second, &other()), Ok(Taken::Now { took_over: None }));
    }

    #[test]
    fn a_record_left_beside_a_free_lock_is_taken_over_and_named() {
        let dir = tempfile::tempdir().unwrap();
        opsbook_base::write_atomically(&dir.path().join(RECORD_FILE), (other().to_line() + "\n").as_bytes(), 0o644)
            .unwrap();
        let lock = HostLock::new("here", Box::new(LocalLock { dir: dir.path().to_path_buf() }));
        let mine = Record::this_run("configure", "");
        let taken = lock.take(&mine, Duration::ZERO, &Cancel::default(), &mut |_| {});
        assert_eq!(taken, Ok(Taken::Now { took_over: Some(Holder::Known(other())) }));
        assert_eq!(std::fs::read_to_string(dir.path().join(RECORD_FILE)).unwrap(), mine.to_line() + "\n");
    }

    #[test]
    fn the_lock_guards_the_manager_it_changes() {
        assert!(lock_dir(true).to_string_lossy().contains("/opsbook"), "{}", lock_dir(true).display());
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(lock_dir(false), PathBuf::from("/run/opsbook"));
        }
    }
}
