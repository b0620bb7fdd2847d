//! The "app" workload: a fixed 1 KiB body from a [`Service`], with servery's CLI.
//!
//! `cargo run --release --example hello -- serve --bind 127.0.0.1:8080`
//! answers every GET/HEAD with the same 1 KiB text (other methods: 405 with
//! `Allow`). The body is built once per worker and shared (`Bytes`), so this
//! measures the server and the service API, not the handler.

use std::process::ExitCode;

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use servery::app::{Body, MakeError, Request, Response, Service};
use servery::cli;

/// Body size of the app workload (the seed's "1 KiB app response").
const BODY_BYTES: usize = 1024;

struct Hello {
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
        Hello {
            body: Bytes::from(body),
        }
    }
}

impl Service for Hello {
    type Body = Body;

    async fn call(&self, req: Request) -> Response<Body> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut resp = Response::new(Body::from("405 Method Not Allowed\n"));
            *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return resp;
        }
        let mut resp = Response::new(Body::from(self.body.clone()));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        resp
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
