//! The keeper of a connection: a session of its master (`exec cat`, reading a socket of ours)
//! that holds the master open for as long as we hold that socket, started shortly before the
//! master's persist time is up (forwarded sockets alone do not hold a master; any session
//! ending restarts that time, so until then it cannot end). Short runs finish before and never
//! pay for the session; it ends when the connection closes, or when opsbook dies (the socket
//! closes). Like every other session, it is asked of the master over its control socket: no
//! local `ssh` client, no process of ours.
//!
//! One timer thread for the whole process starts the keepers that come due, rather than a
//! waiting thread per connection: a run over a thousand hosts holds a thousand connections.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::transport::mux::Mux;

/// The most asking the master for the keeper's session may take.
const ASK_LIMIT: Duration = Duration::from_secs(5);

/// One connection's keeper: its session once started, and whether the connection closed.
#[derive(Default)]
pub(super) struct Keeper {
    /// Taken under this lock: a keeper never starts for a closed connection.
    closed: Mutex<bool>,
    /// The session's control connection and our end of its stdin.
    session: Mutex<Option<(Mux, UnixStream)>>,
}

impl Keeper {
    /// Has the keeper session start at `due` on the master listening on `socket`, unless the
    /// connection closed before.
    pub(super) fn schedule(self: &Arc<Keeper>, due: Instant, socket: PathBuf) {
        let timer = timer();
        timer.pending.lock().unwrap_or_else(|p| p.into_inner()).push(Due {
            at: due,
            keeper: Arc::downgrade(self),
            socket,
        });
        timer.wake.notify_one();
    }

    /// Marks the connection closed; false when it already was.
    pub(super) fn close(&self) -> bool {
        let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        !std::mem::replace(&mut *closed, true)
    }

    /// Ends the keeper session, if it started: its `cat` reads the end of its input, and the
    /// master ends the session (the master, not we, waits for that).
    pub(super) fn end(&self) {
        drop(self.session.lock().unwrap_or_else(|p| p.into_inner()).take());
    }

    fn start(&self, socket: &std::path::Path) {
        let closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if *closed {
            return;
        }
        let asked = UnixStream::pair().map_err(|e| e.to_string()).and_then(|(ours, theirs)| {
            let fd = theirs.as_raw_fd();
            Mux::ask_session(Mux::reach(socket)?, ASK_LIMIT, "exec cat", [fd, fd, fd]).map(|control| (control, ours))
        });
        match asked {
            Ok(session) => *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(session),
            Err(e) => tracing::debug!("cannot start the ssh keeper: {e}"),
        }
        drop(closed);
    }
}

/// A keeper to start at `at`.
struct Due {
    at: Instant,
    keeper: Weak<Keeper>,
    socket: PathBuf,
}

/// The keepers waiting for their time, and the thread that starts them.
struct Timer {
    pending: Mutex<Vec<Due>>,
    wake: Condvar,
}

/// The process's timer, its thread started on first use.
fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer { pending: Mutex::default(), wake: Condvar::new() }));
        if let Err(e) = std::thread::Builder::new().name("opsbook-ssh-keeper".into()).spawn(move || timer.run()) {
            tracing::debug!("cannot start the ssh keepers' timer: {e}");
        }
        timer
    })
}

impl Timer {
    fn run(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            // Connections that closed (their keeper dropped) are forgotten.
            pending.retain(|d| d.keeper.strong_count() > 0);
            let now = Instant::now();
            let (due, waiting): (Vec<Due>, Vec<Due>) =
                std::mem::take(&mut *pending).into_iter().partition(|d| d.at <= now);
            *pending = waiting;
            if !due.is_empty() {
                drop(pending);
                for d in due {
                    if let Some(keeper) = d.keeper.upgrade() {
                        keeper.start(&d.socket);
                    }
                }
                pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            pending = match pending.iter().map(|d| d.at).min() {
                Some(next) => self.wake.wait_timeout(pending, next - now).unwrap_or_else(|p| p.into_inner()).0,
                None => self.wake.wait(pending).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixListener;

    use super::*;

    /// A master's control socket that records what each connection asked (the keeper's hello
    /// and session request), until that connection closes.
    fn listening(dir: &std::path::Path) -> (PathBuf, std::sync::mpsc::Receiver<Vec<u8>>) {
        let socket = dir.join("cm");
        let listener = UnixListener::bind(&socket).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for mut connection in listener.incoming().flatten() {
                let mut asked = Vec::new();
                connection.read_to_end(&mut asked).ok();
                tx.send(asked).ok();
            }
        });
        (socket, rx)
    }

    #[test]
    fn a_keeper_starts_when_due_and_never_for_a_closed_connection() {
        let dir = tempfile::tempdir().unwrap();
        let (socket, asked) = listening(dir.path());
        let (due, closed) = (Arc::new(Keeper::default()), Arc::new(Keeper::default()));
        let soon = Instant::now() + Duration::from_millis(50);
        due.schedule(soon, socket.clone());
        closed.schedule(soon, socket);
        assert!(closed.close());
        assert!(!closed.close(), "closing twice does nothing");
        std::thread::sleep(Duration::from_millis(300));
        assert!(due.session.lock().unwrap().is_some(), "started when due");
        assert!(closed.session.lock().unwrap().is_none(), "never started once closed");
        due.close();
        due.end();
        assert!(due.session.lock().unwrap().is_none());
        // Ending it closed the control connection: what it asked is all there.
        let request = asked.recv_timeout(Duration::from_secs(2)).unwrap();
        assert!(request.windows(8).any(|w| w == b"exec cat"), "{request:?}");
        assert!(asked.recv_timeout(Duration::from_millis(200)).is_err(), "one keeper asked, not two");
    }
}
