//! The Handler API: what a request means.
//!
//! Owns: the [`Handler`] trait (a request head in, a [`Response`] out) and the
//! [`HandlerFactory`] that makes one handler per worker. Does not own
//! connections, framing, keep-alive or limits: the connection loop answers
//! protocol errors itself and strips the body from HEAD responses (a handler
//! may answer a HEAD as the GET). Every method reaches the handler; what it
//! does with one it does not serve is its own answer (the static files
//! answer OPTIONS with 204 and others with 405, both with `Allow`). A panic
//! in `handle` is answered 500 and closes that connection; the worker goes
//! on serving.
//!
//! Flow:
//! 1. The supervisor holds one `HandlerFactory` (shared, `Send + Sync`).
//! 2. Each worker thread calls `make(worker_index)` while preparing, before it
//!    reports PREPARED; an error there fails the whole generation.
//! 3. The worker's connections call `handle` on that thread-local handler, so
//!    handlers may keep caches in `RefCell`s without locks.

pub mod body;
pub mod head;

use crate::http::{Head, Response};

/// Answers one request. Lives on one worker thread.
pub trait Handler: 'static {
    /// Answer `head`, whatever its method. The connection sends no body for
    /// a HEAD.
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
