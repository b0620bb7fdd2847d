//! A Rust service over HTTP/2 answers as over HTTP/1.1: the same request on
//! a new HTTP/1.1 connection and on a new h2c connection gets the same
//! [`View`], for bodies read by the service, the body limits the server
//! enforces in its place, streamed responses and their trailers, request
//! trailers and panics; over HTTP/2 alone, a service that stops reading
//! shuts the client's send window, and the service is told the protocol
//! and, over TLS, the ALPN choice. Every case runs under both drivers.
//!
//! The service (`routes::Routes`) runs in this process ([`AppServer`]);
//! its routes are listed in `routes.rs`.

use std::future::poll_fn;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;

use crate::common::h2::{
    assert_same, bounded, read_answer, send_body, tls_config, Answer, Client, Exchange, View,
};
use crate::common::tls::{connected, pinned, request, TLS13};
use crate::common::{read_framed, AppServer};

#[path = "routes.rs"]
mod routes;

use routes::{bytes_of, digest_of, App};

/// The `--max-body-bytes` of the servers that test it.
const MAX_BODY: u64 = 1000;
/// How long a send window must stay shut to count as shut: far longer than
/// a WINDOW_UPDATE takes on loopback, from a server that sends one.
const STALL: Duration = Duration::from_millis(300);
/// RFC 9113 §6.9.2: the initial stream and connection windows, which the
/// server does not raise.
const DEFAULT_WINDOW: usize = 65_535;

// ------------------------------------------------------------------ bodies

/// An empty, a small and a 1 MiB body reach the service whole (1 MiB is
/// sixteen of the 64 KiB windows: the server gives credit back as the
/// service reads).
fn a_posted_body_reads_the_same(driver: &str) {
    let app = App::start(driver);
    for n in [0, 10, 1 << 20] {
        let body = bytes_of(n);
        let h2 = app.same(&Exchange::new("POST", "/digest").body(body.clone()));
        assert_eq!(h2.status, 200, "{n} bytes");
        assert_eq!(
            String::from_utf8_lossy(&h2.body),
            digest_of(&body),
            "{n} bytes"
        );
        assert_eq!(h2.field("x-length"), Some(n.to_string().as_str()));
    }
}

/// `collect(limit)`: a body within it is the whole body; one past it is the
/// service's own 413.
fn collect_answers_the_same(driver: &str) {
    let app = App::start(driver);
    let h2 = app.same(&Exchange::new("POST", "/collect?limit=1000").body(bytes_of(500)));
    assert_eq!((h2.status, &h2.body[..]), (200, &b"len=500\n"[..]));
    let h2 = app.same(&Exchange::new("POST", "/collect?limit=1000").body(bytes_of(2000)));
    assert_eq!(
        (h2.status, &h2.body[..]),
        (413, &b"service limit 1000\n"[..])
    );
}

/// A declared `content-length` past `--max-body-bytes` is 413 before the
/// service runs, and the client need not send the body: over HTTP/2 the
/// HEADERS alone, without END_STREAM, are answered.
fn a_declared_body_past_the_limit_is_413_before_the_service(driver: &str) {
    let app = App::with(AppServer::builder().driver(driver).max_body_bytes(MAX_BODY));
    let ex = Exchange::new("POST", "/digest").field("content-length", "2000");
    let h1 = View::h1(&ex.h1(app.server.addr()));
    let mut client = Client::connect(app.server.addr());
    let req = ex.h2_request();
    let answer = client.run(|send| async move {
        let mut send = bounded("a stream slot", send.ready()).await.unwrap();
        let (response, _body) = send.send_request(req, false).unwrap();
        let response = bounded("the 413", response).await.unwrap();
        read_answer(response).await.unwrap()
    });
    assert_same(&ex, &h1, &View::h2(&answer));
    assert_eq!(answer.status, 413);
    assert_eq!(app.calls(), 0, "the service ran");
    // The server serves on.
    let h2 = app.same(&Exchange::new("POST", "/digest").body("abc"));
    assert_eq!(h2.status, 200);
}

/// A body of unknown length that grows past `--max-body-bytes` is 413,
/// whatever the service was doing with it.
fn a_streamed_body_past_the_limit_is_413(driver: &str) {
    let app = App::with(AppServer::builder().driver(driver).max_body_bytes(MAX_BODY));
    let h2 = app.same(
        &Exchange::new("POST", "/digest")
            .body(bytes_of(2 * MAX_BODY as usize))
            .chunked(),
    );
    assert_eq!(h2.status, 413);
    let h2 = app.same(
        &Exchange::new("POST", "/digest")
            .body(bytes_of(MAX_BODY as usize))
            .chunked(),
    );
    assert_eq!(h2.status, 200, "a body at the limit");
}

/// Request trailers reach the service, over HTTP/2 as a HEADERS frame after
/// the DATA.
fn request_trailers_reach_the_service(driver: &str) {
    let app = App::start(driver);
    let h2 = app.same(
        &Exchange::new("POST", "/digest")
            .body("abc")
            .trailer("x-sum", "1")
            .trailer("x-more", "two"),
    );
    assert_eq!(h2.status, 200);
    assert_eq!(h2.field("x-trailers"), Some("x-sum=1; x-more=two"));
}

// --------------------------------------------------------------- responses

/// A streamed response of unknown size: over HTTP/2 no `content-length`,
/// the body whole, its trailers an HTTP/2 trailer block.
fn a_streamed_response_keeps_its_trailers(driver: &str) {
    let app = App::start(driver);
    let ex = Exchange::get("/stream?n=3");
    let framed = ex.h1(app.server.addr());
    let answer = Client::connect(app.server.addr()).send(&ex);
    assert_same(&ex, &View::h1(&framed), &View::h2(&answer));
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-length"), None);
    assert_eq!(answer.body_text(), "chunk 0\nchunk 1\nchunk 2\n");
    let trailers = answer.trailers.expect("an HTTP/2 trailer block");
    assert_eq!(
        trailers.get("x-chunks").map(HeaderValue::as_bytes),
        Some(&b"3"[..])
    );
    // An empty stream: its trailers still come.
    let h2 = app.same(&Exchange::get("/stream?n=0"));
    assert!(h2.body.is_empty());
    assert_eq!(h2.trailers.get("x-chunks"), Some(&vec!["0".to_owned()]));
}

/// A panic in `call` or after an await is 500 on that stream, and the
/// server keeps serving: a new connection, over either protocol, is
/// answered.
fn a_panic_is_500_and_the_server_serves_on(driver: &str) {
    let app = App::start(driver);
    for path in ["/panic", "/panic-later"] {
        let h2 = app.same(&Exchange::get(path));
        assert_eq!(h2.status, 500, "{path}");
        let h2 = app.same(&Exchange::new("POST", "/digest").body("abc"));
        assert_eq!(h2.status, 200, "after {path}");
    }
}

/// Each panic is counted once (`servery_handler_panics_total`), over
/// either protocol, wherever the service panicked.
fn a_panic_is_counted_once(driver: &str) {
    let app = App::start(driver);
    let panics = || app.server.counter(|s| &s.handler_panics);
    for path in ["/panic", "/panic-later"] {
        let ex = Exchange::get(path);
        let before = panics();
        assert_eq!(ex.h1(app.server.addr()).response.status, 500);
        assert_eq!(panics(), before + 1, "{path} over HTTP/1.1");
        assert_eq!(Client::connect(app.server.addr()).send(&ex).status, 500);
        assert_eq!(panics(), before + 2, "{path} over HTTP/2");
    }
}

/// Answers without a body: HEAD of a known and of an unknown size, 204 and
/// 304 (whatever body the service gave), a length the service states for
/// a HEAD or a 304, and one it misstates for a GET (the body's wins). Over
/// HTTP/2, END_STREAM is on the HEADERS.
fn bodiless_answers_answer_the_same(driver: &str) {
    let app = App::start(driver);
    for ex in [
        Exchange::new("HEAD", "/bytes?len=100"),
        Exchange::new("HEAD", "/stream?n=3"),
        Exchange::new("HEAD", "/status?code=200&len=7"),
        Exchange::new("HEAD", "/status?code=200&len=0&declared=4096"),
        Exchange::get("/status?code=204&len=5"),
        Exchange::get("/status?code=204&len=0&declared=9"),
        Exchange::get("/status?code=304"),
        Exchange::get("/status?code=304&len=0&declared=9"),
    ] {
        let h1 = View::h1(&ex.h1(app.server.addr()));
        let answer = Client::connect(app.server.addr()).send(&ex);
        assert!(answer.ended_on_headers, "{ex:?}: DATA after the head");
        assert_same(&ex, &h1, &View::h2(&answer));
    }
    let h2 = app.same(&Exchange::get("/status?code=200&len=2&declared=9"));
    assert_eq!(
        (h2.field("content-length"), &h2.body[..]),
        (Some("2"), &b"xx"[..])
    );
}

/// The lengths HTTP/1.1 gives bodiless answers (tests/service.rs
/// `bodiless_answers_send_no_body`), over HTTP/2 too: a 304 whose service
/// gave a body says that body's length (the 200's); a HEAD answered with
/// an empty body says no length (not `0`, which would claim the GET's body
/// is empty).
fn bodiless_lengths_answer_the_same(driver: &str) {
    let app = App::start(driver);
    let mut differ = Vec::new();
    for ex in [
        Exchange::get("/status?code=304&len=5"),
        Exchange::new("HEAD", "/status?code=200&len=0"),
    ] {
        let h1 = View::h1(&ex.h1(app.server.addr()));
        let h2 = View::h2(&Client::connect(app.server.addr()).send(&ex));
        let (a, b) = (h1.field("content-length"), h2.field("content-length"));
        if a != b {
            differ.push(format!(
                "{} {}: HTTP/1.1 {a:?}, HTTP/2 {b:?}",
                ex.method, ex.path
            ));
        }
    }
    assert!(differ.is_empty(), "content-length differs: {differ:#?}");
}

/// A 1 MiB response of known length and a streamed one of sixty-four
/// 16 KiB chunks arrive whole through the 64 KiB windows.
fn large_responses_arrive_whole(driver: &str) {
    let app = App::start(driver);
    let h2 = app.same(&Exchange::get("/bytes?len=1048576"));
    assert!(h2.body == bytes_of(1 << 20), "not the service's bytes");
    let h2 = app.same(&Exchange::get("/stream?n=64&size=16384"));
    assert_eq!(h2.body.len(), 1 << 20);
    assert!(h2.body.ends_with(&[63u8; 16384]), "cut short");
    assert_eq!(h2.trailers.get("x-chunks"), Some(&vec!["64".to_owned()]));
}

/// A streamed response of 20,000 small chunks reaches a client with the
/// `h2` crate's default settings, as it does over HTTP/1.1.
fn a_stream_of_small_chunks_reaches_a_default_client(driver: &str) {
    let app = App::start(driver);
    let ex = Exchange::get("/stream?n=20000");
    let h1 = View::h1(&ex.h1(app.server.addr()));
    let h2 = Client::connect(app.server.addr())
        .try_send(&ex)
        .unwrap_or_else(|e| panic!("over HTTP/2: {e}"));
    assert_same(&ex, &h1, &View::h2(&h2));
}

/// A body sent in 1,000 DATA frames of 10 bytes reads as the same body
/// sent in 1,000 chunks of 10 bytes over HTTP/1.1.
fn a_body_in_small_frames_reads_the_same(driver: &str) {
    let app = App::start(driver);
    let body = bytes_of(10_000);
    let mut raw = b"POST /digest HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\
                    Transfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    for piece in body.chunks(10) {
        raw.extend_from_slice(b"a\r\n");
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let mut s = app.server.connect();
    s.write_all(&raw).expect("write the request");
    let h1 = View::h1(&read_framed(&mut s, false));
    assert_eq!(String::from_utf8_lossy(&h1.body), digest_of(&body));
    let mut client = Client::connect(app.server.addr());
    let pieces: Vec<Bytes> = body.chunks(10).map(Bytes::copy_from_slice).collect();
    let answer = client.run(|send| async move {
        let mut send = bounded("a stream slot", send.ready()).await?;
        let req = Exchange::new("POST", "/digest").h2_request();
        let (response, mut stream) = send.send_request(req, false)?;
        let n = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            send_body(&mut stream, piece, i + 1 == n).await?;
        }
        read_answer(bounded("the digest", response).await?).await
    });
    let answer =
        answer.unwrap_or_else(|e| panic!("over HTTP/2: {e} (connection: {:?})", client.closed()));
    assert_same(&Exchange::new("POST", "/digest"), &h1, &View::h2(&answer));
}

/// An echo answers while it reads: over HTTP/2 a 1 MiB body comes back
/// whole while it is still being sent (neither side's window could hold
/// it), and a small one with trailers answers as over HTTP/1.1, the
/// request's trailers the response's.
fn an_echo_streams_while_it_reads(driver: &str) {
    let app = App::start(driver);
    let h2 = app.same(
        &Exchange::new("POST", "/echo")
            .body("ping")
            .trailer("x-sum", "1"),
    );
    assert_eq!(h2.body, b"ping");
    assert_eq!(h2.trailers.get("x-sum"), Some(&vec!["1".to_owned()]));
    let body = bytes_of(1 << 20);
    let mut client = Client::connect(app.server.addr());
    let sent = Bytes::from(body.clone());
    let answer = client.run(|send| async move {
        let mut send = bounded("a stream slot", send.ready()).await.unwrap();
        let req = Exchange::new("POST", "/echo").h2_request();
        let (response, mut stream) = send.send_request(req, false).unwrap();
        let sending = async move { send_body(&mut stream, sent, true).await };
        let reading = async move {
            let response = bounded("the echo's head", response).await?;
            read_answer(response).await
        };
        let (sent, answer) = tokio::join!(sending, reading);
        sent.expect("the body sent");
        answer.expect("the echo")
    });
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-length"), None);
    assert_eq!(answer.body.len(), body.len());
    assert!(answer.body == body, "the echo differs");
}

/// The connection-specific fields a service sets are dropped over HTTP/2
/// (`h2` would refuse to send them), and the answer is otherwise the
/// HTTP/1.1 one.
fn connection_fields_are_dropped_over_h2(driver: &str) {
    let app = App::start(driver);
    let ex = Exchange::get("/hop");
    let answer = Client::connect(app.server.addr()).send(&ex);
    assert_eq!(answer.status, 200);
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "upgrade",
        "te",
    ] {
        assert_eq!(answer.header(name), None, "{name} over HTTP/2");
    }
    assert_eq!(answer.header("x-kept"), Some("1"));
    let mut h1 = View::h1(&ex.h1(app.server.addr()));
    for name in ["proxy-connection", "upgrade", "te"] {
        h1.fields.remove(name);
    }
    assert_same(&ex, &h1, &View::h2(&answer));
}

// ----------------------------------------------------------------- HTTP/2

/// Uploads 1 MiB to `/hold` (a service that reads nothing until told) for
/// as long as the server gives credit, then releases the service. Returns
/// the bytes the window let out, the credit left when it shut, and the
/// held answer.
fn upload_to_a_service_that_does_not_read(
    app: &App,
    client: &mut Client,
) -> (usize, usize, Answer) {
    let probe = app.probe.clone();
    client.run(|send| async move {
        let mut send = bounded("a stream slot", send.ready()).await.unwrap();
        let req = Exchange::new("POST", "/hold").h2_request();
        let (response, mut stream) = send.send_request(req, false).unwrap();
        stream.reserve_capacity(1 << 20);
        let mut sent = 0usize;
        while sent < 1 << 20 {
            let got = tokio::time::timeout(STALL, poll_fn(|cx| stream.poll_capacity(cx))).await;
            match got {
                // No credit for STALL: the window is shut.
                Err(_) => break,
                Ok(Some(Ok(n))) => {
                    stream.send_data(Bytes::from(vec![7u8; n]), false).unwrap();
                    sent += n;
                }
                Ok(other) => panic!("the stream ended while sending: {other:?}"),
            }
        }
        let left = stream.capacity();
        probe.release.store(true, Ordering::SeqCst);
        let response = bounded("the held answer", response).await.unwrap();
        let answer = read_answer(response).await.unwrap();
        (sent, left, answer)
    })
}

/// A service that does not read its body stops the client: of a 1 MiB
/// upload, the client's send window lets out no more than the stream's
/// initial window, and gives no more credit while the service holds the
/// request. Once the service answers, the answer arrives and the
/// connection serves on.
fn a_service_that_does_not_read_shuts_the_window(driver: &str) {
    let app = App::start(driver);
    let mut client = Client::connect(app.server.addr());
    let (sent, left, answer) = upload_to_a_service_that_does_not_read(&app, &mut client);
    assert!(
        (16 * 1024..=DEFAULT_WINDOW).contains(&sent),
        "the client sent {sent} bytes to a service that reads none"
    );
    assert_eq!(left, 0, "credit left after {sent} bytes");
    assert_eq!(
        (answer.status, answer.body_text().as_str()),
        (200, "held\n")
    );
    let answer = client.send(&Exchange::new("POST", "/digest").body("abc"));
    assert_eq!(answer.body_text(), digest_of(b"abc"));
}

/// `--h2-initial-window-bytes 256KiB`: the same upload gets that far ahead
/// of the service (four times the default window) and no further; the
/// connection's window is the same, so one stream may use all of it. A
/// 1 MiB upload to a service that reads then arrives whole.
fn a_larger_initial_window_lets_that_much_ahead_and_no_more(driver: &str) {
    const WINDOW: usize = 256 * 1024;
    let app = App::with(AppServer::builder().driver(driver).raw(|r| {
        r.h2_initial_window_bytes = Some(servery::config::Size(WINDOW as u64));
        // A worker's windows together stay within 1 GiB.
        r.max_connections = Some(1024);
    }));
    let mut client = Client::connect(app.server.addr());
    // One exchange first: the server's SETTINGS and its connection
    // WINDOW_UPDATE come before its first answer, so the client knows the
    // windows before it uploads (on a loaded machine they could otherwise
    // arrive after the client stopped at the protocol's default).
    let first = client.send(&Exchange::new("POST", "/digest").body("abc"));
    assert_eq!(first.body_text(), digest_of(b"abc"));
    let (sent, left, answer) = upload_to_a_service_that_does_not_read(&app, &mut client);
    assert!(
        (DEFAULT_WINDOW + 1..=WINDOW).contains(&sent),
        "the client sent {sent} bytes to a service that reads none (window {WINDOW})"
    );
    assert_eq!(left, 0, "credit left after {sent} bytes");
    assert_eq!(answer.status, 200);
    let answer = client.send(&Exchange::new("POST", "/digest").body(bytes_of(1 << 20)));
    assert_eq!(answer.body_text(), digest_of(&bytes_of(1 << 20)));
}

/// The service is told the protocol: HTTP/2 over h2c (no TLS), and over
/// TLS the ALPN choice, h2 or http/1.1.
fn the_service_sees_the_protocol(driver: &str) {
    let app = App::with(AppServer::builder().driver(driver).tls());
    let ex = Exchange::get("/facts");
    let h1 = ex.h1(app.server.addr()).response.body_text();
    let h2 = Client::connect(app.server.addr()).send(&ex).body_text();
    assert_eq!(
        h1,
        "version=HTTP/1.1 tls=None peer=Some(127.0.0.1) worker=0\n"
    );
    assert_eq!(
        h2,
        "version=HTTP/2.0 tls=None peer=Some(127.0.0.1) worker=0\n"
    );
    let (addr, fp) = app.server.tls();
    let offer: &[&[u8]] = &[b"h2", b"http/1.1"];
    let mut client = Client::tls(addr, tls_config(fp, offer))
        .unwrap_or_else(|alpn| panic!("ALPN chose {alpn:?}, not h2"));
    assert_eq!(
        client.send(&ex).body_text(),
        "version=HTTP/2.0 tls=Some(Tls { alpn: Some(H2), version: Some(\"TLSv1.3\"), resumed: false, site: Some(0) }) peer=Some(127.0.0.1) worker=0\n"
    );
    let mut s = connected(&pinned(fp, TLS13), addr);
    let h1 = request(&mut s, "/facts", "").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        h1.body_text(),
        "version=HTTP/1.1 tls=Some(Tls { alpn: Some(Http11), version: Some(\"TLSv1.3\"), resumed: false, site: Some(0) }) peer=Some(127.0.0.1) worker=0\n"
    );
}

/// The first HEADERS frame of stream 1 read off `s` (other frames are
/// skipped), decoded: its `:status` and whether it ended the stream.
fn next_head(
    s: &mut std::net::TcpStream,
    decoder: &mut servery::http::h2::hpack::Decoder,
) -> (String, bool) {
    use servery::http::h2::frame::{flag, kind, Head, HEADER_LEN};
    use std::io::Read;
    loop {
        let mut head = [0u8; HEADER_LEN];
        s.read_exact(&mut head).expect("a frame header");
        let h = Head::read(&head);
        let mut payload = vec![0u8; h.len];
        s.read_exact(&mut payload).expect("a frame payload");
        if h.kind == kind::HEADERS && h.stream == 1 {
            let mut list = servery::http::h2::hpack::FieldList::default();
            decoder.decode(&payload, 1 << 16, &mut list).expect("HPACK");
            let status = list
                .iter()
                .find(|(n, _)| *n == b":status")
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                .expect(":status");
            return (status, h.has(flag::END_STREAM));
        }
    }
}

/// `Expect: 100-continue` on a request whose body the service reads: an
/// interim 100 comes while the client holds its body back (RFC 9110
/// §10.1.1), then, once the body came, the final answer.
fn expect_100_continue_is_answered_when_the_service_reads(driver: &str) {
    use servery::http::h2::frame::{self, flag, kind};
    use servery::http::h2::hpack::{encode, Decoder};
    let app = App::start(driver);
    let mut s = std::net::TcpStream::connect(app.server.addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut out = servery::http::h2::PREFACE.to_vec();
    frame::write_settings(&mut out, &[]);
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/digest"),
        ("expect", "100-continue"),
        ("content-length", "5"),
    ] {
        encode::field_raw(&mut block, n.as_bytes(), v.as_bytes());
    }
    frame::head(&mut out, block.len(), kind::HEADERS, flag::END_HEADERS, 1);
    out.extend_from_slice(&block);
    s.write_all(&out).expect("write the head");
    let mut decoder = Decoder::new(4096);
    assert_eq!(next_head(&mut s, &mut decoder), ("100".into(), false));
    let mut body = Vec::new();
    frame::head(&mut body, 5, kind::DATA, flag::END_STREAM, 1);
    body.extend_from_slice(b"hello");
    s.write_all(&body).expect("write the body");
    let (status, _) = next_head(&mut s, &mut decoder);
    assert_eq!(status, "200");
    assert_eq!(app.calls(), 1);
}

driver_tests! {
    expect_100_continue_is_answered_when_the_service_reads,
    a_posted_body_reads_the_same,
    collect_answers_the_same,
    a_declared_body_past_the_limit_is_413_before_the_service,
    a_streamed_body_past_the_limit_is_413,
    request_trailers_reach_the_service,
    a_streamed_response_keeps_its_trailers,
    bodiless_answers_answer_the_same,
    bodiless_lengths_answer_the_same,
    large_responses_arrive_whole,
    a_stream_of_small_chunks_reaches_a_default_client,
    a_body_in_small_frames_reads_the_same,
    an_echo_streams_while_it_reads,
    connection_fields_are_dropped_over_h2,
    a_panic_is_500_and_the_server_serves_on,
    a_panic_is_counted_once,
    a_service_that_does_not_read_shuts_the_window,
    a_larger_initial_window_lets_that_much_ahead_and_no_more,
    the_service_sees_the_protocol,
}
