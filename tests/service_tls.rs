//! A Rust service over TLS: the exchange's reads, its interim 100 Continue
//! and its streamed writes go through rustls instead of the socket, and the
//! request says it came over TLS with ALPN `http/1.1`. Under both drivers.
//! (The plain-TCP behaviour of each is `tests/service.rs`'s.)

#[macro_use]
mod common;

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use common::tls::{connected, pinned, TLS13};
use common::{read_framed, AppServer, Delimit};
use http::StatusCode;
use http_body::Frame;
use servery::app::{Alpn, Body, MakeError, Request, Response, Service};
use sha2::{Digest, Sha256};

struct Routes;

/// Three chunks, then the end: a body of unknown size (sent chunked).
struct Three(u8);

impl http_body::Body for Three {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.0 == 3 {
            return Poll::Ready(None);
        }
        self.0 += 1;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!(
            "part {}\n",
            self.0
        ))))))
    }
}

impl Service for Routes {
    type Body = Body;
    async fn call(&self, req: Request) -> Response<Body> {
        match req.uri().path() {
            "/digest" => {
                let mut body = req.into_body();
                let mut digest = Sha256::new();
                while let Some(chunk) = body.chunk().await {
                    match chunk {
                        Ok(b) => digest.update(&b),
                        Err(e) => {
                            let mut r = Response::new(Body::from(e.to_string()));
                            *r.status_mut() = StatusCode::BAD_REQUEST;
                            return r;
                        }
                    }
                }
                let hex: String = digest
                    .finalize()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                Response::new(Body::from(hex))
            }
            "/stream" => Response::new(Body::stream(Three(0))),
            "/facts" => {
                let tls = req.connection().tls;
                let alpn = tls.and_then(|t| t.alpn) == Some(Alpn::Http11);
                Response::new(Body::from(format!("tls={} alpn={alpn}", tls.is_some())))
            }
            _ => Response::new(Body::from("?")),
        }
    }
}

fn app(driver: &str) -> AppServer {
    AppServer::builder()
        .driver(driver)
        .tls()
        .start(|_worker: usize| Ok::<_, MakeError>(Routes))
}

fn hex_digest(body: &[u8]) -> String {
    Sha256::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A body read over TLS, by length and chunked, and the 100 Continue the
/// service's first read sends through rustls before the body comes.
fn a_body_is_read_over_tls_with_its_100_continue(driver: &str) {
    let app = app(driver);
    let (addr, fp) = app.tls();
    let mut s = connected(&pinned(fp, TLS13), addr);
    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let head = format!(
        "POST /digest HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.flush().unwrap();
    let interim = read_framed(&mut s, false);
    assert_eq!(interim.response.status, 100, "{interim:?}");
    s.write_all(&body).unwrap();
    s.flush().unwrap();
    let answer = read_framed(&mut s, false);
    assert_eq!(answer.response.status, 200, "{answer:?}");
    assert_eq!(answer.response.body_text(), hex_digest(&body));
    let mut chunked =
        b"POST /digest HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for part in body.chunks(3_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    s.write_all(&chunked).unwrap();
    s.flush().unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        hex_digest(&body)
    );
}

/// A streamed response leaves chunked, frame by frame, through rustls; and
/// the request knows it came over TLS with ALPN http/1.1.
fn a_stream_is_written_over_tls_and_the_request_knows_its_tls(driver: &str) {
    let app = app(driver);
    let (addr, fp) = app.tls();
    let mut s = connected(&pinned(fp, TLS13), addr);
    s.write_all(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    s.flush().unwrap();
    let streamed = read_framed(&mut s, false);
    assert_eq!(streamed.delimit, Delimit::Chunked, "{streamed:?}");
    assert_eq!(streamed.response.body_text(), "part 1\npart 2\npart 3\n");
    s.write_all(b"GET /facts HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    s.flush().unwrap();
    assert_eq!(
        read_framed(&mut s, false).response.body_text(),
        "tls=true alpn=true"
    );
    // The plain listener of the same server says otherwise.
    let mut plain = app.connect();
    plain
        .write_all(b"GET /facts HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(
        read_framed(&mut plain, false).response.body_text(),
        "tls=false alpn=false"
    );
}

driver_tests!(
    a_body_is_read_over_tls_with_its_100_continue,
    a_stream_is_written_over_tls_and_the_request_knows_its_tls,
);
