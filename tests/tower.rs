//! The tower adapter over raw sockets: the axum Router of
//! `examples/axum/routes.rs` (the one `examples/axum.rs` serves and the
//! benchmark compares with `axum::serve` on tokio) on servery's workers,
//! and what needs the side tokio runtime, with and without it. Each test
//! runs under both drivers.
//!
//! The Router is the example's own file, so what is tested is what ships:
//! JSON in and out, a path parameter, the Router's 404, servery's 413 past
//! `--max-body-bytes` (before the Router runs), and a body the Router reads.

#[macro_use]
mod common;

#[path = "../examples/axum/routes.rs"]
#[allow(dead_code)]
mod routes;

use std::io::Write;
use std::time::Duration;

use axum::routing::get;
use common::{read_framed, AppServer};
use servery::app::tower::{self, SideRuntime};
use servery::app::Connection;

fn get_req(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

fn post(path: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(body);
    raw
}

fn axum_app(driver: &str) -> AppServer {
    AppServer::builder()
        .driver(driver)
        .max_body_bytes(64 * 1024)
        .start(tower::factory(routes::router()))
}

/// JSON out, a path parameter, JSON in and out, on one kept-alive
/// connection, and the Router's own 404 and 400.
fn the_axum_router_answers_json_routes_and_its_404(driver: &str) {
    let app = axum_app(driver);
    let mut s = app.connect();
    s.write_all(&get_req("/json")).unwrap();
    let json = read_framed(&mut s, false).response;
    assert_eq!(json.status, 200);
    assert_eq!(json.header("content-type"), Some("application/json"));
    assert_eq!(
        json.body_text(),
        r#"{"message":"Hello, World!","server":"servery","app":"axum","n":1}"#
    );
    // Axum's body has a known size: a length, not chunked.
    assert_eq!(json.header("content-length"), Some("65"));
    s.write_all(&get_req("/items/42")).unwrap();
    let item = read_framed(&mut s, false).response;
    assert_eq!(item.body_text(), r#"{"id":42,"name":"item 42"}"#);
    s.write_all(&post(
        "/echo",
        "application/json",
        br#"{"name":"ada","n":41}"#,
    ))
    .unwrap();
    let echo = read_framed(&mut s, false).response;
    assert_eq!(echo.status, 200, "{echo:?}");
    assert_eq!(echo.body_text(), r#"{"name":"ada","n":42}"#);
    s.write_all(&get_req("/nowhere")).unwrap();
    let missing = read_framed(&mut s, false).response;
    assert_eq!(missing.status, 404);
    assert!(
        !missing.closes(),
        "a 404 from the Router keeps the connection"
    );
    s.write_all(&get_req("/items/not-a-number")).unwrap();
    assert_eq!(read_framed(&mut s, false).response.status, 400);
    // Axum's own refusal of a body that is not JSON.
    s.write_all(&post("/echo", "text/plain", b"hi")).unwrap();
    assert_eq!(read_framed(&mut s, false).response.status, 415);
}

/// A declared body past `--max-body-bytes` is servery's 413, before the
/// Router runs; a chunked one growing past it is cut with 413 too.
fn a_body_past_the_limit_is_413_before_the_router(driver: &str) {
    let app = axum_app(driver);
    let big = vec![b'x'; 64 * 1024 + 1];
    let mut s = app.connect();
    s.write_all(&post("/digest", "application/octet-stream", &big))
        .unwrap();
    let refused = read_framed(&mut s, false).response;
    assert_eq!(refused.status, 413);
    assert!(refused.closes());
    let mut s = app.connect();
    let mut chunked =
        b"POST /digest HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..5 {
        chunked.extend_from_slice(format!("{:x}\r\n", 16 * 1024).as_bytes());
        chunked.extend_from_slice(&[b'y'; 16 * 1024]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let _ = s.write_all(&chunked);
    let cut = read_framed(&mut s, false).response;
    assert_eq!(cut.status, 413);
    assert!(cut.closes());
}

/// A body the Router reads whole (its `/digest`), within the limit, by
/// length and chunked.
fn the_router_reads_a_posted_body(driver: &str) {
    use sha2::{Digest, Sha256};
    let app = axum_app(driver);
    let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let want: String = Sha256::digest(&body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut s = app.connect();
    s.write_all(&post("/digest", "application/octet-stream", &body))
        .unwrap();
    assert_eq!(read_framed(&mut s, false).response.body_text(), want);
    let mut chunked =
        b"POST /digest HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for part in body.chunks(7_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    s.write_all(&chunked).unwrap();
    assert_eq!(read_framed(&mut s, false).response.body_text(), want);
}

/// A Router whose handlers need tokio: a timer, a spawned task, and the
/// connection facts from the request's extensions.
fn tokio_router() -> axum::Router {
    axum::Router::new()
        .route(
            "/sleep",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                "slept"
            }),
        )
        .route(
            "/spawn",
            get(|| async {
                let n = tokio::spawn(async { 20 + 1 }).await.unwrap_or(0);
                format!("spawned {n}")
            }),
        )
        .route(
            "/whoami",
            get(
                |axum::Extension(c): axum::Extension<Connection>| async move {
                    format!("worker {} tls {}", c.worker, c.tls.is_some())
                },
            ),
        )
}

/// With the side runtime, tokio's timers and `tokio::spawn` work from a
/// handler polled on the worker.
fn with_the_side_runtime_tokio_timers_and_spawn_work(driver: &str) {
    let side = SideRuntime::new(1).expect("a side runtime");
    let app = AppServer::builder()
        .driver(driver)
        .start(side.serve(tower::factory(tokio_router())));
    let mut s = app.connect();
    for (path, want) in [("/sleep", "slept"), ("/spawn", "spawned 21")] {
        s.write_all(&get_req(path)).unwrap();
        let answer = read_framed(&mut s, false).response;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        assert_eq!(answer.body_text(), want);
    }
    s.write_all(&get_req("/whoami")).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        "worker 0 tls false"
    );
}

/// Without it, the same handlers panic ("no reactor running"): each is a
/// 500 and a closed connection, and the worker goes on serving what needs
/// no tokio.
fn without_the_side_runtime_tokio_calls_are_500_and_the_worker_survives(driver: &str) {
    let app = AppServer::builder()
        .driver(driver)
        .start(tower::factory(tokio_router()));
    for path in ["/sleep", "/spawn"] {
        let mut s = app.connect();
        s.write_all(&get_req(path)).unwrap();
        let answer = read_framed(&mut s, false).response;
        assert_eq!(answer.status, 500, "{path}: {answer:?}");
        assert!(answer.closes());
    }
    let mut s = app.connect();
    s.write_all(&get_req("/whoami")).unwrap();
    assert_eq!(read_framed(&mut s, false).response.status, 200);
    assert_eq!(app.counter(|s| &s.handler_panics), 2);
}

driver_tests!(
    the_axum_router_answers_json_routes_and_its_404,
    a_body_past_the_limit_is_413_before_the_router,
    the_router_reads_a_posted_body,
    with_the_side_runtime_tokio_timers_and_spawn_work,
    without_the_side_runtime_tokio_calls_are_500_and_the_worker_survives,
);
