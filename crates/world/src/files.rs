//! The files seam: what `file::`, `unit::install` and friends need from a host's file system —
//! read a file with its mode and owner, replace it atomically, change its mode or owner,
//! remove it, make a directory, and the acting user's home directory.
//!
//! `local_files::LocalFiles` acts on this machine; `CommandFiles` (here) acts through the
//! `Commands` seam with small `sh -c` scripts, so on an ssh host everything happens on that
//! host. Paths travel as positional arguments of the script, never spliced into it, and
//! content on stdin.

use std::sync::Arc;
use std::time::Duration;

use super::commands::{Commands, Invocation};
use crate::future::BoxFuture;

/// The suffix of the one backup kept beside a replaced file.
pub const BACKUP_SUFFIX: &str = ".opsbook-backup";

/// A file's or directory's mode and ownership. Owner and group are names when the host
/// knows them, else numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The permission bits (`0o644`).
    pub mode: u32,
    /// The owner.
    pub owner: String,
    /// The group.
    pub group: String,
    /// Whether it is a directory.
    pub dir: bool,
}

/// What a file should be: a mode, and an owner and group when asked for (`None` keeps what
/// the file has, or what a new file gets: the acting user's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// The permission bits.
    pub mode: Option<u32>,
    /// The owner's name.
    pub owner: Option<String>,
    /// The group's name.
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
    /// Removes a file and the backup kept beside it (`PATH.opsbook-backup`, when there is one),
    /// or with `tree` a directory and what it holds; false when nothing was at the path.
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
    /// Its mode and ownership.
    pub meta: Meta,
}

/// `0640`, as operators write modes.
pub fn mode_text(mode: u32) -> String {
    format!("{mode:04o}")
}

/// Files on the host `commands` runs on (an ssh host), through `sh -c` scripts.
pub(crate) struct CommandFiles {
    pub commands: Arc<dyn Commands>,
    pub timeout: Duration,
}

/// Prints `absent`, or the metadata line `MODE:OWNER:GROUP:TYPE` and then the file's text;
/// what is read is a regular file of at most 16 MiB (`input::FILE`), never a FIFO or a device.
const READ: &str = r#"p=$1
if [ ! -e "$p" ]; then echo absent; exit 0; fi
stat -L -c '%a:%U:%G:%F' "$p" || exit 1
if [ "$2" = read ] && [ ! -d "$p" ]; then
  [ -f "$p" ] || { echo "it is a $(stat -L -c %F "$p"), not a regular file" >&2; exit 1; }
  n=$(wc -c < "$p") || exit 1
  [ "$n" -le 16777216 ] || { echo "it is $n bytes, more than the 16 MiB a file read may be" >&2; exit 1; }
  cat "$p"
fi"#;

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
  [ -f "$p" ] || { echo "$p is a $(stat -L -c %F "$p"), not a regular file" >&2; exit 1; }
  n=$(wc -c < "$p") || exit 1
  [ "$n" -le 16777216 ] || { echo "$p is $n bytes, more than the 16 MiB a file read may be" >&2; exit 1; }
  echo "$m:$((n))"
  cat "$p" || exit 1
  echo
done"#;

/// A candidate file checked by a command, in one call: $1 the candidate's path, $2 its mode,
/// $3 its size in bytes, then the command; the content on stdin. The candidate is removed
/// whatever the command said; the command's exit status and output are the script's. The
/// script's own failures say `opsbook-candidate:` and exit 125.
pub const CANDIDATE: &str = r#"p=$1 mode=$2 size=$3
shift 3
fail() { echo "opsbook-candidate: $*" >&2; rm -f "$p"; exit 125; }
(umask 077 && cat > "$p") || fail "cannot write $p"
n=$(wc -c < "$p")
[ "$n" -eq "$size" ] || fail "only $n of $size bytes of $p arrived"
chmod "$mode" "$p" || fail "cannot change the mode of $p"
"$@"
rc=$?
rm -f "$p"
exit $rc"#;

/// What marks the candidate script's own failure (not the command's) on its stderr.
pub const CANDIDATE_FAILED: &str = "opsbook-candidate: ";

const SET_META: &str = r#"set -eu
if [ -n "$3" ]; then chown "$3" "$1"; fi
if [ -n "$2" ]; then chmod "$2" "$1"; fi"#;

/// $1 path, $2 `tree` or `file` (a file goes with its backup, in the same call).
const REMOVE: &str = r#"if [ ! -e "$1" ] && [ ! -L "$1" ]; then echo absent; exit 0; fi
if [ -d "$1" ] && [ "$2" != tree ]; then echo "it is a directory" >&2; exit 1; fi
rm -rf "$1" || exit 1
if [ "$2" != tree ]; then rm -f "$1.opsbook-backup" || exit 1; fi
echo removed"#;

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
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// The scripts an ssh host runs, run here by a real `sh`.
    #[tokio::test]
    async fn the_shell_scripts_write_read_back_up_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().display().to_string();
        let shell =
            CommandFiles { commands: Arc::new(super::super::commands::Processes), timeout: Duration::from_secs(10) };
        let (sub, file) = (format!("{base}/sub/dir"), format!("{base}/sub/dir/a.conf"));
        assert_eq!(shell.mkdir(&sub).await, Ok(true));
        assert_eq!(shell.mkdir(&sub).await, Ok(false));
        assert_eq!(shell.read(&file).await, Ok(None));
        let wanted = Wanted { mode: Some(0o640), ..Wanted::default() };
        shell.write(&file, "one\n", &wanted, true).await.unwrap();
        shell.write(&file, "two 'quoted' $HOME\n", &wanted, true).await.unwrap();
        let (text, meta) = shell.read(&file).await.unwrap().unwrap();
        assert_eq!(text, "two 'quoted' $HOME\n");
        // Owned by whoever runs the test, as the directory the test made.
        let own = shell.stat(&base).await.unwrap().unwrap();
        assert_eq!((meta.owner.as_str(), meta.group.as_str()), (own.owner.as_str(), own.group.as_str()));
        assert_eq!((meta.mode, meta.dir), (0o640, false));
        let backup = format!("{file}{BACKUP_SUFFIX}");
        assert_eq!(shell.read(&backup).await.unwrap().map(|(t, _)| t).as_deref(), Some("one\n"));
        shell.set_meta(&file, &Wanted { mode: Some(0o600), ..Wanted::default() }).await.unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777, 0o600);
        assert_eq!(shell.stat(&sub).await.unwrap().map(|m| m.dir), Some(true));
        let names: Vec<String> =
            std::fs::read_dir(&sub).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names.len(), 2, "a temporary file was left: {names:?}");
        assert_eq!(
            shell.remove(&sub, false).await.unwrap_err(),
            format!("cannot remove {sub}: \"it is a directory\" (exit status 1)")
        );
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

    /// The candidate script hands the command's status and output back and leaves no candidate,
    /// whether the command passed, failed, or the content arrived cut short.
    #[tokio::test]
    async fn a_candidate_is_checked_by_the_command_and_removed_whatever_it_said() {
        let dir = tempfile::tempdir().unwrap();
        let candidate = format!("{}/config.opsbook-candidate.alloy", dir.path().display());
        let run = |size: &str, check: &str| {
            let argv = ["sh", "-c", CANDIDATE, "sh", &candidate, "0600", size, "sh", "-c", check, "check", &candidate]
                .map(String::from)
                .to_vec();
            Invocation { argv, timeout: Duration::from_secs(10), env: Vec::new(), stdin: Some("a = 1\n".into()) }
        };
        let processes = super::super::commands::Processes;
        let seen = r#"stat -c %a "$1"; cat "$1"; echo rejected >&2; exit 3"#;
        let done = processes.run(&run("6", seen)).await.unwrap();
        assert_eq!((done.code, done.stdout.as_str(), done.stderr.as_str()), (Some(3), "600\na = 1\n", "rejected\n"));
        assert_eq!(processes.run(&run("6", "true")).await.unwrap().code, Some(0));
        let short = processes.run(&run("99", "true")).await.unwrap();
        assert_eq!(
            (short.code, short.stderr.as_str()),
            (Some(125), format!("{CANDIDATE_FAILED}only 6 of 99 bytes of {candidate} arrived\n").as_str())
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
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
