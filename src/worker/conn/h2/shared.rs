//! What the streams of one HTTP/2 connection tell it and share: the
//! output budget's counts (`outbox`), client resets counted against
//! `--h2-max-resets`, a request to end the connection, and the fields every
//! response of the connection carries (`alt-svc`), HPACK-encoded once.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::outbox::Outbox;
use crate::http::h2::hpack::encode;
use crate::http::h2::ErrorCode;
use crate::telemetry::WorkerStats;

/// The window `--h2-max-resets` counts over.
pub(crate) const RESET_WINDOW: Duration = Duration::from_secs(10);

/// What the streams of one connection tell it, and share.
pub(super) struct Shared {
    /// The DATA the streams have handed over and the socket has not taken.
    pub(super) outbox: Rc<Outbox>,
    /// Client resets in the current window: (window start, count).
    resets: Cell<Option<(Instant, usize)>>,
    /// The connection should end: gracefully (`NO_ERROR`, after a panic)
    /// or at once (`ENHANCE_YOUR_CALM`, too many resets).
    pub(super) goaway: Cell<Option<ErrorCode>>,
    /// The connection's `Alt-Svc` (a TLS connection where HTTP/3 is on).
    pub(super) alt_svc: Option<http::HeaderValue>,
    /// The same, HPACK-encoded.
    alt_svc_field: Vec<u8>,
}

impl Shared {
    pub(super) fn new(outbox: Rc<Outbox>, alt_svc: Option<http::HeaderValue>) -> Shared {
        let mut alt_svc_field = Vec::new();
        if let Some(v) = &alt_svc {
            encode::field(&mut alt_svc_field, b"alt-svc", v.as_bytes());
        }
        Shared {
            outbox,
            alt_svc,
            alt_svc_field,
            resets: Cell::new(None),
            goaway: Cell::new(None),
        }
    }

    /// The `alt-svc` field HPACK-encoded (empty without one).
    pub(super) fn alt_svc_field(&self) -> &[u8] {
        &self.alt_svc_field
    }

    /// Count one client reset; past `max` in [`RESET_WINDOW`], ask for
    /// GOAWAY ENHANCE_YOUR_CALM.
    pub(super) fn reset_by_client(&self, stats: &WorkerStats, max: usize) {
        WorkerStats::add(&stats.h2_resets, 1);
        let now = Instant::now();
        let (start, n) = match self.resets.get() {
            Some((start, n)) if now.duration_since(start) < RESET_WINDOW => (start, n + 1),
            _ => (now, 1),
        };
        self.resets.set(Some((start, n)));
        if n > max {
            self.goaway.set(Some(ErrorCode::ENHANCE_YOUR_CALM));
        }
    }

    /// Where a stream's response goes: the outbox, with the `Alt-Svc`.
    pub(super) fn out(&self) -> (&Outbox, Option<&http::HeaderValue>) {
        (&self.outbox, self.alt_svc.as_ref())
    }

    pub(super) fn end_gracefully(&self) {
        if self.goaway.get().is_none() {
            self.goaway.set(Some(ErrorCode::NO_ERROR));
        }
    }
}
