//! Where a host's shared ssh connection keeps its control socket, and what a lasting one
//! remembers between runs.
//!
//! A connection is either for this run alone (`Control::private`: a fresh 0700 directory in the
//! user's runtime directory, removed at the end) or lasting (`Control::lasting`): like
//! Ansible's ControlPersist, the master stays a while after the run, so the next run to the
//! same host — an operator's next command, a serve job's next round — skips the TCP and key
//! exchange. A lasting control
//! socket lives in one 0700 directory of ours, named by a hash of everything that makes the
//! connection (user, address, port, key, options), so another key or user never shares it.
//!
//! Runs may start at once from several processes, so checking for a master and starting one
//! happen under a lock file, and so do the forwards over a lasting master: they are
//! remembered beside its socket (`NAME.forwards`) for the next run to reuse, and forgotten
//! whenever a new master starts. A forward is a unix socket beside the control socket
//! (`NAME.HASH`, mode 0600 in the 0700 directory), never a TCP port: only the operator can
//! connect through it.
//!
//! Lasting masters are bounded (`ssh.max_masters`): a run holds a shared lock on `NAME.use`
//! for as long as it uses a master, whose time of last use is that file's; past the maximum,
//! the least recently used masters that no run uses are asked to exit (`trim`).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// The control socket of one connection and the directory it lives in.
#[derive(Debug)]
pub struct Control {
    /// The socket's path.
    pub socket: PathBuf,
    dir: PathBuf,
    /// `Some`: the master outlives the run by this long; `None`: it ends with the run.
    pub lasting: Option<Duration>,
}

/// Where a forward leads, as the remote host sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// A TCP port: the host's own loopback, or a machine the host reaches (a server).
    Port(String, u16),
    /// A unix socket of the host, by its absolute path (its D-Bus).
    Socket(String),
}

impl Remote {
    /// The destination half of a `-L` spec: `HOST:PORT` (`[V6]:PORT`) or `/PATH`.
    pub fn spec(&self) -> String {
        match self {
            Remote::Port(host, port) if host.contains(':') => format!("[{host}]:{port}"),
            Remote::Port(host, port) => format!("{host}:{port}"),
            Remote::Socket(path) => path.clone(),
        }
    }

    /// Reads back what `spec` wrote; `None` for anything else.
    fn from_spec(spec: &str) -> Option<Remote> {
        if spec.starts_with('/') {
            return Some(Remote::Socket(spec.to_string()));
        }
        let (host, port) = spec.rsplit_once(':')?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        Some(Remote::Port(host.to_string(), port.parse().ok()?))
    }
}

/// A forward a master holds: the unix socket `local` reaches `remote`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The unix socket on this machine.
    pub local: PathBuf,
    /// What it reaches on the host.
    pub remote: Remote,
}

impl Forward {
    /// The whole `-L` spec: `SOCKET:DESTINATION`.
    pub fn spec(&self) -> String {
        format!("{}:{}", self.local.display(), self.remote.spec())
    }
}

/// Held while a master is checked or started, or its forwards read and extended.
pub struct Locked(#[allow(dead_code)] File);

/// Held (shared) for as long as a run uses a lasting master, so none is asked to exit under
/// it; dropping it marks the master's last use.
pub struct InUse(File);

impl Drop for InUse {
    fn drop(&mut self) {
        let _ = self.0.set_modified(SystemTime::now());
    }
}

impl Control {
    /// A fresh private directory for a connection of this run alone.
    pub fn private() -> Result<Control, String> {
        let dir = private_dir()?;
        Ok(Control { socket: dir.join("cm"), dir, lasting: None })
    }

    /// The lasting control socket of the connection `identity` describes, in opsbook's own
    /// directory (`$XDG_RUNTIME_DIR/opsbook-ssh`, else `/tmp/opsbook-ssh-UID`).
    pub fn lasting(identity: &str, persist: Duration) -> Result<Control, String> {
        let dir = shared_dir()?;
        Ok(Control { socket: dir.join(format!("{:016x}", fnv1a(identity))), dir, lasting: Some(persist) })
    }

    /// Waits (at most `limit`) for this connection's lock.
    pub fn lock(&self, limit: Duration) -> Result<Locked, String> {
        let path = self.socket.with_extension("lock");
        let file = Self::open_for_locking(&path)?;
        let deadline = Instant::now() + limit;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Locked(file)),
                Err(std::fs::TryLockError::WouldBlock) if !limit.is_zero() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(format!("{} stayed locked by another opsbook for {limit:?}", path.display()));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(format!("{}: {e}", path.display())),
            }
        }
    }

    /// This connection's lock if nobody holds it now; `None` while another holds it (another
    /// opsbook, or another connection of this run to the same host, still starting).
    pub fn try_lock(&self) -> Result<Option<Locked>, String> {
        let path = self.socket.with_extension("lock");
        let file = Self::open_for_locking(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Locked(file))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// The forward to `remote`: its socket beside the control socket, named by the
    /// destination, so a lasting master's forward is found again by name.
    pub fn forward_to(&self, remote: &Remote) -> Forward {
        let hash = fnv1a(&remote.spec()) as u32;
        let mut name = self.socket.clone().into_os_string();
        name.push(format!(".{hash:08x}"));
        Forward { local: PathBuf::from(name), remote: remote.clone() }
    }

    /// Marks this lasting master as used by this run until the returned guard drops (call
    /// under the lock, which a trim takes too).
    pub fn in_use(&self, _: &Locked) -> Result<InUse, String> {
        let path = self.socket.with_extension("use");
        let file = Self::open_for_locking(&path)?;
        file.lock_shared().map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = file.set_modified(SystemTime::now());
        Ok(InUse(file))
    }

    /// Asks the lasting masters of our directory beyond `max` to exit (`exit` does, given the
    /// control socket), least recently used first, skipping those a run uses or is connecting
    /// to; how many were asked.
    pub fn trim(&self, max: usize, exit: impl Fn(&std::path::Path)) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return 0 };
        let mut masters: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(is_master_name))
            .map(|p| {
                let used = std::fs::metadata(p.with_extension("use")).or_else(|_| std::fs::symlink_metadata(&p));
                (used.and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH), p)
            })
            .collect();
        if masters.len() <= max {
            return 0;
        }
        masters.sort();
        let (mut live, mut asked) = (masters.len(), 0);
        for (_, socket) in masters {
            if live <= max {
                break;
            }
            let other = Control { socket, dir: self.dir.clone(), lasting: self.lasting };
            let Ok(locked) = other.lock(Duration::ZERO) else { continue };
            let Ok(idle) = OpenOptions::new().write(true).open(other.socket.with_extension("use")) else { continue };
            if idle.try_lock().is_err() {
                continue;
            }
            exit(&other.socket);
            other.reset(&locked);
            live -= 1;
            asked += 1;
        }
        asked
    }

    fn forwards_file(&self) -> PathBuf {
        self.socket.with_extension("forwards")
    }

    /// The forwards the lasting master holds (call under the lock).
    pub fn forwards(&self, _: &Locked) -> Vec<Forward> {
        let text = std::fs::read_to_string(self.forwards_file()).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                // `SOCKET DESTINATION`; an older opsbook's lines (three words) are not reused.
                let (local, remote) = line.split_once(' ')?;
                let local = Some(PathBuf::from(local)).filter(|p| p.is_absolute())?;
                Some(Forward { local, remote: Remote::from_spec(remote)? })
            })
            .collect()
    }

    /// Remembers a forward the lasting master now holds (call under the lock).
    pub fn remember(&self, _: &Locked, forward: &Forward) -> Result<(), String> {
        use std::io::Write;
        let path = self.forwards_file();
        let mut file =
            OpenOptions::new().create(true).append(true).open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        writeln!(file, "{} {}", forward.local.display(), forward.remote.spec())
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A new master holds no forwards yet, and its socket paths must be free (call under the lock).
    pub fn reset(&self, locked: &Locked) {
        for forward in self.forwards(locked) {
            if forward.local.parent() == Some(self.dir.as_path()) {
                let _ = std::fs::remove_file(&forward.local);
            }
        }
        let _ = std::fs::remove_file(self.forwards_file());
        let _ = std::fs::remove_file(&self.socket);
    }

    /// Removes what a connection of this run alone leaves behind.
    pub(crate) fn remove_private(&self) {
        if self.lasting.is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// A file of ours to take a lock on, made when missing (its content is never read).
    fn open_for_locking(path: &Path) -> Result<File, String> {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    #[cfg(test)]
    /// A control socket in `dir`, for tests.
    pub fn at(dir: &std::path::Path) -> Control {
        Control { socket: dir.join("cm"), dir: dir.to_path_buf(), lasting: None }
    }
}

/// A lasting master's control socket is named by 16 hex digits, with no extension.
fn is_master_name(name: &str) -> bool {
    name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// 64-bit FNV-1a: stable across builds, so every opsbook names a connection alike.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// Our lasting directory, made 0700 if missing; refused if someone else owns it or others may
/// enter it (a socket there would hand them our hosts).
fn shared_dir() -> Result<PathBuf, String> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let dir = match runtime_dir() {
        Some(runtime) => runtime.join("opsbook-ssh"),
        None => PathBuf::from(format!("/tmp/opsbook-ssh-{uid}")),
    };
    match DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a private directory of this user (owner uid {}, mode {:o}): remove it, or set ssh.persist = \"0\"",
            dir.display(),
            meta.uid(),
            meta.permissions().mode() & 0o777
        ));
    }
    Ok(dir)
}

/// The user's runtime directory (`$XDG_RUNTIME_DIR`, `/run/user/UID`: theirs alone, in
/// memory, emptied at logout), where sockets belong; `None` when unset, too long for a socket
/// path (about 100 bytes) under it, or not a directory of this user (`sudo -E` keeps the
/// invoking user's).
fn runtime_dir() -> Option<PathBuf> {
    usable_runtime_dir(PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR")?))
}

fn usable_runtime_dir(runtime: PathBuf) -> Option<PathBuf> {
    let meta = std::fs::metadata(&runtime).ok()?;
    // SAFETY: geteuid has no preconditions.
    let ours = meta.uid() == unsafe { libc::geteuid() };
    (runtime.is_absolute() && runtime.as_os_str().len() < 60 && meta.is_dir() && ours).then_some(runtime)
}

/// A fresh 0700 directory for one control socket, directly under the runtime directory, else
/// the temporary one (`/tmp` when that is too long for socket paths). The runtime directory
/// comes first also for cost: on a disk-backed `/tmp`, making and removing a directory and its
/// sockets per host is most of a cold fleet run's own CPU (inode allocation).
fn private_dir() -> Result<PathBuf, String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = runtime_dir().unwrap_or_else(|| {
        let temp = std::env::temp_dir();
        if temp.as_os_str().len() > 60 { PathBuf::from("/tmp") } else { temp }
    });
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    for _ in 0..20 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("opsbook-ssh-{}-{n}-{nanos:x}", std::process::id()));
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        }
    }
    Err(format!("no free name under {}", base.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_fresh_and_only_ours() {
        let (a, b) = (Control::private().unwrap(), Control::private().unwrap());
        assert_ne!(a.dir, b.dir);
        assert_eq!(std::fs::metadata(&a.dir).unwrap().permissions().mode() & 0o777, 0o700);
        a.remove_private();
        b.remove_private();
        assert!(!a.dir.exists());
    }

    #[test]
    fn the_runtime_directory_is_used_only_when_it_is_this_users_and_short() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        assert_eq!(usable_runtime_dir(dir.path().to_path_buf()), Some(dir.path().to_path_buf()));
        assert_eq!(usable_runtime_dir(PathBuf::from("relative/dir")), None);
        assert_eq!(usable_runtime_dir(dir.path().join("missing")), None);
        let long = dir.path().join("x".repeat(60));
        std::fs::create_dir(&long).unwrap();
        assert_eq!(usable_runtime_dir(long), None, "too long for socket paths under it");
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert_eq!(usable_runtime_dir(file), None);
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert_eq!(usable_runtime_dir(theirs), None, "another user's (sudo -E)");
        }
    }

    #[test]
    fn a_lasting_socket_is_named_by_the_whole_identity() {
        let persist = Duration::from_secs(60);
        let one = Control::lasting("root@10.0.0.5|22|/k1|", persist).unwrap();
        let again = Control::lasting("root@10.0.0.5|22|/k1|", persist).unwrap();
        let other_key = Control::lasting("root@10.0.0.5|22|/k2|", persist).unwrap();
        assert_eq!(one.socket, again.socket);
        assert_ne!(one.socket, other_key.socket);
        assert_eq!(std::fs::metadata(&one.dir).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn forwards_are_remembered_until_a_new_master_starts() {
        let dir = tempfile::tempdir().unwrap();
        let control = Control::at(dir.path());
        let locked = control.lock(Duration::from_secs(1)).unwrap();
        let logs = control.forward_to(&Remote::Port("10.0.0.1".into(), 3100));
        let db = control.forward_to(&Remote::Port("fd00::1".into(), 8086));
        let bus = control.forward_to(&Remote::Socket("/run/dbus/system_bus_socket".into()));
        assert_ne!(logs.local, db.local);
        assert_eq!(db.spec(), format!("{}:[fd00::1]:8086", db.local.display()));
        assert_eq!(bus.spec(), format!("{}:/run/dbus/system_bus_socket", bus.local.display()));
        assert_eq!(logs.local.parent(), Some(dir.path()));
        control.remember(&locked, &logs).unwrap();
        control.remember(&locked, &db).unwrap();
        control.remember(&locked, &bus).unwrap();
        // Older opsbooks' lines (a TCP port; three words) are not taken for forwards of ours.
        let lines = std::fs::read_to_string(control.forwards_file()).unwrap();
        let old = format!("127.0.0.1:40001 10.0.0.1 9\n{} 10.0.0.1 3100\n", logs.local.display());
        std::fs::write(control.forwards_file(), format!("{old}{lines}")).unwrap();
        assert_eq!(control.forwards(&locked), [logs.clone(), db, bus]);
        std::fs::write(&logs.local, "").unwrap();
        control.reset(&locked);
        assert_eq!(control.forwards(&locked), []);
        assert!(!logs.local.exists(), "a new master's forward may listen there again");
    }

    #[test]
    fn past_the_maximum_the_least_recently_used_idle_masters_are_asked_to_exit() {
        let dir = tempfile::tempdir().unwrap();
        let persist = Some(Duration::from_secs(60));
        let at =
            |name: &str| Control { socket: dir.path().join(name), dir: dir.path().to_path_buf(), lasting: persist };
        let names = ["000000000000000a", "000000000000000b", "000000000000000c", "000000000000000d"];
        let mut guards = Vec::new();
        for (age, name) in names.iter().enumerate() {
            let c = at(name);
            std::fs::write(&c.socket, "").unwrap();
            let locked = c.lock(Duration::from_secs(1)).unwrap();
            drop(c.in_use(&locked).unwrap());
            let when = SystemTime::now() - Duration::from_secs(100 - age as u64);
            OpenOptions::new().write(true).open(c.socket.with_extension("use")).unwrap().set_modified(when).unwrap();
            // `b` is in use by a run: never asked, though older than `c`.
            if *name == "000000000000000b" {
                guards.push(c.in_use(&locked).unwrap());
                let use_file = OpenOptions::new().write(true).open(c.socket.with_extension("use")).unwrap();
                use_file.set_modified(when).unwrap();
            }
        }
        std::fs::write(dir.path().join("000000000000000a.lock"), "").unwrap();
        let asked = std::sync::Mutex::new(Vec::new());
        let n = at(names[3]).trim(2, |socket| asked.lock().unwrap().push(socket.file_name().unwrap().to_owned()));
        assert_eq!(n, 2);
        assert_eq!(*asked.lock().unwrap(), ["000000000000000a", "000000000000000c"]);
        assert!(!dir.path().join("000000000000000a").exists() && dir.path().join("000000000000000b").exists());
        assert_eq!(at(names[3]).trim(2, |_| panic!("within the maximum")), 0);
        drop(guards);
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_for_then_given_up() {
        let dir = tempfile::tempdir().unwrap();
        let control = Control::at(dir.path());
        let held = control.lock(Duration::from_secs(1)).unwrap();
        let err = Control::at(dir.path()).lock(Duration::from_millis(50)).err().unwrap();
        assert!(err.ends_with("stayed locked by another opsbook for 50ms"), "{err}");
        drop(held);
        // Free now: taken at once (the limit only has to outlast a busy machine's scheduling).
        assert!(Control::at(dir.path()).lock(Duration::from_secs(10)).is_ok());
    }
}
