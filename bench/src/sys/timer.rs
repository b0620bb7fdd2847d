//! A one-shot wake-up timer on a timerfd (timerfd_create(2), `CLOCK_MONOTONIC`, the clock
//! behind `std::time::Instant` on Linux).
//!
//! Why not just the epoll timeout: epoll_wait(2) takes milliseconds, so an open-loop send
//! scheduled 300 µs from now would go out up to 1 ms late and every latency would carry that
//! error. A timerfd wakes the loop with nanosecond resolution (subject to timer slack).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The timerfd plus the deadline it is armed for, so re-arming for the same deadline is free.
pub(crate) struct Timer {
    /// Owned timerfd; closed on drop.
    fd: OwnedFd,
    /// The deadline currently armed, `None` once it fired and was read or when never armed.
    armed: Option<Instant>,
}

impl Timer {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain syscall with constant flags; no pointers.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Self { fd, armed: None })
    }

    /// Arms the timer to fire at `deadline` (must be after `now`). A no-op if already armed
    /// for exactly that deadline.
    pub(crate) fn arm(&mut self, deadline: Instant, now: Instant) -> io::Result<()> {
        if self.armed == Some(deadline) {
            return Ok(());
        }
        // A zero it_value disarms the timer (timerfd_settime(2)), so never pass zero.
        let wait = deadline
            .saturating_duration_since(now)
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(wait.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(wait.subsec_nanos()),
            },
        };
        // SAFETY: `self.fd` is a live timerfd; `spec` is a valid itimerspec that outlives the
        // call; a null old_value is allowed.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = Some(deadline);
        Ok(())
    }

    /// Notes that the armed deadline passed (epoll reported the timer). With edge-triggered
    /// registration nothing has to be read: the next `arm` resets the expiry count.
    pub(crate) fn fired(&mut self) {
        self.armed = None;
    }
}

impl AsFd for Timer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
