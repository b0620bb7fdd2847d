//! The HTTP/1.1 client side of the wire, with no I/O: request bytes are serialized once up
//! front, and responses are framed by an incremental parser that is fed whatever a read(2)
//! returned.
//!
//! Owns: request serialization ([`request`]: head and any body, framed by `Content-Length`)
//! and response framing ([`response`]): status,
//! `Content-Length`, chunked transfer coding, close-delimited bodies and keep-alive.
//! Does not own: sockets, timing, or deciding what an unexpected status means (the engine and
//! the validator do that).
//!
//! Flow:
//! 1. [`request::serialize`] builds each URL's request, body included, once; the engine copies
//!    those bytes.
//! 2. The engine hands each read's bytes to [`response::Parser::advance`] in a loop until it
//!    answers `NeedMore`, keeping any unconsumed tail (a partial head or chunk-size line).
//! 3. Body bytes are counted (or hashed by the validator) as slices of the read buffer; they
//!    are never copied.
//! 4. On EOF the engine asks [`response::Parser::on_eof`] whether that completed a response,
//!    was a clean idle close, or truncated one.

pub(crate) mod request;
pub(crate) mod response;
