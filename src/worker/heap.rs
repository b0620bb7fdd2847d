//! Memory given back after a burst: once a second a thread of the worker's
//! process looks at how much the C heap holds free, and when that grew by
//! [`TRIM_AFTER_BYTES`] since the last look that gave memory back, it has
//! malloc give its free pages to the kernel (`sys::heap::trim`).
//!
//! Why: a burst (ten thousand HTTP/2 streams, a flood of connections) frees
//! its memory in many small pieces spread over the arena, which malloc
//! keeps; RSS then stays at the high-water mark until the next burst reuses
//! it. docs/decisions/0011 has the measurements and the options weighed.
//!
//! Why a thread of its own, and not a worker's timer: a trim walks every
//! arena, about 10 ms after such a burst, which a worker's event loop would
//! spend not serving. On its own thread, at a lower priority, a worker
//! waits only if it allocates while its own arena is being walked. One
//! thread per process: the heap is the process's, shared by its worker
//! threads.

use std::sync::Once;
use std::time::{Duration, Instant};

use crate::sys::heap;

/// How often the heap is looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Free heap growth that makes a trim worth its walk: far above the churn
/// of steady serving (a few connections' buffers), well below what a burst
/// that RSS would show frees (20 TLS connections of 100 streams free 13 MiB).
const TRIM_AFTER_BYTES: usize = 8 * 1024 * 1024;
/// The thread's nice increment: it yields to the workers.
const NICE_INCREMENT: i32 = 10;

/// Start the process's thread, once; later calls do nothing.
pub(super) fn start() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("servery-heap".into())
            .spawn(run);
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the heap thread; freed memory stays with malloc");
        }
    });
}

fn run() {
    if let Err(e) = crate::sys::priority::lower_current_thread(NICE_INCREMENT) {
        tracing::debug!(error = %e, "heap thread keeps its priority");
    }
    let mut look = Look::default();
    loop {
        std::thread::sleep(CHECK_EVERY);
        let free = heap::stats().free;
        if look.should_trim(free) {
            let started = Instant::now();
            let released = heap::trim();
            tracing::debug!(
                free_mib = free / (1024 * 1024),
                released,
                took = ?started.elapsed(),
                "gave the heap's free pages back"
            );
        }
    }
}

/// The free bytes to grow past before the next trim.
#[derive(Debug, Default)]
struct Look {
    floor: Option<usize>,
}

impl Look {
    /// Whether `free` bytes, seen now, call for a trim.
    fn should_trim(&mut self, free: usize) -> bool {
        // The floor follows the free bytes down (memory reused), so a later
        // burst is measured from there.
        let floor = self.floor.map_or(free, |f| f.min(free));
        let trim = free >= floor + TRIM_AFTER_BYTES;
        // After a trim the free chunks stay free (their pages are gone):
        // the next burst is measured from here.
        self.floor = Some(if trim { free } else { floor });
        trim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn a_trim_follows_a_burst_of_freed_memory_once() {
        let mut look = Look::default();
        assert!(!look.should_trim(2 * MIB));
        assert!(
            !look.should_trim(9 * MIB),
            "7 MiB freed is below the threshold"
        );
        assert!(look.should_trim(12 * MIB), "10 MiB freed since the floor");
        // Nothing more was freed: no second walk.
        assert!(!look.should_trim(12 * MIB));
        // The memory is reused, then freed again: another trim.
        assert!(!look.should_trim(MIB));
        assert!(look.should_trim(10 * MIB));
    }
}
