//! The "app" workload: a fixed 1 KiB body from a `Handler`, with servery's CLI.
//!
//! `cargo run --release --example hello -- serve --bind 127.0.0.1:8080`
//! answers every GET/HEAD with the same 1 KiB text (other methods: 405). The body and its head are
//! prebuilt once per worker, so this measures the server, not the handler.

use std::process::ExitCode;

use bytes::Bytes;
use servery::app::{Handler, MakeError};
use servery::cli;
use servery::http::error::{on_error, Refusal};
use servery::http::response::prebuild_head;
use servery::http::{Body, Fields, Head, Method, Response, Status};

/// Body size of the app workload (the seed's "1 KiB app response").
const BODY_BYTES: usize = 1024;

struct Hello {
    head: Bytes,
    body: Bytes,
}

impl Hello {
    fn new() -> Hello {
        let line = b"Hello from servery! ";
        let body: Vec<u8> = line
            .iter()
            .copied()
            .cycle()
            .take(BODY_BYTES - 1)
            .chain([b'\n'])
            .collect();
        let head = prebuild_head(
            Status::OK,
            &[("Content-Type".into(), "text/plain; charset=utf-8".into())],
            body.len() as u64,
        );
        Hello {
            head,
            body: Bytes::from(body),
        }
    }
}

impl Handler for Hello {
    fn handle(&self, head: &Head<'_>) -> Response {
        if !matches!(head.method, Method::Get | Method::Head) {
            return on_error(&Refusal::MethodNotAllowed);
        }
        Response {
            status: Status::OK,
            fields: Fields::Prebuilt(self.head.clone()),
            body: Body::Bytes(self.body.clone()),
        }
    }
}

fn main() -> ExitCode {
    servery::telemetry::init_logging("warn");
    let result = cli::parse().and_then(|cli| {
        cli::run(cli, |_config| {
            |_worker: usize| Ok::<_, MakeError>(Hello::new())
        })
    });
    result.unwrap_or_else(|e| cli::report(&e))
}
