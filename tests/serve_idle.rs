//! `opsbook serve` closes connections that send or take nothing for 10 seconds (#36, item 7):
//! one that never sends a byte, one that stops in the middle of its request (half-open, as a
//! slow-loris client leaves it), and a kept-alive one after its answer. Each would otherwise
//! hold a socket for as long as the client likes; the service answers on after them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::serve::{free_port, get, until};
use crate::support::Test;

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
