//! HTTP/1.1 protocol core: request heads in, response heads out, no I/O.
//!
//! Owns: parsing (`parse`), the framing rules of RFC 9112 that httparse leaves
//! to us, the error → status mapping (`error`), response serialisation
//! (`response`) and the cached `Date` value (`date`). Does not own sockets,
//! timeouts or the connection loop (`worker::conn`) nor what a request means
//! (`app::Handler`).
//!
//! Flow for one request:
//! 1. `parse(buf, limits)` → `Ok(None)` (need bytes) or a borrowed [`Head`].
//! 2. The connection asks the handler for a [`Response`].
//! 3. `write_head` appends the head (prebuilt or formatted) plus `Date` and
//!    `Connection` to the output buffer; the body follows.

pub mod date;
pub mod error;
pub mod parse;
pub mod response;

pub use error::ParseError;
pub use parse::{parse, Head, Limits, Method, Version};
pub use response::{Body, Fields, FileRange, Part, Persistence, Response, Status};
