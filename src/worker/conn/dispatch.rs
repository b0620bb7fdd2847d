//! Dispatch: a request in, a response out, whatever the protocol.
//!
//! The only place the service (static files, or an app) is called. It knows
//! neither framing nor methods: HTTP/1.1 (`h1`, `exchange`) decides
//! persistence and bodies around it, HTTP/2 streams will call the same
//! functions, and what a method means is the service's (static files answer
//! OPTIONS and 405 themselves; the sender drops the body of a HEAD).
//!
//! Flow:
//! 1. Every request goes to the service: [`respond_to_head`] for a service
//!    that answers from the borrowed head (the static files), [`start`]
//!    otherwise. A panic in the service, in its `call` or while its future
//!    is polled, is caught here: the request is answered 500, the connection
//!    is closed after it (whatever it was in the middle of cannot be
//!    trusted), the panic is counted (`servery_handler_panics_total`), and
//!    the worker goes on serving its other connections. This needs
//!    `panic = "unwind"`, which the release profile keeps for that reason
//!    (docs/decisions/0004).
//! 2. The request is counted (`servery_requests_total`).
//! 3. An app's response gets the `[[headers]]` rules that match its path
//!    (the static files set theirs themselves, from their cached entries).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Ctx;
use crate::app::{BodyError, Request, Response, Service};
use crate::http::error::{on_error, Refusal};
use crate::http::rules;
use crate::http::{Head, ParseError};
use crate::telemetry::{Protocol, WorkerStats};

/// A request's answer.
pub(crate) struct Answer {
    pub response: crate::http::Response,
    /// The service panicked: close the connection after this answer.
    pub close: bool,
}

/// Answer one request from its borrowed head, catching a panic; `None` when
/// the service wants the request as a [`Request`] instead. The service's own
/// state is not poisoned by the unwind (a `RefCell` borrow is released as it
/// unwinds); whether it is still coherent is the service's concern, as with
/// a panic in any Rust service that keeps running.
pub(crate) fn respond_to_head<S: Service>(
    ctx: &Ctx<S>,
    head: &Head<'_>,
    conn: &crate::app::Connection,
    protocol: Protocol,
) -> Option<Answer> {
    let handled = catch_unwind(AssertUnwindSafe(|| {
        inject_panic(ctx, head.target);
        ctx.service.respond_to_head(head, conn)
    }));
    match handled {
        Ok(None) => None,
        Ok(Some(response)) => {
            ctx.stats.request(protocol);
            Some(Answer {
                response,
                close: false,
            })
        }
        Err(_) => {
            ctx.stats.request(protocol);
            Some(panicked(ctx, head.target))
        }
    }
}

/// Call the service with `req`: its future, or `None` if `call` itself
/// panicked (counted and logged). The caller pins the future where it
/// keeps it and polls it through [`CatchUnwind`], calling [`panicked`] if
/// that catches one: built this way, the future is stored once, not once
/// in a wrapper and again where it is polled.
pub(crate) fn start<S: Service>(
    ctx: &Ctx<S>,
    req: Request,
    protocol: Protocol,
) -> Option<impl Future<Output = Response<S::Body>> + '_> {
    ctx.stats.request(protocol);
    // The path the `[[headers]]` rules match, kept only when there are any.
    let ruled = (!ctx.header_rules.is_empty()).then(|| req.uri().path().to_owned());
    let called = catch_unwind(AssertUnwindSafe(|| {
        inject_panic(ctx, target_of(req.uri()).as_bytes());
        ctx.service.call(req)
    }));
    match called {
        Ok(fut) => Some(async move {
            let mut resp = fut.await;
            if let Some(path) = ruled {
                rules::set_on_map(&ctx.header_rules, path.as_bytes(), resp.headers_mut());
            }
            resp
        }),
        Err(_) => {
            panicked(ctx, b"(in call)");
            None
        }
    }
}

/// A request-target as sent (origin-form or `*`).
pub(crate) fn target_of(uri: &http::Uri) -> &str {
    uri.path_and_query().map_or(uri.path(), |p| p.as_str())
}

/// The 500 that answers a panic; counted and logged.
pub(crate) fn panicked<S>(ctx: &Ctx<S>, target: &[u8]) -> Answer {
    WorkerStats::add(&ctx.stats.handler_panics, 1);
    tracing::error!(
        target = %String::from_utf8_lossy(target),
        "handler panicked: answered 500 and closed the connection"
    );
    Answer {
        response: on_error(&Refusal::HandlerPanicked),
        close: true,
    }
}

/// Test-only fault: a request for `SERVERY_TEST_FAULT=panic-on=TARGET`
/// panics inside the service call.
fn inject_panic<S>(ctx: &Ctx<S>, target: &[u8]) {
    if let Some(on) = ctx.panic_on.as_deref() {
        if on.as_bytes() == target {
            panic!("injected handler panic for {on}");
        }
    }
}

/// Poll `fut` once, its panic as `Err(())`.
pub(crate) fn poll_caught<F: Future>(
    fut: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<Result<F::Output, ()>> {
    match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
        Ok(Poll::Pending) => Poll::Pending,
        Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
        Err(_) => Poll::Ready(Err(())),
    }
}

/// A future whose panics become `Err(())`.
pub(crate) struct CatchUnwind<F>(pub F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        poll_caught(Pin::new(&mut self.0), cx)
    }
}

/// The answer a broken request body gets; `None` for a client that left.
pub(crate) fn refusal_of(e: BodyError) -> Option<Refusal> {
    match e {
        BodyError::TooLarge { limit } => Some(Refusal::Parse(ParseError::BodyTooLarge {
            length: limit.saturating_add(1),
        })),
        // HTTP/2 and HTTP/3 frame bodies themselves; only HTTP/1.1 finds
        // one malformed.
        BodyError::Malformed => Some(Refusal::Unrepresentable),
        BodyError::TimedOut => Some(Refusal::BodyTimedOut),
        BodyError::Closed => None,
    }
}
