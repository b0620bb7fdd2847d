//! The HTTP/2 client side of the tests: the `h2` crate's client on a tokio
//! current-thread runtime owned by the test ([`Client`]), over plain TCP
//! (h2c by prior knowledge) or TLS with ALPN ([`Client::tls`]); whole
//! answers read with the flow-control credit given back as the body is
//! read ([`Answer`]); and the one request written both ways ([`Exchange`]),
//! so a suite can ask the same thing over HTTP/1.1 and HTTP/2 and compare
//! what came back ([`View`], [`assert_same`]).
//!
//! Does not own a server (`server`, `app`), nor the HTTP/1.1 reader
//! (`http`), which the HTTP/1.1 half of an [`Exchange`] is read with.
//!
//! Flow of a test:
//! 1. [`Client::connect`] to a plain listener (or [`Client::tls`]): the
//!    handshake runs, the connection's task is spawned on the runtime.
//! 2. [`Client::send`] an [`Exchange`] (or drive `h2` directly inside
//!    [`Client::run`]): the runtime runs only while the test blocks on it,
//!    every wait bounded by [`IO_TIMEOUT`].
//! 3. Dropping the client drops the runtime, its connection task and socket.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use ::h2::client::SendRequest;
use ::h2::RecvStream;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::runtime::Runtime;

use super::http::{connect, read_framed, Framed};
use super::IO_TIMEOUT;

/// An HTTP/2 client connection and the runtime that drives it.
pub struct Client {
    /// Declared first: dropped before the runtime that polls it.
    send: SendRequest<Bytes>,
    /// The connection task; its outcome once it ends ([`Client::closed`]).
    conn: Option<tokio::task::JoinHandle<Result<(), ::h2::Error>>>,
    rt: Runtime,
}

/// What the server said on one stream, read to its end.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// The trailer fields, if a HEADERS frame ended the stream after DATA.
    pub trailers: Option<HeaderMap>,
    /// END_STREAM was on the response's HEADERS: no DATA frame at all.
    pub ended_on_headers: bool,
}

impl Answer {
    /// The value of `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A TLS 1.3 client accepting only the certificate with `fp` (the
/// server's self-signed one) and offering `alpn`, in order.
pub fn tls_config(fp: &str, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut config = Arc::unwrap_or_clone(super::tls::pinned(fp, super::tls::TLS13));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A current-thread runtime with I/O and time.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// `fut` bounded by [`IO_TIMEOUT`]; panics with `what` past it.
pub async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(IO_TIMEOUT, fut).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: nothing within {IO_TIMEOUT:?}"),
    }
}

impl Client {
    /// HTTP/2 by prior knowledge (RFC 9113 §3.3) on a new connection to
    /// `addr`; panics if the handshake fails.
    pub fn connect(addr: SocketAddr) -> Client {
        Client::try_connect(addr).unwrap_or_else(|e| panic!("h2c handshake with {addr}: {e}"))
    }

    /// [`Client::connect`], the handshake's failure returned. (The client
    /// handshake only writes; a server that does not speak HTTP/2 shows on
    /// the first request, or in [`Client::closed`].)
    pub fn try_connect(addr: SocketAddr) -> Result<Client, ::h2::Error> {
        let rt = runtime();
        let tcp = rt.block_on(async {
            let tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
                .await
                .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
            tcp.set_nodelay(true).expect("nodelay");
            tcp
        });
        Client::over(rt, tcp)
    }

    /// HTTP/2 over TLS to `addr` with `config` (its ALPN list is what the
    /// client offers), SNI `localhost`: the client, or `None` when the
    /// server chose another protocol (with the one it chose).
    pub fn tls(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Client, Option<Vec<u8>>> {
        Client::tls_as(addr, config, "localhost")
    }

    /// [`Client::tls`] with SNI `sni`.
    pub fn tls_as(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
        sni: &str,
    ) -> Result<Client, Option<Vec<u8>>> {
        let rt = runtime();
        let tls = rt.block_on(async {
            let tcp = bounded("connect", tokio::net::TcpStream::connect(addr))
                .await
                .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
            tcp.set_nodelay(true).expect("nodelay");
            let name = rustls::pki_types::ServerName::try_from(sni.to_owned()).expect("a name");
            let connector = tokio_rustls::TlsConnector::from(config);
            bounded("TLS handshake", connector.connect(name, tcp))
                .await
                .unwrap_or_else(|e| panic!("TLS handshake with {addr}: {e}"))
        });
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        if alpn.as_deref() != Some(b"h2") {
            return Err(alpn);
        }
        Ok(Client::over(rt, tls).unwrap_or_else(|e| panic!("h2 handshake over TLS: {e}")))
    }

    /// The client handshake over `io`, its connection task spawned on `rt`.
    fn over<T>(rt: Runtime, io: T) -> Result<Client, ::h2::Error>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = rt.block_on(bounded("h2 handshake", ::h2::client::handshake(io)))?;
        let conn = rt.spawn(conn);
        Ok(Client {
            send,
            conn: Some(conn),
            rt,
        })
    }

    /// Run `f` with a handle to open streams, on this client's runtime (the
    /// connection task runs meanwhile).
    pub fn run<F, Fut>(&mut self, f: F) -> Fut::Output
    where
        F: FnOnce(SendRequest<Bytes>) -> Fut,
        Fut: Future,
    {
        let send = self.send.clone();
        self.rt.block_on(f(send))
    }

    /// Send `ex` on a new stream and read its answer to the end.
    pub fn send(&mut self, ex: &Exchange) -> Answer {
        self.try_send(ex)
            .unwrap_or_else(|e| panic!("{} {}: {e}", ex.method, ex.path))
    }

    /// [`Client::send`], the stream's failure returned.
    pub fn try_send(&mut self, ex: &Exchange) -> Result<Answer, ::h2::Error> {
        let ex = ex.clone();
        self.run(|send| async move { exchange(send, &ex).await })
    }

    /// Wait (bounded) for the connection task to end: its outcome.
    pub fn closed(&mut self) -> Result<(), ::h2::Error> {
        let conn = self.conn.take().expect("the connection task, once");
        self.rt
            .block_on(bounded("the connection's end", conn))
            .expect("the connection task ran")
    }
}

/// Send `ex` on a new stream of `send` and read the answer to its end.
pub async fn exchange(send: SendRequest<Bytes>, ex: &Exchange) -> Result<Answer, ::h2::Error> {
    let mut send = bounded("a stream slot", send.ready()).await?;
    let body_ends = ex.body.is_empty() && ex.trailers.is_empty();
    let (response, mut stream) = send.send_request(ex.h2_request(), body_ends)?;
    if !body_ends {
        let rest = ex.trailers.is_empty();
        send_body(&mut stream, Bytes::from(ex.body.clone()), rest).await?;
        if !rest {
            stream.send_trailers(ex.h2_trailers())?;
        }
    }
    let response = bounded("a response head", response).await?;
    read_answer(response).await
}

/// Send `data` as the stream's window allows; `end` ends the stream with
/// its last bytes.
pub async fn send_body(
    stream: &mut ::h2::SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
) -> Result<(), ::h2::Error> {
    if data.is_empty() {
        return stream.send_data(data, end);
    }
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let got = bounded(
            "send credit",
            std::future::poll_fn(|cx| stream.poll_capacity(cx)),
        )
        .await;
        let n = match got {
            Some(n) => n?,
            None => return Err(::h2::Error::from(::h2::Reason::STREAM_CLOSED)),
        };
        let chunk = data.split_to(n.min(data.len()));
        stream.send_data(chunk, end && data.is_empty())?;
    }
    Ok(())
}

/// Read a response to its end, giving the credit of each DATA frame back
/// as it is read (so a body larger than the window arrives).
pub async fn read_answer(response: http::Response<RecvStream>) -> Result<Answer, ::h2::Error> {
    let (parts, mut body) = response.into_parts();
    let ended_on_headers = body.is_end_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = bounded("response DATA", body.data()).await {
        let chunk = chunk?;
        bytes.extend_from_slice(&chunk);
        body.flow_control().release_capacity(chunk.len())?;
    }
    let trailers = bounded("response trailers", body.trailers()).await?;
    Ok(Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: bytes,
        trailers,
        ended_on_headers,
    })
}

/// One request, to be written as HTTP/1.1 and as HTTP/2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    pub method: Method,
    /// The request target as sent (`/a/b?q`); over HTTP/2, `:path`.
    pub path: String,
    /// Header fields (names lower-case).
    pub fields: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Request trailer fields (HTTP/1.1: the body is sent chunked).
    pub trailers: Vec<(String, String)>,
    /// HTTP/1.1 sends the body chunked, its length unknown (HTTP/2 never
    /// declares one unless a `content-length` field is given).
    pub chunked: bool,
    /// HTTP/2's `:authority`.
    pub authority: String,
}

impl Exchange {
    pub fn new(method: &str, path: &str) -> Exchange {
        Exchange {
            method: method.parse().expect("a method"),
            path: path.to_owned(),
            fields: Vec::new(),
            body: Vec::new(),
            trailers: Vec::new(),
            chunked: false,
            authority: "test".to_owned(),
        }
    }

    /// HTTP/2's `:authority` (default `test`).
    pub fn authority(mut self, authority: &str) -> Exchange {
        self.authority = authority.to_owned();
        self
    }

    pub fn get(path: &str) -> Exchange {
        Exchange::new("GET", path)
    }

    /// A header field.
    pub fn field(mut self, name: &str, value: &str) -> Exchange {
        self.fields
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// A body (HTTP/1.1: with its `Content-Length`, unless chunked; HTTP/2:
    /// no `content-length` unless given as a field).
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Exchange {
        self.body = body.into();
        self
    }

    /// A trailer field after the body (HTTP/1.1: chunked).
    pub fn trailer(mut self, name: &str, value: &str) -> Exchange {
        self.trailers
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self.chunked = true;
        self
    }

    /// HTTP/1.1 sends the body chunked.
    pub fn chunked(mut self) -> Exchange {
        self.chunked = true;
        self
    }

    /// The HTTP/1.1 request, with `Connection: close`.
    pub fn h1_bytes(&self) -> Vec<u8> {
        let mut raw = format!("{} {} HTTP/1.1\r\nHost: test\r\n", self.method, self.path);
        for (name, value) in &self.fields {
            raw.push_str(&format!("{name}: {value}\r\n"));
        }
        raw.push_str("Connection: close\r\n");
        let chunked = self.chunked;
        let declared = self.fields.iter().any(|(n, _)| n == "content-length");
        if chunked {
            raw.push_str("Transfer-Encoding: chunked\r\n");
        } else if !declared && (!self.body.is_empty() || self.method == Method::POST) {
            raw.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        raw.push_str("\r\n");
        let mut raw = raw.into_bytes();
        if chunked {
            for piece in self.body.chunks(16 * 1024) {
                raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                raw.extend_from_slice(piece);
                raw.extend_from_slice(b"\r\n");
            }
            raw.extend_from_slice(b"0\r\n");
            for (name, value) in &self.trailers {
                raw.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
            }
            raw.extend_from_slice(b"\r\n");
        } else {
            raw.extend_from_slice(&self.body);
        }
        raw
    }

    /// The HTTP/2 request head: `:authority` `test`, as HTTP/1.1's `Host`.
    pub fn h2_request(&self) -> Request<()> {
        let mut req = Request::builder()
            .method(self.method.clone())
            .uri(format!("http://{}{}", self.authority, self.path));
        for (name, value) in &self.fields {
            req = req.header(name.as_str(), value.as_str());
        }
        req.body(())
            .unwrap_or_else(|e| panic!("an HTTP/2 request for {:?}: {e}", self.path))
    }

    fn h2_trailers(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in &self.trailers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("a trailer name"),
                HeaderValue::from_str(value).expect("a trailer value"),
            );
        }
        map
    }

    /// Write the HTTP/1.1 request on a new connection to `addr` and read
    /// its answer in whatever framing it comes (head only for HEAD).
    pub fn h1(&self, addr: SocketAddr) -> Framed {
        let mut s: TcpStream = connect(addr);
        // A server that answers early and closes may refuse the rest.
        let _ = s.write_all(&self.h1_bytes());
        read_framed(&mut s, self.method == Method::HEAD)
    }
}

/// The fields no comparison looks at: hop-by-hop (RFC 9113 §8.2.2), or
/// different on every answer (`date`).
pub const UNCOMPARED: &[&str] = &["date", "connection", "keep-alive", "transfer-encoding"];

/// What a comparison of an HTTP/1.1 and an HTTP/2 answer looks at: the
/// status, every field but [`UNCOMPARED`] (names lower-case, values in
/// order), the body and the trailers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub status: u16,
    pub fields: BTreeMap<String, Vec<String>>,
    pub body: Vec<u8>,
    pub trailers: BTreeMap<String, Vec<String>>,
}

impl View {
    fn of<'a>(
        status: u16,
        fields: impl Iterator<Item = (&'a str, String)>,
        body: &[u8],
        trailers: impl Iterator<Item = (&'a str, String)>,
    ) -> View {
        View {
            status,
            fields: collect(fields),
            body: body.to_vec(),
            trailers: collect(trailers),
        }
    }

    pub fn h1(framed: &Framed) -> View {
        let r = &framed.response;
        View::of(
            r.status,
            r.headers.iter().map(|(n, v)| (n.as_str(), v.clone())),
            &r.body,
            framed.trailers.iter().map(|(n, v)| (n.as_str(), v.clone())),
        )
    }

    pub fn h2(answer: &Answer) -> View {
        let text = |v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        let empty = HeaderMap::new();
        View::of(
            answer.status,
            answer.headers.iter().map(|(n, v)| (n.as_str(), text(v))),
            &answer.body,
            answer
                .trailers
                .as_ref()
                .unwrap_or(&empty)
                .iter()
                .map(|(n, v)| (n.as_str(), text(v))),
        )
    }

    /// The one value of `name`, if any.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(|v| v[0].as_str())
    }

    /// Every occurrence of `from` replaced by `to`, in the fields and the
    /// body: for a value each answer makes anew (a multipart boundary).
    pub fn replace(&mut self, from: &str, to: &str) {
        for values in self.fields.values_mut() {
            for v in values {
                *v = v.replace(from, to);
            }
        }
        self.body = replace_bytes(&self.body, from.as_bytes(), to.as_bytes());
    }
}

fn collect<'a>(fields: impl Iterator<Item = (&'a str, String)>) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in fields {
        let name = name.to_ascii_lowercase();
        if !UNCOMPARED.contains(&name.as_str()) {
            map.entry(name).or_default().push(value);
        }
    }
    map
}

fn replace_bytes(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if !from.is_empty() && hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// The two answers to `ex` are the same [`View`], and each one's
/// `content-length`, where it has one, is its body's length (a HEAD's is
/// the GET's; a 304's is not checked against its empty body). A long
/// body's mismatch is shown by length and first difference, not in full.
pub fn assert_same(ex: &Exchange, h1: &View, h2: &View) {
    let what = format!("{} {}", ex.method, ex.path);
    for (proto, view) in [("HTTP/1.1", h1), ("HTTP/2", h2)] {
        if ex.method == Method::HEAD || view.status == 304 {
            continue;
        }
        if let Some(len) = view.field("content-length") {
            assert_eq!(
                len.parse::<usize>().ok(),
                Some(view.body.len()),
                "{what} over {proto}: content-length {len} for a body of {}",
                view.body.len()
            );
        }
    }
    if h1.body != h2.body {
        let first = h1.body.iter().zip(&h2.body).position(|(a, b)| a != b);
        panic!(
            "{what}: bodies differ: HTTP/1.1 {} bytes, HTTP/2 {} bytes, first difference at {first:?}\n\
             HTTP/1.1 starts {:?}\nHTTP/2 starts {:?}",
            h1.body.len(),
            h2.body.len(),
            String::from_utf8_lossy(&h1.body[..h1.body.len().min(200)]),
            String::from_utf8_lossy(&h2.body[..h2.body.len().min(200)]),
        );
    }
    assert_eq!(h1.status, h2.status, "{what}: status");
    assert_eq!(h1.fields, h2.fields, "{what}: fields");
    assert_eq!(h1.trailers, h2.trailers, "{what}: trailers");
}
