//! This machine's file system as the files seam (`super::files::Files`): std::fs and libc's
//! chown, or, with a root folder, that folder standing for `/` (the sandbox's private
//! directory), every path confined to it (`confined`). Replacing a file is atomic (a temporary
//! file beside it, synced, renamed).

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use opsbook_base::Atomic;
use opsbook_base::{InputKind, Refused, read_text};

use super::files::{BACKUP_SUFFIX, Files, Meta, Wanted};
use crate::future::BoxFuture;

/// This machine's file system, or, with `root`, a folder standing for its `/` (the sandbox's).
pub struct LocalFiles {
    /// The folder standing for `/`; `None`: this machine's own.
    pub root: Option<PathBuf>,
}

impl LocalFiles {
    /// Where `path` is: with a root, confined to it (`confined`); else as given.
    fn at(&self, path: &str) -> PathBuf {
        match &self.root {
            Some(root) => confined(root, path),
            None => PathBuf::from(path),
        }
    }
}

/// Where `path` is on a host whose `/` is the folder `root`: the path normalised (`.` dropped,
/// each `..` taking back one folder, never above `/`), then kept as it is when it lies inside
/// `root` already (a path the sandbox itself handed out, as its clients' configuration files),
/// else joined under `root`. So no path, however many `..` it holds, names a place outside.
pub fn confined(root: &Path, path: &str) -> PathBuf {
    use std::path::Component;
    let mut normal = PathBuf::from("/");
    for part in Path::new(path).components() {
        match part {
            Component::Normal(name) => normal.push(name),
            Component::ParentDir => {
                normal.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    if normal.starts_with(root) { normal } else { root.join(normal.strip_prefix("/").unwrap_or(&normal)) }
}

/// The error as an operator reads it: what was done, to which path (as the script named it).
fn io_error(action: &str, path: &str) -> impl Fn(std::io::Error) -> String {
    let (action, path) = (action.to_string(), path.to_string());
    move |e| format!("cannot {action} {path}: {e}")
}

fn meta_of(m: &std::fs::Metadata) -> Meta {
    Meta { mode: m.mode() & 0o7777, owner: user_name(m.uid()), group: group_name(m.gid()), dir: m.is_dir() }
}

impl Files for LocalFiles {
    fn stat<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Option<Meta>, String>> {
        Box::pin(async move {
            match std::fs::metadata(self.at(path)) {
                Ok(m) => Ok(Some(meta_of(&m))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io_error("inspect", path)(e)),
            }
        })
    }

    fn read<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Option<(String, Meta)>, String>> {
        Box::pin(async move {
            let at = self.at(path);
            let meta = match std::fs::metadata(&at) {
                Ok(m) if m.is_dir() => return Err(format!("cannot read {path}: it is a directory")),
                Ok(m) => meta_of(&m),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_error("read", path)(e)),
            };
            // Regular files only, up to a size: a FIFO, a device or a huge file is refused.
            let text = read_text(&at, InputKind::FILE).map_err(|refused| match refused {
                Refused::Io(e) => io_error("read", path)(e),
                other => other.explain(InputKind::FILE, Path::new(path)),
            })?;
            Ok(Some((text, meta)))
        })
    }

    fn write<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
        wanted: &'a Wanted,
        backup: bool,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { write_local(&self.at(path), content, wanted, backup).map_err(io_error("write", path)) })
    }

    fn set_meta<'a>(&'a self, path: &'a str, wanted: &'a Wanted) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let at = self.at(path);
            let (uid, gid) = ids(wanted)?;
            if uid.is_some() || gid.is_some() {
                std::os::unix::fs::chown(&at, uid, gid).map_err(io_error("change the owner of", path))?;
            }
            if let Some(mode) = wanted.mode {
                std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode))
                    .map_err(io_error("change the mode of", path))?;
            }
            Ok(())
        })
    }

    fn remove<'a>(&'a self, path: &'a str, tree: bool) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let at = self.at(path);
            let gone = match std::fs::symlink_metadata(&at) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Ok(m) if m.is_dir() && tree => std::fs::remove_dir_all(&at),
                Ok(m) if m.is_dir() => return Err(format!("cannot remove {path}: it is a directory")),
                _ => std::fs::remove_file(&at),
            };
            gone.map_err(io_error("remove", path))?;
            if !tree {
                let backup = format!("{path}{BACKUP_SUFFIX}");
                match std::fs::remove_file(self.at(&backup)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error("remove", &backup)(e)),
                    _ => {}
                }
            }
            Ok(true)
        })
    }

    fn mkdir<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let at = self.at(path);
            if at.is_dir() {
                return Ok(false);
            }
            std::fs::create_dir_all(&at).map(|_| true).map_err(io_error("create the directory", path))
        })
    }

    fn home(&self) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            // $HOME, as the user manager started in this environment reads it; the password
            // database when it is not set.
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            std::env::var("HOME")
                .ok()
                .filter(|h| h.starts_with('/'))
                .or_else(|| passwd_home(uid))
                .ok_or_else(|| format!("the home directory of user {uid} is unknown (no passwd entry, no $HOME)"))
        })
    }
}

fn write_local(path: &Path, content: &str, wanted: &Wanted, backup: bool) -> std::io::Result<()> {
    let (uid, gid) = ids(wanted).map_err(std::io::Error::other)?;
    let mut file = Atomic::create(path)?;
    file.file().write_all(content.as_bytes())?;
    // chown first: it clears set-id bits that the mode may ask for.
    if (uid.is_some() || gid.is_some()) && !file.is_in_place() {
        std::os::unix::fs::fchown(file.file(), uid, gid)?;
    }
    if backup && path.is_file() {
        keep_backup(path)?;
    }
    file.commit(wanted.mode.unwrap_or(0o644))
}

/// `PATH.opsbook-backup` becomes the file about to be replaced: a hard link (the same bytes,
/// mode and owner, at no cost), swapped in by rename; a copy where links are not possible.
fn keep_backup(path: &Path) -> std::io::Result<()> {
    let mut backup = path.as_os_str().to_owned();
    backup.push(BACKUP_SUFFIX);
    let backup = PathBuf::from(backup);
    let temp = opsbook_base::atomic_temporary(&backup);
    if std::fs::hard_link(path, &temp).is_err() {
        std::fs::copy(path, &temp)?;
    }
    std::fs::rename(&temp, &backup).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// The uid and gid `wanted` names, looked up on this machine.
fn ids(wanted: &Wanted) -> Result<(Option<u32>, Option<u32>), String> {
    let uid = wanted.owner.as_deref().map(|n| lookup_id(n, true)).transpose()?;
    let gid = wanted.group.as_deref().map(|n| lookup_id(n, false)).transpose()?;
    Ok((uid, gid))
}

/// A user's (`user`) or group's id by name (a number is taken as it is).
fn lookup_id(name: &str, user: bool) -> Result<u32, String> {
    if let Ok(id) = name.parse::<u32>() {
        return Ok(id);
    }
    let what = if user { "user" } else { "group" };
    let c = std::ffi::CString::new(name).map_err(|_| format!("`{name}` is not a {what} name"))?;
    let mut buf = vec![0 as libc::c_char; 1 << 16];
    // SAFETY: the entry and buffer live across the call; the result points into them.
    unsafe {
        if user {
            let mut entry: libc::passwd = std::mem::zeroed();
            let mut found = std::ptr::null_mut();
            let rc = libc::getpwnam_r(c.as_ptr(), &mut entry, buf.as_mut_ptr(), buf.len(), &mut found);
            if rc == 0 && !found.is_null() {
                return Ok(entry.pw_uid);
            }
        } else {
            let mut entry: libc::group = std::mem::zeroed();
            let mut found = std::ptr::null_mut();
            let rc = libc::getgrnam_r(c.as_ptr(), &mut entry, buf.as_mut_ptr(), buf.len(), &mut found);
            if rc == 0 && !found.is_null() {
                return Ok(entry.gr_gid);
            }
        }
    }
    Err(format!("there is no {what} `{name}` on this host (account::ensure_{what} creates one)"))
}

/// The name of a uid, or the number when it has none.
fn user_name(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 1 << 16];
    // SAFETY: as in lookup_id; pw_name points into `buf`.
    unsafe {
        let mut entry: libc::passwd = std::mem::zeroed();
        let mut found = std::ptr::null_mut();
        if libc::getpwuid_r(uid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) == 0 && !found.is_null() {
            return std::ffi::CStr::from_ptr(entry.pw_name).to_string_lossy().into_owned();
        }
    }
    uid.to_string()
}

/// The name of a gid, or the number when it has none.
fn group_name(gid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 1 << 16];
    // SAFETY: as in lookup_id; gr_name points into `buf`.
    unsafe {
        let mut entry: libc::group = std::mem::zeroed();
        let mut found = std::ptr::null_mut();
        if libc::getgrgid_r(gid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) == 0 && !found.is_null() {
            return std::ffi::CStr::from_ptr(entry.gr_name).to_string_lossy().into_owned();
        }
    }
    gid.to_string()
}

fn passwd_home(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 1 << 16];
    // SAFETY: as in lookup_id; pw_dir points into `buf`.
    unsafe {
        let mut entry: libc::passwd = std::mem::zeroed();
        let mut found = std::ptr::null_mut();
        if libc::getpwuid_r(uid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut found) == 0 && !found.is_null() {
            return Some(std::ffi::CStr::from_ptr(entry.pw_dir).to_string_lossy().into_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::files::CommandFiles;

    #[test]
    fn every_path_is_confined_to_the_root_and_one_inside_it_stays() {
        let root = Path::new("/tmp/opsbook-sandbox-1/h1/root");
        let cases = [
            ("/etc/alloy/alloy.toml", "/tmp/opsbook-sandbox-1/h1/root/etc/alloy/alloy.toml"),
            ("/../../../../../../tmp/x", "/tmp/opsbook-sandbox-1/h1/root/tmp/x"),
            ("../proc/./self/environ", "/tmp/opsbook-sandbox-1/h1/root/proc/self/environ"),
            (
                "/tmp/opsbook-sandbox-1/h1/root/etc/telegraf/telegraf.conf",
                "/tmp/opsbook-sandbox-1/h1/root/etc/telegraf/telegraf.conf",
            ),
            ("/tmp/opsbook-sandbox-1/h1/root/../../../../etc/shadow", "/tmp/opsbook-sandbox-1/h1/root/etc/shadow"),
            (
                "/tmp/opsbook-sandbox-1/h1/rootless/x",
                "/tmp/opsbook-sandbox-1/h1/root/tmp/opsbook-sandbox-1/h1/rootless/x",
            ),
            ("/", "/tmp/opsbook-sandbox-1/h1/root"),
        ];
        for (path, at) in cases {
            assert_eq!(confined(root, path), Path::new(at), "{path}");
        }
    }

    /// Several paths in one call: the shell's answer, framed by sizes, is what the local
    /// files say one by one, whatever the texts end with.
    #[tokio::test]
    async fn look_all_answers_in_one_script_as_the_local_files_do_path_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().display().to_string();
        for (name, text) in [("empty", ""), ("bare", "no newline"), ("two", "a\n\nb\n"), ("nl", "\n")] {
            std::fs::write(format!("{base}/{name}"), text).unwrap();
        }
        std::fs::create_dir(format!("{base}/sub")).unwrap();
        let paths: Vec<String> =
            ["empty", "bare", "sub", "absent", "two", "nl"].iter().map(|n| format!("{base}/{n}")).collect();
        let shell =
            CommandFiles { commands: Arc::new(super::super::commands::Processes), timeout: Duration::from_secs(10) };
        let found = shell.look_all(&paths).await.unwrap();
        assert_eq!(found, LocalFiles { root: None }.look_all(&paths).await.unwrap());
        let texts: Vec<Option<&str>> = found.iter().map(|f| f.as_ref().and_then(|l| l.text.as_deref())).collect();
        assert_eq!(texts, [Some(""), Some("no newline"), None, None, Some("a\n\nb\n"), Some("\n")]);
        assert_eq!(found[2].as_ref().map(|l| l.meta.dir), Some(true));
        assert_eq!(found[3], None);
    }
}
