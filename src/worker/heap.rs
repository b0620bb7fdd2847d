//! Memory given back after a burst: once a second a worker looks at how
//! much the C heap holds free, and when that grew by [`TRIM_AFTER_BYTES`]
//! since the last look that gave memory back, it has malloc give its free
//! pages to the kernel (`sys::heap::trim`).
//!
//! Why here and not per connection: a burst (ten thousand HTTP/2 streams,
//! a flood of connections) frees its memory in many small pieces spread
//! over the arena, which malloc keeps; RSS then stays at the high-water
//! mark until the next burst reuses it. A trim costs a walk of the arenas
//! (about a millisecond after such a burst), so it runs on a timer, off
//! the request path, and only after memory was freed.
//! docs/decisions/0011 has the measurements and the options weighed.
//!
//! One look per process per interval, whichever worker's timer comes first:
//! the heap is the process's, shared by its worker threads.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sys::heap;

/// How often a worker looks.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Free heap growth that makes a trim worth its walk: far above the churn
/// of steady serving (a few connections' buffers), far below a burst that
/// RSS would show.
const TRIM_AFTER_BYTES: usize = 8 * 1024 * 1024;

/// The process's last look: when, and the free bytes to grow past.
static LOOK: Mutex<Option<(Instant, usize)>> = Mutex::new(None);

/// Look once per [`CHECK_EVERY`] for the worker's whole life.
pub(super) async fn give_back() {
    loop {
        monoio::time::sleep(CHECK_EVERY).await;
        look(Instant::now());
    }
}

/// One look, unless another worker of the process looked within the interval.
fn look(now: Instant) {
    let Ok(mut last) = LOOK.try_lock() else {
        return;
    };
    if let Some((when, _)) = *last {
        if now.duration_since(when) < CHECK_EVERY / 2 {
            return;
        }
    }
    let free = heap::stats().free;
    let floor = match *last {
        // The floor follows the free bytes down (memory reused), so a later
        // burst is measured from there.
        Some((_, floor)) => floor.min(free),
        None => free,
    };
    if free >= floor + TRIM_AFTER_BYTES {
        let started = Instant::now();
        let released = heap::trim();
        tracing::debug!(
            free_mib = free / (1024 * 1024),
            released,
            took = ?started.elapsed(),
            "gave the heap's free pages back"
        );
    }
    // After a trim the free chunks stay free (their pages are gone):
    // measure the next burst from here.
    let floor = if free >= floor + TRIM_AFTER_BYTES {
        free
    } else {
        floor
    };
    *last = Some((now, floor));
}
