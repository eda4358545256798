//! The name of the machine this process runs on (`gethostname(2)`): the one place opsbook asks
//! for it. A host reached over ssh tells its own (`World::hostname`); the twins, the sandbox and
//! the history of `serve` name this machine through here.

/// This machine's host name, or `localhost` when the kernel will not say.
pub fn this_machine() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        return String::from_utf8_lossy(&buf[..end]).into_owned();
    }
    "localhost".into()
}
