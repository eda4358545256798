//! A child that stays: started as any other (`start_staying`) and watched by `Children` until
//! it says it is ready — a line on its stdout — then left running, held by its `Staying`. Its
//! stdin stays open, so a child that ends at the end of its input (an ssh master whose session
//! reads it) ends when the `Staying` ends it, or as soon as this process dies, however it dies:
//! the kernel closes the pipe. Until then it can be talked to, a line at a time: `say` writes
//! to its stdin, `hear_line` reads its stdout. It is this process's child, so its pid cannot
//! be reused before the `Staying` reaps it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::ChildStdin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::shared::GroupGuard;

/// A started child that stays once ready: `stop` asks it to end, `end` waits for that and
/// reaps it. Before it was ready (or if it never was) both do nothing: until then it belongs to
/// its `Running`, which kills it at its timeout.
#[derive(Default)]
pub struct Staying(Arc<Mutex<Option<Stayed>>>, Arc<Mutex<Heard>>);

/// The ready child's stdout (non-blocking), and what was read of it past the last line heard.
#[derive(Default)]
struct Heard {
    stdout: Option<File>,
    unread: Vec<u8>,
}

/// The longest line `hear_line` takes.
const MAX_LINE: usize = 64 * 1024;

/// A ready child: its pid (not reaped yet), its exit as a pidfd, the open end of its stdin,
/// and its process group, killed if it does not end when asked.
pub(super) struct Stayed {
    pid: u32,
    exit: Option<OwnedFd>,
    stdin: Option<ChildStdin>,
    group: GroupGuard,
    asked: bool,
}

/// What a `Running` that stays hands to its `Staying` when the child is ready.
pub(super) struct Handover {
    slot: Arc<Mutex<Option<Stayed>>>,
    heard: Arc<Mutex<Heard>>,
    /// The line on stdout that says the child is ready.
    pub(super) ready: String,
    stdin: Option<ChildStdin>,
}

impl Handover {
    pub(super) fn new(ready: &str, stdin: Option<ChildStdin>) -> (Handover, Staying) {
        let staying = Staying::default();
        let (slot, heard) = (staying.0.clone(), staying.1.clone());
        (Handover { slot, heard, ready: format!("{ready}\n"), stdin }, staying)
    }

    /// The child is ready: from now on it is the `Staying`'s, with its stdout (non-blocking)
    /// and what it printed after its ready line.
    pub(super) fn hand_over(
        self,
        pid: u32,
        exit: Option<OwnedFd>,
        group: GroupGuard,
        stdout: Option<File>,
        unread: Vec<u8>,
    ) {
        *self.heard.lock().unwrap_or_else(|p| p.into_inner()) = Heard { stdout, unread };
        let stayed = Stayed { pid, exit, stdin: self.stdin, group, asked: false };
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(stayed);
    }
}

impl Staying {
    /// The child's pid, once it was ready and until it is ended.
    pub fn pid(&self) -> Option<u32> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|s| s.pid)
    }

    /// Writes `line` and a newline to the ready child's stdin: an error before it was ready,
    /// once it was asked to end, or when it no longer reads.
    pub fn say(&self, line: &str) -> Result<(), String> {
        let mut stayed = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let stdin = stayed.as_mut().and_then(|s| s.stdin.as_mut()).ok_or("the process is not running")?;
        stdin.write_all(format!("{line}\n").as_bytes()).map_err(|e| format!("writing to the process: {e}"))
    }

    /// The next line the ready child prints on its stdout, without its newline, waiting at most
    /// `limit` for it: an error when its stdout ends first, the time is up, or the line is
    /// longer than 64 KiB. One caller at a time (the others wait for it).
    pub fn hear_line(&self, limit: Duration) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        let mut heard = self.1.lock().unwrap_or_else(|p| p.into_inner());
        let Heard { stdout, unread } = &mut *heard;
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = unread.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = unread.drain(..=end).collect();
                return Ok(String::from_utf8_lossy(&line[..end]).into_owned());
            }
            if unread.len() > MAX_LINE {
                return Err(format!("the process printed a line longer than {} KiB", MAX_LINE >> 10));
            }
            let file = stdout.as_mut().ok_or("the process's output has ended")?;
            match file.read(&mut chunk) {
                Ok(0) => {
                    *stdout = None;
                    return Err("the process's output ended".into());
                }
                Ok(n) => unread.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(format!("the process said nothing within {}", humantime::format_duration(limit)));
                    }
                    wait_readable(file, left);
                }
                Err(e) => return Err(format!("reading the process's output: {e}")),
            }
        }
    }

    /// Asks the child to end (SIGTERM), without waiting; `end` then waits for it.
    pub fn stop(&self) {
        if let Some(stayed) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            stayed.ask();
        }
    }

    /// Asks the child to end if `stop` did not, waits at most `limit` for it, kills its process
    /// group if it is still there, and reaps it; false when it had to be killed. Done once.
    pub fn end(&self, limit: Duration) -> bool {
        let Some(mut stayed) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() else { return true };
        stayed.ask();
        let ended = stayed.exited_within(limit);
        if !ended {
            stayed.group.kill();
        }
        stayed.reap();
        ended
    }
}

/// Waits until `file` has something to read (or its end), at most `limit`.
fn wait_readable(file: &File, limit: Duration) {
    let mut poll = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let millis = limit.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one live pollfd for the duration of the call; an interrupted poll is looked at
    // again by the caller.
    unsafe { libc::poll(&mut poll, 1, millis) };
}

impl Stayed {
    fn ask(&mut self) {
        if !std::mem::replace(&mut self.asked, true) {
            // SAFETY: kill(2) on our own child, not reaped yet, so the pid is still its own.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        }
        drop(self.stdin.take());
    }

    /// Whether the child exits within `limit` (asleep in the kernel on its pidfd; every 5 ms a
    /// look where there is none).
    fn exited_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(fd) = &self.exit else {
                let exited = self.has_exited();
                if exited || left.is_zero() {
                    return exited;
                }
                std::thread::sleep(left.min(Duration::from_millis(5)));
                continue;
            };
            let mut poll = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let millis = left.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one live pollfd for the duration of the call.
            match unsafe { libc::poll(&mut poll, 1, millis) } {
                n if n > 0 => return true,
                0 => return false,
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => continue,
                _ => return false,
            }
        }
    }

    /// Whether the child has exited, without reaping it.
    fn has_exited(&self) -> bool {
        // SAFETY: siginfo_t is plain data, valid all zeroes.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid(2) on our own child with WNOWAIT leaves it to be reaped by `reap`.
        let r = unsafe {
            libc::waitid(libc::P_PID, self.pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
        };
        // SAFETY: the pid field is filled when waitid found an exited child.
        r == 0 && unsafe { info.si_pid() } != 0
    }

    /// Collects the child's exit (it has exited, or was killed).
    fn reap(&mut self) {
        self.group.0 = None;
        let mut status = 0;
        // SAFETY: waitpid(2) on our own child; it blocks only until a killed child is gone.
        unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, 0) };
    }
}

impl Drop for Stayed {
    /// A child still held when its `Staying` goes (its owner did not `end` it): killed with its
    /// process group, and reaped.
    fn drop(&mut self) {
        if self.group.0.is_some() {
            self.group.kill();
            self.reap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::inv;
    use super::super::{Children, start_staying};
    use super::*;

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    }

    fn reaped(pid: u32) -> bool {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    /// Starts `script` (sh) to stay once it prints `READY`, and watches it until done there.
    fn watched(script: &str, timeout: Duration) -> (Result<super::super::Completed, String>, Staying) {
        let (running, staying) = start_staying(inv(&["sh", "-c", script], timeout), "READY").unwrap();
        let mut one = Children::new();
        one.add((), running);
        (one.next_done().unwrap().1, staying)
    }

    #[test]
    fn a_child_that_stays_is_done_once_ready_and_runs_until_ended() {
        let (ready, staying) = watched("echo chatter; echo READY; exec cat", Duration::from_secs(10));
        let ready = ready.unwrap();
        assert_eq!((ready.code, ready.stdout.as_str(), ready.timed_out), (Some(0), "chatter\nREADY\n", false));
        let pid = staying.pid().expect("ready, so held");
        std::thread::sleep(Duration::from_millis(100));
        assert!(alive(pid), "it stays after its Running is gone");
        assert!(staying.end(Duration::from_secs(5)), "it ends when asked");
        assert!(reaped(pid), "and is reaped");
        assert_eq!(staying.pid(), None);
        assert!(staying.end(Duration::from_secs(5)), "ending twice does nothing");
    }

    #[test]
    fn a_ready_child_is_talked_to_a_line_at_a_time_until_it_ends() {
        let (ready, staying) = watched("echo READY; while read -r c; do eval \"$c\"; done", Duration::from_secs(10));
        assert_eq!(ready.unwrap().stdout, "READY\n");
        staying.say("echo one; echo two").unwrap();
        assert_eq!(staying.hear_line(Duration::from_secs(5)), Ok("one".to_string()));
        assert_eq!(staying.hear_line(Duration::from_secs(5)), Ok("two".to_string()));
        let started = Instant::now();
        assert_eq!(staying.hear_line(Duration::from_millis(200)), Err("the process said nothing within 200ms".into()));
        assert!(started.elapsed() >= Duration::from_millis(200));
        staying.say("printf 'partial'; sleep 0.2; echo ' line'").unwrap();
        assert_eq!(staying.hear_line(Duration::from_secs(5)), Ok("partial line".to_string()));
        staying.say("exit").unwrap();
        assert_eq!(staying.hear_line(Duration::from_secs(5)), Err("the process's output ended".into()));
        assert!(staying.end(Duration::from_secs(5)));
        assert_eq!(staying.say("echo gone"), Err("the process is not running".into()));
    }

    #[test]
    fn the_ready_line_must_be_a_whole_line() {
        let (ready, staying) = watched("echo NOT-READY; sleep 0.3; echo READY; exec cat", Duration::from_secs(10));
        assert_eq!(ready.unwrap().stdout, "NOT-READY\nREADY\n");
        staying.end(Duration::from_secs(5));
    }

    #[test]
    fn a_child_that_ends_or_hangs_before_it_is_ready_is_reported_as_any_other() {
        let (ended, staying) = watched("echo refused >&2; exit 255", Duration::from_secs(10));
        let ended = ended.unwrap();
        assert_eq!((ended.code, ended.stderr.as_str()), (Some(255), "refused\n"));
        assert_eq!(staying.pid(), None, "never ready: nothing to hold");

        let (hung, staying) = watched("exec sleep 30", Duration::from_millis(300));
        let hung = hung.unwrap();
        assert_eq!((hung.code, hung.timed_out, hung.stderr.as_str()), (None, true, "killed after 300ms"));
        assert_eq!(staying.pid(), None);
    }

    #[test]
    fn a_child_that_ignores_being_asked_is_killed_and_one_dropped_is_killed_too() {
        let command =
            inv(&["sh", "-c", "trap '' TERM; echo READY; while :; do sleep 1; done"], Duration::from_secs(10));
        let (running, staying) = start_staying(command, "READY").unwrap();
        let mut one = Children::new();
        one.add((), running);
        one.next_done().unwrap().1.unwrap();
        let pid = staying.pid().unwrap();
        assert!(!staying.end(Duration::from_millis(300)), "killed, not ended by itself");
        assert!(reaped(pid));

        let (ready, staying) = watched("echo READY; exec cat", Duration::from_secs(10));
        ready.unwrap();
        let pid = staying.pid().unwrap();
        drop(staying);
        assert!(reaped(pid), "a dropped Staying kills and reaps its child");
    }
}
