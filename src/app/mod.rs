//! The service API: what a request means.
//!
//! Owns the [`Service`] trait (a [`Request`] in, a [`Response`] out, async),
//! the [`ServiceFactory`] that makes one service per worker, the request's
//! pulled [`RequestBody`], the response [`Body`], and, with the `tower`
//! feature, the adapter that runs a `tower::Service` (an axum `Router`) as
//! one. Does not own connections, framing, keep-alive or limits: the
//! connection answers protocol errors itself, frames the response body
//! (`Content-Length` or chunked), sends no body for HEAD and 304, answers
//! `Expect: 100-continue` when the service first reads the body, and
//! discards a body the service left unread. Every method reaches the
//! service; a panic in it is answered 500 and closes that connection, and
//! the worker goes on serving. docs/apps.md is the guide.
//!
//! Flow:
//! 1. The supervisor holds one `ServiceFactory` (shared, `Send + Sync`).
//! 2. Each worker thread calls `make(worker_index)` while preparing, before it
//!    reports PREPARED; an error there fails the whole generation.
//! 3. Each request becomes a `Request` (its head in the `http` crate's types,
//!    pointing into the read buffer; its body read only as the service pulls
//!    it), and the worker's connections call `call` on that thread-local
//!    service and poll its future on the worker's thread. The static files
//!    skip the `Request`: they answer from the borrowed head
//!    ([`Service::respond_to_head`]).

pub mod body;
pub mod head;
mod request;
pub(crate) mod response;
mod service;
#[cfg(feature = "tower")]
pub mod tower;

pub use body::{BodyError, RequestBody};
pub use request::{Alpn, Connection, Request, Tls};
pub use response::{Body, BoxError, Response};
pub(crate) use service::into_body;
pub use service::{BoxFuture, BoxService, MakeError, Service, ServiceFactory};
