//! A small builder for driving the real `opsbook` binary in a scratch directory.
//!
//! Each test gets its own temporary directory that is the working directory, `$HOME` and
//! `$XDG_CONFIG_HOME` parent, with `runbooks/` and `stdlib/` beside each other as in the repo,
//! and an environment cleared of anything that could leak in from the developer's shell.
//! ```ignore
//! Test::new().runbook("x", "check(\"a\", true);").args(["run", "x"]).run().code(0).stdout_has("1 passed");
//! ```

#![allow(dead_code)]

pub(crate) mod apt_repo;
pub(crate) mod docs;
pub(crate) mod fleet;
pub(crate) mod ports;
pub(crate) mod private_host;
pub(crate) mod seeded;
pub(crate) mod vendor_debs;
pub(crate) mod wire;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) fn opsbook() -> &'static str {
    env!("CARGO_BIN_EXE_opsbook")
}

#[must_use]
pub(crate) struct Test {
    dir: tempfile::TempDir,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Option<String>,
}

impl Default for Test {
    fn default() -> Self {
        Self::new()
    }
}

impl Test {
    pub(crate) fn new() -> Test {
        let dir = tempfile::Builder::new().prefix("opsbook-test").tempdir().expect("temp dir");
        Test { dir, args: Vec::new(), env: Vec::new(), stdin: None }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file relative to the test directory (parents created).
    #[track_caller]
    pub(crate) fn file(self, relative: &str, contents: &str) -> Test {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
        self
    }

    pub(crate) fn runbook(self, name: &str, source: &str) -> Test {
        self.file(&format!("runbooks/{name}.rhai"), source)
    }

    pub(crate) fn module(self, name: &str, source: &str) -> Test {
        self.file(&format!("stdlib/{name}.rhai"), source)
    }

    /// `./opsbook.toml`.
    pub(crate) fn config(self, toml: &str) -> Test {
        self.file("opsbook.toml", toml)
    }

    pub(crate) fn args<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, args: I) -> Test {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Test {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub(crate) fn stdin(mut self, text: &str) -> Test {
        self.stdin = Some(text.to_string());
        self
    }

    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(opsbook());
        cmd.current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join(".config"))
            .env("XDG_STATE_HOME", self.dir.path().join(".state"))
            .env("OPSBOOK_LOCK_DIR", self.dir.path().join(".lock"))
            .args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs to completion (killed after 60 s).
    #[track_caller]
    pub(crate) fn run(self) -> Output {
        let mut cmd = self.command();
        cmd.stdin(if self.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start opsbook");
        if let Some(text) = &self.stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        let out = wait_output(child, Duration::from_secs(60));
        Output { code: out.0, stdout: out.1, stderr: out.2, test: self }
    }

    /// Runs `args` in this test's directory, leaving the test to run again (exit status,
    /// stdout, stderr).
    pub(crate) fn run_in_place(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command().args(args).stdin(Stdio::null()).output().expect("start opsbook");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Starts without waiting, for tests that signal the process.
    pub(crate) fn spawn(self) -> Running {
        let mut cmd = self.command();
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start opsbook");
        let capture = Capture::start(&mut child);
        Running { child: Some(child), capture: Some(capture), test: Some(self) }
    }
}

/// Runs opsbook in `dir` as `Test` does in its own scratch directory (the same environment),
/// for tests that run several commands against the same files.
#[track_caller]
pub(crate) fn run_in(dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(opsbook());
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .env("OPSBOOK_LOCK_DIR", dir.join(".lock"))
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start opsbook");
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let out = wait_output(child, Duration::from_secs(120));
    Output { code: out.0, stdout: out.1, stderr: out.2, test: Test::new() }
}

/// A child's stdout and stderr, read as they come by a thread each: a test can look at what
/// a running process printed so far (`Running::wait_for_output`) and still get it all at the end.
struct Capture {
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Capture {
    fn start(child: &mut Child) -> Capture {
        fn reader(mut from: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> std::thread::JoinHandle<()> {
            std::thread::spawn(move || {
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = from.read(&mut chunk) {
                    into.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            })
        }
        let (stdout, stderr) = (Arc::default(), Arc::default());
        let readers = vec![
            reader(child.stdout.take().unwrap(), Arc::clone(&stdout)),
            reader(child.stderr.take().unwrap(), Arc::clone(&stderr)),
        ];
        Capture { stdout, stderr, readers }
    }

    /// Stdout and stderr so far.
    fn so_far(&self) -> (String, String) {
        let text = |bytes: &Mutex<Vec<u8>>| String::from_utf8_lossy(&bytes.lock().unwrap()).into_owned();
        (text(&self.stdout), text(&self.stderr))
    }

    /// Everything, once the child has ended (its pipes close then).
    fn finish(mut self) -> (String, String) {
        for reader in self.readers.drain(..) {
            reader.join().unwrap();
        }
        self.so_far()
    }
}

/// Waits for `child` to end, for at most `limit` (then it is killed and the test fails).
#[track_caller]
fn wait_output(mut child: Child, limit: Duration) -> (i32, String, String) {
    let capture = Capture::start(&mut child);
    finish(child, capture, limit)
}

#[track_caller]
fn finish(mut child: Child, capture: Capture, limit: Duration) -> (i32, String, String) {
    let Ok(status) = poll(limit, || child.try_wait().unwrap().ok_or(())) else {
        child.kill().ok();
        child.wait().ok();
        // What it printed so far: a process it started may still hold the pipes open.
        let (stdout, stderr) = capture.so_far();
        panic!("opsbook did not finish within {limit:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    };
    let (stdout, stderr) = capture.finish();
    (status.code().unwrap_or(-1), stdout, stderr)
}

/// Calls `probe` until it returns `Ok`, for at most `limit`, at growing intervals (5 ms, then
/// twice as long each time up to 100 ms): its value, or its last `Err` once the time is up.
/// For setup that reports a failure rather than panicking; a test waits with `wait_until`.
pub(crate) fn poll<T, E>(limit: Duration, mut probe: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match probe() {
            Ok(value) => return Ok(value),
            Err(last) if started.elapsed() >= limit => return Err(last),
            Err(_) => {}
        }
        std::thread::sleep(pause.min(limit.saturating_sub(started.elapsed())));
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Waits for a condition instead of sleeping: calls `probe` until it observes what the test
/// waits for (`Ok`, whose value is returned), for at most `limit`. Past that the test fails,
/// naming `what` it waited for and what `probe` last observed (its `Err`).
///
/// ```ignore
/// let body = wait_until("/healthz answering 200", Duration::from_secs(20), || match get(&url) {
///     (200, body) => Ok(body),
///     (code, body) => Err(format!("{code} {body}")),
/// });
/// ```
#[track_caller]
pub(crate) fn wait_until<T, E: std::fmt::Display>(
    what: &str,
    limit: Duration,
    probe: impl FnMut() -> Result<T, E>,
) -> T {
    match poll(limit, probe) {
        Ok(value) => value,
        Err(last) => panic!("waited {limit:?} for {what}, in vain; last seen: {last}"),
    }
}

/// A finished run.
pub(crate) struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub test: Test,
}

impl Output {
    /// From a process run elsewhere (the private host); `test` is a fresh scratch dir.
    pub(crate) fn from_raw(out: std::process::Output, _dir: &Path) -> Output {
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            test: Test::new(),
        }
    }

    /// The run's exit status and output, its failed checks again at the end: a log cut to its
    /// last lines (CI's) still shows why.
    fn context(&self) -> String {
        format!(
            "\n--- exit {}\n--- stdout\n{}\n--- stderr\n{}\n--- failed checks (exit {})\n{}",
            self.code,
            self.stdout,
            self.stderr,
            self.code,
            failed_checks(&self.stdout)
        )
    }

    #[track_caller]
    pub(crate) fn code(self, expected: i32) -> Output {
        assert_eq!(self.code, expected, "unexpected exit status{}", self.context());
        self
    }

    /// A run that passed: exit 0 and a summary line counting no failed check.
    #[track_caller]
    pub(crate) fn passed(self, what: &str) -> Output {
        let summary = self.stdout.lines().last().unwrap_or("");
        assert!(self.code == 0 && summary.contains(" 0 failed"), "{what} did not pass{}", self.context());
        self
    }

    /// Stdout is exactly `expected` once durations and temporary paths are masked (`mask`).
    #[track_caller]
    pub(crate) fn stdout_is(self, expected: &str) -> Output {
        let seen = mask(&self.stdout);
        assert!(seen == expected, "stdout differs{}", diff(expected, &seen, &self.context()));
        self
    }

    /// Stderr is exactly `expected` once masked.
    #[track_caller]
    pub(crate) fn stderr_is(self, expected: &str) -> Output {
        let seen = mask(&self.stderr);
        assert!(seen == expected, "stderr differs{}", diff(expected, &seen, &self.context()));
        self
    }

    /// The whole masked stdout matches `pattern` (anchored at both ends; `(?s)` is implied
    /// nowhere, so say where lines may vary).
    #[track_caller]
    pub(crate) fn stdout_matches(self, pattern: &str) -> Output {
        let seen = mask(&self.stdout);
        let re = regex::Regex::new(&format!("^(?:{pattern})$")).expect("a valid pattern");
        assert!(re.is_match(&seen), "stdout does not match{}", diff(pattern, &seen, &self.context()));
        self
    }

    /// Stdout, masked, equals the file `tests/fixtures/NAME`; with `OPSBOOK_BLESS=1` the file
    /// is written from what was seen instead (then review the change with `git diff`).
    #[track_caller]
    pub(crate) fn stdout_is_fixture(self, name: &str) -> Output {
        let path = repo_dir().join("tests/fixtures").join(name);
        let seen = mask(&self.stdout);
        if std::env::var_os("OPSBOOK_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &seen).unwrap();
            return self;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            seen == expected,
            "stdout differs from {} (OPSBOOK_BLESS=1 rewrites it){}",
            path.display(),
            diff(&expected, &seen, &self.context())
        );
        self
    }

    #[track_caller]
    pub(crate) fn stdout_has(self, text: &str) -> Output {
        assert!(self.stdout.contains(text), "stdout lacks {text:?}{}", self.context());
        self
    }

    #[track_caller]
    pub(crate) fn stdout_lacks(self, text: &str) -> Output {
        assert!(!self.stdout.contains(text), "stdout has {text:?}{}", self.context());
        self
    }

    #[track_caller]
    pub(crate) fn stderr_has(self, text: &str) -> Output {
        assert!(self.stderr.contains(text), "stderr lacks {text:?}{}", self.context());
        self
    }

    #[track_caller]
    pub(crate) fn stderr_lacks(self, text: &str) -> Output {
        assert!(!self.stderr.contains(text), "stderr has {text:?}{}", self.context());
        self
    }

    #[track_caller]
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON: {e}{}", self.context()))
    }
}

/// `text` with what varies from run to run replaced: durations (`12ms`, `0.5s`, `(3ms)`)
/// become `[DUR]`, the test's scratch directories and temporary files become `[TMP]`.
pub(crate) fn mask(text: &str) -> String {
    use std::sync::OnceLock;
    static RULES: OnceLock<Vec<(regex::Regex, &'static str)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        vec![
            (regex::Regex::new(r"(?:/private)?/tmp/[A-Za-z0-9._-]+").unwrap(), "[TMP]"),
            (regex::Regex::new(r"\b\d+(?:\.\d+)?(?:ms|µs|s)\b").unwrap(), "[DUR]"),
            // A check's own time, shown when it took 100 ms or more (load decides which do):
            // at the end of an indented line, never the summary's at the start of one.
            (regex::Regex::new(r"(?m)^(  .*?)  \(\[DUR\]\)$").unwrap(), "$1"),
        ]
    });
    rules.iter().fold(text.to_string(), |t, (re, with)| re.replace_all(&t, *with).into_owned())
}

/// Expected and seen side by side, line by line, for a failed whole-output comparison.
fn diff(expected: &str, seen: &str, context: &str) -> String {
    let mut out = String::from("\n--- expected / seen (first differing line marked >)\n");
    let (e, s): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), seen.lines().collect());
    let mut marked = false;
    for i in 0..e.len().max(s.len()) {
        let (a, b) = (e.get(i).copied().unwrap_or("<none>"), s.get(i).copied().unwrap_or("<none>"));
        let mark = if a != b && !marked {
            marked = true;
            ">"
        } else {
            " "
        };
        if a == b {
            out.push_str(&format!("{mark}   {a}\n"));
        } else {
            out.push_str(&format!("{mark} - {a}\n{mark} + {b}\n"));
        }
    }
    out + context
}

/// A run in progress.
pub(crate) struct Running {
    child: Option<Child>,
    capture: Option<Capture>,
    test: Option<Test>,
}

impl Running {
    pub(crate) fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    pub(crate) fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), signal);
        }
    }

    /// Waits until the process has printed `text` (on stdout or stderr), for at most `limit`.
    #[track_caller]
    pub(crate) fn wait_for_output(&self, text: &str, limit: Duration) {
        let capture = self.capture.as_ref().unwrap();
        wait_until(&format!("{text:?} in the output"), limit, || {
            let (stdout, stderr) = capture.so_far();
            if stdout.contains(text) || stderr.contains(text) {
                Ok(())
            } else {
                Err(format!("\n--- stdout\n{stdout}\n--- stderr\n{stderr}"))
            }
        });
    }

    /// Waits for the end; returns the output and how long the wait took.
    #[track_caller]
    pub(crate) fn wait(mut self, limit: Duration) -> (Output, Duration) {
        let started = Instant::now();
        let (code, stdout, stderr) = finish(self.child.take().unwrap(), self.capture.take().unwrap(), limit);
        let took = started.elapsed();
        (Output { code, stdout, stderr, test: self.test.take().unwrap() }, took)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().ok();
            c.wait().ok();
        }
    }
}

/// Marks the calling test as skipped because a real part it needs is missing. The reason is
/// printed (visible with `--nocapture`) and appended to `target/tmp/skipped.log`. With
/// `OPSBOOK_TEST_REQUIRE_ALL` set to anything but `0` or nothing (`.ci/run` sets it to 1, after
/// installing every part) a skip is a failure instead: nothing passes in CI without having run.
#[track_caller]
pub(crate) fn skip(reason: impl AsRef<str>) {
    let reason = reason.as_ref();
    if std::env::var("OPSBOOK_TEST_REQUIRE_ALL").is_ok_and(|v| !v.is_empty() && v != "0") {
        panic!("this test cannot run here, and OPSBOOK_TEST_REQUIRE_ALL forbids skipping: {reason}");
    }
    eprintln!("skipped: {reason}");
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("skipped.log");
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let _ = writeln!(f, "{test}: {reason}");
    }
}

/// Where the repository's own runbooks live (for tests of the built-ins).
pub(crate) fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Private hosts all run as root, and each one's systemd --user and journald take several
/// inotify instances from root's allowance (`fs.inotify.max_user_instances`, 128 by
/// default): with a few dozen hosts up at once a new user manager exits at start, silently.
/// The tests' hosts are root's, so the allowance is raised for the machine (never lowered).
pub(crate) fn raise_inotify_instances() {
    const PATH: &str = "/proc/sys/fs/inotify/max_user_instances";
    let now: u64 = std::fs::read_to_string(PATH).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
    if now < 8192 {
        let _ = std::fs::write(PATH, "8192");
    }
}

/// Real containers (runc) change this machine's cgroups, which the test hosts' user managers
/// use too: while a container starts or goes, a manager may fail to spawn a process (status
/// 219). So tests that run containers hold the cgroups alone (`cgroups_exclusive`), and every
/// private host holds them shared while it is up (`cgroups_shared`, kept by `Fleet` and
/// `PrivateHost`): hosts run side by side, never beside a container. The cgroups are the
/// machine's, not this test binary's: besides the lock in the process, each holder takes the
/// same lock on a file every test binary of the machine opens (`MACHINE_LOCK`, flock(2)), so
/// another suite running at the same time (another worktree's, another crate's) keeps the rule
/// too.
static CGROUPS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The file whose flock(2) is the machine-wide half of `CGROUPS`.
const MACHINE_LOCK: &str = "/tmp/opsbook-tests-cgroups.lock";

thread_local!(static HOLDS_CGROUPS_ALONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });

/// Held by a test that runs containers, for its whole run (its own hosts boot under it).
pub(crate) struct CgroupsAlone(
    #[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>,
    #[allow(dead_code)] Option<std::fs::File>,
);

impl Drop for CgroupsAlone {
    fn drop(&mut self) {
        HOLDS_CGROUPS_ALONE.set(false);
    }
}

/// What a private host keeps while it is up.
pub(crate) struct CgroupsShared(
    #[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>,
    #[allow(dead_code)] Option<std::fs::File>,
);

pub(crate) fn cgroups_exclusive() -> CgroupsAlone {
    let guard = CGROUPS.write().unwrap_or_else(|e| e.into_inner());
    let machine = lock_machine(libc::LOCK_EX);
    HOLDS_CGROUPS_ALONE.set(true);
    CgroupsAlone(guard, machine)
}

/// What a private host keeps while it is up (nothing in a test holding the cgroups alone).
pub(crate) fn cgroups_shared() -> Option<CgroupsShared> {
    if HOLDS_CGROUPS_ALONE.get() {
        return None;
    }
    let guard = CGROUPS.read().unwrap_or_else(|e| e.into_inner());
    Some(CgroupsShared(guard, lock_machine(libc::LOCK_SH)))
}

/// `MACHINE_LOCK` locked `how` (shared or exclusive; waits its turn), held until the file is
/// closed. None when the file cannot be opened or locked (said on stderr): the lock in the
/// process still holds.
fn lock_machine(how: i32) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new().create(true).append(true).mode(0o666).open(MACHINE_LOCK);
    let file = match opened {
        Ok(file) => file,
        Err(e) => {
            eprintln!("{MACHINE_LOCK}: {e}: the cgroups are held in this test binary only");
            return None;
        }
    };
    loop {
        // SAFETY: flock(2) on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
            return Some(file);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            eprintln!("{MACHINE_LOCK}: {e}: the cgroups are held in this test binary only");
            return None;
        }
    }
}

/// The `FAIL` lines of a report, each with its newline: repeated at the end of a test's
/// failure, where a log cut to its last lines still shows them.
pub(crate) fn failed_checks(stdout: &str) -> String {
    stdout.lines().filter(|l| l.trim_start().starts_with("FAIL ")).map(|l| format!("{l}\n")).collect()
}
