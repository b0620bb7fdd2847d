//! servery: a thread-per-core io_uring HTTP/1.1 server for static files.
//!
//! # Layout
//! - `acme`: ACME (RFC 8555) certificates: account, orders, renewals.
//! - `cli`: the `servery` command line (`serve`, `check-config`, `help`,
//!   `man`, `completions`).
//! - `config`: raw config (file + flags) validated into [`config::Config`].
//! - `supervisor`: a generation of workers: barrier, run, drain.
//! - `control`: what the supervisor and workers say to each other (states,
//!   messages, reports) and its wire form for worker processes.
//! - `worker`: one pinned thread, one monoio runtime, the connection loop.
//! - `net`: listening sockets (reuseport, shared, systemd).
//! - `quic`: connection IDs that name their worker, and the BPF program
//!   steering each datagram of a UDP port to that worker.
//! - `http`: the I/O-free protocol core: parse, errors → status, responses.
//! - `app`: the [`app::Service`] API a server serves (apps, tower, axum).
//! - `sites`: the service the binary serves: virtual hosts by Host and SNI,
//!   each a root of static files; ACME's challenge answers.
//! - `static_files`: one site's files.
//! - `telemetry`: counters, the admin endpoint, logging.
//! - `access_log`: one line per request, formatted per worker, written off them.
//! - `tls`: rustls identity, self-signed material, the shared ticketer.
//! - `sys`: the only module with `unsafe`: syscalls behind safe wrappers.
//! - `choice`: settings that take one word from a list (`choice!`).
//! - `plural`: counts in what servery prints ("1 worker", "2 workers").
//!
//! # Serving a service
//! ```no_run
//! use servery::app::{Body, MakeError, Request, Response, Service};
//! use servery::config::RawConfig;
//!
//! struct Hello;
//!
//! impl Service for Hello {
//!     type Body = Body;
//!     async fn call(&self, req: Request) -> Response<Body> {
//!         Response::new(Body::from(format!("hi from {}\n", req.uri().path())))
//!     }
//! }
//!
//! let config = RawConfig::default().validate().unwrap();
//! let server = servery::Server::new(config, |_worker| Ok::<_, MakeError>(Hello));
//! server.run(|ready| println!("{ready}")).unwrap();
//! ```
//!
//! An axum `Router` is served the same way through `app::tower` (the
//! `tower` feature); docs/apps.md is the guide.

pub mod access_log;
pub mod acme;
pub mod app;
pub mod auth;
mod choice;
pub mod cli;
pub mod config;
pub mod control;
pub mod http;
pub mod net;
mod plural;
pub mod quic;
pub mod sites;
pub mod static_files;
pub mod supervisor;
#[allow(unsafe_code)]
pub mod sys;
pub mod telemetry;
pub mod tls;
pub mod worker;

pub use supervisor::Server;
