//! Dispatch: one request head in, one response out, whatever the protocol.
//!
//! The only place the handler (static files, or an app) is called. It knows
//! methods, not framing: HTTP/1.1 (`h1`) decides persistence and body
//! skipping around it, and HTTP/2 streams will call the same function.
//! Refusals it makes (405) go through `http::on_error` like every other.
//!
//! Flow:
//! 1. GET and HEAD go to the handler (it answers both alike; the sender drops
//!    the body of a HEAD).
//! 2. OPTIONS is answered here: 204 with `Allow`.
//! 3. Any other method is a 405 with `Allow`.

use super::super::Ctx;
use crate::app::Handler;
use crate::http::error::{on_error, Refusal, ALLOW};
use crate::http::{Body, Head, Method, Response, Status};
use crate::telemetry::WorkerStats;

/// Answer one request.
pub(crate) fn respond<H: Handler>(ctx: &Ctx<H>, head: &Head<'_>) -> Response {
    WorkerStats::add(&ctx.stats.requests, 1);
    match head.method {
        Method::Get | Method::Head => ctx.handler.handle(head),
        Method::Options => Response::new(Status::NO_CONTENT, Body::Empty).header("Allow", ALLOW),
        Method::Other => on_error(&Refusal::MethodNotAllowed),
    }
}
