//! HTTP protocol cores: request heads in, response heads out, no I/O.
//! HTTP/2's frames, HPACK and connection state are `h2`'s (RFC 9113, RFC 7541).
//!
//! Owns: parsing (`parse`), the Host grammar (`host`), request-body framing
//! (`body`) and the chunked decoder under it (`chunked`), the token grammar
//! they share (`token`), every refusal and the one place that answers it
//! (`error`'s `on_error`), response serialisation (`response`), the
//! `[[headers]]` rules every kind of response gets (`rules`) and the cached
//! `Date` value (`date`), and what every protocol's response gets before it
//! is encoded: its length, `Server`, the fields the connection owns
//! (`finish`). Does not own sockets, timeouts or the connection loop
//! (`worker::conn`) nor what a request means (`app::Service`).
//!
//! Flow for one request:
//! 1. `parse(buf, limits)` → `Ok(None)` (need bytes) or a borrowed [`Head`].
//! 2. `body::Framing::of(head, max_body)` says which following bytes are its
//!    body; its `body::Decoder` takes them from the buffered bytes as they
//!    arrive (counted down, or chunked through `chunked::Decoder`), saying
//!    where the body bytes lie and where the next request starts.
//! 3. The connection asks the service for a [`Response`] (or answers a
//!    [`Refusal`] with [`on_error`]).
//! 4. `write_head` formats the head (prebuilt or from fields) plus `Date`
//!    and `Connection` into the connection's head buffer; the body follows
//!    from where it lives.

pub mod body;
pub mod chunked;
pub mod date;
pub mod error;
pub mod finish;
pub mod h2;
pub mod host;
pub mod parse;
pub mod response;
pub mod rules;
pub mod token;

pub use error::{on_error, ParseError, Refusal};
pub use parse::{parse, Head, Limits, Method, TransferEncoding, Version};
pub use response::{Body, Fields, FileRange, Part, Persistence, Response, Status};
