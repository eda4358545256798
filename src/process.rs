//! Running a child process with a deadline, from synchronous code.
//!
//! The child gets its own process group, so on timeout the whole group (the command and
//! anything it started) is killed, not just the direct child. Output is drained on threads so
//! a chatty child cannot block on a full pipe.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What to give the child besides its argv.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    pub stdin: Option<String>,
    pub env: Vec<(String, String)>,
}

/// How the child ended.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Exit status; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
    pub timed_out: bool,
}

/// Runs `argv` (no shell) and waits at most `timeout`; on timeout the process group is
/// killed and `timed_out` is set. A command that cannot be started is an `Err` naming it.
pub fn run(argv: &[String], timeout: Duration, capture: Capture) -> Result<Finished, String> {
    let (program, args) = argv.split_first().ok_or("empty command")?;
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .envs(capture.env.iter().map(|(k, v)| (k, v)))
        .stdin(if capture.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("`{program}` not found in PATH"),
            _ => format!("cannot start `{program}`: {e}"),
        })?;
    if let (Some(text), Some(mut stdin)) = (capture.stdin, child.stdin.take()) {
        std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    }
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() >= timeout {
            timed_out = true;
            kill_group(child.id());
            break child.wait().map_err(|e| e.to_string())?;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(Finished {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        duration: started.elapsed(),
        timed_out,
    })
}

/// SIGKILL to the process group led by `pid`.
pub fn kill_group(pid: u32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn captures_output_and_status() {
        let f = run(&argv(&["sh", "-c", "echo out; echo err >&2; exit 3"]), Duration::from_secs(5), Capture::default())
            .unwrap();
        assert_eq!((f.code, f.stdout.as_str(), f.stderr.as_str(), f.timed_out), (Some(3), "out\n", "err\n", false));
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let f =
            run(&argv(&["sh", "-c", "sleep 30 & sleep 30"]), Duration::from_millis(200), Capture::default()).unwrap();
        assert!(f.timed_out);
        assert!(f.duration < Duration::from_secs(5), "{:?}", f.duration);
    }

    #[test]
    fn missing_program_is_named() {
        let e = run(&argv(&["no-such-program-xyz"]), Duration::from_secs(1), Capture::default()).unwrap_err();
        assert_eq!(e, "`no-such-program-xyz` not found in PATH");
    }
}
