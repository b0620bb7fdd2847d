//! Dispatch: one request head in, one response out, whatever the protocol.
//!
//! The only place the handler (static files, or an app) is called. It knows
//! neither framing nor methods: HTTP/1.1 (`h1`) decides persistence and body
//! skipping around it, HTTP/2 streams will call the same function, and what
//! a method means is the handler's (static files answer OPTIONS and 405
//! themselves; the sender drops the body of a HEAD).
//!
//! Flow:
//! 1. Every request goes to the handler. A panic in the handler is caught here: the
//!    request is answered 500, the connection is closed after it (whatever
//!    it was in the middle of cannot be trusted), the panic is counted
//!    (`servery_handler_panics_total`), and the worker goes on serving its
//!    other connections. This needs `panic = "unwind"`, which the release
//!    profile keeps for that reason (docs/decisions/0004).
//! 2. The request is counted (`servery_requests_total`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::super::Ctx;
use crate::app::Handler;
use crate::http::error::{on_error, Refusal};
use crate::http::{Head, Response};
use crate::telemetry::WorkerStats;

/// A request's answer.
pub(crate) struct Answer {
    pub response: Response,
    /// The handler panicked: close the connection after this answer.
    pub close: bool,
}

/// Answer one request: call the handler, catching a panic. The handler's own state is not
/// poisoned by the unwind (a `RefCell` borrow is released as it unwinds);
/// whether it is still coherent is the handler's concern, as with a panic
/// in any Rust service that keeps running.
pub(crate) fn respond<H: Handler>(ctx: &Ctx<H>, head: &Head<'_>) -> Answer {
    WorkerStats::add(&ctx.stats.requests, 1);
    let handled = catch_unwind(AssertUnwindSafe(|| {
        if let Some(target) = ctx.panic_on.as_deref() {
            if target.as_bytes() == head.target {
                panic!("injected handler panic for {target}");
            }
        }
        ctx.handler.handle(head)
    }));
    match handled {
        Ok(response) => Answer {
            response,
            close: false,
        },
        Err(_) => {
            WorkerStats::add(&ctx.stats.handler_panics, 1);
            tracing::error!(
                target = %String::from_utf8_lossy(head.target),
                "handler panicked: answered 500 and closed the connection"
            );
            Answer {
                response: on_error(&Refusal::HandlerPanicked),
                close: true,
            }
        }
    }
}
