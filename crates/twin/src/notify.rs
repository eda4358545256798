//! Readiness told to the service manager, as Telegraf and Alloy tell it under their packages'
//! `Type=notify` units (`sd_notify(READY=1)`): one datagram to `$NOTIFY_SOCKET` (a path, or
//! `@name` in the abstract namespace). Without the variable (the sandbox, a shell, a
//! `Type=simple` unit) nothing is sent.

/// Sends `READY=1` when the service manager asked for it; a failure is logged, not fatal.
pub(crate) fn ready() {
    let Some(socket_path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let sent = std::os::unix::net::UnixDatagram::unbound().and_then(|socket| {
        match socket_path.as_encoded_bytes().strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(b"READY=1", &address)
            }
            None => socket.send_to(b"READY=1", &socket_path),
        }
    });
    if let Err(e) = sent {
        tracing::warn!("could not tell the service manager the twin is ready ({socket_path:?}): {e}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ready_reaches_the_socket_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // SAFETY: this test alone reads or writes NOTIFY_SOCKET.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &path) };
        super::ready();
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        let mut buf = [0u8; 32];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}
