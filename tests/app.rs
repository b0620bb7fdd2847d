//! Apps on the workers: what happens around a handler call, over raw
//! sockets against the real binary.
//!
//! A handler that panics must not take its worker down: the request is
//! answered 500, its connection is closed (pipelined requests behind it are
//! not answered: the connection's state cannot be trusted), the panic is
//! counted in `/metrics`, and every other connection and the next ones are
//! served as before. The panic is injected with the test-only fault
//! `panic-on=TARGET`, which panics inside the handler call; that also shows
//! every method reaching the handler. Runs under both drivers and both
//! isolations.

#[macro_use]
mod common;

use std::io::Write;
use std::time::Duration;

use common::{metric, parse_responses, read_until_close, TestServer, IO_TIMEOUT};

fn server(driver: &str, isolation: &str) -> TestServer {
    TestServer::builder()
        .file("ok.txt", b"ok\n")
        .driver(driver)
        .isolation(isolation)
        .admin()
        .fault("panic-on=/boom")
        .start()
}

fn a_panicking_handler_gets_500_and_a_close_and_the_worker_keeps_serving(
    driver: &str,
    isolation: &str,
) {
    let server = server(driver, isolation);
    // A kept-alive connection that has already been served, open across the
    // panic on another connection.
    let mut other = server.connect();
    other
        .write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let first = common::read_response(&mut other);
    assert_eq!(first.status, 200);

    // The panic, with a request pipelined behind it.
    let mut s = server.connect();
    s.write_all(b"GET /boom HTTP/1.1\r\nHost: t\r\n\r\nGET /ok.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let raw = read_until_close(&mut s, IO_TIMEOUT).expect("the connection is closed");
    let answers = parse_responses(&raw);
    assert_eq!(answers.len(), 1, "{}", String::from_utf8_lossy(&raw));
    assert_eq!(answers[0].status, 500);
    assert_eq!(answers[0].header("connection"), Some("close"));

    // The same worker still serves: the old connection, and new ones.
    other
        .write_all(b"GET /ok.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(common::read_response(&mut other).status, 200);
    for _ in 0..3 {
        assert_eq!(server.get("/ok.txt").status, 200);
    }
    // Counted, once the numbers reach the admin endpoint (process workers
    // report with their beats).
    // (A bound, not a wait: beats are late on a loaded machine.)
    let counted = common::wait_until(Duration::from_secs(30), || {
        metric(&server.metrics(), "servery_handler_panics_total") == Some(1.0)
    });
    assert!(counted, "{}", server.metrics());
    // Logged after the 500 went out; the pipe reader may not have it yet.
    server.wait_log("handler panicked", 1, Duration::from_secs(30));
}

fn repeated_panics_leave_the_server_up(driver: &str, isolation: &str) {
    let mut server = server(driver, isolation);
    for _ in 0..50 {
        let raw = server.send(b"GET /boom HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(parse_responses(&raw)[0].status, 500);
    }
    assert_eq!(server.get("/ok.txt").status, 200);
    assert!(server.alive(), "the server died");
    if isolation == "process" {
        // No worker was replaced: each panic was caught where it happened.
        assert_eq!(server.workers().len(), 1);
        assert!(!server.stderr().contains("died unexpectedly"));
    }
}

/// Every method is the handler's to answer: the injected panic fires in the
/// handler call for each, so each gets the 500 (the static files would
/// have answered 405 or 204 themselves).
fn every_method_reaches_the_handler(driver: &str) {
    let server = server(driver, "thread");
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"] {
        let req = format!("{method} /boom HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
        let raw = server.send(req.as_bytes());
        assert_eq!(parse_responses(&raw)[0].status, 500, "{method}");
    }
    // Without the fault, the static files answer for themselves.
    let raw = server.send(b"POST /ok.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    let answer = &parse_responses(&raw)[0];
    assert_eq!(answer.status, 405);
    assert_eq!(answer.header("allow"), Some("GET, HEAD, OPTIONS"));
}

fn thread(driver: &str) {
    a_panicking_handler_gets_500_and_a_close_and_the_worker_keeps_serving(driver, "thread");
}

fn process(driver: &str) {
    a_panicking_handler_gets_500_and_a_close_and_the_worker_keeps_serving(driver, "process");
}

fn repeated_thread(driver: &str) {
    repeated_panics_leave_the_server_up(driver, "thread");
}

fn repeated_process(driver: &str) {
    repeated_panics_leave_the_server_up(driver, "process");
}

driver_tests! {
    every_method_reaches_the_handler,
    thread,
    process,
    repeated_thread,
    repeated_process,
}
