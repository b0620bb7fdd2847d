//! The Handler API: what a request means.
//!
//! Owns: the [`Handler`] trait (a request head in, a [`Response`] out) and the
//! [`HandlerFactory`] that makes one handler per worker. Does not own
//! connections, framing, keep-alive, limits or methods other than GET/HEAD:
//! the connection loop answers OPTIONS, 405 and protocol errors itself, and
//! strips the body from HEAD responses, so a handler only ever answers a GET
//! (and may ignore whether it was a HEAD).
//!
//! Flow:
//! 1. The supervisor holds one `HandlerFactory` (shared, `Send + Sync`).
//! 2. Each worker thread calls `make(worker_index)` while preparing, before it
//!    reports PREPARED; an error there fails the whole generation.
//! 3. The worker's connections call `handle` on that thread-local handler, so
//!    handlers may keep caches in `RefCell`s without locks.

use crate::http::{Head, Response};

/// Answers one request. Lives on one worker thread.
pub trait Handler: 'static {
    /// Answer a GET or HEAD for `head`. The connection sends no body for HEAD.
    fn handle(&self, head: &Head<'_>) -> Response;
}

/// Error from building a worker's handler.
pub type MakeError = Box<dyn std::error::Error + Send + Sync>;

/// Makes the per-worker handler.
pub trait HandlerFactory: Send + Sync + 'static {
    type Handler: Handler;
    /// Build the handler for worker `index` (0-based), on that worker's thread.
    fn make(&self, index: usize) -> Result<Self::Handler, MakeError>;
}

impl<F, H> HandlerFactory for F
where
    F: Fn(usize) -> Result<H, MakeError> + Send + Sync + 'static,
    H: Handler,
{
    type Handler = H;
    fn make(&self, index: usize) -> Result<H, MakeError> {
        self(index)
    }
}
