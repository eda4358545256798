//! Passing a file descriptor over a unix socket (`SCM_RIGHTS`), as OpenSSH's `mm_send_fd`
//! does: one byte of data carrying one descriptor, which the receiver gets as its own. The
//! ssh master takes a mux session's stdin, stdout and stderr this way (`mux::new_session`).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

/// Sends `fd` over `socket`: the receiver holds a descriptor of the same open file.
pub(super) fn send_fd(socket: &UnixStream, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: CMSG_SPACE computes a size from a size; no memory is touched.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // u64 words: the control buffer is aligned for a cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: an all-zero msghdr is a valid empty message; its pointers are set below.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space as _;
    // SAFETY: the control buffer is `space` bytes, room for one header and one descriptor, so
    // the first header and its data lie inside it; the message points only at live locals.
    let sent = unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
        loop {
            let sent = libc::sendmsg(socket.as_raw_fd(), &message, libc::MSG_NOSIGNAL);
            if sent >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break sent;
            }
        }
    };
    match sent {
        1 => Ok(()),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Err(io::Error::new(io::ErrorKind::WriteZero, "the descriptor was not sent")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;

    /// Receives one descriptor as `mm_receive_fd` does.
    fn receive_fd(socket: &UnixStream) -> RawFd {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control = vec![0u64; 8];
        // SAFETY: as in send_fd; the kernel fills the buffers it is given.
        unsafe {
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &mut iov;
            message.msg_iovlen = 1;
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = 64;
            assert_eq!(libc::recvmsg(socket.as_raw_fd(), &mut message, 0), 1);
            let header = libc::CMSG_FIRSTHDR(&message);
            assert_eq!((*header).cmsg_type, libc::SCM_RIGHTS);
            std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<RawFd>())
        }
    }

    #[test]
    fn a_passed_socket_reaches_the_same_peer() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (mine, far) = UnixStream::pair().unwrap();
        send_fd(&ours, far.as_raw_fd()).unwrap();
        drop(far);
        // SAFETY: the descriptor was just received and is owned by nothing else.
        let mut received = unsafe { UnixStream::from_raw_fd(receive_fd(&theirs)) };
        received.write_all(b"taken\n").unwrap();
        drop(received);
        let mut answer = String::new();
        (&mine).read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "taken\n");
    }
}
