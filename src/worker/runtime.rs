//! A worker's runtime: monoio on io_uring with the best setup flags this
//! kernel accepts, or on epoll.
//!
//! Owns the choice of io_uring setup flags and building either runtime.
//! Does not own which driver a worker asks for (`--driver`, in `worker::run`)
//! nor what runs on it (`worker::lifecycle`).

use std::io;

use crate::choice::choice;

use monoio::{IoUringDriver, LegacyDriver, RuntimeBuilder};

choice! {
    /// Which I/O driver the operator asked for.
    pub enum DriverChoice {
        /// io_uring, falling back to epoll where it cannot be set up.
        Auto = "auto",
        /// io_uring or fail.
        Uring = "uring" | "io_uring",
        /// epoll (monoio's legacy driver).
        Epoll = "epoll",
    }
}

/// io_uring setup flags, best first. Completions are delivered as task work;
/// by default the kernel interrupts the task for each (TWA_SIGNAL: an IPI and
/// the sighand lock, ~10 % of a busy worker's CPU here). DEFER_TASKRUN (6.1)
/// runs task work only when we wait for completions, and SINGLE_ISSUER (6.0)
/// lets the kernel skip locking: both hold for a thread-per-core runtime.
/// COOP_TASKRUN (5.19) at least avoids the interrupt. Older kernels get none.
type UringSetup = (&'static str, fn(&mut io_uring::Builder));

const URING_SETUPS: [UringSetup; 3] = [
    ("defer_taskrun", |b| {
        b.setup_single_issuer().setup_defer_taskrun();
    }),
    ("coop_taskrun", |b| {
        b.setup_coop_taskrun().setup_taskrun_flag();
    }),
    ("plain", |_| {}),
];

pub(super) type UringRuntime = monoio::Runtime<monoio::time::TimeDriver<IoUringDriver>>;

/// Build an io_uring runtime with the best setup flags this kernel accepts.
pub(super) fn uring(worker: usize) -> io::Result<UringRuntime> {
    let mut last = None;
    for (name, setup) in URING_SETUPS {
        let mut b = io_uring::IoUring::builder();
        setup(&mut b);
        match RuntimeBuilder::<IoUringDriver>::new()
            .uring_builder(b)
            .enable_timer()
            .build()
        {
            Ok(rt) => {
                tracing::debug!(worker, setup = name, "io_uring runtime built");
                return Ok(rt);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no io_uring setup tried")))
}

/// The runtime on epoll (`--driver epoll`, or `auto` without io_uring).
pub(super) fn epoll() -> io::Result<monoio::Runtime<monoio::time::TimeDriver<LegacyDriver>>> {
    RuntimeBuilder::<LegacyDriver>::new().enable_timer().build()
}
