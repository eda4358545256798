//! The files seam: what `file::`, `unit::install` and friends need from a host's file system —
//! read a file with its mode and owner, replace it atomically, change its mode or owner,
//! remove it, make a directory, and the acting user's home directory.
//!
//! `LocalFiles` acts on this machine (std::fs and libc's chown, or under a root folder: the
//! sandbox's private directory); `CommandFiles` acts through the `Commands` seam with small
//! `sh -c` scripts, so on an ssh host everything happens on that host. Paths travel as
//! positional arguments of the script, never spliced into it, and content on stdin.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::BoxFuture;
use super::commands::{Commands, Invocation};

/// The suffix of the one backup kept beside a replaced file.
pub const BACKUP_SUFFIX: &str = ".opsbook-backup";

/// A file's or directory's mode and ownership. Owner and group are names when the host
/// knows them, else numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub mode: u32,
    pub owner: String,
    pub group: String,
    pub dir: bool,
}

/// What a file should be: a mode, and an owner and group when asked for (`None` keeps what
/// the file has, or what a new file gets: the acting user's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub mode: Option<u32>,
    pub owner: Option<String>,
    pub group: Option<String>,
}

/// A host's file system.
pub trait Files: Send + Sync {
    /// The path's mode and owner; `None` when nothing is there.
    fn stat<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Option<Meta>, String>>;
    /// A file's text and metadata; `None` when it does not exist.
    fn read<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Option<(String, Meta)>, String>>;
    /// Replaces `path` with `content` atomically: a temporary file in the same directory,
    /// written, given `wanted`'s ownership and mode, synced, renamed over the target. With
    /// `backup`, the file it replaces is kept as `PATH.opsbook-backup`.
    fn write<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
        wanted: &'a Wanted,
        backup: bool,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// Changes the mode and ownership of an existing path.
    fn set_meta<'a>(&'a self, path: &'a str, wanted: &'a Wanted) -> BoxFuture<'a, Result<(), String>>;
    /// Removes a file (or, with `tree`, a directory and what it holds); false when nothing was there.
    fn remove<'a>(&'a self, path: &'a str, tree: bool) -> BoxFuture<'a, Result<bool, String>>;
    /// Creates a directory and its parents; false when it already existed.
    fn mkdir<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<bool, String>>;
    /// The home directory of the user this world acts as.
    fn home(&self) -> BoxFuture<'_, Result<String, String>>;
    /// Several paths at once, in order: each one's metadata and, for a file, its text; `None`
    /// where nothing is. The same answers as `stat` and `read` one by one; a remote host
    /// answers them all in one round trip.
    fn look_all<'a>(&'a self, paths: &'a [String]) -> BoxFuture<'a, Result<Vec<Option<Looked>>, String>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(paths.len());
            for path in paths {
                out.push(match self.stat(path).await? {
                    Some(meta) if meta.dir => Some(Looked { text: None, meta }),
                    Some(_) => self.read(path).await?.map(|(text, meta)| Looked { text: Some(text), meta }),
                    None => None,
                });
            }
            Ok(out)
        })
    }
}

/// What `look_all` found at a path: a directory's metadata, or a file's with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looked {
    /// The file's text; `None` for a directory.
    pub text: Option<String>,
    pub meta: Meta,
}

/// `0640`, as operators write modes.
pub fn mode_text(mode: u32) -> String {
    format!("{mode:04o}")
}

/// This machine's file system, or, with `root`, a folder standing for its `/` (the sandbox's).
pub struct LocalFiles {
    pub root: Option<PathBuf>,
}

impl LocalFiles {
    fn at(&self, path: &str) -> PathBuf {
        match &self.root {
            Some(root) => root.join(path.trim_start_matches('/')),
            None => PathBuf::from(path),
        }
    }
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
            let bytes = std::fs::read(&at).map_err(io_error("read", path))?;
            let text = String::from_utf8(bytes).map_err(|_| format!("cannot read {path}: it is not UTF-8 text"))?;
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
            gone.map(|_| true).map_err(io_error("remove", path))
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

/// A temporary name in the target's directory: `.NAME.opsbook-PID-N`.
fn temporary(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.opsbook-{}-{n}", std::process::id()))
}

fn write_local(path: &Path, content: &str, wanted: &Wanted, backup: bool) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let (uid, gid) = ids(wanted).map_err(std::io::Error::other)?;
    let temp = temporary(path);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp)?;
    let done = (|| {
        file.write_all(content.as_bytes())?;
        // chown first: it clears set-id bits that the mode may ask for.
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::fchown(&file, uid, gid)?;
        }
        file.set_permissions(std::fs::Permissions::from_mode(wanted.mode.unwrap_or(0o644)))?;
        file.sync_all()?;
        if backup && path.is_file() {
            keep_backup(path)?;
        }
        std::fs::rename(&temp, path)?;
        // The rename is durable once the directory is synced.
        if let Some(dir) = path.parent().and_then(|d| std::fs::File::open(d).ok()) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if done.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    done
}

/// `PATH.opsbook-backup` becomes the file about to be replaced: a hard link (the same bytes,
/// mode and owner, at no cost), swapped in by rename; a copy where links are not possible.
fn keep_backup(path: &Path) -> std::io::Result<()> {
    let mut backup = path.as_os_str().to_owned();
    backup.push(BACKUP_SUFFIX);
    let backup = PathBuf::from(backup);
    let temp = temporary(&backup);
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

/// Files on the host `commands` runs on (an ssh host), through `sh -c` scripts.
pub struct CommandFiles {
    pub commands: Arc<dyn Commands>,
    pub timeout: Duration,
}

/// Prints `absent`, or the metadata line `MODE:OWNER:GROUP:TYPE` and then the file's text.
const READ: &str = r#"p=$1
if [ ! -e "$p" ]; then echo absent; exit 0; fi
stat -L -c '%a:%U:%G:%F' "$p" || exit 1
if [ "$2" = read ] && [ ! -d "$p" ]; then cat "$p"; fi"#;

/// $1 path, $2 mode, $3 chown spec (empty: keep), $4 `1` to keep a backup, $5 the content's
/// size in bytes; content on stdin. The trap removes the temporary file on any failure, and a
/// content cut short (the connection lost mid-way ends stdin early) is a failure, so the target
/// is old or new, never half.
const WRITE: &str = r#"set -eu
p=$1
t=$(mktemp "$(dirname "$p")/.opsbook-write.XXXXXX")
trap 'rm -f "$t"' EXIT
cat > "$t"
size=$(wc -c < "$t")
if [ "$size" -ne "$5" ]; then echo "only $size of $5 bytes arrived" >&2; exit 1; fi
if [ -n "$3" ]; then chown "$3" "$t"; fi
chmod "$2" "$t"
sync "$t" 2>/dev/null || sync
if [ "$4" = 1 ] && [ -f "$p" ]; then ln -f "$p" "$p.opsbook-backup" 2>/dev/null || cp -p "$p" "$p.opsbook-backup"; fi
mv -f "$t" "$p"
trap - EXIT"#;

/// For each path argument: `absent`, or `MODE:OWNER:GROUP:TYPE:SIZE` then, for a file, its
/// SIZE bytes and a newline (a file that changes between the two reads breaks that framing,
/// which the reader reports).
const LOOK_ALL: &str = r#"for p in "$@"; do
  if [ ! -e "$p" ]; then echo absent; continue; fi
  m=$(stat -L -c '%a:%U:%G:%F' "$p") || exit 1
  if [ -d "$p" ]; then echo "$m:0"; continue; fi
  n=$(wc -c < "$p") || exit 1
  echo "$m:$((n))"
  cat "$p" || exit 1
  echo
done"#;

const SET_META: &str = r#"set -eu
if [ -n "$3" ]; then chown "$3" "$1"; fi
if [ -n "$2" ]; then chmod "$2" "$1"; fi"#;

const REMOVE: &str = r#"if [ ! -e "$1" ] && [ ! -L "$1" ]; then echo absent; exit 0; fi
if [ -d "$1" ] && [ "$2" != tree ]; then echo "it is a directory" >&2; exit 1; fi
rm -rf "$1" && echo removed"#;

const MKDIR: &str = r#"if [ -d "$1" ]; then echo exists; else mkdir -p "$1" && echo created; fi"#;

/// `owner:group`, `owner`, `:group` or empty, as chown reads them.
fn chown_spec(wanted: &Wanted) -> String {
    match (&wanted.owner, &wanted.group) {
        (Some(o), Some(g)) => format!("{o}:{g}"),
        (Some(o), None) => o.clone(),
        (None, Some(g)) => format!(":{g}"),
        (None, None) => String::new(),
    }
}

/// `MODE:OWNER:GROUP:TYPE` as `stat -c '%a:%U:%G:%F'` prints it.
fn parse_meta(line: &str) -> Option<Meta> {
    let mut parts = line.splitn(4, ':');
    let mode = u32::from_str_radix(parts.next()?, 8).ok()?;
    let (owner, group, kind) = (parts.next()?, parts.next()?, parts.next()?);
    Some(Meta { mode, owner: owner.to_string(), group: group.to_string(), dir: kind == "directory" })
}

impl CommandFiles {
    /// Runs one script with its arguments; its stdout, or the failure in the operator's words.
    async fn script(
        &self,
        action: &str,
        path: &str,
        script: &str,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<String, String> {
        let mut argv = vec!["sh".to_string(), "-c".to_string(), script.to_string(), "sh".to_string()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let inv = Invocation { argv, timeout: self.timeout, env: Vec::new(), stdin: stdin.map(str::to_string) };
        let done = self.commands.run(&inv).await.map_err(|e| format!("cannot {action} {path}: {e}"))?;
        if done.timed_out {
            return Err(format!(
                "cannot {action} {path}: no answer within {}",
                humantime::format_duration(self.timeout)
            ));
        }
        if done.code != Some(0) {
            let said = done.stderr.trim();
            return Err(format!("cannot {action} {path}: \"{said}\" (exit status {})", done.code.unwrap_or(-1)));
        }
        Ok(done.stdout)
    }

    async fn look(&self, path: &str, read: bool) -> Result<Option<(String, Meta)>, String> {
        let action = if read { "read" } else { "inspect" };
        let out = self.script(action, path, READ, &[path, if read { "read" } else { "stat" }], None).await?;
        if out.trim_end() == "absent" {
            return Ok(None);
        }
        let (line, text) = out.split_once('\n').unwrap_or((out.as_str(), ""));
        let meta = parse_meta(line).ok_or_else(|| format!("cannot {action} {path}: unexpected answer \"{line}\""))?;
        Ok(Some((text.to_string(), meta)))
    }
}

/// `look_all`'s answer, path by path: a header line, then a file's bytes and a newline.
fn parse_look_all(out: &str, paths: &[String]) -> Result<Vec<Option<Looked>>, String> {
    let bad = |path: &str, what: &str| format!("cannot read {path}: unexpected answer ({what})");
    let mut rest = out;
    let mut found = Vec::with_capacity(paths.len());
    for path in paths {
        let (line, after) = rest.split_once('\n').ok_or_else(|| bad(path, "cut short"))?;
        rest = after;
        if line == "absent" {
            found.push(None);
            continue;
        }
        let (head, size) = line.rsplit_once(':').ok_or_else(|| bad(path, line))?;
        let meta = parse_meta(head).ok_or_else(|| bad(path, line))?;
        let size: usize = size.parse().map_err(|_| bad(path, line))?;
        if meta.dir {
            found.push(Some(Looked { text: None, meta }));
            continue;
        }
        if rest.len() < size {
            return Err(format!("cannot read {path}: it changed while being read (run again)"));
        }
        let text = rest.get(..size).ok_or_else(|| format!("cannot read {path}: it is not UTF-8 text"))?;
        rest = rest[size..]
            .strip_prefix('\n')
            .ok_or_else(|| format!("cannot read {path}: it changed while being read (run again)"))?;
        found.push(Some(Looked { text: Some(text.to_string()), meta }));
    }
    Ok(found)
}

impl Files for CommandFiles {
    fn look_all<'a>(&'a self, paths: &'a [String]) -> BoxFuture<'a, Result<Vec<Option<Looked>>, String>> {
        Box::pin(async move {
            let args: Vec<&str> = paths.iter().map(String::as_str).collect();
            let out = self.script("read", &paths.join(", "), LOOK_ALL, &args, None).await?;
            parse_look_all(&out, paths)
        })
    }

    fn stat<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Option<Meta>, String>> {
        Box::pin(async move { Ok(self.look(path, false).await?.map(|(_, m)| m)) })
    }

    fn read<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Option<(String, Meta)>, String>> {
        Box::pin(async move {
            match self.look(path, true).await? {
                Some((_, m)) if m.dir => Err(format!("cannot read {path}: it is a directory")),
                found => Ok(found),
            }
        })
    }

    fn write<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
        wanted: &'a Wanted,
        backup: bool,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mode = mode_text(wanted.mode.unwrap_or(0o644));
            let size = content.len().to_string();
            let args = [path, mode.as_str(), &chown_spec(wanted), if backup { "1" } else { "0" }, &size];
            self.script("write", path, WRITE, &args, Some(content)).await.map(|_| ())
        })
    }

    fn set_meta<'a>(&'a self, path: &'a str, wanted: &'a Wanted) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mode = wanted.mode.map(mode_text).unwrap_or_default();
            let args = [path, mode.as_str(), &chown_spec(wanted)];
            self.script("change the mode or owner of", path, SET_META, &args, None).await.map(|_| ())
        })
    }

    fn remove<'a>(&'a self, path: &'a str, tree: bool) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let out = self.script("remove", path, REMOVE, &[path, if tree { "tree" } else { "file" }], None).await?;
            Ok(out.trim_end() == "removed")
        })
    }

    fn mkdir<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let out = self.script("create the directory", path, MKDIR, &[path], None).await?;
            Ok(out.trim_end() == "created")
        })
    }

    fn home(&self) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            let out = self.script("find", "the home directory", r#"printf %s "$HOME""#, &[], None).await?;
            if out.is_empty() { Err("the host's user has no $HOME".to_string()) } else { Ok(out) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scripts an ssh host runs, run here by a real `sh`: the same answers as `LocalFiles`.
    #[tokio::test]
    async fn the_shell_scripts_write_read_back_up_and_remove_as_the_local_files_do() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().display().to_string();
        let shell =
            CommandFiles { commands: Arc::new(super::super::commands::Processes), timeout: Duration::from_secs(10) };
        let local = LocalFiles { root: None };
        let (sub, file) = (format!("{base}/sub/dir"), format!("{base}/sub/dir/a.conf"));
        assert_eq!(shell.mkdir(&sub).await, Ok(true));
        assert_eq!(shell.mkdir(&sub).await, Ok(false));
        assert_eq!(shell.read(&file).await, Ok(None));
        let wanted = Wanted { mode: Some(0o640), ..Wanted::default() };
        shell.write(&file, "one\n", &wanted, true).await.unwrap();
        shell.write(&file, "two 'quoted' $HOME\n", &wanted, true).await.unwrap();
        let (text, meta) = shell.read(&file).await.unwrap().unwrap();
        assert_eq!(text, "two 'quoted' $HOME\n");
        assert_eq!(Some(meta.clone()), local.read(&file).await.unwrap().map(|(_, m)| m));
        assert_eq!((meta.mode, meta.dir), (0o640, false));
        let backup = format!("{file}{BACKUP_SUFFIX}");
        assert_eq!(shell.read(&backup).await.unwrap().map(|(t, _)| t).as_deref(), Some("one\n"));
        shell.set_meta(&file, &Wanted { mode: Some(0o600), ..Wanted::default() }).await.unwrap();
        assert_eq!(local.stat(&file).await.unwrap().map(|m| m.mode), Some(0o600));
        assert_eq!(shell.stat(&sub).await.unwrap().map(|m| m.dir), Some(true));
        let names: Vec<String> =
            std::fs::read_dir(&sub).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names.len(), 2, "a temporary file was left: {names:?}");
        assert!(shell.remove(&sub, false).await.unwrap_err().contains("it is a directory"));
        assert_eq!(shell.remove(&file, false).await, Ok(true));
        assert_eq!(shell.remove(&file, false).await, Ok(false));
        assert_eq!(shell.remove(&format!("{base}/sub"), true).await, Ok(true));
        assert!(!shell.home().await.unwrap().is_empty());
        // Content cut short on its way leaves the old file and no temporary one.
        let again = format!("{base}/b.conf");
        shell.write(&again, "old\n", &Wanted::default(), false).await.unwrap();
        let argv = ["sh", "-c", WRITE, "sh", &again, "0644", "", "0", "999"].map(String::from).to_vec();
        let inv = Invocation { argv, timeout: Duration::from_secs(10), env: Vec::new(), stdin: Some("new\n".into()) };
        let done = shell.commands.run(&inv).await.unwrap();
        assert_eq!((done.code, done.stderr.as_str()), (Some(1), "only 4 of 999 bytes arrived\n"));
        assert_eq!(std::fs::read_to_string(&again).unwrap(), "old\n");
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 1);
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

    #[test]
    fn stat_lines_and_chown_specs() {
        assert_eq!(
            parse_meta("640:root:loki:regular file"),
            Some(Meta { mode: 0o640, owner: "root".into(), group: "loki".into(), dir: false })
        );
        assert_eq!(parse_meta("755:0:0:directory").map(|m| m.dir), Some(true));
        assert_eq!(parse_meta("absent"), None);
        let w = |o: Option<&str>, g: Option<&str>| Wanted {
            mode: None,
            owner: o.map(Into::into),
            group: g.map(Into::into),
        };
        assert_eq!(chown_spec(&w(Some("root"), Some("loki"))), "root:loki");
        assert_eq!(chown_spec(&w(None, Some("loki"))), ":loki");
        assert_eq!(chown_spec(&w(Some("root"), None)), "root");
        assert_eq!(chown_spec(&w(None, None)), "");
    }
}
