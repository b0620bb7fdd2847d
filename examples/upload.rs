//! The upload workload: a POSTed body streamed through SHA-256, its digest
//! answered, with servery's CLI.
//!
//! `cargo run --release --example upload -- serve --bind 127.0.0.1:8080`,
//! then `curl --data-binary @file http://127.0.0.1:8080/digest` prints the
//! same 64 hex digits as `sha256sum file` (without a newline, as the
//! `app-post-4k` benchmark and the axum Router's `/digest` answer). Every path takes POST (and PUT); the body is
//! read chunk by chunk as it arrives (nothing is collected), so memory stays
//! one read buffer whatever the size, up to `--max-body-bytes`. A body past
//! that limit, or malformed, is answered by the server (413, 400) however
//! the service reacts; GET says how to use it.

use std::process::ExitCode;

use http::{header, HeaderValue, Method, StatusCode};
use servery::app::{Body, BodyError, MakeError, Request, Response, Service};
use servery::cli;
use sha2::{Digest, Sha256};

struct Upload;

fn text(status: StatusCode, body: impl Into<Body>) -> Response<Body> {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

impl Service for Upload {
    type Body = Body;

    async fn call(&self, req: Request) -> Response<Body> {
        match *req.method() {
            Method::POST | Method::PUT => {}
            Method::GET | Method::HEAD => {
                return text(StatusCode::OK, "POST a body: its SHA-256 comes back\n")
            }
            _ => {
                let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed\n");
                resp.headers_mut().insert(
                    header::ALLOW,
                    HeaderValue::from_static("GET, HEAD, POST, PUT"),
                );
                return resp;
            }
        }
        let mut body = req.into_body();
        let mut digest = Sha256::new();
        while let Some(chunk) = body.chunk().await {
            match chunk {
                Ok(bytes) => digest.update(&bytes),
                Err(BodyError::TooLarge { .. }) => {
                    return text(StatusCode::PAYLOAD_TOO_LARGE, "413 Content Too Large\n")
                }
                Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
            }
        }
        let hex: String = digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        text(StatusCode::OK, hex)
    }
}

fn main() -> ExitCode {
    servery::telemetry::init_logging("warn");
    let result = cli::parse()
        .and_then(|cli| cli::run(cli, |_config| |_worker: usize| Ok::<_, MakeError>(Upload)));
    result.unwrap_or_else(|e| cli::report(&e))
}
