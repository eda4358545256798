//! A remote host's change lock, held by a shell of this run's own ssh session on the host.
//!
//! The shell runs in the session a master of this run alone has of its own (`OwnSession`: it
//! runs each line it is sent), or, on a lasting master, which has none, in a session opened on
//! it through its control socket (`Ssh::session`, its stdin and stdout one socket of ours).
//! Either way no new connection. On the host, `SCRIPT` opens `change.lock`, tries `flock -n`
//! on it and answers one line (`Answer`): `held RECORD` (and ends), or, once it wrote this
//! run's record beside the lock, `taken` or `taken-over RECORD` (the record a holder that is
//! gone left behind). It then holds the lock by waiting on its stdin: the line `release`
//! removes the record, unlocks and ends it (`released`); anything else — opsbook killed (the
//! pipe or socket closes), the connection dropped (sshd ends the session) — ends it with the
//! record left, the lock freed by the kernel as the shell exits.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use super::backend::{Backend, Holding, Try};
use super::record::{Answer, Record};
use crate::transport::mux::Mux;
use crate::transport::shell_quote;
use crate::transport::{OwnSession, Ssh};

/// How long the host may take to answer a try, and to confirm a release (set once: the
/// socket keeps it).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The holder, run by `sh -c` on the host with the manager's scope (`system`, `user`) and the
/// record as its arguments. POSIX sh and util-linux's `flock`, which every Debian has. Few
/// programs: a hundred hosts' holders start at once. Root is told by `/run` being writable;
/// closing the lock's only descriptor unlocks it. Each line a whole command: it is sent as one
/// line, its lines joined with `; ` (`command`).
pub(crate) const SCRIPT: &str = r#"exec 2>/dev/null
if [ "$1" = system ] && [ -w /run ]; then d=/run/opsbook
elif [ -n "${XDG_RUNTIME_DIR:-}" ]; then d=$XDG_RUNTIME_DIR/opsbook
else d=/tmp/opsbook-$(id -u); fi
command -v flock >/dev/null || { echo "error flock(1) is not installed on the host (package util-linux)"; exit 0; }
{ [ -d "$d" ] || mkdir -p "$d"; } && exec 9>>"$d/change.lock" || { echo "error cannot open $d/change.lock"; exit 0; }
r=$d/change.json
if ! flock -n 9; then printf 'held %s\n' "$(head -c 4096 "$r" | tr -d '\n')"; exit 0; fi
o=; [ -e "$r" ] && o="$(head -c 4096 "$r" | tr -d '\n')"
printf '%s\n' "$2" >"$r.new" && mv -f "$r.new" "$r" || { echo "error cannot write $r"; exit 0; }
if [ -n "$o" ]; then printf 'taken-over %s\n' "$o"; else echo taken; fi
read -r l
[ "$l" = release ] && rm -f "$r" && exec 9>&- && echo released
"#;

/// The lock of the host `ssh` reaches, for its `system` or `user` manager.
pub struct RemoteLock {
    /// The host's shared ssh connection.
    pub ssh: Arc<Ssh>,
    /// Whether it is the lock of the user's service manager (else the system's).
    pub user_scope: bool,
}

/// A lock held by a session of the master: its control connection and our end of its stdio.
struct RemoteHolding {
    _control: Mux,
    stream: UnixStream,
    released: bool,
}

impl Holding for RemoteHolding {
    /// The holder reads one line: no end of input needs to follow it.
    fn begin_release(&mut self) {
        if !std::mem::replace(&mut self.released, true) {
            let _ = self.stream.write_all(b"release\n");
        }
    }

    /// The record is removed and the lock free once the holder says `released` (it unlocks
    /// before it says so); read up to that word, not to the session's end, which needs one
    /// more exchange with the host.
    fn finish_release(self: Box<Self>) {
        let mut said = Vec::new();
        let mut chunk = [0u8; 64];
        while !said.ends_with(b"released\n") && said.len() < 4096 {
            match (&self.stream).read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => said.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if !said.ends_with(b"released\n") {
            tracing::debug!("a change lock's holder did not confirm its release: {:?}", String::from_utf8_lossy(&said));
        }
    }
}

/// A lock held in the master's own session: the session, lent to it until the release is
/// confirmed.
struct OwnHolding {
    session: OwnSession,
    released: bool,
}

impl Holding for OwnHolding {
    fn begin_release(&mut self) {
        if !std::mem::replace(&mut self.released, true) {
            let _ = self.session.say("release");
        }
    }

    fn finish_release(mut self: Box<Self>) {
        if !self.released {
            self.begin_release();
        }
        match self.session.hear_line(ANSWER_TIMEOUT) {
            Ok(said) if said == "released" => {}
            said => {
                self.session.lose_step();
                tracing::debug!("a change lock's holder did not confirm its release: {said:?}");
            }
        }
    }
}

/// The command that runs the holder on the host, one line: the script quoted once for every
/// host of the run, the scope and the record for each.
fn command(user_scope: bool, record: &Record) -> String {
    static QUOTED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let script =
        QUOTED.get_or_init(|| shell_quote::join(&["sh".to_string(), "-c".into(), one_line(), "opsbook-lock".into()]));
    let scope = if user_scope { "user" } else { "system" };
    format!("{script} {scope} {}", shell_quote::quote(&record.to_line()))
}

/// `SCRIPT` as one line.
fn one_line() -> String {
    SCRIPT.trim_end().replace('\n', "; ")
}

/// What the holder answered, as a try.
fn answered(answer: &str, holding: impl FnOnce() -> Box<dyn Holding>) -> Result<Try, String> {
    match Answer::parse(answer)? {
        Answer::Held(holder) => Ok(Try::Held(holder)),
        Answer::Error(why) => Err(why),
        Answer::TookOver(holder) => Ok(Try::Taken { holding: holding(), took_over: Some(holder) }),
        Answer::Taken => Ok(Try::Taken { holding: holding(), took_over: None }),
    }
}

impl Backend for RemoteLock {
    fn try_take(&self, record: &Record) -> Result<Try, String> {
        let command = command(self.user_scope, record);
        if let Some(mut session) = self.ssh.own_session() {
            let over_it = |e| format!("over the ssh connection's own session: {e}");
            session.say(&command).map_err(over_it)?;
            let answer = session.hear_line(ANSWER_TIMEOUT).map_err(over_it)?;
            if Answer::parse(&answer).is_err() {
                session.lose_step();
            }
            return answered(&answer, || Box::new(OwnHolding { session, released: false }));
        }
        let (mut control, stream) = self.ssh.session(&command)?;
        // The script's answer comes after the master's: one wait for both.
        let answer = read_answer(&stream);
        control.confirm_session()?;
        answered(&answer?, || Box::new(RemoteHolding { _control: control, stream, released: false }))
    }
}

/// The script's first line (or all it said, when it ended without one), within the timeout.
fn read_answer(stream: &UnixStream) -> Result<String, String> {
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 512];
    while !answer.contains(&b'\n') && answer.len() < 8192 {
        match (&*stream).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(format!("the host did not answer within {}s", ANSWER_TIMEOUT.as_secs()));
            }
            Err(e) => return Err(format!("reading the host's answer: {e}")),
        }
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The script as the host runs it (one line), here, in a folder of its own (`XDG_RUNTIME_DIR`, the
    /// user scope): two holders, the release, and a holder killed with its record left behind.
    #[test]
    fn the_hosts_script_holds_refuses_releases_and_reports_what_a_killed_holder_left() {
        if Command::new("flock").arg("-V").output().is_err() {
            assert!(std::env::var_os("OPSBOOK_TEST_REQUIRE_ALL").is_none(), "flock(1) is missing");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let start = |record: &str| {
            let mut child = Command::new("sh")
                .args(["-c", &one_line(), "opsbook-lock", "user", record])
                .env("XDG_RUNTIME_DIR", dir.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            let out = child.stdout.as_mut().unwrap();
            while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
                line.push(byte[0]);
            }
            (child, String::from_utf8(line).unwrap())
        };
        let (mine, other) = (Record::this_run("configure", "metrics-agent"), Record::this_run("stop", ""));
        let (mut first, said) = start(&mine.to_line());
        assert_eq!(said, "taken");
        let (_, said) = start(&other.to_line());
        assert_eq!(Answer::parse(&said), Ok(Answer::Held(super::super::Holder::Known(mine.clone()))));
        first.stdin.as_mut().unwrap().write_all(b"release\n").unwrap();
        let done = first.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&done.stdout), "released\n");
        assert!(!dir.path().join("opsbook/change.json").exists());
        // A holder whose opsbook went away without a word (stdin closed): the record stays.
        let (mut second, said) = start(&other.to_line());
        assert_eq!(said, "taken");
        drop(second.stdin.take());
        second.wait().unwrap();
        let (_, said) = start(&mine.to_line());
        assert_eq!(Answer::parse(&said), Ok(Answer::TookOver(super::super::Holder::Known(other))));
    }
}
