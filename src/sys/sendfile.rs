//! sendfile(2) with an explicit offset, and the socket's O_NONBLOCK flag.
//!
//! Large bodies go from the page cache to the socket without a copy through
//! user space. The offset is passed by pointer, so the file's shared position
//! is never used: concurrent ranges on one cached fd stay correct (the reason
//! we do not use monoio's splice helper, which reads at the file position).
//! The socket is made non-blocking for the duration so a slow reader yields
//! EAGAIN to the event loop instead of blocking the worker thread.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Send up to `count` bytes of `file` from `*offset` to socket `sock`,
/// advancing `*offset` by what was sent.
pub fn sendfile_at(
    sock: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut off = libc::off_t::try_from(*offset)
        .map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
    // SAFETY: `off` is a valid, writable off_t for the call; both fds are
    // borrowed, so open.
    let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off as u64;
    Ok(n as usize)
}

/// Set or clear O_NONBLOCK on `fd`; returns whether it was set before, so
/// the caller can restore it.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<bool> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL reads the flags of a borrowed (open) fd; no memory.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let was = flags & libc::O_NONBLOCK != 0;
    if was != on {
        let new = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        // SAFETY: F_SETFL with an int argument on the same borrowed fd.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, new) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(was)
}

/// Set or clear TCP_CORK on socket `fd`: while set, the kernel sends only
/// full segments; clearing it flushes the rest.
pub fn set_cork(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let v: libc::c_int = i32::from(on);
    // SAFETY: `v` is a valid c_int for the duration of the call and the
    // length passed is its size; `fd` is borrowed, so open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
