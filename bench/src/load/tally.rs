//! Per-worker counters for the timed window, merged into one at the end.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Highest latency the histogram tracks: one hour in microseconds. Anything slower is clamped,
/// and a request that slow has long since timed out anyway.
const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Three significant digits: 0.1% value error, the usual HdrHistogram setting.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Why a request failed. Each failed timed request counts once, in exactly one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The TCP connection could not be established (counted per attempt).
    Connect,
    /// Reset, EOF before the response head was complete, a malformed head, or a write failure.
    Read,
    /// No complete response within the per-request timeout.
    Timeout,
    /// A complete response with a status other than the expected one.
    Status,
    /// The body ended before its Content-Length, or its chunked framing was broken.
    ShortBody,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 5] = [
        ErrorClass::Connect,
        ErrorClass::Read,
        ErrorClass::Timeout,
        ErrorClass::Status,
        ErrorClass::ShortBody,
    ];

    /// The name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Read => "read",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Status => "status",
            ErrorClass::ShortBody => "short_body",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What one worker saw in the timed window.
pub(crate) struct Tally {
    /// Timed requests answered completely with the expected status.
    pub(crate) requests: u64,
    /// Response bytes (heads, framing and bodies) of the requests counted in `requests`, so
    /// that bytes/s and requests/s describe the same responses.
    pub(crate) bytes: u64,
    errors: [u64; ErrorClass::ALL.len()],
    /// Connections opened during the window.
    pub(crate) connects: u64,
    /// Open loop: requests scheduled inside the window that were never sent.
    pub(crate) unsent: u64,
    /// Timed requests sent but still unanswered when the run stopped.
    pub(crate) unfinished: u64,
    /// Latency of every counted request, in microseconds.
    pub(crate) latency: Histogram<u64>,
    /// CPU time this worker's thread used during the window.
    pub(crate) cpu: Duration,
    /// When the worker stopped counting (the window's end, or its last answer with `requests`).
    pub(crate) stopped: Option<Instant>,
}

impl Tally {
    pub(crate) fn new() -> Tally {
        Tally {
            requests: 0,
            bytes: 0,
            errors: [0; ErrorClass::ALL.len()],
            connects: 0,
            unsent: 0,
            unfinished: 0,
            latency: histogram(),
            cpu: Duration::ZERO,
            stopped: None,
        }
    }

    pub(crate) fn error(&mut self, class: ErrorClass) {
        self.errors[class.index()] += 1;
    }

    pub(crate) fn errors(&self, class: ErrorClass) -> u64 {
        self.errors[class.index()]
    }

    pub(crate) fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.requests += 1;
        self.latency.saturating_record(us.max(1));
    }

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.bytes += other.bytes;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        self.connects += other.connects;
        self.unsent += other.unsent;
        self.unfinished += other.unfinished;
        // Same bounds on both sides, so adding cannot fail; saturate rather than drop data if
        // that ever changes.
        if self.latency.add(&other.latency).is_err() {
            for v in other.latency.iter_recorded() {
                self.latency
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        self.cpu += other.cpu;
        self.stopped = self.stopped.max(other.stopped);
    }
}

/// An empty latency histogram, microseconds, with the bounds every tally uses.
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid: 1 <= low, high >= 2 * low, sigfig <= 5")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_histograms() {
        let mut a = Tally::new();
        let mut b = Tally::new();
        a.record(Duration::from_micros(100));
        b.record(Duration::from_micros(300));
        b.error(ErrorClass::Timeout);
        a.merge(&b);
        assert_eq!(a.requests, 2);
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.errors(ErrorClass::Timeout), 1);
        assert!(a.latency.max() >= 300);
    }
}
