//! HTTP/2 answers as HTTP/1.1 does: every static-file behaviour and every
//! app case, asked the same over both protocols, gets the same status,
//! body bytes and representation fields; and what only HTTP/2 has (flow
//! control, concurrent streams, trailers as frames, ALPN and h2c
//! negotiation, its metrics) does what it says.
//!
//! The client is the `h2` crate's, on a tokio current-thread runtime of the
//! test's own (`common::h2`); HTTP/1.1 is raw bytes as in the other suites.
//! Every case runs under both drivers. By file:
//! - `h2/static_files.rs`: the real binary's files: bodies, HEAD,
//!   conditionals, ranges, precompressed variants, directories, header
//!   rules, containment, methods; an 8 MiB file through the default
//!   windows; concurrent streams.
//! - `h2/app.rs`: a Rust service in this process (`AppServer`): bodies,
//!   body limits, request and response trailers, streamed responses,
//!   panics, a service that stops reading, the connection facts.
//! - `h2/auth.rs`: `[[auth]]`, Basic authentication, over both protocols,
//!   and its limits (a thousand wrong passwords within a CPU budget).
//! - `h2/negotiation.rs`: h2c beside HTTP/1.1, `--h2c off`, ALPN over TLS,
//!   the HTTP/2 metrics.

#[macro_use]
mod common;

#[path = "h2/app.rs"]
mod app;
#[path = "h2/auth.rs"]
mod auth;
#[path = "h2/cors.rs"]
mod cors;
#[path = "h2/negotiation.rs"]
mod negotiation;
#[path = "h2/site_pages.rs"]
mod site_pages;
#[path = "h2/static_files.rs"]
mod static_files;
