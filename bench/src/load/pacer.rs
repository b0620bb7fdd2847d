//! Open-loop scheduling: the intended send time of each request, from which latency counts.
//!
//! Times come from the request's index (`first + k * interval`), never from when the previous
//! request actually went out, so a stalled server cannot slow the schedule down. That is what
//! keeps coordinated omission out of the numbers (Gil Tene, "How NOT to measure latency").

use std::time::{Duration, Instant};

/// One worker's share of the schedule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pacer {
    /// Intended time of request 0.
    first: Instant,
    /// Nanoseconds between intended times.
    interval_ns: f64,
    /// Index of the next request to send.
    next: u64,
}

impl Pacer {
    /// `rate` requests per second starting at `start`, shifted by `phase` (0..1) of one
    /// interval so that workers sharing a total rate interleave instead of bursting together.
    pub(crate) fn new(start: Instant, rate: f64, phase: f64) -> Pacer {
        let interval_ns = 1e9 / rate;
        Pacer {
            first: start + nanos(interval_ns * phase),
            interval_ns,
            next: 0,
        }
    }

    /// Intended send time of the next request.
    pub(crate) fn due(&self) -> Instant {
        self.at(self.next)
    }

    pub(crate) fn advance(&mut self) {
        self.next += 1;
    }

    /// Requests not yet sent whose intended time falls in `[from, until)`.
    pub(crate) fn unsent(&self, from: Instant, until: Instant) -> u64 {
        let index_at = |t: Instant| -> u64 {
            // First index whose intended time is >= t.
            let since = t.saturating_duration_since(self.first).as_nanos() as f64;
            let mut k = (since / self.interval_ns).ceil() as u64;
            while k > 0 && self.at(k - 1) >= t {
                k -= 1;
            }
            while self.at(k) < t {
                k += 1;
            }
            k
        };
        let lo = index_at(from).max(self.next);
        index_at(until).saturating_sub(lo)
    }

    fn at(&self, k: u64) -> Instant {
        self.first + nanos(k as f64 * self.interval_ns)
    }
}

fn nanos(ns: f64) -> Duration {
    Duration::from_nanos(ns.max(0.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_does_not_drift_and_counts_unsent() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 1000.0, 0.5);
        assert_eq!(p.due(), t0 + Duration::from_micros(500));
        for _ in 0..1000 {
            p.advance();
        }
        assert_eq!(p.due(), t0 + Duration::from_micros(1_000_500));
        // Intended times 1.0005s, 1.0015s, ... in [1s, 1.01s): ten of them.
        let from = t0 + Duration::from_secs(1);
        assert_eq!(p.unsent(from, from + Duration::from_millis(10)), 10);
        // A window that starts later than `next` only counts from its start.
        assert_eq!(
            p.unsent(
                from + Duration::from_millis(5),
                from + Duration::from_millis(10)
            ),
            5
        );
    }
}
