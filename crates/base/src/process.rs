//! The one process runner: a child process with a deadline, for host commands (through the
//! `Commands` seam) and for `token_command` alike — `run` for async callers, `run_blocking`
//! (`blocking`) for synchronous ones, both with the same contract; `start` and `Children`
//! for a synchronous caller with many at once (one thread watching them all).
//!
//! The child gets its own process group, so on timeout, or when the caller gives up (Ctrl-C
//! drops the future), the whole group — the command and anything it started — is killed, not
//! just the direct child. Both pipes are read as the child writes, so a chatty child cannot
//! block on a full pipe and a command that times out still shows what it printed.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

mod blocking;
mod children;
mod shared;
mod staying;

pub use blocking::{Running, start, start_staying};
pub use children::{Children, run_blocking, run_blocking_ending_its_group};
pub use shared::{Completed, Invocation, MAX_OUTPUT, printed_too_much, said_on_stderr, too_much};
pub use staying::Staying;

use shared::{GroupGuard, killed_note, spawn_error};

/// A pipe read to its end in the background; what arrived so far is readable at any time.
/// Past `MAX_OUTPUT` it stops reading and says so (`overflowed`).
struct Collected {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: tokio::task::JoinHandle<()>,
    overflow: std::sync::Arc<tokio::sync::Notify>,
    overflowed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Collected {
    fn start<R>(pipe: Option<R>) -> Collected
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let overflow = std::sync::Arc::new(tokio::sync::Notify::new());
        let overflowed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (sink, tell, flag) = (bytes.clone(), overflow.clone(), overflowed.clone());
        let done = tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut chunk = [0u8; 8192];
            while let Ok(n @ 1..) = tokio::io::AsyncReadExt::read(&mut pipe, &mut chunk).await {
                let mut bytes = sink.lock().unwrap_or_else(|e| e.into_inner());
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() > MAX_OUTPUT {
                    bytes.truncate(MAX_OUTPUT);
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    tell.notify_one();
                    return;
                }
            }
        });
        Collected { bytes, done, overflow, overflowed }
    }

    fn overflowed(&self) -> bool {
        self.overflowed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits a moment for the end of the pipe (a grandchild may still hold it open), then
    /// returns what arrived.
    async fn text(self) -> String {
        let _ = tokio::time::timeout(Duration::from_millis(200), self.done).await;
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Runs `inv.argv` (no shell) and waits at most `inv.timeout`; on timeout the process group is
/// killed and `timed_out` is set. A command that cannot be started is an `Err` naming it.
pub async fn run(inv: &Invocation) -> Result<Completed, String> {
    let (program, args) = inv.argv.split_first().ok_or("empty command")?;
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(if inv.stdin.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
    let mut guard = GroupGuard(child.id());
    if let (Some(text), Some(mut stdin)) = (inv.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    // Read both pipes as the child writes, so a command that times out still shows
    // what it printed (often the best clue to why it hung).
    let out = Collected::start(child.stdout.take());
    let err = Collected::start(child.stderr.take());
    let (out_overflow, err_overflow) = (out.overflow.clone(), err.overflow.clone());
    let waited = tokio::time::timeout(inv.timeout, async {
        tokio::select! {
            status = child.wait() => Some(status),
            _ = out_overflow.notified() => None,
            _ = err_overflow.notified() => None,
        }
    })
    .await;
    if matches!(waited, Ok(None)) || out.overflowed() || err.overflowed() {
        drop(guard); // printed too much: the group is killed
        let pipe = if out.overflowed() { "stdout" } else { "stderr" };
        return Err(too_much(program, pipe));
    }
    let timed_out = waited.is_err();
    if timed_out {
        drop(guard); // kill the group now: the pipes close and the readers finish
    } else {
        guard.0 = None;
    }
    let code = match waited {
        Ok(Some(Ok(status))) => status.code(),
        Ok(Some(Err(e))) => return Err(format!("waiting for `{program}`: {e}")),
        _ => None,
    };
    let (stdout, mut stderr) = (out.text().await, err.text().await);
    if timed_out {
        stderr = killed_note(&stderr, inv.timeout);
    }
    Ok(Completed { code, stdout, stderr, duration: started.elapsed(), timed_out })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_always_says_how_it_ended_and_what_was_said_or_that_nothing_was() {
        let done = |code, stderr: &str, timed_out| Completed {
            code,
            stdout: String::new(),
            stderr: stderr.into(),
            duration: Duration::ZERO,
            timed_out,
        };
        assert_eq!(done(Some(1), "", false).failure(), "exit status 1, nothing on stderr");
        assert_eq!(done(Some(1), " \n\n", false).failure(), "exit status 1, nothing on stderr");
        assert_eq!(done(None, "", false).failure(), "ended by a signal, nothing on stderr");
        assert_eq!(done(None, "killed after 5s", true).failure(), "it did not finish in time: killed after 5s");
        assert_eq!(
            done(Some(2), "a\nb\n\nc\nFailed to open journal\n", false).failure(),
            "exit status 2: …b\nc\nFailed to open journal"
        );
        let long = "x".repeat(600);
        assert_eq!(done(Some(3), &long, false).failure(), format!("exit status 3: …{}", "x".repeat(500)));
        // Whatever it said, something follows the colon.
        for stderr in ["", " ", "\n", "\t\n ", "e", "\u{1b}"] {
            let said = done(Some(1), stderr, false).failure();
            assert!(!said.trim_end().ends_with(':'), "{said:?}");
        }
    }

    pub(in crate::process) fn inv(a: &[&str], timeout: Duration) -> Invocation {
        Invocation { argv: a.iter().map(|s| s.to_string()).collect(), timeout, ..Invocation::default() }
    }

    /// Runs `i` with both runners, which keep one contract: what they report must agree
    /// (the time taken aside); the blocking runner's report is returned.
    pub(in crate::process) fn both(i: Invocation) -> Result<Completed, String> {
        let blocking = run_blocking(i.clone());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let in_runtime = runtime.block_on(run(&i));
        let timeless = |r: &Result<Completed, String>| r.clone().map(|c| Completed { duration: Duration::ZERO, ..c });
        assert_eq!(timeless(&blocking), timeless(&in_runtime), "the two runners disagree");
        blocking
    }

    #[test]
    fn captures_output_and_status() {
        let f = both(inv(&["sh", "-c", "echo out; echo err >&2; exit 3"], Duration::from_secs(5))).unwrap();
        assert_eq!((f.code, f.stdout.as_str(), f.stderr.as_str(), f.timed_out), (Some(3), "out\n", "err\n", false));
    }

    #[test]
    fn timeout_kills_the_whole_group_and_keeps_what_was_printed() {
        let f = both(inv(&["sh", "-c", "echo started; sleep 30 & sleep 30"], Duration::from_millis(200))).unwrap();
        assert_eq!(
            (f.code, f.stdout.as_str(), f.stderr.as_str(), f.timed_out),
            (None, "started\n", "killed after 200ms", true)
        );
        assert!(f.duration < Duration::from_secs(5), "{:?}", f.duration);
    }

    #[test]
    fn a_command_printing_too_much_is_stopped_and_refused() {
        let flood = format!("head -c {} /dev/zero", MAX_OUTPUT * 4);
        let e = both(inv(&["sh", "-c", &flood], Duration::from_secs(20))).unwrap_err();
        assert_eq!(e, "`sh` printed more than 16 MiB on stdout: it was stopped");
        let e = both(inv(&["sh", "-c", &format!("{flood} >&2")], Duration::from_secs(20))).unwrap_err();
        assert_eq!(e, "`sh` printed more than 16 MiB on stderr: it was stopped");
    }

    #[test]
    fn a_command_line_too_long_to_start_says_what_to_do() {
        let long = "x".repeat(200_000);
        let e = both(inv(&["true", &long], Duration::from_secs(5))).unwrap_err();
        assert_eq!(
            e,
            "cannot start `true`: its command line is longer than this machine lets a program start with (E2BIG); \
             pass large data in a file or on standard input rather than as arguments"
        );
        assert!(!printed_too_much(&e));
        assert!(printed_too_much(&too_much("ssh", "stderr")));
    }

    #[test]
    fn missing_program_is_named() {
        let e = both(inv(&["no-such-program-xyz"], Duration::from_secs(1))).unwrap_err();
        assert_eq!(e, "`no-such-program-xyz` not found in PATH");
    }
}
