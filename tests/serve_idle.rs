//! `opsbook serve` closes connections that send or take nothing for 10 seconds (#36, item 7):
//! one that never sends a byte, one that stops in the middle of its request (half-open, as a
//! slow-loris client leaves it), and a kept-alive one after its answer. Each would otherwise
//! hold a socket for as long as the client likes; the service answers on after them.
//!
//! And a request's head must arrive within 10 seconds however steadily it drips (#50 case 6):
//! clients sending a header line every 2 s are closed, and a crowd of them under a low
//! descriptor limit does not keep `/healthz` from answering.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::serve::{get, until};
use crate::support::Test;
use crate::support::ports::free_port;

/// Reads `stream` to its end: what came, and how long after `since` the service closed it.
fn read_until_closed(mut stream: TcpStream, since: Instant) -> (String, Duration) {
    stream.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
    let mut got = Vec::new();
    stream.read_to_end(&mut got).expect("the service closes the connection (not a read timeout)");
    (String::from_utf8_lossy(&got).into_owned(), since.elapsed())
}

#[test]
fn idle_and_half_open_connections_are_closed_after_ten_seconds() {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let running =
        Test::new().args(["serve", "--sandbox", "quick-check@1m", "--listen", &format!("127.0.0.1:{port}")]).spawn();
    until(&format!("{base}/healthz"), 200, Duration::from_secs(30));

    let address = format!("127.0.0.1:{port}");
    let silent = TcpStream::connect(&address).unwrap();
    let silent_since = Instant::now();
    let mut half = TcpStream::connect(&address).unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    let half_since = Instant::now();
    let mut kept = TcpStream::connect(&address).unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let kept_since = Instant::now();

    let (nothing, silent_took) = read_until_closed(silent, silent_since);
    let (partial, half_took) = read_until_closed(half, half_since);
    let (answer, kept_took) = read_until_closed(kept, kept_since);
    assert_eq!(nothing, "");
    assert_eq!(partial, "");
    let answer = regex::Regex::new(r"date: [^\r]+").unwrap().replace(&answer, "date: [DATE]");
    assert_eq!(
        answer,
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 35\r\ndate: [DATE]\r\n\r\n\
         ok: the latest run of 1 job passed\n"
    );
    for (what, took) in [("silent", silent_took), ("half-open", half_took), ("kept-alive", kept_took)] {
        assert!(took >= Duration::from_secs(9) && took < Duration::from_secs(20), "{what}: closed after {took:?}");
    }
    // The service answers on.
    assert_eq!(get(&format!("{base}/healthz")), (200, "ok: the latest run of 1 job passed\n".to_string()));
    running.signal(libc::SIGTERM);
    assert_eq!(running.wait(Duration::from_secs(30)).0.code, 0);
}

/// Connects to `address` and sends a request line, then a header line every 2 s from a thread
/// until the service closes the connection; returns how long after connecting it did (`None`
/// while it stays open past 40 s).
fn slow_drip(address: &str) -> std::thread::JoinHandle<Option<Duration>> {
    let address = address.to_string();
    std::thread::spawn(move || {
        let since = Instant::now();
        let mut stream = TcpStream::connect(&address).ok()?;
        stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\n").ok()?;
        let mut line = 0;
        while since.elapsed() < Duration::from_secs(40) {
            let mut byte = [0u8; 64];
            match stream.read(&mut byte) {
                Ok(0) => return Some(since.elapsed()),
                Ok(_) => return Some(since.elapsed()),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(since.elapsed()),
                Err(_) => {}
            }
            if since.elapsed() >= Duration::from_secs(2 * (line + 1)) {
                line += 1;
                if stream.write_all(format!("X-Drip-{line}: x\r\n").as_bytes()).is_err() {
                    return Some(since.elapsed());
                }
            }
        }
        None
    })
}

#[test]
fn a_request_head_dripping_a_line_every_two_seconds_is_closed_after_ten() {
    let t = Test::new();
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    // The service with few descriptors: 120 dripping clients are more than it can hold at once.
    let mut command = t.command();
    command.args(["serve", "--sandbox", "quick-check@1m", "--listen", &address]);
    command.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    // SAFETY: setrlimit(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            let limit = libc::rlimit { rlim_cur: 96, rlim_max: 96 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = command.spawn().expect("start opsbook serve");
    let base = format!("http://{address}");
    until(&format!("{base}/healthz"), 200, Duration::from_secs(30));

    let drips: Vec<_> = (0..120).map(|_| slow_drip(&address)).collect();
    std::thread::sleep(Duration::from_secs(1));
    // The service answers while the crowd drips: within the head deadline and a second's retry.
    let asked = Instant::now();
    let (_, took) = until(&format!("{base}/healthz"), 200, Duration::from_secs(25));
    let closed: Vec<Option<Duration>> = drips.into_iter().map(|d| d.join().unwrap()).collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(took < Duration::from_secs(25), "/healthz answered after {:?}", asked.elapsed());
    // Every dripping client was closed: those accepted at once after 10 s, the rest 10 s after
    // the service took them (one wave behind).
    let late: Vec<_> = closed.iter().filter(|c| !c.is_some_and(|d| d < Duration::from_secs(32))).collect();
    assert!(late.is_empty(), "{} of 120 dripping clients stayed open: {late:?}", late.len());
    let first_wave = closed.iter().flatten().filter(|d| **d < Duration::from_secs(14)).count();
    assert!(first_wave >= 40, "only {first_wave} were closed within 14 s: {closed:?}");
}
