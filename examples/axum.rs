//! An axum app on servery: the Router of `examples/axum/routes.rs` (a JSON
//! route, a path parameter, a POST that reads JSON, a digest of a POSTed
//! body) served on servery's pinned workers through the tower adapter, with
//! all of servery's command line: the barrier, drains, SIGHUP reload,
//! crash restart, thread or process isolation, the admin listener.
//!
//! `cargo run --release --example axum -- serve --bind 127.0.0.1:8080`
//!
//! then `curl 127.0.0.1:8080/json`, `curl 127.0.0.1:8080/items/7`,
//! `curl -d '{"name":"a","n":1}' -H 'content-type: application/json'
//! 127.0.0.1:8080/echo`. The same Router on `axum::serve` and tokio is
//! `examples/axum_tokio.rs`, which the benchmark compares it with.
//!
//! Each worker gets its own clone of the Router (`app::tower::factory`);
//! no tokio runtime is started, since nothing in the Router needs one
//! (docs/apps.md, "What needs tokio").

#[path = "axum/routes.rs"]
mod routes;

use std::process::ExitCode;

use servery::app::tower;
use servery::cli;

fn main() -> ExitCode {
    servery::telemetry::init_logging("warn");
    let router = routes::router();
    let result =
        cli::parse().and_then(|cli| cli::run(cli, move |_config| tower::factory(router.clone())));
    result.unwrap_or_else(|e| cli::report(&e))
}
