//! The only room in this crate where `unsafe` is allowed: thin, safe wrappers over the Linux
//! syscalls the load generator needs and that no allowed crate wraps the way we want.
//!
//! Owns: epoll, level-triggered for sockets ([`epoll`]), a nanosecond-precision wake-up timer ([`timer`]),
//! per-thread CPU accounting ([`rusage`]), CPU pinning ([`affinity`]), and for the matrix the
//! `/proc` clock-tick unit and signals to server processes ([`process`]), and for the probe
//! server a bare io_uring with multishot receive and zero-copy send ([`uring`]).
//! Does not own: sockets (non-blocking `connect` comes from `mio::net::TcpStream`, which is safe)
//! or any policy about when to call these.
//!
//! Flow, as the engine uses it:
//! 1. A worker pins itself with [`affinity::pin`].
//! 2. It creates an [`epoll::Epoll`] and a [`timer::Timer`], registering the timer's fd.
//! 3. Each loop it arms the timer for its next deadline and blocks in [`epoll::Epoll::wait`].
//! 4. It samples [`rusage::thread_cpu`] when the timed window opens and when it stops.
//!
//! Every `unsafe {}` block carries a `// SAFETY:` comment naming the invariant it relies on.

pub(crate) mod affinity;
pub(crate) mod epoll;
pub(crate) mod process;
pub(crate) mod rusage;
pub(crate) mod timer;
pub(crate) mod uring;
