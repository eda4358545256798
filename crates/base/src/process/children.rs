//! Many children watched from one thread: `Children` holds the `Running` children `start`
//! gave, each with a key of the caller's, and `next_done` waits (one `poll(2)` over all their pipes
//! and exits) until one of them is done. A fleet run starts its hosts' ssh masters so, all at
//! once, with no thread per host; `run_blocking` is one child watched so, on the caller's thread.

use std::time::{Duration, Instant};

use super::blocking::{Running, start};
use super::shared::{Completed, Invocation};

/// Runs `inv.argv` (no shell) on this thread and waits at most `inv.timeout`; on timeout the
/// process group is killed and `timed_out` is set. A command that cannot be started is an
/// `Err` naming it.
pub fn run_blocking(inv: Invocation) -> Result<Completed, String> {
    let mut one = Children::new();
    one.add((), start(inv)?);
    one.next_done().expect("one child was added").1
}

/// `run_blocking`, and what the command started and left running in its process group (a
/// `token_command`'s `sleep 300 &`) is killed when it ends, not left behind.
pub fn run_blocking_ending_its_group(inv: Invocation) -> Result<Completed, String> {
    let mut one = Children::new();
    one.add((), start(inv)?.ending_its_group());
    one.next_done().expect("one child was added").1
}

/// Children started with `start`, each under a key of the caller's, watched together.
pub struct Children<K> {
    running: Vec<(K, Running)>,
}

impl<K> Default for Children<K> {
    fn default() -> Self {
        Children { running: Vec::new() }
    }
}

impl<K> Children<K> {
    /// No children yet.
    pub fn new() -> Children<K> {
        Children::default()
    }

    /// Watches `child` from now on, under `key`.
    pub fn add(&mut self, key: K, child: Running) {
        self.running.push((key, child));
    }

    /// How many are still watched.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Whether none is left to watch.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Waits until one of the children is done (exited and its pipes read, or killed at its
    /// timeout), and gives its key and how it ended, as `run_blocking` would have; `None` when
    /// none is left.
    pub fn next_done(&mut self) -> Option<(K, Result<Completed, String>)> {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(self.running.len() * 3);
        let mut spans = Vec::with_capacity(self.running.len());
        loop {
            if self.running.is_empty() {
                return None;
            }
            fds.clear();
            spans.clear();
            for (_, child) in &self.running {
                let from = fds.len();
                child.interest(&mut fds);
                spans.push(from..fds.len());
            }
            let now = Instant::now();
            let due = self.running.iter().map(|(_, child)| child.due(now)).min().expect("one is running");
            if let Err(e) = poll(&mut fds, due.saturating_duration_since(now)) {
                let (key, _) = self.running.swap_remove(0);
                return Some((key, Err(format!("waiting for a command: {e}"))));
            }
            for (index, span) in spans.iter().enumerate() {
                if let Some(ended) = self.running[index].1.advance(&fds[span.clone()]) {
                    let (key, _) = self.running.swap_remove(index);
                    return Some((key, ended));
                }
            }
        }
    }
}

/// One `poll(2)` over `fds` for at most `wait` (rounded up to a millisecond, so a deadline a
/// moment away is slept through, not spun on); interrupted by a signal counts as woken.
fn poll(fds: &mut [libc::pollfd], wait: Duration) -> std::io::Result<()> {
    let millis = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: `fds` is a live, correctly sized array of pollfd for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::inv;
    use super::super::{run_blocking, start};
    use super::*;

    #[test]
    fn children_end_in_the_order_they_finish_each_as_run_blocking_reports_it() {
        let commands = [
            inv(&["sh", "-c", "sleep 0.6; echo slow"], Duration::from_secs(10)),
            inv(&["sh", "-c", "echo fast >&2; exit 4"], Duration::from_secs(10)),
            inv(&["sh", "-c", "echo stuck; sleep 30"], Duration::from_millis(300)),
        ];
        let mut children = Children::new();
        for (key, command) in commands.iter().enumerate() {
            children.add(key, start(command.clone()).unwrap());
        }
        let mut ended = Vec::new();
        while let Some((key, result)) = children.next_done() {
            let alone = run_blocking(commands[key].clone());
            let timeless = |r: Result<Completed, String>| r.map(|c| Completed { duration: Duration::ZERO, ..c });
            assert_eq!(timeless(result), timeless(alone), "child {key}");
            ended.push(key);
        }
        assert_eq!(ended, vec![1, 2, 0]);
        assert!(children.is_empty());
    }
}
