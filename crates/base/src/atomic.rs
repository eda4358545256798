//! The one way opsbook writes a whole file: into a temporary beside it (created new, 0600),
//! synced, given its mode, then renamed over the target and the folder synced — so an
//! interrupted write leaves the old file or the new one, never half of either. Every writer
//! of a whole file goes through here (`tests/tidy.rs` holds it); appending to a log is not a
//! whole-file write.
//!
//! A target that is not a regular file is never replaced (`--save-json /dev/null` as root must
//! not turn `/dev/null` into a file): a character device or a FIFO (also through a link such
//! as `/proc/self/fd/1`) is written into in place — a FIFO only when someone reads it, never
//! waited for — and a folder, a socket or a block device is refused in words.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A file being written: the temporary until `commit`, removed if dropped before; or the
/// device or FIFO itself, written in place (`temporary` is `None`).
pub struct Atomic {
    target: PathBuf,
    temporary: Option<PathBuf>,
    file: File,
    committed: bool,
}

impl Atomic {
    /// Starts writing `path`: a new temporary `.NAME.opsbook-PID-N` in its folder, or the
    /// target itself when it is a character device or a FIFO.
    pub fn create(path: &Path) -> io::Result<Atomic> {
        if let Some(file) = in_place(path)? {
            return Ok(Atomic { target: path.to_path_buf(), temporary: None, file, committed: false });
        }
        let temporary = temporary(path);
        let file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary)?;
        Ok(Atomic { target: path.to_path_buf(), temporary: Some(temporary), file, committed: false })
    }

    /// Whether this writes into a device or FIFO in place (its owner and mode are not ours
    /// to change).
    pub fn is_in_place(&self) -> bool {
        self.temporary.is_none()
    }

    /// The temporary, to write into (or to change the owner of).
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Gives the file `mode`, syncs it and puts it in place of the target.
    pub fn commit(mut self, mode: u32) -> io::Result<()> {
        let Some(temporary) = self.temporary.clone() else {
            self.committed = true;
            return Ok(());
        };
        self.file.set_permissions(Permissions::from_mode(mode))?;
        self.file.sync_all()?;
        std::fs::rename(&temporary, &self.target)?;
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
        if let (false, Some(temporary)) = (self.committed, &self.temporary) {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

/// The device or FIFO `path` is (following links), opened for writing; `None` for a regular
/// file or nothing yet; an error saying what it is for anything else.
fn in_place(path: &Path) -> io::Result<Option<File>> {
    use std::os::unix::fs::FileTypeExt;
    let kind = match std::fs::metadata(path) {
        Ok(m) => m.file_type(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let refuse = |what: &str| Err(io::Error::other(format!("it is {what}, not a file: give the path of a file")));
    if kind.is_file() {
        Ok(None)
    } else if kind.is_char_device() {
        OpenOptions::new().write(true).open(path).map(Some)
    } else if kind.is_fifo() {
        // Non-blocking, so that a FIFO nobody reads is said rather than waited on forever.
        let file = OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENXIO) {
                io::Error::other("it is a FIFO (named pipe) that nothing reads")
            } else {
                e
            }
        })?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        // SAFETY: fcntl on a descriptor this function owns; clearing O_NONBLOCK only.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
        Ok(Some(file))
    } else if kind.is_dir() {
        refuse("a folder")
    } else if kind.is_socket() {
        refuse("a socket")
    } else {
        refuse("a block device")
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

    #[test]
    fn a_fifo_is_written_into_never_replaced_and_a_folder_is_refused() {
        use std::os::unix::fs::FileTypeExt;
        // The device case is tests/hostile_input.rs's, in a private mount namespace.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(write(&fifo, b"x", 0o600).unwrap_err().to_string(), "it is a FIFO (named pipe) that nothing reads");
        let mut reader =
            OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).expect("a reader of the FIFO");
        write(&fifo, b"read\n", 0o600).unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut reader, &mut got).unwrap();
        assert_eq!(got, "read\n");
        assert_eq!(
            write(dir.path(), b"x", 0o600).unwrap_err().to_string(),
            "it is a folder, not a file: give the path of a file"
        );
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }
}
