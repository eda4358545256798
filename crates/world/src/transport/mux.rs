//! A client of an OpenSSH master's control socket, speaking its multiplexing protocol
//! (OpenSSH's `PROTOCOL.mux`, version 4): open or close a forward, ask the master's pid, ask it
//! to exit, and open a session whose stdin, stdout and stderr are a socket of ours passed to the
//! master (`new_session`: a remote command over the connection with no `ssh` process of its
//! own, as the change lock's holder is).
//!
//! `ssh -O forward|cancel|exit` does the same, at the price of a process per request (about as
//! much CPU as the check it serves, once per host of a fleet run); these requests are a few
//! bytes on a unix socket. Every request has a deadline: a stuck master is an error, never a
//! hang.
//!
//! Wire format: each message is `uint32 length` then the body, whose first `uint32` is the
//! message type; strings are `uint32 length` then bytes; all big-endian.

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::control::{Forward, Remote};

const HELLO: u32 = 0x0000_0001;
const NEW_SESSION: u32 = 0x1000_0002;
const ALIVE_CHECK: u32 = 0x1000_0004;
const TERMINATE: u32 = 0x1000_0005;
const OPEN_FWD: u32 = 0x1000_0006;
const CLOSE_FWD: u32 = 0x1000_0007;
const OK: u32 = 0x8000_0001;
const PERMISSION_DENIED: u32 = 0x8000_0002;
const FAILURE: u32 = 0x8000_0003;
const ALIVE: u32 = 0x8000_0005;
const SESSION_OPENED: u32 = 0x8000_0006;
const EXIT_MESSAGE: u32 = 0x8000_0004;
/// No escape character (the session has no terminal to read one from).
const NO_ESCAPE: u32 = 0xffff_ffff;
/// The only protocol version there is.
const VERSION: u32 = 4;
/// A local forward (`-L`).
const FORWARD_LOCAL: u32 = 1;
/// A port that says "the host is a unix socket path".
const STREAMLOCAL: u32 = -2i32 as u32;
/// Replies are a few bytes; anything longer is not a master speaking.
pub const MAX_REPLY: usize = 64 << 10;

/// What a request says when the master closed the connection instead of answering.
const CLOSED: &str = "the ssh master closed the control connection";

/// One conversation with a master, after both hellos.
pub struct Mux {
    stream: UnixStream,
    next_id: u32,
    /// What was read and not yet taken as a message: the master's hello and its answer often
    /// come in one read.
    unread: Vec<u8>,
}

impl Mux {
    /// Connects to the master listening on `socket` and exchanges hellos, within `limit`.
    pub fn connect(socket: &Path, limit: Duration) -> Result<Mux, String> {
        let stream = Mux::reach(socket)?;
        stream.set_read_timeout(Some(limit)).and_then(|()| stream.set_write_timeout(Some(limit))).map_err(io)?;
        let mut mux = Mux { stream, next_id: 1, unread: Vec::new() };
        mux.send(&Message::new(HELLO).u32(VERSION))?;
        mux.hello()?;
        Ok(mux)
    }

    /// The master's process id.
    pub fn pid(&mut self) -> Result<u32, String> {
        let mut reply = self.request(Message::new(ALIVE_CHECK))?;
        match reply.kind {
            ALIVE => reply.u32(),
            _ => Err(reply.refusal()),
        }
    }

    /// Asks the master to exit at once, ending every session and forward on it. OpenSSH exits
    /// before its yes reaches us (its mux.c says as much), so the connection closing without an
    /// answer is a yes too; a refusal is still an error.
    pub fn terminate(&mut self) -> Result<(), String> {
        match self.expect_ok(Message::new(TERMINATE)) {
            Err(e) if e == CLOSED => Ok(()),
            other => other,
        }
    }

    /// Has the master listen on `forward.local` and connect each connection to `forward.remote`.
    pub fn open_forward(&mut self, forward: &Forward) -> Result<(), String> {
        self.expect_ok(forwarding(OPEN_FWD, forward))
    }

    /// Ends a forward `open_forward` (or `-L` at the master's start) made.
    pub fn close_forward(&mut self, forward: &Forward) -> Result<(), String> {
        self.expect_ok(forwarding(CLOSE_FWD, forward))
    }

    /// A new connection to the master listening on `socket` (`ask_session`'s to talk on), or
    /// why there is none.
    pub fn reach(socket: &Path) -> Result<UnixStream, String> {
        UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))
    }

    /// Asks the master at the other end of `stream` (a new connection: `reach`) for a session
    /// running `command` (one string, for the remote login shell) with `stdio` as its stdin,
    /// stdout and stderr, no terminal, within `limit`, without waiting for its answer: our
    /// hello and the request go in one write and the descriptors right after (the master reads
    /// one message at a time).
    /// The master's hello and its answer come on the returned connection (`confirm_session`,
    /// or `session_word` for a caller reading it itself); the session lasts while it stays
    /// open, and the master's last word on it is the command's exit status. The master closes
    /// the descriptors it was given when it refuses, so a caller that dropped its own copies
    /// sees its ends of them close.
    ///
    /// Only reads have a deadline: what is written is a few hundred bytes and three
    /// descriptors into a new connection's empty buffer, taken whole whoever listens.
    pub fn ask_session(stream: UnixStream, limit: Duration, command: &str, stdio: [RawFd; 3]) -> Result<Mux, String> {
        stream.set_read_timeout(Some(limit)).map_err(io)?;
        let mut mux = Mux { stream, next_id: 1, unread: Vec::new() };
        let request = Message::new(NEW_SESSION).string("").u32(0).u32(0).u32(0).u32(0).u32(NO_ESCAPE);
        let (_, request) = mux.numbered(request.string("").string(command));
        let mut both = packet(&Message::new(HELLO).u32(VERSION));
        both.extend_from_slice(&packet(&request));
        mux.stream.write_all(&both).map_err(io)?;
        for fd in stdio {
            super::fd_passing::send_fd(&mux.stream, fd).map_err(io)?;
        }
        Ok(mux)
    }

    /// Reads the master's hello and its answer to `ask_session`: `Ok` once the host opened the
    /// session, the refusal in words otherwise.
    pub fn confirm_session(&mut self) -> Result<(), String> {
        self.hello()?;
        let reply = self.answer_to(1)?;
        match reply.kind {
            SESSION_OPENED => Ok(()),
            _ => Err(reply.refusal()),
        }
    }

    /// The control connection itself, for reading the session's end without blocking a thread
    /// (`exit_status` says what a message on it means). Only before anything was read from it.
    pub fn into_stream(self) -> UnixStream {
        debug_assert!(self.unread.is_empty(), "a connection handed over with a message read from it");
        self.stream
    }

    /// Reads the master's hello.
    fn hello(&mut self) -> Result<(), String> {
        let mut hello = self.receive()?;
        match (hello.u32()?, hello.u32()?) {
            (HELLO, VERSION) => Ok(()),
            (HELLO, version) => Err(format!("the ssh master speaks mux protocol {version}, not {VERSION}")),
            (kind, _) => Err(format!("the control socket answered message {kind:#x}, not a hello")),
        }
    }

    fn expect_ok(&mut self, message: Message) -> Result<(), String> {
        let reply = self.request(message)?;
        match reply.kind {
            OK => Ok(()),
            _ => Err(reply.refusal()),
        }
    }

    /// Sends a request (its id added after the type) and reads the reply to it.
    fn request(&mut self, message: Message) -> Result<Reply, String> {
        let (id, message) = self.numbered(message);
        self.send(&message)?;
        self.answer_to(id)
    }

    /// The message with the next request id after its type.
    fn numbered(&mut self, message: Message) -> (u32, Message) {
        let id = self.next_id;
        self.next_id += 1;
        let mut body = message.body;
        body.splice(4..4, id.to_be_bytes());
        (id, Message { body })
    }

    /// Reads the reply to request `id`.
    fn answer_to(&mut self, id: u32) -> Result<Reply, String> {
        let mut reply = self.receive()?;
        reply.kind = reply.u32()?;
        let answered = reply.u32()?;
        if answered != id {
            return Err(format!("the ssh master answered request {answered}, not {id}"));
        }
        Ok(reply)
    }

    fn send(&mut self, message: &Message) -> Result<(), String> {
        self.stream.write_all(&packet(message)).map_err(io)
    }

    /// The next message: from what was read already when it holds one whole, else reading
    /// what the master has sent so far (one read for a hello and an answer sent together).
    fn receive(&mut self) -> Result<Reply, String> {
        loop {
            if let Some(length) = self.unread.get(..4) {
                let length = u32::from_be_bytes(length.try_into().expect("four bytes")) as usize;
                if length > MAX_REPLY {
                    return Err(format!("the control socket sent a {length}-byte message: not an ssh master"));
                }
                if self.unread.len() >= 4 + length {
                    let body = self.unread[4..4 + length].to_vec();
                    self.unread.drain(..4 + length);
                    return Ok(Reply { body, at: 0, kind: 0 });
                }
            }
            let mut chunk = [0u8; 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(CLOSED.into()),
                Ok(n) => self.unread.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
    }
}

/// A message as it goes on the socket: its length, then its body.
fn packet(message: &Message) -> Vec<u8> {
    let mut packet = (message.body.len() as u32).to_be_bytes().to_vec();
    packet.extend_from_slice(&message.body);
    packet
}

/// What a message the master sends on a session's control connection says of the session:
/// `Some(status)` for its exit message (the remote command's exit status), `None` for anything
/// else (a terminal that could not be had, which a session without one never asks for).
/// `body` is the message without its length.
pub fn exit_status(body: &[u8]) -> Option<u32> {
    let word = |at: usize| body.get(at..at + 4).map(|b| u32::from_be_bytes(b.try_into().expect("four bytes")));
    (word(0)? == EXIT_MESSAGE).then(|| word(8)).flatten()
}

/// What one message on a session's control connection says (`body` without its length), in
/// the order the master sends them: its hello, the session opened or refused, the command's
/// exit status. `Err` for a hello of another protocol version.
pub fn session_word(body: &[u8]) -> Result<SessionWord, String> {
    let mut reply = Reply { body: body.to_vec(), at: 0, kind: 0 };
    reply.kind = reply.u32()?;
    Ok(match reply.kind {
        HELLO => match reply.u32()? {
            VERSION => SessionWord::Hello,
            version => return Err(format!("the ssh master speaks mux protocol {version}, not {VERSION}")),
        },
        SESSION_OPENED => SessionWord::Opened,
        PERMISSION_DENIED | FAILURE => {
            reply.u32()?;
            SessionWord::Refused(reply.refusal())
        }
        _ => exit_status(body).map_or(SessionWord::Other, SessionWord::Exit),
    })
}

/// A message on a session's control connection (`session_word`).
#[derive(Debug, PartialEq, Eq)]
pub enum SessionWord {
    /// The master's hello.
    Hello,
    /// The host opened the session: the command runs.
    Opened,
    /// The master would not open it (nothing ran), in words.
    Refused(String),
    /// The command's exit status.
    Exit(u32),
    /// Anything else (a terminal that could not be had, which a session without one never asks for).
    Other,
}

fn io(e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => "the ssh master did not answer in time".into(),
        std::io::ErrorKind::UnexpectedEof => CLOSED.into(),
        _ => format!("control connection: {e}"),
    }
}

/// `OPEN_FWD` / `CLOSE_FWD` of a local forward from a unix socket.
fn forwarding(kind: u32, forward: &Forward) -> Message {
    let message = Message::new(kind).u32(FORWARD_LOCAL).string(&forward.local.to_string_lossy()).u32(STREAMLOCAL);
    match &forward.remote {
        Remote::Port(host, port) => message.string(host).u32(u32::from(*port)),
        Remote::Socket(path) => message.string(path).u32(STREAMLOCAL),
    }
}

/// A request being written: its type, then fields (the request id goes in when sent).
struct Message {
    body: Vec<u8>,
}

impl Message {
    fn new(kind: u32) -> Message {
        Message { body: kind.to_be_bytes().to_vec() }
    }

    fn u32(mut self, value: u32) -> Message {
        self.body.extend_from_slice(&value.to_be_bytes());
        self
    }

    fn string(mut self, text: &str) -> Message {
        self.body.extend_from_slice(&(text.len() as u32).to_be_bytes());
        self.body.extend_from_slice(text.as_bytes());
        self
    }
}

/// A message read from the master, its fields taken in order.
struct Reply {
    body: Vec<u8>,
    at: usize,
    kind: u32,
}

impl Reply {
    fn u32(&mut self) -> Result<u32, String> {
        let bytes = self.body.get(self.at..self.at + 4).ok_or("the ssh master's reply is cut short")?;
        self.at += 4;
        Ok(u32::from_be_bytes(bytes.try_into().expect("four bytes")))
    }

    fn string(&mut self) -> Result<String, String> {
        let length = self.u32()? as usize;
        let bytes = self.body.get(self.at..self.at + length).ok_or("the ssh master's reply is cut short")?;
        self.at += length;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    /// What a reply other than the one hoped for says.
    fn refusal(mut self) -> String {
        match self.kind {
            PERMISSION_DENIED => format!("the ssh master refused: {}", self.string().unwrap_or_default()),
            FAILURE => format!("the ssh master failed: {}", self.string().unwrap_or_default()),
            other => format!("the ssh master answered message {other:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;

    use super::*;

    /// A master on a socket of a temporary directory: answers the hello, then each request
    /// with what `answer` makes of its body (nothing: it closes the connection, as OpenSSH
    /// does on `TERMINATE`); what it was asked is returned at the end.
    fn master(answer: fn(&[u8]) -> Vec<u8>) -> (tempfile::TempDir, PathBuf, std::thread::JoinHandle<Vec<Vec<u8>>>) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cm");
        let listener = UnixListener::bind(&socket).unwrap();
        let served = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let packet = |body: &[u8]| [&(body.len() as u32).to_be_bytes()[..], body].concat();
            s.write_all(&packet(&[0, 0, 0, 1, 0, 0, 0, 4])).unwrap();
            let mut asked = Vec::new();
            loop {
                let mut length = [0u8; 4];
                if s.read_exact(&mut length).is_err() {
                    return asked;
                }
                let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
                s.read_exact(&mut body).unwrap();
                let hello = body[..4] == [0, 0, 0, 1];
                asked.push(body);
                if !hello {
                    let answer = answer(asked.last().unwrap());
                    if answer.is_empty() {
                        return asked;
                    }
                    s.write_all(&packet(&answer)).unwrap();
                }
            }
        });
        (dir, socket, served)
    }

    fn reply(kind: u32, request: &[u8], rest: &[u8]) -> Vec<u8> {
        [&kind.to_be_bytes()[..], &request[4..8], rest].concat()
    }

    #[test]
    fn a_forward_to_a_port_and_one_to_a_socket_are_asked_as_the_protocol_says() {
        let (_dir, socket, served) = master(|request| reply(OK, request, &[]));
        let mut mux = Mux::connect(&socket, Duration::from_secs(2)).unwrap();
        let tcp = Forward { local: "/d/cm.1".into(), remote: Remote::Port("10.0.0.1".into(), 8086) };
        let bus = Forward { local: "/d/cm.2".into(), remote: Remote::Socket("/run/dbus/system_bus_socket".into()) };
        mux.open_forward(&tcp).unwrap();
        mux.close_forward(&bus).unwrap();
        drop(mux);
        let asked = served.join().unwrap();
        let string = |s: &str| [&(s.len() as u32).to_be_bytes()[..], s.as_bytes()].concat();
        let be = |n: u32| n.to_be_bytes().to_vec();
        assert_eq!(asked[0], [be(HELLO), be(4)].concat(), "our hello");
        let fwd = |kind, id, local: &str, host: &str, port| {
            [be(kind), be(id), be(1), string(local), be(0xffff_fffe), string(host), be(port)].concat()
        };
        assert_eq!(asked[1], fwd(OPEN_FWD, 1, "/d/cm.1", "10.0.0.1", 8086));
        assert_eq!(asked[2], fwd(CLOSE_FWD, 2, "/d/cm.2", "/run/dbus/system_bus_socket", 0xffff_fffe));
    }

    #[test]
    fn the_pid_is_read_and_a_refusal_is_quoted() {
        let (_dir, socket, _served) = master(|request| match u32::from_be_bytes(request[..4].try_into().unwrap()) {
            ALIVE_CHECK => reply(ALIVE, request, &4242u32.to_be_bytes()),
            _ => reply(FAILURE, request, &[&7u32.to_be_bytes()[..], b"no way!"].concat()),
        });
        let mut mux = Mux::connect(&socket, Duration::from_secs(2)).unwrap();
        assert_eq!(mux.pid(), Ok(4242));
        assert_eq!(mux.terminate(), Err("the ssh master failed: no way!".into()));
    }

    #[test]
    fn a_master_that_exits_before_answering_terminate_has_said_yes() {
        let (_dir, socket, served) = master(|_| Vec::new());
        let mut mux = Mux::connect(&socket, Duration::from_secs(2)).unwrap();
        assert_eq!(mux.terminate(), Ok(()));
        assert_eq!(served.join().unwrap()[1], [TERMINATE.to_be_bytes(), 1u32.to_be_bytes()].concat());
    }

    #[test]
    fn a_session_s_exit_message_gives_the_status_and_nothing_else_does() {
        let words = |w: &[u32]| w.iter().flat_map(|n| n.to_be_bytes()).collect::<Vec<u8>>();
        assert_eq!(exit_status(&words(&[EXIT_MESSAGE, 7, 255])), Some(255));
        assert_eq!(exit_status(&words(&[EXIT_MESSAGE, 7])), None, "cut short");
        assert_eq!(exit_status(&words(&[0x8000_0008, 7])), None, "a terminal refused");
    }

    #[test]
    fn a_silent_socket_is_an_error_in_time_and_no_socket_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("cm");
        let _listener = UnixListener::bind(&socket).unwrap();
        let started = std::time::Instant::now();
        let err = Mux::connect(&socket, Duration::from_millis(100)).err().unwrap();
        assert_eq!(err, "the ssh master did not answer in time");
        assert!(started.elapsed() < Duration::from_secs(2));
        let err = Mux::connect(&dir.path().join("gone"), Duration::from_millis(100)).err().unwrap();
        assert!(err.ends_with("gone: No such file or directory (os error 2)"), "{err}");
    }
}
