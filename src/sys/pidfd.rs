//! Process file descriptors (Linux 5.3+): race-free handles on children.
//!
//! A pid can be reused once reaped; a pidfd cannot. We open one right after
//! spawning (the child is unreaped, so the pid is still ours), poll it for
//! exit, signal through it (pidfd_send_signal, 5.1), and reap with
//! waitid(P_PIDFD) (5.4). [`probe`] tells once whether this kernel has them.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// How children are watched on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildWatch {
    /// pidfd_open, poll, pidfd_send_signal, waitid(P_PIDFD).
    Pidfd,
    /// SIGCHLD plus a waitpid(WNOHANG) sweep over every child.
    Sigchld,
}

impl ChildWatch {
    pub fn name(self) -> &'static str {
        match self {
            ChildWatch::Pidfd => "pidfd",
            ChildWatch::Sigchld => "sigchld",
        }
    }
}

/// Whether pidfds work here (probed once on our own pid).
pub fn probe() -> ChildWatch {
    static PROBE: OnceLock<ChildWatch> = OnceLock::new();
    *PROBE.get_or_init(|| match open(std::process::id()) {
        Ok(_) => ChildWatch::Pidfd,
        Err(_) => ChildWatch::Sigchld,
    })
}

/// pidfd_open(2) for `pid`.
pub fn open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative return is a new fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// pidfd_send_signal(2): signal the process behind `pidfd`.
pub fn send_signal(pidfd: BorrowedFd<'_>, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: null siginfo is allowed (like kill(2)); flags must be 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Block until the process behind `pidfd` exits (the fd turns readable).
pub fn wait_readable(pidfd: BorrowedFd<'_>) -> io::Result<()> {
    loop {
        let mut p = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut p, 1, -1) };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// kill(2) a whole process group (the worker's session leader's group).
pub fn kill_group(pgid: u32, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: killpg takes integers only.
    if unsafe { libc::killpg(pgid as libc::pid_t, signal) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// kill(2) one process by pid (the SIGCHLD fallback, where no pidfd exists;
/// only for a child we have not reaped, so the pid is still ours).
pub fn kill(pid: u32, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes integers only.
    if unsafe { libc::kill(pid as libc::pid_t, signal) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
