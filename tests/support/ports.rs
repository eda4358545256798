//! Loopback ports for the servers a test starts in another process (serve, Prometheus, a twin
//! process), handed out so that no one else takes them between the handing out and the bind.
//!
//! A port the kernel picked (`bind(":0")`, then dropped) is free only for a moment: servers
//! that other tests start in this process bind `:0` too and may be given the same port before
//! a slow process (Prometheus) binds it — the test then talks to someone else's server. The
//! ports here come from below the kernel's ephemeral range (32768–60999 by default), which
//! `:0` never hands out, each one once per test binary, and only after a bind on it succeeded.

use std::sync::atomic::{AtomicU16, Ordering};

/// The first port handed out; a slice below the ephemeral range, offset by this process' id
/// so two test binaries running at once start far apart.
fn first() -> u16 {
    20_000 + (std::process::id() % 40) as u16 * 300
}

/// A loopback port that binds now, that this test binary has not handed out before and that
/// the kernel does not hand out for `:0`.
pub(crate) fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(0, first(), Ordering::SeqCst, Ordering::SeqCst);
    loop {
        let port = NEXT.fetch_add(1, Ordering::SeqCst);
        assert!(port < 32_768, "no free port left below the ephemeral range");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
