//! Socket syscalls that need raw fds.
//!
//! Two things here cannot be done through std or socket2 with owned values:
//! shutting down a connection that another task owns (drain and force-close
//! reach every open connection of a worker by its fd), and adopting the
//! listening sockets systemd passes as fds 3.. (sd_listen_fds(3)).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Which directions to shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Stop reading: a pending read completes with EOF.
    Read,
    /// Stop writing: the peer gets our FIN (a graceful close of an idle
    /// connection); reading goes on.
    Write,
    /// Both directions: pending reads and writes fail (force-close).
    Both,
}

/// A connection's socket as the worker's registry knows it: taken from a
/// borrow of the stream when the connection registers, used to shut it
/// down from outside its task (drain, force-close).
///
/// It holds the descriptor number, not a borrow (the registry outlives
/// none of its connections but cannot name their lifetimes). The registry
/// removes an entry before its stream closes, and only the worker's own
/// thread uses it, so it cannot name an unrelated, reused descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered(RawFd);

impl Registered {
    pub fn new(fd: BorrowedFd<'_>) -> Registered {
        Registered(fd.as_raw_fd())
    }

    /// A token naming no descriptor (its shutdowns fail with EBADF), for
    /// tests of the registry's bookkeeping.
    pub fn detached() -> Registered {
        Registered(-1)
    }

    /// `shutdown(2)` the connection.
    pub fn shutdown(self, how: Shutdown) -> io::Result<()> {
        let how = match how {
            Shutdown::Read => libc::SHUT_RD,
            Shutdown::Write => libc::SHUT_WR,
            Shutdown::Both => libc::SHUT_RDWR,
        };
        // SAFETY: shutdown takes no pointers; per the type's contract the
        // fd is a live socket owned by a connection of this thread (or -1,
        // which fails with EBADF).
        let rc = unsafe { libc::shutdown(self.0, how) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// The socket of a monoio stream, borrowed for as long as the stream is.
pub fn stream_fd(stream: &monoio::net::TcpStream) -> BorrowedFd<'_> {
    // SAFETY: a monoio TcpStream owns its socket until it is dropped, and
    // the borrow cannot outlive `stream`.
    unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) }
}

/// Whether the peer of a readable connection has closed it (or reset it):
/// a one-byte `MSG_PEEK` that does not wait, so bytes that did arrive (a
/// pipelined request) stay queued for the next read. `false` when bytes
/// are waiting or nothing is (a spurious wake-up).
pub fn peer_closed(fd: BorrowedFd<'_>) -> bool {
    use nix::sys::socket::{recv, MsgFlags};
    let mut byte = [0u8; 1];
    match recv(
        fd.as_raw_fd(),
        &mut byte,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => true,
        Ok(_) => false,
        Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => false,
        Err(_) => true,
    }
}

/// The socket of a monoio listener, borrowed for as long as it is.
pub fn listener_fd(listener: &monoio::net::TcpListener) -> BorrowedFd<'_> {
    // SAFETY: a monoio TcpListener owns its socket until it is dropped, and
    // the borrow cannot outlive `listener`.
    unsafe { BorrowedFd::borrow_raw(listener.as_raw_fd()) }
}

/// accept4(2) without waiting, on a listening socket the caller owns;
/// the new connection comes back owned (and close-on-exec).
pub fn accept_nonblocking(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed (we do not want the peer
    // address); `listener` is borrowed, so open for the call.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative accept4 return is a new fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// First fd systemd passes (SD_LISTEN_FDS_START).
const LISTEN_FDS_START: RawFd = 3;
/// More inherited sockets than this is a misconfiguration, not a server.
const MAX_LISTEN_FDS: usize = 64;

/// Take the sockets passed by systemd socket activation, if any.
///
/// Follows sd_listen_fds(3): only when `LISTEN_PID` is this process; the
/// variables are removed so children do not inherit them. Each fd must be a
/// listening stream socket, else the whole set is refused.
pub fn take_listen_fds() -> io::Result<Vec<OwnedFd>> {
    let pid = match std::env::var("LISTEN_PID") {
        Ok(p) => p,
        Err(_) => return Ok(Vec::new()),
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(Vec::new());
    }
    let count: usize = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("LISTEN_PID is set but LISTEN_FDS is not a number"))?;
    if count > MAX_LISTEN_FDS {
        return Err(io::Error::other(format!(
            "LISTEN_FDS={count} is more than {MAX_LISTEN_FDS}"
        )));
    }
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");

    let mut fds = Vec::with_capacity(count);
    for i in 0..count {
        let raw = LISTEN_FDS_START + i as RawFd;
        // Validate before adopting: fcntl fails with EBADF on a closed fd.
        // SAFETY: F_GETFD reads flags of a descriptor number; no memory.
        if unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
            return Err(io::Error::other(format!(
                "LISTEN_FDS names fd {raw}, which is not open"
            )));
        }
        // SAFETY: the fd is open (checked above), was handed to this process
        // by systemd for it alone (LISTEN_PID matched), and nothing else in
        // the process adopts fds 3.. — so ownership is ours to take, once.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sock = socket2::SockRef::from(&fd);
        if sock.r#type()? != socket2::Type::STREAM || !sock.is_listener()? {
            return Err(io::Error::other(format!(
                "inherited fd {raw} is not a listening stream socket"
            )));
        }
        sock.set_cloexec(true)?;
        fds.push(fd);
    }
    Ok(fds)
}
