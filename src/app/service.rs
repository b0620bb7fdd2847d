//! The service traits: what a worker calls to answer a request.
//!
//! A [`Service`] lives on one worker thread (it need not be `Send`), is made
//! there by the shared [`ServiceFactory`] before the worker reports PREPARED,
//! and is called through `&self` by every connection of that worker at once:
//! per-worker state goes in `Cell`s and `RefCell`s, without locks.
//! [`BoxService`] is the same thing behind one pointer, for services chosen
//! at run time.
//!
//! The static files answer from the parsed head still in the read buffer
//! ([`Service::respond_to_head`], with [`Service::BORROWS_HEADS`]): building
//! an owned [`Request`] costs ~0.4 µs a request (docs/decisions/0006), which
//! the static hot path does not pay. Every other service gets a `Request`.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use super::{Body, BoxError, Request, Response};
use crate::http::Head;

/// Answers requests on one worker thread.
///
/// ```
/// use servery::app::{Body, Request, Response, Service};
///
/// struct Hello;
///
/// impl Service for Hello {
///     type Body = Body;
///     async fn call(&self, req: Request) -> Response<Body> {
///         let text = format!("hello, {}\n", req.uri().path());
///         Response::new(Body::from(text))
///     }
/// }
/// ```
pub trait Service: 'static {
    /// The response body: [`Body`] (in-memory bytes, a file range sent
    /// zero-copy, or a stream), or any `http_body::Body` of `Bytes`.
    type Body: http_body::Body<Data = Bytes, Error: Into<BoxError>> + 'static;

    /// Answer `req`, whatever its method. The connection sends no body for
    /// a HEAD or a 304, and frames the body itself: `Content-Length` when
    /// the body's size is known, chunked otherwise. A panic is answered 500
    /// and closes the connection; the worker goes on serving.
    fn call(&self, req: Request) -> impl Future<Output = Response<Self::Body>>;

    /// Whether the connection should offer each parsed head to
    /// [`Service::respond_to_head`] before building a `Request`. Off by
    /// default: a service that answers no head that way would parse each
    /// head twice.
    const BORROWS_HEADS: bool = false;

    /// Answer from the parsed head alone, borrowing the read buffer, when
    /// the answer needs neither the body nor an await (the static files).
    /// `conn` is the connection it came on (its TLS facts pick a site).
    /// `None` hands the request to [`Service::call`]. Asked only when
    /// [`Service::BORROWS_HEADS`] is true.
    fn respond_to_head(
        &self,
        head: &Head<'_>,
        conn: &super::Connection,
    ) -> Option<crate::http::Response> {
        let _ = (head, conn);
        None
    }
}

/// Error from building a worker's service.
pub type MakeError = Box<dyn std::error::Error + Send + Sync>;

/// Makes the per-worker service, on the worker's thread.
pub trait ServiceFactory: Send + Sync + 'static {
    type Service: Service;
    /// Build the service for worker `index` (0-based). An error fails the
    /// whole generation (startup or reload) before any worker serves.
    fn make(&self, index: usize) -> Result<Self::Service, MakeError>;
}

impl<F, S> ServiceFactory for F
where
    F: Fn(usize) -> Result<S, MakeError> + Send + Sync + 'static,
    S: Service,
{
    type Service = S;
    fn make(&self, index: usize) -> Result<S, MakeError> {
        self(index)
    }
}

/// A future a [`BoxService`] answers with.
pub type BoxFuture<'a> = Pin<Box<dyn Future<Output = Response<Body>> + 'a>>;

/// The object-safe face of a [`Service`].
trait Erased {
    fn call_boxed(&self, req: Request) -> BoxFuture<'_>;
}

impl<S: Service> Erased for S {
    fn call_boxed(&self, req: Request) -> BoxFuture<'_> {
        let fut = self.call(req);
        Box::pin(async move { fut.await.map(into_body) })
    }
}

/// Any service behind one pointer, its body a [`Body`]: for services picked
/// at run time, at the cost of one allocation per call. It never takes the
/// borrowed-head path.
pub struct BoxService(Box<dyn Erased>);

impl BoxService {
    pub fn new<S: Service>(service: S) -> BoxService {
        BoxService(Box::new(service))
    }
}

impl Service for BoxService {
    type Body = Body;
    fn call(&self, req: Request) -> impl Future<Output = Response<Body>> {
        self.0.call_boxed(req)
    }
}

/// `body` as a [`Body`]: itself when it is one, else a stream of it.
pub(crate) fn into_body<B>(body: B) -> Body
where
    B: http_body::Body<Data = Bytes, Error: Into<BoxError>> + 'static,
{
    let mut slot = Some(body);
    if let Some(own) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Body>>() {
        if let Some(own) = own.take() {
            return own;
        }
    }
    match slot {
        Some(other) => Body::stream(other),
        None => Body::empty(),
    }
}
