//! servery: a thread-per-core io_uring HTTP/1.1 server for static files.
//!
//! # Layout
//! - `cli`: the `servery` command line (`serve`, `check-config`).
//! - `config`: raw config (file + flags) validated into [`config::Config`].
//! - `supervisor`: a generation of workers: barrier, run, drain.
//! - `control`: what the supervisor and workers say to each other (states,
//!   messages, reports) and its wire form for worker processes.
//! - `worker`: one pinned thread, one monoio runtime, the connection loop.
//! - `net`: listening sockets (reuseport, shared, systemd).
//! - `http`: the I/O-free protocol core: parse, errors → status, responses.
//! - `app`: the [`app::Handler`] API a server serves.
//! - `static_files`: the file handler the binary serves.
//! - `telemetry`: counters, the admin endpoint, logging.
//! - `tls`: rustls identity, self-signed material, the shared ticketer.
//! - `sys`: the only module with `unsafe`: syscalls behind safe wrappers.
//!
//! # Serving a handler
//! ```no_run
//! use servery::{app::MakeError, config::RawConfig, http::{Body, Head, Response, Status}};
//! struct Hello;
//! impl servery::app::Handler for Hello {
//!     fn handle(&self, _: &Head<'_>) -> Response {
//!         Response::new(Status::OK, Body::Bytes(bytes::Bytes::from_static(b"hi\n")))
//!     }
//! }
//! let config = RawConfig::default().validate().unwrap();
//! let server = servery::Server::new(config, |_worker| Ok::<_, MakeError>(Hello));
//! server.run(|ready| println!("{ready}")).unwrap();
//! ```

pub mod app;
pub mod cli;
pub mod config;
pub mod control;
pub mod http;
pub mod net;
pub mod static_files;
pub mod supervisor;
#[allow(unsafe_code)]
pub mod sys;
pub mod telemetry;
pub mod tls;
pub mod worker;

pub use supervisor::Server;
