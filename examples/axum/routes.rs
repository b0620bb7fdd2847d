//! One axum `Router`, served by two runtimes so that a benchmark compares the runtimes and not
//! the apps: servery's pinned workers (`examples/axum.rs`) and axum's own `axum::serve` on a
//! tokio current-thread runtime (`examples/axum_tokio.rs`). Both include this file with
//! `#[path = "axum/routes.rs"] mod routes;`, so there is exactly one definition of the app.
//!
//! Routes (anything else is the Router's own 404):
//! - `GET /json`: a fixed 65-byte JSON object, serialized on every request
//!   (`servery-load matrix`'s `app-json` scenario expects exactly those bytes; the tests
//!   below pin them).
//! - `GET /items/{id}`: JSON naming the path parameter; an id that is not a `u64` is axum's 400.
//! - `POST /echo`: a JSON body `{"name": string, "n": u64}` answered as `{"name", "n": n + 1}`
//!   (saturating, so `u64::MAX` stays `u64::MAX` rather than overflowing).
//! - `POST /digest`: the whole body's SHA-256 as 64 lowercase hex digits, `text/plain`, no
//!   newline (`app-post-4k` expects exactly that). The body is collected first, so axum's
//!   default 2 MB body limit applies (413 above it).
//!
//! No state, no middleware: what is measured is routing, extraction, serialization and the
//! runtime underneath.

use axum::body::Bytes;
use axum::extract::Path;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The answer of `GET /json`, built from a `const` so only its serialization costs per request.
#[derive(Serialize)]
struct Hello {
    message: &'static str,
    server: &'static str,
    app: &'static str,
    n: u64,
}

const HELLO: Hello = Hello {
    message: "Hello, World!",
    server: "servery",
    app: "axum",
    n: 1,
};

/// The answer of `GET /items/{id}`.
#[derive(Serialize)]
struct Item {
    id: u64,
    name: String,
}

/// The body of `POST /echo`, and (with `n + 1`) its answer.
#[derive(Deserialize, Serialize)]
struct Echo {
    name: String,
    n: u64,
}

/// The app: the four routes above.
pub fn router() -> Router {
    Router::new()
        .route("/json", get(json))
        .route("/items/{id}", get(item))
        .route("/echo", post(echo))
        .route("/digest", post(digest))
}

async fn json() -> Json<Hello> {
    Json(HELLO)
}

async fn item(Path(id): Path<u64>) -> Json<Item> {
    Json(Item {
        id,
        name: format!("item {id}"),
    })
}

async fn echo(Json(body): Json<Echo>) -> Json<Echo> {
    Json(Echo {
        name: body.name,
        n: body.n.saturating_add(1),
    })
}

/// `String` answers `text/plain; charset=utf-8`.
async fn digest(body: Bytes) -> String {
    format!("{:x}", Sha256::digest(&body))
}

#[cfg(test)]
mod tests {
    use axum::body::{to_bytes, Body};
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt as _;

    use super::*;

    /// What `GET /json` answers, byte for byte; `bench/src/matrix/scenario.rs` expects the same.
    const JSON_BODY: &str = r#"{"message":"Hello, World!","server":"servery","app":"axum","n":1}"#;

    /// Sends one request through the Router; the status, `Content-Type` and body.
    fn call(method: &str, uri: &str, body: &'static [u8]) -> (StatusCode, String, Vec<u8>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let request = Request::builder()
                .method(method)
                .uri(uri)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .expect("request");
            let response = router().oneshot(request).await.expect("infallible");
            let status = response.status();
            let kind = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let bytes = to_bytes(response.into_body(), 1 << 20).await.expect("body");
            (status, kind, bytes.to_vec())
        })
    }

    #[test]
    fn json_is_the_fixed_object_the_benchmark_expects() {
        let (status, kind, body) = call("GET", "/json", b"");
        assert_eq!(
            (status, kind.as_str()),
            (StatusCode::OK, "application/json")
        );
        assert_eq!(String::from_utf8(body).expect("utf-8"), JSON_BODY);
        assert_eq!(JSON_BODY.len(), 65);
    }

    #[test]
    fn item_echoes_its_id_and_a_bad_id_is_400() {
        let (status, _, body) = call("GET", "/items/42", b"");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, br#"{"id":42,"name":"item 42"}"#);
        assert_eq!(call("GET", "/items/x", b"").0, StatusCode::BAD_REQUEST);
        assert_eq!(call("GET", "/items/-1", b"").0, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn echo_adds_one_and_saturates() {
        let (status, _, body) = call("POST", "/echo", br#"{"name":"a","n":1}"#);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, br#"{"name":"a","n":2}"#);
        let max = br#"{"name":"m","n":18446744073709551615}"#;
        assert_eq!(call("POST", "/echo", max).2, max);
        assert!(call("POST", "/echo", br#"{"name":1}"#).0.is_client_error());
    }

    #[test]
    fn digest_is_lowercase_hex_sha256_without_newline() {
        let (status, kind, body) = call("POST", "/digest", b"abc");
        assert_eq!(status, StatusCode::OK);
        assert!(kind.starts_with("text/plain"), "{kind}");
        // FIPS 180-2 appendix B.1: SHA-256("abc").
        assert_eq!(
            body,
            b"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn unknown_routes_and_methods_are_the_routers_own() {
        assert_eq!(call("GET", "/nope", b"").0, StatusCode::NOT_FOUND);
        assert_eq!(
            call("GET", "/digest", b"").0,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
