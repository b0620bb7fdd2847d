//! Spawning a worker process: its own process group, control socket at fd 3.
//!
//! `setpgid(0, 0)` makes the worker lead a process group, so a kill of its
//! group reaches whatever it starts, and a terminal's Ctrl-C (sent to the
//! foreground group) reaches only the supervisor, which drains the workers.
//! It stays in the supervisor's session on purpose: with scheduler
//! autogroups (`kernel.sched_autogroup_enabled`, on by default in Debian,
//! Ubuntu and Fedora kernels) a new session is a new scheduling group, and a
//! fresh group beside a CPU-bound one was measured runnable but unscheduled
//! for up to a second after a reload (docs/decisions/0014). In the
//! session, a worker is a background group of the terminal's job control,
//! so it ignores SIGTTOU and SIGTTIN: its log lines reach the terminal even
//! under `stty tostop`, instead of stopping it. The control socket is
//! placed at the fixed fd [`CONTROL_FD`] (like systemd's fds from 3) and
//! validated by the worker before use; everything else arrives over it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Where a worker process finds its control socket.
pub const CONTROL_FD: RawFd = 3;

/// Arrange for `cmd` to lead its own process group, ignore the terminal's
/// job-control stops, and find `control` at fd 3.
pub fn prepare(cmd: &mut Command, control: BorrowedFd<'_>) {
    let fd = control.as_raw_fd();
    // SAFETY: between fork and exec only setpgid, signal (to SIG_IGN), dup2
    // and fcntl run, which are async-signal-safe and touch no memory;
    // `control` outlives spawn.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            // SIG_IGN survives exec (signal(7)).
            libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            libc::signal(libc::SIGTTIN, libc::SIG_IGN);
            // dup2 onto itself would keep FD_CLOEXEC: clear it instead.
            let rc = if fd == CONTROL_FD {
                libc::fcntl(CONTROL_FD, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, CONTROL_FD)
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// In a worker process: adopt fd 3 after checking it is a SEQPACKET socket.
pub fn take_control_fd() -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD reads flags of a descriptor number; no memory.
    if unsafe { libc::fcntl(CONTROL_FD, libc::F_GETFD) } < 0 {
        return Err(io::Error::other(
            "no control socket at fd 3: `worker` is started by the supervisor only",
        ));
    }
    // SAFETY: fd 3 is open (checked) and was placed there for this process
    // alone by the supervisor; nothing else in the process adopts it.
    let fd = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    let sock = socket2::SockRef::from(&fd);
    if sock.r#type()? != socket2::Type::SEQPACKET {
        return Err(io::Error::other(
            "fd 3 is not a SOCK_SEQPACKET control socket",
        ));
    }
    sock.set_cloexec(true)?;
    Ok(fd)
}

/// Ignore SIGTERM in this process (the test-only `ignore-drain` fault: a
/// worker that only SIGKILL can stop).
pub fn ignore_sigterm() {
    // SAFETY: installing SIG_IGN runs no handler code, so no async-signal
    // safety question arises.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
}
