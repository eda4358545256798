//! A child that stays: started as any other (`start_staying`) and watched by `Children` until
//! it says it is ready — a line on its stdout — then left running, held by its `Staying`. Its
//! stdin stays open and is never written, so a child that ends at the end of its input (an
//! ssh master whose session is `cat`) ends when the `Staying` ends it, or as soon as this
//! process dies, however it dies: the kernel closes the pipe. It is this process's child, so
//! its pid cannot be reused before the `Staying` reaps it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::ChildStdin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::shared::GroupGuard;

/// A started child that stays once ready: `stop` asks it to end, `end` waits for that and
/// reaps it. Before it was ready (or if it never was) both do nothing: until then it belongs to
/// its `Running`, which kills it at its timeout.
#[derive(Default)]
pub struct Staying(Arc<Mutex<Option<Stayed>>>);

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
    /// The line on stdout that says the child is ready.
    pub(super) ready: String,
    stdin: Option<ChildStdin>,
}

impl Handover {
    pub(super) fn new(ready: &str, stdin: Option<ChildStdin>) -> (Handover, Staying) {
        let staying = Staying::default();
        (Handover { slot: staying.0.clone(), ready: format!("{ready}\n"), stdin }, staying)
    }

    /// The child is ready: from now on it is the `Staying`'s.
    pub(super) fn hand_over(self, pid: u32, exit: Option<OwnedFd>, group: GroupGuard) {
        let stayed = Stayed { pid, exit, stdin: self.stdin, group, asked: false };
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(stayed);
    }
}

impl Staying {
    /// The child's pid, once it was ready and until it is ended.
    pub fn pid(&self) -> Option<u32> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|s| s.pid)
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
