//! Level-triggered epoll(7) for sockets (edge-triggered only for the timerfd).
//!
//! Why not `mio::Poll`: mio is edge-triggered, which obliges a reader to call read(2) until it
//! returns `EAGAIN`, i.e. one wasted syscall per response on a keep-alive connection. With
//! level triggering a short read means "drained for now" and the next `wait` reports the socket
//! again if more arrived, which is the syscall profile of wrk (write, epoll_wait, read).
//!
//! Closing a socket removes it from the interest list (epoll(7), "Q6"), so there is no
//! `delete`: the engine never duplicates its fds.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// What a registration waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Readable (including EOF and errors, which epoll always reports).
    Read,
    /// Readable or writable: used while connecting or while a write is incomplete.
    ReadWrite,
    /// Readable, edge-triggered: one event per wake-up. Used for the timerfd, whose
    /// re-arming resets its expiry count (timerfd_settime(2)), so it never needs a read(2).
    ReadEdge,
}

impl Interest {
    fn bits(self) -> u32 {
        match self {
            Interest::Read => libc::EPOLLIN as u32,
            Interest::ReadWrite => (libc::EPOLLIN | libc::EPOLLOUT) as u32,
            Interest::ReadEdge => (libc::EPOLLIN | libc::EPOLLET) as u32,
        }
    }
}

/// An epoll instance; closed on drop.
pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// One readiness report: the registration's token and what is ready.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) token: u64,
    flags: u32,
}

impl Event {
    pub(crate) fn readable(&self) -> bool {
        self.flags & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0
    }

    pub(crate) fn writable(&self) -> bool {
        self.flags & (libc::EPOLLOUT | libc::EPOLLERR) as u32 != 0
    }
}

/// A reusable buffer for `wait` results, allocated once per worker.
pub(crate) struct Events {
    buf: Vec<libc::epoll_event>,
    len: usize,
}

impl Events {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The `i`th event of the last `wait` (`i < len()`).
    pub(crate) fn get(&self, i: usize) -> Event {
        let raw = self.buf[..self.len][i];
        Event {
            token: raw.u64,
            flags: raw.events,
        }
    }
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: plain syscall with a constant flag; no pointers.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Self { fd })
    }

    pub(crate) fn add(&self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    pub(crate) fn modify(
        &self,
        fd: BorrowedFd<'_>,
        token: u64,
        interest: Interest,
    ) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    fn ctl(&self, op: i32, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: interest.bits(),
            u64: token,
        };
        // SAFETY: both fds are live for the call (`fd` is borrowed); `event` is a valid
        // epoll_event the kernel only reads.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd.as_raw_fd(), &mut event) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits for readiness; `None` blocks until an event (the engine's timerfd bounds it).
    /// `EINTR` is reported as zero events.
    pub(crate) fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
        let timeout_ms = match timeout {
            None => -1,
            // Round up so a sub-millisecond timeout is not a busy poll.
            Some(t) => i32::try_from(t.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX),
        };
        let capacity = i32::try_from(events.buf.len()).unwrap_or(i32::MAX);
        // SAFETY: `events.buf` has room for `capacity` epoll_events and stays borrowed
        // mutably for the whole call.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.buf.as_mut_ptr(),
                capacity,
                timeout_ms,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            events.len = 0;
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(err);
        }
        // n <= capacity per epoll_wait(2); the explicit min keeps `get`'s slice in bounds.
        events.len = usize::try_from(n).unwrap_or(0).min(events.buf.len());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::time::Instant;

    #[test]
    fn reports_a_readable_socket_with_its_token() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let epoll = Epoll::new().expect("epoll");
        epoll.add(server.as_fd(), 7, Interest::Read).expect("add");
        let mut events = Events::with_capacity(4);
        epoll.wait(&mut events, Some(Duration::ZERO)).expect("wait");
        assert_eq!(events.len(), 0);
        client.write_all(b"x").expect("write");
        epoll
            .wait(&mut events, Some(Duration::from_secs(2)))
            .expect("wait");
        assert_eq!(events.len(), 1);
        assert_eq!(events.get(0).token, 7);
        assert!(events.get(0).readable());
    }

    #[test]
    fn timer_wakes_wait() {
        let epoll = Epoll::new().expect("epoll");
        let mut timer = crate::sys::timer::Timer::new().expect("timer");
        epoll
            .add(timer.as_fd(), 1, Interest::ReadEdge)
            .expect("add");
        let mut events = Events::with_capacity(4);
        for round in 0..3 {
            let now = Instant::now();
            timer.arm(now + Duration::from_millis(5), now).expect("arm");
            epoll
                .wait(&mut events, Some(Duration::from_secs(2)))
                .expect("wait");
            assert_eq!(events.len(), 1, "round {round}");
            assert!(now.elapsed() >= Duration::from_millis(5));
            timer.fired();
            epoll.wait(&mut events, Some(Duration::ZERO)).expect("wait");
            assert_eq!(events.len(), 0, "a fired timer must report once");
        }
    }
}
