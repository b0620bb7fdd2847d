//! `servery-load`: an HTTP/1.1 load generator for benchmarking servery (and any HTTP/1.1
//! server; with `--h3`, any HTTP/3 server), built to cost the client less CPU per request than
//! wrk and to report latency without coordinated omission.
//!
//! # Layout
//! - [`cli`]: command-line syntax, turning arguments into a [`Plan`], printing results.
//! - [`plan`]: what to run, as validated types with documented defaults.
//! - [`validate`]: one request per URL before timing; a wrong status or body stops the run.
//! - [`load`]: worker threads, each a level-triggered epoll loop over its connections;
//!   closed loop, open loop ([`Mode::Open`]), pipelining, churn, error classes.
//! - `http`: request serialization and incremental response framing, no I/O.
//! - [`http3`]: `--h3`, the HTTP/3 client side: QUIC connections (quinn on tokio), requests
//!   and answers on their streams, and the pre-run check over HTTP/3; the engine that drives
//!   it with the same books is [`load::h3`].
//! - [`report`]: the result record, its JSON schema and the human summary.
//! - [`matrix`]: `servery-load matrix`, scenarios × servers × workers × trials against servery,
//!   nginx, h2o and Caddy, with the raw artifact, markdown tables and SVG charts.
//! - [`probe`]: `servery-load probe`, a minimal io_uring responder measuring multishot receive
//!   with provided buffers and zero-copy send against single-shot receive (decision records).
//! - `sys`: the only module allowed `unsafe`: epoll, timerfd, getrusage, affinity, io_uring.
//!
//! # Library use
//! A driver (tests, [`matrix`]) builds a [`Plan`] with [`Plan::new`], adjusts its fields, then
//! calls [`validate::check`] and [`load::run`] (or [`load::run_with`], to sample the server
//! when the timed window opens), getting a [`Report`].

pub mod cli;
pub(crate) mod http;
pub mod http3;
pub mod load;
pub mod matrix;
pub mod plan;
pub mod probe;
pub mod report;
#[allow(unsafe_code)]
pub(crate) mod sys;
pub mod validate;

pub use load::{run, run_with, ErrorClass};
pub use plan::{Mode, Plan};
pub use report::Report;
