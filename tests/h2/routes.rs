//! The service the app cases ask: [`Routes`], run in this process by an
//! [`App`] (an [`AppServer`] and the [`Probe`] its service writes to).
//!
//! Routes:
//! - `/digest`: the body's SHA-256 in hex, read chunk by chunk; headers
//!   `x-length` and `x-trailers` (the trailer fields, `name=value` joined
//!   by `; `).
//! - `/collect?limit=N`: `collect(N)`: the length, or its own 413.
//! - `/echo`: the body streamed back as it is read (size unknown), the
//!   request's trailers the response's.
//! - `/stream?n=K`: K chunks `chunk I\n` of unknown total size (with
//!   `&size=S`: of S bytes each), then a trailer `x-chunks: K`.
//! - `/bytes?len=L`: L bytes of [`bytes_of`], their length known.
//! - `/status?code=N&len=L`: status N with a body of L bytes (with
//!   `&declared=D`: and a `content-length: D` field).
//! - `/hop`: sets the connection-specific fields RFC 9113 §8.2.2 forbids
//!   in HTTP/2, beside `x-kept`.
//! - `/panic`: panics in `call`; `/panic-later`: after an await.
//! - `/hold`: answers without reading the body once the test sets
//!   [`Probe::release`] (at most [`HOLD`] later).
//! - `/facts`: the request's version and connection facts, as text.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body::Frame;
use servery::app::{Body, BodyError, MakeError, Request, Response, Service};
use sha2::{Digest, Sha256};

use crate::common::h2::{assert_same, Client, Exchange, View};
use crate::common::{hex, query_value, text, AppBuilder, AppServer};

/// The longest `/hold` waits for its release.
const HOLD: Duration = Duration::from_secs(5);

/// What the service saw, shared with the test thread.
#[derive(Debug, Default)]
pub(super) struct Probe {
    /// Calls of any route.
    calls: AtomicUsize,
    /// `/hold` may answer.
    pub(super) release: AtomicBool,
}

/// The test service (see the module doc for its routes).
pub(super) struct Routes {
    probe: Arc<Probe>,
}

impl Service for Routes {
    type Body = Body;

    /// Not an `async fn`: `/panic` must panic in `call` itself.
    fn call(&self, req: Request) -> impl Future<Output = Response<Body>> {
        self.probe.calls.fetch_add(1, Ordering::SeqCst);
        if req.uri().path() == "/panic" {
            panic!("test panic in call");
        }
        route(self.probe.clone(), req)
    }
}

async fn route(probe: Arc<Probe>, req: Request) -> Response<Body> {
    let query = req.uri().query().unwrap_or("").to_owned();
    match req.uri().path() {
        "/digest" => digest(req).await,
        "/collect" => {
            let limit = query_value(&query, "limit").unwrap_or(1 << 20);
            let mut body = req.into_body();
            match body.collect(limit).await {
                Ok(bytes) => text(StatusCode::OK, format!("len={}\n", bytes.len())),
                Err(BodyError::TooLarge { limit }) => text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("service limit {limit}\n"),
                ),
                Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
            }
        }
        "/echo" => Response::new(Body::stream(req.into_body())),
        "/bytes" => Response::new(Body::from(bytes_of(
            query_value(&query, "len").unwrap_or(0),
        ))),
        "/status" => {
            let code = query_value(&query, "code").unwrap_or(200) as u16;
            let len = query_value(&query, "len").unwrap_or(0);
            let mut resp = text(StatusCode::from_u16(code).unwrap(), "x".repeat(len));
            if let Some(n) = query_value(&query, "declared") {
                resp.headers_mut()
                    .insert(http::header::CONTENT_LENGTH, HeaderValue::from(n));
            }
            resp
        }
        "/hop" => {
            let mut resp = text(StatusCode::OK, "hop\n".to_owned());
            let headers = resp.headers_mut();
            for (name, value) in [
                ("connection", "keep-alive"),
                ("keep-alive", "timeout=5"),
                ("proxy-connection", "keep-alive"),
                ("upgrade", "h2c"),
                ("te", "trailers"),
                ("x-kept", "1"),
            ] {
                headers.insert(name, HeaderValue::from_static(value));
            }
            resp
        }
        "/stream" => Response::new(Body::stream(Chunks {
            next: 0,
            n: query_value(&query, "n").unwrap_or(3),
            size: query_value(&query, "size"),
            ended: false,
        })),
        "/panic-later" => {
            monoio::time::sleep(Duration::from_millis(1)).await;
            panic!("test panic after an await");
        }
        "/hold" => {
            let until = Instant::now() + HOLD;
            while !probe.release.load(Ordering::SeqCst) && Instant::now() < until {
                monoio::time::sleep(Duration::from_millis(5)).await;
            }
            text(StatusCode::OK, "held\n".to_owned())
        }
        "/facts" => {
            let facts = req.connection();
            text(
                StatusCode::OK,
                format!(
                    "version={:?} tls={:?} peer={:?} worker={}\n",
                    req.version(),
                    facts.tls,
                    facts.peer.map(|p| p.ip()),
                    facts.worker
                ),
            )
        }
        _ => text(StatusCode::NOT_FOUND, "no such route\n".to_owned()),
    }
}

/// `/digest`: SHA-256 of the body as read, chunk by chunk.
async fn digest(req: Request) -> Response<Body> {
    let mut body = req.into_body();
    let mut sha = Sha256::new();
    let mut len = 0usize;
    while let Some(chunk) = body.chunk().await {
        match chunk {
            Ok(bytes) => {
                len += bytes.len();
                sha.update(&bytes);
            }
            Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
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
    resp
}

/// The `/digest` answer for `body`.
pub(super) fn digest_of(body: &[u8]) -> String {
    hex(&Sha256::digest(body)) + "\n"
}

/// `/stream`'s body: `n` chunks `chunk I\n` (or of `size` bytes `I % 251`),
/// then the trailer `x-chunks`.
struct Chunks {
    next: usize,
    n: usize,
    size: Option<usize>,
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
            let chunk = match self.size {
                Some(size) => vec![(self.next % 251) as u8; size],
                None => format!("chunk {}\n", self.next).into_bytes(),
            };
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

/// A server running [`Routes`], and what its service sees.
pub(super) struct App {
    pub(super) server: AppServer,
    pub(super) probe: Arc<Probe>,
}

impl App {
    pub(super) fn start(driver: &str) -> App {
        App::with(AppServer::builder().driver(driver))
    }

    pub(super) fn with(builder: AppBuilder) -> App {
        let probe = Arc::new(Probe::default());
        let shared = probe.clone();
        let server = builder.start(move |_worker: usize| {
            Ok::<_, MakeError>(Routes {
                probe: shared.clone(),
            })
        });
        App { server, probe }
    }

    pub(super) fn calls(&self) -> usize {
        self.probe.calls.load(Ordering::SeqCst)
    }

    /// `ex` over HTTP/1.1 and over a new h2c connection, asserted the same.
    pub(super) fn same(&self, ex: &Exchange) -> View {
        let h1 = View::h1(&ex.h1(self.server.addr()));
        let h2 = View::h2(&Client::connect(self.server.addr()).send(ex));
        assert_same(ex, &h1, &h2);
        h2
    }
}

/// Bytes `0..n` of a pattern no chunking lines up with.
pub(super) fn bytes_of(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}
