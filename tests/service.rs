//! A service's side of a request over raw sockets (issue 11 items 2, 3 and
//! 5): bodies read as the service pulls them, however they are framed and
//! split; the framing errors, limits and timeouts the server answers in
//! the service's place; `Expect: 100-continue`; unread bodies; streamed
//! responses and their framing; a client leaving mid-stream; panics.
//!
//! The service ([`Routes`]) is written here and run in this process by
//! [`AppServer`] (`tests/common/app.rs`); every case runs under both
//! drivers (`driver_tests!` at the bottom). Its routes:
//! - `/digest`: the body's SHA-256 in hex, read chunk by chunk; headers
//!   `x-length`, `x-echo` (the request's `x-echo`) and `x-trailers` (the
//!   trailer fields it saw, `name=value` joined by `; `); a body that
//!   fails is noted in [`Probe::body_errors`].
//! - `/echo`: the body streamed back as it is read (size unknown: chunked,
//!   and the request's trailers become the response's).
//! - `/collect?limit=N`: `collect(N)`, answering the length, or its own 413.
//! - `/ignore`: 200 without touching the body.
//! - `/status?code=N&len=L`: status N with a body of L bytes (`&stream=1`:
//!   of L chunks, its size unknown).
//! - `/stream?n=K`: K chunks, then a trailer `x-chunks: K`.
//! - `/slow-stream`: a chunk now, then one every [`TICK`] for ever; counts
//!   its drops in [`Probe::streams_dropped`].
//! - `/keep`: keeps the body (a slice of the read buffer, when it came in
//!   one piece) in the service; `/kept`: every kept body, joined.
//! - `/panic`: panics in `call` itself; `/panic-later`: after an await;
//!   `/panic-body?at=I`: its body panics on its `I`th poll.
//! - `/smuggled`: counted; a test that sees it called found a request made
//!   of body bytes.

#[macro_use]
mod common;

use std::cell::RefCell;
use std::future::Future;
use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body::Frame;
use servery::app::{Body, BodyError, MakeError, Request, Response, Service};
use sha2::{Digest, Sha256};

use common::{
    half_close, hex, query_value, read_framed, read_until_close, stays_silent, text, wait_until,
    AppServer, Delimit, Framed, IO_TIMEOUT,
};

/// Period of `/slow-stream`'s chunks after the first.
const TICK: Duration = Duration::from_millis(20);
/// The body limit of the servers that test it.
const MAX_BODY: u64 = 1000;
/// How long a state the server reaches on its own may take to show.
const SETTLE: Duration = Duration::from_secs(5);

/// What the service saw, shared with the test thread.
#[derive(Debug, Default)]
struct Probe {
    /// Calls of any route.
    calls: AtomicUsize,
    /// Calls of `/smuggled`.
    smuggled: AtomicUsize,
    /// `/slow-stream` bodies dropped.
    streams_dropped: AtomicUsize,
    /// `/wait` calls dropped before they answered.
    waits_dropped: AtomicUsize,
    /// The errors `/digest` read its bodies to, in order.
    body_errors: Mutex<Vec<BodyError>>,
}

impl Probe {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
    fn smuggled(&self) -> usize {
        self.smuggled.load(Ordering::SeqCst)
    }
    fn streams_dropped(&self) -> usize {
        self.streams_dropped.load(Ordering::SeqCst)
    }
    fn waits_dropped(&self) -> usize {
        self.waits_dropped.load(Ordering::SeqCst)
    }
    fn body_errors(&self) -> Vec<BodyError> {
        self.body_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The test service (see the module doc for its routes).
struct Routes {
    probe: Arc<Probe>,
    /// Bodies `/keep` kept (slices of the worker's read buffers).
    kept: RefCell<Vec<Bytes>>,
}

impl Service for Routes {
    type Body = Body;

    /// Not an `async fn`: `/panic` must panic in `call` itself, before any
    /// future exists.
    fn call(&self, req: Request) -> impl Future<Output = Response<Body>> {
        self.probe.calls.fetch_add(1, Ordering::SeqCst);
        if req.uri().path() == "/panic" {
            panic!("test panic in call");
        }
        self.route(req)
    }
}

impl Routes {
    async fn route(&self, mut req: Request) -> Response<Body> {
        let probe = self.probe.clone();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or("").to_owned();
        match path.as_str() {
            "/digest" => digest(&probe, req).await,
            "/echo" => Response::new(Body::stream(req.into_body())),
            "/collect" => {
                let limit = query_value(&query, "limit").unwrap_or(1 << 20);
                let mut body = req.into_body();
                match body.collect(limit).await {
                    Ok(bytes) => {
                        let trailers = body.trailers().map_or(0, |t| t.len());
                        text(
                            StatusCode::OK,
                            format!("len={} trailers={trailers}\n", bytes.len()),
                        )
                    }
                    Err(BodyError::TooLarge { limit }) => text(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("service limit {limit}\n"),
                    ),
                    Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
                }
            }
            "/ignore" => text(StatusCode::OK, "ignored\n".to_owned()),
            "/status" => {
                let code = query_value(&query, "code").unwrap_or(200) as u16;
                let len = query_value(&query, "len").unwrap_or(0);
                let mut resp = match query_value(&query, "stream") {
                    Some(1) => Response::new(Body::stream(Chunks {
                        next: 0,
                        n: len,
                        ended: false,
                    })),
                    _ => text(StatusCode::OK, "x".repeat(len)),
                };
                *resp.status_mut() = StatusCode::from_u16(code).unwrap();
                if let Some(n) = query_value(&query, "declared") {
                    resp.headers_mut()
                        .insert(http::header::CONTENT_LENGTH, n.to_string().parse().unwrap());
                }
                resp
            }
            "/stream" => Response::new(Body::stream(Chunks {
                next: 0,
                n: query_value(&query, "n").unwrap_or(3),
                ended: false,
            })),
            "/slow-stream" => Response::new(Body::stream(Ticker {
                sent: 0,
                sleep: None,
                probe,
            })),
            "/first-chunk" => {
                // One chunk, then a long pause before reading on: whatever
                // the client sends meanwhile must wait in TCP, not here.
                let mut body = req.into_body();
                let first = body.chunk().await.map_or(0, |c| c.map_or(0, |b| b.len()));
                monoio::time::sleep(Duration::from_secs(10)).await;
                text(StatusCode::OK, format!("first={first}\n"))
            }
            "/wait" => {
                /// Counts the call dropped if it is, before it answers.
                struct Dropped(Arc<Probe>);
                impl Drop for Dropped {
                    fn drop(&mut self) {
                        self.0.waits_dropped.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let guard = Dropped(probe.clone());
                let ms = query_value(&query, "ms").unwrap_or(10_000);
                monoio::time::sleep(Duration::from_millis(ms as u64)).await;
                std::mem::forget(guard);
                text(StatusCode::OK, "waited\n".to_owned())
            }
            "/panic-later" => {
                monoio::time::sleep(Duration::from_millis(1)).await;
                // Still reading the body, so the panic leaves it unfinished.
                let _ = req.body_mut().chunk().await;
                panic!("test panic after an await");
            }
            "/panic-body" => Response::new(Body::stream(Panicky {
                at: query_value(&query, "at").unwrap_or(0),
                once: query_value(&query, "once") == Some(1),
                polls: 0,
            })),
            "/keep" => match req.into_body().collect(1 << 20).await {
                Ok(body) => {
                    self.kept.borrow_mut().push(body);
                    text(StatusCode::OK, "kept\n".to_owned())
                }
                Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
            },
            "/kept" => Response::new(Body::from(self.kept.borrow().concat())),
            "/smuggled" => {
                probe.smuggled.fetch_add(1, Ordering::SeqCst);
                text(StatusCode::OK, "smuggled\n".to_owned())
            }
            _ => text(StatusCode::NOT_FOUND, "no such route\n".to_owned()),
        }
    }
}

/// `/digest`: SHA-256 of the body as read, chunk by chunk.
async fn digest(probe: &Probe, req: Request) -> Response<Body> {
    let echo = req.headers().get("x-echo").cloned();
    let mut body = req.into_body();
    let mut sha = Sha256::new();
    let mut len = 0usize;
    while let Some(chunk) = body.chunk().await {
        match chunk {
            Ok(bytes) => {
                len += bytes.len();
                sha.update(&bytes);
            }
            Err(e) => {
                let mut errors = probe.body_errors.lock().unwrap_or_else(|p| p.into_inner());
                errors.push(e);
                return text(StatusCode::BAD_REQUEST, format!("{e}\n"));
            }
        }
    }
    let trailers = body
        .trailers()
        .unwrap_or_default()
        .iter()
        .map(|(n, v)| format!("{n}={}", String::from_utf8_lossy(v.as_bytes())))
        .collect::<Vec<_>>()
        .join("; ");
    let mut resp = text(StatusCode::OK, hex(&sha.finalize()) + "\n");
    let headers = resp.headers_mut();
    headers.insert("x-length", HeaderValue::from(len));
    headers.insert("x-trailers", HeaderValue::try_from(trailers).unwrap());
    if let Some(echo) = echo {
        headers.insert("x-echo", echo);
    }
    resp
}

/// The `/digest` answer for `body`.
fn digest_of(body: &[u8]) -> String {
    hex(&Sha256::digest(body)) + "\n"
}

/// `/stream`'s body: `n` chunks `chunk I\n`, then the trailer `x-chunks`.
struct Chunks {
    next: usize,
    n: usize,
    ended: bool,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.next < self.n {
            let chunk = format!("chunk {}\n", self.next);
            self.next += 1;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        self.ended = true;
        let mut trailers = HeaderMap::new();
        trailers.insert("x-chunks", HeaderValue::from(self.n));
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }
}

/// `/panic-body?at=I`: `chunk I` for each poll before the `I`th, which
/// panics, and so does every poll after it; with `once=1`, a poll after the
/// panic ends the body instead.
struct Panicky {
    at: usize,
    once: bool,
    polls: usize,
}

impl http_body::Body for Panicky {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let poll = self.polls;
        self.polls += 1;
        if poll == self.at || (poll > self.at && !self.once) {
            panic!("test panic in a response body, poll {poll}");
        }
        if poll > self.at {
            return Poll::Ready(None);
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!(
            "chunk {poll}\n"
        ))))))
    }
}

/// `/slow-stream`'s body: `tick 0` at once, then `tick I` every [`TICK`]
/// (a monoio timer on the worker) for ever; its drop is counted.
struct Ticker {
    sent: usize,
    sleep: Option<Pin<Box<monoio::time::Sleep>>>,
    probe: Arc<Probe>,
}

impl http_body::Body for Ticker {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.sent > 0 {
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(monoio::time::sleep(TICK)));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.sleep = None;
        }
        let chunk = format!("tick {}\n", this.sent);
        this.sent += 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.probe.streams_dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// A server running [`Routes`], and what its service sees.
struct App {
    server: AppServer,
    probe: Arc<Probe>,
}

impl App {
    fn start(driver: &str) -> App {
        App::with(AppServer::builder().driver(driver))
    }

    fn with(builder: common::AppBuilder) -> App {
        let probe = Arc::new(Probe::default());
        let shared = probe.clone();
        let server = builder.start(move |_worker: usize| {
            Ok::<_, MakeError>(Routes {
                probe: shared.clone(),
                kept: RefCell::default(),
            })
        });
        App { server, probe }
    }

    fn connect(&self) -> std::net::TcpStream {
        self.server.connect()
    }

    /// `raw` on a new connection, then everything until the server closes.
    fn send(&self, raw: &[u8]) -> Vec<u8> {
        common::send_to(self.server.addr(), raw)
    }

    /// The panics counted in `servery_handler_panics_total`.
    fn panics(&self) -> u64 {
        self.server.counter(|s| &s.handler_panics)
    }

    /// The worker's open connections.
    fn open_connections(&self) -> u64 {
        self.server.counter(|s| &s.connections_open)
    }

    /// The connection a test abandoned is closed, and a new one is served.
    fn assert_gone_and_others_served(&self) {
        assert!(wait_until(SETTLE, || self.open_connections() == 0));
        let mut other = self.connect();
        other.write_all(&post("/digest", b"others")).unwrap();
        assert_eq!(
            read_framed(&mut other, false).response.body_text(),
            digest_of(b"others")
        );
    }
}

/// A POST of `body` to `path` with a Content-Length.
fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(body);
    raw
}

/// `body` in chunks of the given sizes (cycled), with extensions on some
/// size lines, then the last chunk and `trailers`.
fn chunked(body: &[u8], sizes: &[usize], trailers: &[(&str, &str)]) -> Vec<u8> {
    let mut wire = Vec::new();
    let mut rest = body;
    let mut sizes = sizes.iter().cycle();
    let mut i = 0;
    while !rest.is_empty() {
        let n = (*sizes.next().unwrap()).clamp(1, rest.len());
        let ext = if i % 2 == 1 { ";ext=1" } else { "" };
        wire.extend(format!("{n:x}{ext}\r\n").bytes());
        wire.extend_from_slice(&rest[..n]);
        wire.extend_from_slice(b"\r\n");
        rest = &rest[n..];
        i += 1;
    }
    wire.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        wire.extend(format!("{name}: {value}\r\n").bytes());
    }
    wire.extend_from_slice(b"\r\n");
    wire
}

/// A chunked POST of `body` to `path`.
fn post_chunked(path: &str, body: &[u8], sizes: &[usize], trailers: &[(&str, &str)]) -> Vec<u8> {
    let mut raw = format!("POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    raw.extend(chunked(body, sizes, trailers));
    raw
}

/// `n` bytes of a fixed pseudo-random sequence.
fn bytes_of(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 131 + usize::from(seed) * 7) % 251) as u8)
        .collect()
}

/// What the server sends on `s` until it closes it, which it must within
/// [`IO_TIMEOUT`].
fn assert_closed_after(s: &mut std::net::TcpStream) -> Vec<u8> {
    read_until_close(s, IO_TIMEOUT).expect("the server closes the connection")
}

/// The responses `raw` holds, any framing (for a captured close).
fn framed_all(raw: &[u8]) -> Vec<Framed> {
    let mut cursor = std::io::Cursor::new(raw);
    let mut out = Vec::new();
    while (cursor.position() as usize) < raw.len() {
        out.push(read_framed(&mut cursor, false));
    }
    out
}

/// Write `raw` in pieces cut at `cuts` (sorted offsets), pausing between
/// them so each piece is its own segment (TCP_NODELAY is on).
fn write_in_pieces(s: &mut std::net::TcpStream, raw: &[u8], cuts: &[usize]) {
    let mut from = 0;
    for &cut in cuts.iter().chain([raw.len()].iter()) {
        let cut = cut.clamp(from, raw.len());
        if cut > from {
            s.write_all(&raw[from..cut]).unwrap();
            s.flush().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        from = cut;
    }
}

// ---- Reading bodies -------------------------------------------------------

fn content_length_body_reaches_the_service(driver: &str) {
    let app = App::start(driver);
    let body = bytes_of(5000, 1);
    let mut s = app.connect();
    s.write_all(&post("/digest", &body)).unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.response.body_text(), digest_of(&body));
    assert_eq!(answer.response.header("x-length"), Some("5000"));
    assert_eq!(answer.delimit, Delimit::Length);
    // The connection is kept: the body ended where its length said.
    s.write_all(&post("/digest", b"again")).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"again")
    );
    // Idle between requests, the connection does not hold up the drain.
    app.server.stop().expect("a clean drain");
    assert_eq!(assert_closed_after(&mut s), b"");
}

/// A body far larger than a read buffer and the socket buffers, at the
/// default limit (1 MiB): read as it comes, the client writing meanwhile.
/// The body is read only as the service asks: a service that has taken
/// one chunk and stopped reading stops the client. A 64 MiB upload stalls
/// once the kernel's socket buffers are full (a few MiB), so the server
/// holds one read buffer of it, not the body.
fn a_service_that_stops_reading_stops_the_client(driver: &str) {
    let App { server, probe } = App::with(
        AppServer::builder()
            .driver(driver)
            .max_body_bytes(128 << 20),
    );
    let mut s = server.connect();
    let total = 64usize << 20;
    s.write_all(
        format!("POST /first-chunk HTTP/1.1\r\nHost: t\r\nContent-Length: {total}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    assert!(wait_until(SETTLE, || probe.calls() == 1));
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let block = vec![b'z'; 64 * 1024];
    let mut sent = 0usize;
    while sent < total {
        match s.write(&block) {
            Ok(n) => sent += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            Err(e) => panic!("write failed after {sent} B: {e}"),
        }
    }
    eprintln!("backpressure: {sent} B of {total} B written before the client stalled");
    assert!(
        sent < 24 << 20,
        "{sent} B of a 64 MiB body went in while the service read one chunk: read ahead"
    );
}

fn large_body_is_read_as_it_comes(driver: &str) {
    let app = App::start(driver);
    let body = bytes_of(1 << 20, 10);
    for raw in [
        post("/digest", &body),
        post_chunked("/digest", &body, &[65_536, 1000], &[]),
    ] {
        let mut s = app.connect();
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || w.write_all(&raw));
        let answer = read_framed(&mut s, false);
        writer.join().unwrap().unwrap();
        assert_eq!(answer.response.status, 200);
        assert_eq!(answer.response.body_text(), digest_of(&body));
    }
}

/// `Connection: close` on a request with a body: answered after the body
/// is read, with `Connection: close`, then the server closes.
fn connection_close_is_honoured_after_the_body(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(
        b"POST /digest HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc",
    )
    .unwrap();
    let answers = framed_all(&assert_closed_after(&mut s));
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].response.body_text(), digest_of(b"abc"));
    assert!(answers[0].response.closes());
}

fn chunked_body_reaches_the_service(driver: &str) {
    let app = App::start(driver);
    let body = bytes_of(3000, 2);
    let mut s = app.connect();
    s.write_all(&post_chunked("/digest", &body, &[1, 7, 300, 1024], &[]))
        .unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.response.body_text(), digest_of(&body));
    assert_eq!(answer.response.header("x-length"), Some("3000"));
    assert_eq!(answer.response.header("x-trailers"), Some(""));
    s.write_all(&post("/digest", b"next")).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"next")
    );
}

/// Both framings cut once at every offset (two writes, one keep-alive
/// connection for all), and written a byte at a time.
fn body_split_at_every_byte_reaches_the_service(driver: &str) {
    let app = App::start(driver);
    let body = b"split me anywhere";
    for raw in [
        post("/digest", body),
        post_chunked("/digest", body, &[3, 1, 5], &[("x-t", "1")]),
    ] {
        let mut s = app.connect();
        for cut in 0..=raw.len() {
            write_in_pieces(&mut s, &raw, &[cut]);
            let answer = read_framed(&mut s, false);
            assert_eq!(answer.response.status, 200, "cut at {cut}");
            assert_eq!(answer.response.body_text(), digest_of(body), "cut at {cut}");
        }
        let mut s = app.connect();
        let every: Vec<usize> = (1..raw.len()).collect();
        write_in_pieces(&mut s, &raw, &every);
        let answer = read_framed(&mut s, false);
        assert_eq!(
            answer.response.body_text(),
            digest_of(body),
            "byte at a time"
        );
    }
}

fn pipelined_posts_are_answered_in_order(driver: &str) {
    let app = App::start(driver);
    let bodies = [bytes_of(100, 3), bytes_of(2000, 4), bytes_of(7, 5)];
    let mut raw = post("/digest", &bodies[0]);
    raw.extend(post_chunked("/digest", &bodies[1], &[333], &[]));
    raw.extend(post("/digest", &bodies[2]));
    let mut s = app.connect();
    s.write_all(&raw).unwrap();
    for (i, body) in bodies.iter().enumerate() {
        let answer = read_framed(&mut s, false);
        assert_eq!(answer.response.status, 200, "response {i}");
        assert_eq!(answer.response.body_text(), digest_of(body), "response {i}");
    }
    assert!(
        stays_silent(&s, Duration::from_millis(100)),
        "a fourth answer"
    );
    assert_eq!(app.probe.calls(), 3);
}

fn chunked_trailers_reach_the_service(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    let trailers = [("x-checksum", "abc"), ("x-count", "2")];
    s.write_all(&post_chunked("/digest", b"with trailers", &[4], &trailers))
        .unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.response.body_text(), digest_of(b"with trailers"));
    assert_eq!(
        answer.response.header("x-trailers"),
        Some("x-checksum=abc; x-count=2")
    );
}

/// `collect` joins the chunks (and leaves the trailers readable); past the service's own limit the service
/// answers for itself and the connection stays (the rest is discarded).
fn collect_reads_the_whole_body_within_its_limit(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(&post_chunked(
        "/collect?limit=100",
        &bytes_of(100, 6),
        &[10],
        &[("X-Sum", "1"), ("X-Count", "10")],
    ))
    .unwrap();
    // The trailers are still there once `collect` has read to the end.
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        "len=100 trailers=2\n"
    );
    s.write_all(&post("/collect?limit=100", &bytes_of(101, 6)))
        .unwrap();
    let refused = read_framed(&mut s, false);
    assert_eq!(refused.response.status, 413);
    assert_eq!(refused.response.body_text(), "service limit 100\n");
    assert!(!refused.response.closes());
    s.write_all(&post("/digest", b"still open")).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"still open")
    );
}

// ---- Framing errors and limits: the server answers -----------------------

/// A chunk size past 64 bits: 400, close, and the bytes after it (a whole
/// request) are never parsed as one.
fn chunk_size_overflow_is_400_and_closes(driver: &str) {
    let app = App::start(driver);
    let raw = b"POST /digest HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
                ffffffffffffffffff\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
    let answers = framed_all(&app.send(raw));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].response.status, 400);
    assert!(answers[0].response.closes());
    assert_eq!(app.probe.smuggled(), 0);
    assert_eq!(app.probe.body_errors(), [BodyError::Malformed]);
}

/// Refused from the head: the status, a close, and the service not called.
fn assert_refused_before_the_service(app: &App, raw: &[u8], status: u16) {
    let before = app.probe.calls();
    let answers = framed_all(&app.send(raw));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0].response.status,
        status,
        "{}",
        String::from_utf8_lossy(raw)
    );
    assert!(answers[0].response.closes());
    assert_eq!(app.probe.calls(), before, "the service was called");
    assert_eq!(app.probe.smuggled(), 0);
}

fn content_length_with_transfer_encoding_is_400_and_closes(driver: &str) {
    let app = App::start(driver);
    assert_refused_before_the_service(
        &app,
        b"POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\
          Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    );
}

fn repeated_differing_content_length_is_400(driver: &str) {
    let app = App::start(driver);
    assert_refused_before_the_service(
        &app,
        b"POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc",
        400,
    );
    assert_refused_before_the_service(
        &app,
        b"POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: 3, 4\r\n\r\nabcd",
        400,
    );
}

/// RFC 9112 §6.3: a final coding other than chunked cannot be framed (400);
/// chunked after a coding the server does not know is 501 (RFC 9112 §6.1).
fn transfer_encoding_not_ending_in_chunked_is_refused(driver: &str) {
    let app = App::start(driver);
    for (te, status) in [
        ("gzip", 400),
        ("chunked, gzip", 400),
        ("chunked, chunked", 400),
        ("gzip, chunked", 501),
    ] {
        let raw =
            format!("POST /digest HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n");
        assert_refused_before_the_service(&app, raw.as_bytes(), status);
    }
}

fn declared_length_past_the_limit_is_413_before_the_service_runs(driver: &str) {
    let app = App::with(AppServer::builder().driver(driver).max_body_bytes(MAX_BODY));
    let mut raw = format!(
        "POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        MAX_BODY + 1
    )
    .into_bytes();
    raw.extend(bytes_of(MAX_BODY as usize + 1, 7));
    assert_refused_before_the_service(&app, &raw, 413);
    // With Expect: the 413 alone, no 100 first (RFC 9110 §10.1.1).
    let expecting = format!(
        "POST /digest HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        MAX_BODY + 1
    );
    assert_refused_before_the_service(&app, expecting.as_bytes(), 413);
    // At the limit, it is read.
    let mut s = app.connect();
    let body = bytes_of(MAX_BODY as usize, 7);
    s.write_all(&post("/digest", &body)).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(&body)
    );
}

/// A chunked body's size is found only as it comes: the service is called,
/// and its answer replaced by the 413 once the chunks pass the limit.
fn chunked_body_growing_past_the_limit_is_413_and_closes(driver: &str) {
    let app = App::with(AppServer::builder().driver(driver).max_body_bytes(MAX_BODY));
    let mut s = app.connect();
    let head = "POST /digest HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    s.write_all(head.as_bytes()).unwrap();
    // 600 bytes (0x258) are fine; 600 more pass the limit.
    let mut chunk = b"258\r\n".to_vec();
    chunk.extend(bytes_of(600, 8));
    chunk.extend_from_slice(b"\r\n");
    s.write_all(&chunk).unwrap();
    s.write_all(&chunk).unwrap();
    let raw = assert_closed_after(&mut s);
    let answers = framed_all(&raw);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].response.status, 413);
    assert!(answers[0].response.closes());
    assert_eq!(app.probe.calls(), 1);
    assert_eq!(
        app.probe.body_errors(),
        [BodyError::TooLarge { limit: MAX_BODY }]
    );
}

fn body_read_timeout_is_408_and_closes(driver: &str) {
    let app = App::with(
        AppServer::builder()
            .driver(driver)
            .body_timeout(Duration::from_millis(300)),
    );
    let mut s = app.connect();
    s.write_all(b"POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    let raw = assert_closed_after(&mut s);
    let answers = framed_all(&raw);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].response.status, 408);
    assert!(answers[0].response.closes());
    assert_eq!(app.probe.body_errors(), [BodyError::TimedOut]);
}

/// The body timeout is between two reads, not for the whole body: a body
/// that trickles in for longer than it, never pausing that long, is read.
fn a_trickling_body_is_read_past_the_body_timeout(driver: &str) {
    let timeout = Duration::from_millis(1000);
    let app = App::with(AppServer::builder().driver(driver).body_timeout(timeout));
    let body = b"fifteen pieces.";
    let mut s = app.connect();
    s.write_all(
        format!(
            "POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    for b in body {
        std::thread::sleep(timeout / 10);
        s.write_all(&[*b]).unwrap();
    }
    assert!(started.elapsed() > timeout);
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.response.body_text(), digest_of(body));
}

/// A client that closes in the middle of its body: nobody to answer, the
/// service's read ends with `Closed`, and the worker serves on.
fn client_leaving_mid_body_ends_it_with_closed(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(b"POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        .unwrap();
    assert!(wait_until(SETTLE, || app.probe.calls() == 1));
    half_close(&s);
    assert_eq!(assert_closed_after(&mut s), b"", "answered nobody");
    assert!(wait_until(SETTLE, || app.probe.body_errors() == [BodyError::Closed]));
    app.assert_gone_and_others_served();
}

// ---- Expect: 100-continue ----------------------------------------------

/// The service reads: the 100 comes once it asks for the body, before the
/// client sends any of it; then the final answer.
fn continue_is_sent_when_the_service_reads(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(
        b"POST /digest HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    )
    .unwrap();
    let interim = read_framed(&mut s, false);
    assert_eq!(interim.response.status, 100, "{interim:?}");
    assert_eq!(interim.response.version, "HTTP/1.1");
    s.write_all(b"body").unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.response.body_text(), digest_of(b"body"));
}

/// The service never reads: the final answer comes at once, no 100, with
/// `Connection: close`. The client may never send a body it was not asked
/// for (curl does not), so the server cannot tell a late body from the next
/// request: it closes rather than discards, and a body sent anyway is
/// lingered away, never parsed as a request.
fn continue_is_not_sent_when_the_service_ignores_the_body(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    let body = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
    let head = format!(
        "POST /ignore HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200, "{answer:?}");
    assert_eq!(answer.response.body_text(), "ignored\n");
    assert!(answer.response.closes(), "{answer:?}");
    s.write_all(body).unwrap();
    let _ = s.write_all(&post("/digest", b"next"));
    let rest = read_until_close(&mut s, IO_TIMEOUT).expect("the server closes the connection");
    assert!(rest.is_empty(), "answered after the close");
    assert_eq!(app.probe.smuggled(), 0);
}

/// Part of the body came with the head: the client did not wait for a 100
/// (RFC 9110 §10.1.1 lets the server omit it), and none comes later in the
/// middle of the body either, when the service asks for the rest.
fn continue_is_not_sent_once_the_body_has_started(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(
        b"POST /digest HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 8\r\n\r\nfirs",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(b"tend").unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200, "{answer:?}");
    assert_eq!(answer.response.body_text(), digest_of(b"firstend"));
}

// ---- Unread bodies -------------------------------------------------------

fn unread_small_body_is_discarded_and_the_connection_kept(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    // A request inside the ignored body stays body.
    let mut body = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
    body.extend(bytes_of(10_000, 9));
    let mut raw = post("/ignore", &body);
    raw.extend(post_chunked("/ignore", &body, &[4000], &[]));
    raw.extend(post("/digest", b"after"));
    s.write_all(&raw).unwrap();
    for _ in 0..2 {
        let ignored = read_framed(&mut s, false);
        assert_eq!(ignored.response.body_text(), "ignored\n");
        assert!(!ignored.response.closes());
    }
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"after")
    );
    assert_eq!(app.probe.smuggled(), 0);
}

/// A declared rest past the discard bound (256 KiB) is not worth reading:
/// the answer says `Connection: close` and the connection ends after it.
fn unread_large_declared_body_closes_the_connection(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    let len = 300 * 1024;
    s.write_all(
        format!("POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\nsome").as_bytes(),
    )
    .unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200);
    assert!(answer.response.closes(), "{answer:?}");
    half_close(&s);
    assert_eq!(assert_closed_after(&mut s), b"");
}

/// An unread chunked body's size is found only by reading it: the answer
/// leaves first (keep-alive, as far as it knows), then the discard stops at
/// the bound (256 KiB) and closes; nothing after the body is answered.
fn unread_chunked_body_past_the_discard_bound_closes(driver: &str) {
    let app = App::start(driver);
    let mut raw = post_chunked("/ignore", &bytes_of(300 * 1024, 11), &[8192], &[]);
    raw.extend(b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut s = app.connect();
    let mut w = s.try_clone().unwrap();
    // The server stops reading part way: the write may fail, which is fine.
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&raw);
        half_close(&w);
    });
    let raw = assert_closed_after(&mut s);
    writer.join().unwrap();
    let answers = framed_all(&raw);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].response.body_text(), "ignored\n");
    assert_eq!(app.probe.smuggled(), 0);
}

// ---- Streamed responses ---------------------------------------------------

fn streamed_response_is_chunked_with_trailers(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(b"GET /stream?n=3 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.delimit, Delimit::Chunked, "{answer:?}");
    assert_eq!(answer.response.header("content-length"), None);
    assert_eq!(
        answer.chunks,
        [&b"chunk 0\n"[..], b"chunk 1\n", b"chunk 2\n"],
        "one chunk per frame"
    );
    assert_eq!(answer.trailers, [("x-chunks".to_owned(), "3".to_owned())]);
    // Kept alive after the last chunk.
    s.write_all(b"GET /stream?n=0 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let empty = read_framed(&mut s, false);
    assert_eq!(empty.response.body, b"");
    assert_eq!(empty.trailers, [("x-chunks".to_owned(), "0".to_owned())]);
}

/// 204 and 304 carry no body whatever the service gave, nor a length but
/// the one a 200 would have had (RFC 9110 §8.6: a `Content-Length: 0` on
/// a 304 would claim the representation is empty); a HEAD carries the
/// length of the body the service gave, and not the body.
fn bodiless_answers_send_no_body(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    let get = |s: &mut std::net::TcpStream, target: &str, method: &str| {
        s.write_all(format!("{method} {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        read_framed(s, method == "HEAD").response
    };
    let no_content = get(&mut s, "/status?code=204&len=5", "GET");
    assert_eq!(no_content.status, 204);
    assert_eq!(no_content.header("content-length"), None);
    assert_eq!(no_content.header("transfer-encoding"), None);
    let not_modified = get(&mut s, "/status?code=304", "GET");
    assert_eq!(not_modified.status, 304);
    assert_eq!(
        not_modified.header("content-length"),
        None,
        "{not_modified:?}"
    );
    let with_length = get(&mut s, "/status?code=304&len=5", "GET");
    assert_eq!(with_length.header("content-length"), Some("5"));
    // A body of unknown size: no chunked coding is claimed for nothing.
    let streamed = get(&mut s, "/status?code=304&len=2&stream=1", "GET");
    assert_eq!(streamed.header("transfer-encoding"), None, "{streamed:?}");
    assert_eq!(streamed.header("content-length"), None);
    let head = get(&mut s, "/status?code=200&len=7", "HEAD");
    assert_eq!(head.header("content-length"), Some("7"));
    // A HEAD answered with no body says no length, unless the service
    // states the GET's itself; a GET's own length is the body's, whatever
    // the service claims.
    let bare = get(&mut s, "/status?code=200&len=0", "HEAD");
    assert_eq!(bare.header("content-length"), None, "{bare:?}");
    let declared = get(&mut s, "/status?code=200&len=0&declared=4096", "HEAD");
    assert_eq!(declared.header("content-length"), Some("4096"));
    let claimed = get(&mut s, "/status?code=200&len=2&declared=9", "GET");
    assert_eq!(claimed.header("content-length"), Some("2"));
    assert_eq!(claimed.body, b"xx");
    // Nothing of those bodies came: the next answer follows at once.
    let next = get(&mut s, "/status?code=200&len=3", "GET");
    assert_eq!(next.body, b"xxx");
}

/// HTTP/1.0 has no chunked coding: the body is the bytes until the close
/// (and the trailers are not sent).
fn http10_client_gets_a_close_delimited_stream(driver: &str) {
    let app = App::start(driver);
    let raw = app.send(b"GET /stream?n=3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let answer = read_framed(&mut std::io::Cursor::new(&raw), false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.delimit, Delimit::Close, "{answer:?}");
    assert_eq!(answer.response.body_text(), "chunk 0\nchunk 1\nchunk 2\n");
    assert!(answer.response.closes(), "{answer:?}");
}

/// HEAD: the head of the answer only; the next response follows at once.
/// The stream is dropped unpolled.
fn head_of_a_stream_gets_no_body(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(b"HEAD /stream?n=3 HTTP/1.1\r\nHost: t\r\n\r\nHEAD /slow-stream HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let head = read_framed(&mut s, true);
    assert_eq!(head.response.status, 200);
    assert!(!head.response.closes());
    let slow = read_framed(&mut s, true);
    assert_eq!(slow.response.status, 200);
    s.write_all(&post("/digest", b"after heads")).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"after heads")
    );
    assert_eq!(app.probe.streams_dropped(), 1);
}

/// A client that goes away mid-stream: the server notices on a write,
/// drops the stream (and the service's future), and serves the others.
fn client_leaving_mid_stream_drops_the_stream(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(b"GET /slow-stream HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 256];
    let mut got = Vec::new();
    while !got.windows(7).any(|w| w == b"tick 1\n") {
        let n = s.read(&mut first).unwrap();
        assert!(n > 0, "closed mid-stream");
        got.extend_from_slice(&first[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"));
    assert_eq!(app.probe.streams_dropped(), 0);
    drop(s);
    assert!(
        wait_until(SETTLE, || app.probe.streams_dropped() == 1),
        "the stream outlived its client"
    );
    app.assert_gone_and_others_served();
}

/// A client that closes while its service is still at work (before any of
/// the response): the service's future is dropped at once, not run to its
/// end; a pipelined request behind a slow one is no sign of leaving, and is
/// answered after it.
fn client_leaving_during_a_call_drops_it(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(b"GET /wait HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(wait_until(SETTLE, || app.probe.calls() == 1));
    drop(s);
    assert!(
        wait_until(SETTLE, || app.probe.waits_dropped() == 1),
        "the call outlived its client"
    );
    app.assert_gone_and_others_served();
    let mut s = app.connect();
    s.write_all(
        b"GET /wait?ms=200 HTTP/1.1\r\nHost: t\r\n\r\nGET /wait?ms=1 HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .unwrap();
    for _ in 0..2 {
        assert_eq!(read_framed(&mut s, false).response.body_text(), "waited\n");
    }
    assert_eq!(app.probe.waits_dropped(), 1);
}

/// A stream in progress when the server is stopped (SIGTERM's drain) goes
/// on until the drain timeout (2 s here), then is cut: the stream is
/// dropped, the client sees the close, and the server's outcome says it cut
/// that one connection.
fn a_drain_lets_a_stream_run_until_its_deadline(driver: &str) {
    let App { server, probe } = App::start(driver);
    let mut s = server.connect();
    s.write_all(b"GET /slow-stream HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !seen.windows(6).any(|w| w == b"tick 0") {
        let n = std::io::Read::read(&mut s, &mut buf).unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    let stopping = std::time::Instant::now();
    let stopper = std::thread::spawn(move || server.stop());
    // Still streaming during the drain: more ticks come.
    let before = seen.len();
    let rest = read_until_close(&mut s, IO_TIMEOUT).expect("the drain cuts the stream");
    let took = stopping.elapsed();
    assert!(
        !rest.is_empty() || seen.len() > before,
        "no tick during the drain"
    );
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(10),
        "cut after {took:?}, the drain timeout is 2 s"
    );
    // The server says it cut one connection at the deadline.
    let outcome = stopper.join().unwrap();
    assert!(
        matches!(
            outcome,
            Err(servery::supervisor::Error::ConnectionsCut { connections: 1 })
        ),
        "{outcome:?}"
    );
    assert_eq!(probe.streams_dropped(), 1);
}

/// `/echo` answers each chunk as it is read: the first comes back before
/// the client sends the second; the request's trailers end the response.
fn echo_streams_the_body_back(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    s.write_all(
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n",
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !seen.windows(7).any(|w| w == b"first\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    s.write_all(b"6\r\nsecond\r\n0\r\nx-end: yes\r\n\r\n")
        .unwrap();
    // What was seen, then the rest from the socket.
    let answer = read_framed(&mut std::io::Cursor::new(seen).chain(&mut s), false);
    assert_eq!(answer.response.status, 200);
    assert_eq!(answer.delimit, Delimit::Chunked);
    assert_eq!(answer.chunks, [&b"first"[..], b"second"]);
    assert_eq!(answer.trailers, [("x-end".to_owned(), "yes".to_owned())]);
    // A length body echoes too, chunked: the stream does not say its size.
    s.write_all(&post("/echo", b"by length")).unwrap();
    let by_length = read_framed(&mut s, false);
    assert_eq!(by_length.response.body_text(), "by length");
}

// ---- Panics ---------------------------------------------------------------

/// 500 and close, the request pipelined behind not answered, the panic
/// counted, and the next connection served.
fn assert_panic_is_500_and_closes(app: &App, path: &str) {
    let before = app.panics();
    let mut raw = post(path, b"body");
    raw.extend(post("/smuggled", b""));
    let answers = framed_all(&app.send(&raw));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].response.status, 500);
    assert!(answers[0].response.closes());
    assert_eq!(app.panics(), before + 1);
    assert_eq!(app.probe.smuggled(), 0);
    let mut s = app.connect();
    s.write_all(&post("/digest", b"served")).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"served")
    );
}

fn panic_in_call_is_500_and_closes(driver: &str) {
    assert_panic_is_500_and_closes(&App::start(driver), "/panic");
}

fn panic_after_an_await_is_500_and_closes(driver: &str) {
    assert_panic_is_500_and_closes(&App::start(driver), "/panic-later");
}

/// A body panicking before its head has left: the request is answered 500
/// and the panic counted, as a panic in `call` is; not a 200 head for a
/// body that failed, nor (a body that ends when polled again) a 200 whose
/// panic nobody counted.
fn panic_in_a_body_before_its_head_is_500_and_closes(driver: &str) {
    let app = App::start(driver);
    assert_panic_is_500_and_closes(&app, "/panic-body?at=0");
    assert_panic_is_500_and_closes(&app, "/panic-body?at=0&once=1");
}

/// A body panicking after its head and first chunk have left: the response
/// cannot be replaced, so it is cut (no last chunk) and the connection
/// closed; the panic is counted, the worker serves on.
fn panic_in_a_body_mid_stream_cuts_the_response(driver: &str) {
    let app = App::start(driver);
    let raw = app.send(b"GET /panic-body?at=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("Transfer-Encoding: chunked"), "{text}");
    assert!(
        text.ends_with("8\r\nchunk 0\n\r\n"),
        "not cut after the first chunk: {text:?}"
    );
    assert_eq!(app.panics(), 1);
    let mut s = app.connect();
    s.write_all(&post("/digest", b"served")).unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"served")
    );
}

// ---- Buffers a service keeps -------------------------------------------

/// A service may keep a chunk of the read buffer as long as it likes: the
/// requests pipelined after it in the same buffer are still read right,
/// and what it kept is not overwritten by later reads.
fn kept_body_slices_outlive_their_request(driver: &str) {
    let app = App::start(driver);
    let mut s = app.connect();
    let mut raw = post("/keep", b"AAAA");
    raw.extend(post("/keep", b"BBBB"));
    raw.extend(post("/digest", b"pipelined"));
    s.write_all(&raw).unwrap();
    assert_eq!(read_framed(&mut s, false).response.body_text(), "kept\n");
    assert_eq!(read_framed(&mut s, false).response.body_text(), "kept\n");
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        digest_of(b"pipelined")
    );
    // More reads through the same pool, then what was kept.
    for i in 0..4u8 {
        s.write_all(&post("/digest", &bytes_of(20_000, i))).unwrap();
        assert_eq!(
            read_framed(&mut s, false).response.body_text(),
            digest_of(&bytes_of(20_000, i))
        );
    }
    s.write_all(b"GET /kept HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_framed(&mut s, false).response.body_text(), "AAAABBBB");
}

// ---- Property -----------------------------------------------------------

mod property {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    use super::*;

    /// A generated request: its bytes, and what the service must see.
    #[derive(Debug, Clone)]
    struct Case {
        wire: Vec<u8>,
        body: Vec<u8>,
        echo: String,
        trailers: String,
        cuts: Vec<usize>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            prop::collection::vec(any::<u8>(), 0..600),
            "[!-~]([ -~]{0,14}[!-~])?",
            prop::option::of(prop::collection::vec(1..80usize, 1..6)),
            prop::collection::vec(("x-[a-z]{1,5}", "[!-~]{1,8}"), 0..3),
            prop::collection::vec(any::<prop::sample::Index>(), 1..6),
        )
            .prop_map(|(body, echo, sizes, trailers, cuts)| {
                let (framing, framed, trailers) = match sizes {
                    None => (
                        format!("Content-Length: {}", body.len()),
                        body.clone(),
                        String::new(),
                    ),
                    Some(sizes) => {
                        let t: Vec<(&str, &str)> = trailers
                            .iter()
                            .map(|(n, v)| (n.as_str(), v.as_str()))
                            .collect();
                        let seen = t
                            .iter()
                            .map(|(n, v)| format!("{n}={v}"))
                            .collect::<Vec<_>>()
                            .join("; ");
                        (
                            "Transfer-Encoding: chunked".to_owned(),
                            chunked(&body, &sizes, &t),
                            seen,
                        )
                    }
                };
                let mut wire = format!(
                    "POST /digest HTTP/1.1\r\nHost: t\r\nX-Echo: {echo}\r\n{framing}\r\n\r\n"
                )
                .into_bytes();
                wire.extend(framed);
                // The next request starts exactly where the body ends.
                wire.extend_from_slice(
                    b"POST /digest HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
                );
                let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(wire.len())).collect();
                cuts.sort_unstable();
                Case {
                    wire,
                    body,
                    echo,
                    trailers,
                    cuts,
                }
            })
    }

    /// A POST with a random body, framing (length or random chunk sizes
    /// with trailers) and header, written in pieces cut at random points,
    /// reaches the service as the same head and body; the next request
    /// follows it.
    pub(super) fn a_body_split_anywhere_reads_the_same(driver: &str) {
        let app = App::start(driver);
        let mut runner = TestRunner::new(Config {
            cases: 24,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&case(), |case| {
                let mut s = app.connect();
                write_in_pieces(&mut s, &case.wire, &case.cuts);
                let answer = read_framed(&mut s, false).response;
                prop_assert_eq!(answer.status, 200);
                prop_assert_eq!(answer.body_text(), digest_of(&case.body));
                prop_assert_eq!(answer.header("x-echo"), Some(case.echo.as_str()));
                let len = case.body.len().to_string();
                prop_assert_eq!(answer.header("x-length"), Some(len.as_str()));
                prop_assert_eq!(answer.header("x-trailers"), Some(case.trailers.as_str()));
                let next = read_framed(&mut s, false).response;
                prop_assert_eq!(next.body_text(), digest_of(b""));
                Ok(())
            })
            .unwrap();
    }
}

use property::a_body_split_anywhere_reads_the_same;

driver_tests! {
    content_length_body_reaches_the_service,
    large_body_is_read_as_it_comes,
    connection_close_is_honoured_after_the_body,
    chunked_body_reaches_the_service,
    body_split_at_every_byte_reaches_the_service,
    pipelined_posts_are_answered_in_order,
    chunked_trailers_reach_the_service,
    collect_reads_the_whole_body_within_its_limit,
    chunk_size_overflow_is_400_and_closes,
    content_length_with_transfer_encoding_is_400_and_closes,
    repeated_differing_content_length_is_400,
    transfer_encoding_not_ending_in_chunked_is_refused,
    declared_length_past_the_limit_is_413_before_the_service_runs,
    chunked_body_growing_past_the_limit_is_413_and_closes,
    body_read_timeout_is_408_and_closes,
    a_trickling_body_is_read_past_the_body_timeout,
    client_leaving_mid_body_ends_it_with_closed,
    continue_is_sent_when_the_service_reads,
    continue_is_not_sent_when_the_service_ignores_the_body,
    continue_is_not_sent_once_the_body_has_started,
    unread_small_body_is_discarded_and_the_connection_kept,
    unread_large_declared_body_closes_the_connection,
    unread_chunked_body_past_the_discard_bound_closes,
    streamed_response_is_chunked_with_trailers,
    bodiless_answers_send_no_body,
    client_leaving_during_a_call_drops_it,
    a_service_that_stops_reading_stops_the_client,
    a_drain_lets_a_stream_run_until_its_deadline,
    http10_client_gets_a_close_delimited_stream,
    head_of_a_stream_gets_no_body,
    client_leaving_mid_stream_drops_the_stream,
    echo_streams_the_body_back,
    panic_in_call_is_500_and_closes,
    panic_after_an_await_is_500_and_closes,
    panic_in_a_body_before_its_head_is_500_and_closes,
    panic_in_a_body_mid_stream_cuts_the_response,
    kept_body_slices_outlive_their_request,
    a_body_split_anywhere_reads_the_same,
}
