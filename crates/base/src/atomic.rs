//! The one way opsbook writes a whole file: into a temporary beside it (created new, 0600),
//! synced, given its mode, then renamed over the target and the folder synced — so an
//! interrupted write leaves the old file or the new one, never half of either. Every writer
//! of a whole file goes through here (`tests/tidy.rs` holds it); appending to a log is not a
//! whole-file write.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A file being written: the temporary until `commit`, removed if dropped before.
pub struct Atomic {
    target: PathBuf,
    temporary: PathBuf,
    file: File,
    committed: bool,
}

impl Atomic {
    /// Starts writing `path`: a new temporary `.NAME.opsbook-PID-N` in its folder.
    pub fn create(path: &Path) -> io::Result<Atomic> {
        let temporary = temporary(path);
        let file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary)?;
        Ok(Atomic { target: path.to_path_buf(), temporary, file, committed: false })
    }

    /// The temporary, to write into (or to change the owner of).
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Gives the file `mode`, syncs it and puts it in place of the target.
    pub fn commit(mut self, mode: u32) -> io::Result<()> {
        self.file.set_permissions(Permissions::from_mode(mode))?;
        self.file.sync_all()?;
        std::fs::rename(&self.temporary, &self.target)?;
        self.committed = true;
        // The rename is durable once the folder is synced.
        if let Some(dir) = self
            .target
            .parent()
            .and_then(|d| File::open(if d.as_os_str().is_empty() { Path::new(".") } else { d }).ok())
        {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

impl Drop for Atomic {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// Writes `bytes` as the whole of `path`, with `mode`.
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    let mut file = Atomic::create(path)?;
    file.file().write_all(bytes)?;
    file.commit(mode)
}

/// A temporary name in the target's folder: `.NAME.opsbook-PID-N`.
pub fn temporary(path: &Path) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.opsbook-{}-{n}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_whole_file_and_a_dropped_one_leaves_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        write(&path, b"old\n", 0o600).unwrap();
        let mut half = Atomic::create(&path).unwrap();
        std::io::Write::write_all(half.file(), b"ne").unwrap();
        drop(half);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        write(&path, b"new\n", 0o640).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["report.json"], "no temporary left");
    }
}
