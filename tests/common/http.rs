//! The HTTP/1.1 client side of the tests: connections with bounded reads
//! ([`connect`], [`read_until_close`], [`stays_silent`]), a byte-exact
//! response reader for any stream, plain or TLS ([`read_response`],
//! [`read_response_from`]) and a parser for captured bytes
//! ([`parse_responses`]), a reader of any framing a service's response may
//! have: length, chunked with trailers, or close-delimited
//! ([`read_framed`]), one-shot fetches that work before a server is
//! ready ([`try_get`], [`first_answer`]), a reader that stalls a worker
//! ([`slow_download`]), and the Prometheus series reader ([`metric`]).
//!
//! Nothing here starts a server: the `server` module does, and its
//! [`TestServer`](super::TestServer) methods (`get`, `admin_get`, `send`,
//! `metrics`) are built on these.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::IO_TIMEOUT;

/// A new connection with [`IO_TIMEOUT`] read and write timeouts.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Write `raw` on a new connection to `addr` and read until EOF or timeout.
/// A write the server refuses half-way (it closed early) is not an error:
/// what it answered before closing is still read.
pub fn send_to(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    let _ = s.write_all(raw);
    read_until_close(&mut s, IO_TIMEOUT).unwrap_or_else(|partial| partial)
}

/// Read until the peer closes (EOF or reset) within `limit`: `Ok(bytes)`.
/// `Err(bytes)` if the connection was still open at the bound.
pub fn read_until_close(s: &mut TcpStream, limit: Duration) -> Result<Vec<u8>, Vec<u8>> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(out);
        }
        s.set_read_timeout(Some(left)).expect("read timeout");
        match s.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if is_timeout(&e) => return Err(out),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // ECONNRESET and friends: closed.
            Err(_) => return Ok(out),
        }
    }
}

/// Whether nothing at all arrives on `s` within `quiet` (the connection stays
/// open and silent). Restores [`IO_TIMEOUT`] afterwards.
pub fn stays_silent(mut s: &TcpStream, quiet: Duration) -> bool {
    s.set_read_timeout(Some(quiet)).expect("read timeout");
    let mut b = [0u8; 1];
    let silent = matches!(s.read(&mut b), Err(e) if is_timeout(&e));
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    silent
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Shut the write half so the server sees EOF after what was sent.
pub fn half_close(s: &TcpStream) {
    let _ = s.shutdown(Shutdown::Write);
}

/// One parsed HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// e.g. `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Header fields in order, names as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name` (case-insensitive), in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `Content-Length` value, parsed.
    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length").map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("bad Content-Length {v:?}"))
        })
    }

    /// The server said it closes after this response.
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Why no whole response was read.
#[derive(Debug)]
pub enum ReadError {
    /// The connection closed (EOF, or an error other than a timeout) before
    /// any byte of a response: the request may be retried on a new
    /// connection (RFC 9112 §9.3.1).
    Unanswered(io::Error),
    /// Anything else: a timeout, or a response cut short or malformed.
    Broken(io::Error),
}

impl ReadError {
    /// The I/O error underneath, whichever kind of failure it was.
    pub fn into_io(self) -> io::Error {
        match self {
            ReadError::Unanswered(e) | ReadError::Broken(e) => e,
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Unanswered(e) => write!(f, "closed before any response byte: {e}"),
            ReadError::Broken(e) => write!(f, "{e}"),
        }
    }
}

/// Read one response (Content-Length framing; none for 1xx/204/304) from
/// `s`, byte-exact: nothing after it is consumed, so the stream can carry
/// the next request and response. Panics on EOF, timeout or a malformed head.
pub fn read_response(s: &mut impl Read) -> Response {
    try_read_response(s, true).unwrap_or_else(|e| panic!("reading a response: {e}"))
}

/// Like [`read_response`] for the answer to a HEAD request: the head only.
pub fn read_response_head_only(s: &mut impl Read) -> Response {
    try_read_response(s, false).unwrap_or_else(|e| panic!("reading a HEAD response: {e}"))
}

/// Read one response; `with_body: false` for HEAD.
pub fn try_read_response(s: &mut impl Read, with_body: bool) -> io::Result<Response> {
    read_response_from(s, with_body).map_err(ReadError::into_io)
}

/// Read one response, telling a connection closed before any byte of it
/// from one that broke later; `with_body: false` for HEAD.
pub fn read_response_from(s: &mut impl Read, with_body: bool) -> Result<Response, ReadError> {
    let head = read_head(s)?;
    let mut resp = parse_head(&head).map_err(ReadError::Broken)?;
    if with_body && !(resp.status < 200 || resp.status == 204 || resp.status == 304) {
        let broken = |m: String| ReadError::Broken(io::Error::other(m));
        match resp.header("transfer-encoding") {
            None => {}
            Some(te) if te.eq_ignore_ascii_case("chunked") => {
                let (chunks, _trailers) = read_chunks(s).map_err(ReadError::Broken)?;
                resp.body = chunks.concat();
                return Ok(resp);
            }
            Some(te) => return Err(broken(format!("unexpected Transfer-Encoding {te:?}"))),
        }
        let n = match resp.header("content-length").map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => return Err(broken(format!("response without Content-Length: {resp:?}"))),
        };
        let mut body = vec![0u8; n];
        s.read_exact(&mut body).map_err(ReadError::Broken)?;
        resp.body = body;
    }
    Ok(resp)
}

/// Read up to and including the blank line, a byte at a time so nothing
/// beyond the head is taken from the stream.
fn read_head(s: &mut impl Read) -> Result<Vec<u8>, ReadError> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(0) => {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed after {} bytes of a response head: {:?}",
                        head.len(),
                        String::from_utf8_lossy(&head)
                    ),
                );
                return Err(if head.is_empty() {
                    ReadError::Unanswered(e)
                } else {
                    ReadError::Broken(e)
                });
            }
            Ok(_) => head.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if head.is_empty() && !is_timeout(&e) => return Err(ReadError::Unanswered(e)),
            Err(e) => return Err(ReadError::Broken(e)),
        }
        if head.len() > 64 * 1024 {
            return Err(ReadError::Broken(io::Error::other(
                "response head over 64 KiB",
            )));
        }
    }
    Ok(head)
}

fn parse_head(head: &[u8]) -> io::Result<Response> {
    let bad = |what: &str| {
        io::Error::other(format!(
            "malformed response head ({what}): {:?}",
            String::from_utf8_lossy(head)
        ))
    };
    let text = std::str::from_utf8(head).map_err(|_| bad("not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().ok_or_else(|| bad("empty"))?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().ok_or_else(|| bad("version"))?.to_owned();
    let status = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("status code"))?;
    let reason = parts.next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or_else(|| bad("field"))?;
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(Response {
        version,
        status,
        reason,
        headers,
        body: Vec::new(),
    })
}

/// A response read in whatever framing it came: its body decoded, and for
/// a chunked one each chunk's data and the trailer fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framed {
    /// The head, and the whole body in `body`.
    pub response: Response,
    /// How the body was delimited.
    pub delimit: Delimit,
    /// The data of each chunk, in order (chunked only).
    pub chunks: Vec<Vec<u8>>,
    /// The trailer fields (chunked only), names as sent.
    pub trailers: Fields,
}

/// Fields in order, names as sent.
pub type Fields = Vec<(String, String)>;

/// How a response body ended (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimit {
    /// No body: HEAD, 1xx, 204, 304.
    None,
    Length,
    Chunked,
    /// Read until the server closed.
    Close,
}

/// Read one response of any framing from `s`, byte-exact for length and
/// chunked bodies (nothing after it is consumed); `head_request` for the
/// answer to a HEAD. Panics on a timeout or malformed framing.
pub fn read_framed(s: &mut impl Read, head_request: bool) -> Framed {
    try_read_framed(s, head_request).unwrap_or_else(|e| panic!("reading a response: {e}"))
}

/// [`read_framed`], the failure returned.
pub fn try_read_framed(s: &mut impl Read, head_request: bool) -> io::Result<Framed> {
    let head = read_head(s).map_err(ReadError::into_io)?;
    let mut response = parse_head(&head)?;
    let status = response.status;
    let chunked = response
        .header("transfer-encoding")
        .map(|te| te.eq_ignore_ascii_case("chunked"));
    let length = response.header("content-length").map(str::to_owned);
    let (delimit, chunks, trailers) =
        if head_request || status < 200 || status == 204 || status == 304 {
            (Delimit::None, Vec::new(), Vec::new())
        } else {
            match (chunked, length) {
                (Some(false), _) => {
                    return Err(io::Error::other(format!(
                        "response coding other than chunked: {response:?}"
                    )))
                }
                (Some(true), Some(_)) => {
                    return Err(io::Error::other(format!(
                        "response with Content-Length and Transfer-Encoding: {response:?}"
                    )))
                }
                (Some(true), None) => {
                    let (chunks, trailers) = read_chunks(s)?;
                    response.body = chunks.concat();
                    (Delimit::Chunked, chunks, trailers)
                }
                (None, Some(n)) => {
                    let n: usize = n
                        .parse()
                        .map_err(|_| io::Error::other(format!("bad Content-Length {n:?}")))?;
                    response.body = vec![0u8; n];
                    s.read_exact(&mut response.body)?;
                    (Delimit::Length, Vec::new(), Vec::new())
                }
                (None, None) => {
                    s.read_to_end(&mut response.body)?;
                    (Delimit::Close, Vec::new(), Vec::new())
                }
            }
        };
    Ok(Framed {
        response,
        delimit,
        chunks,
        trailers,
    })
}

/// A chunked body after its head: each chunk's data, then the trailers.
fn read_chunks(s: &mut impl Read) -> io::Result<(Vec<Vec<u8>>, Fields)> {
    let mut chunks = Vec::new();
    loop {
        let line = read_line(s)?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| io::Error::other(format!("bad chunk size line {line:?}")))?;
        if size == 0 {
            break;
        }
        let mut data = vec![0u8; size + 2];
        s.read_exact(&mut data)?;
        if !data.ends_with(b"\r\n") {
            return Err(io::Error::other("chunk data not followed by CRLF"));
        }
        data.truncate(size);
        chunks.push(data);
    }
    let mut trailers = Vec::new();
    loop {
        let line = read_line(s)?;
        if line.is_empty() {
            return Ok((chunks, trailers));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| io::Error::other(format!("bad trailer field {line:?}")))?;
        trailers.push((name.to_owned(), value.trim().to_owned()));
    }
}

/// One CRLF-ended line, a byte at a time, without its CRLF.
fn read_line(s: &mut impl Read) -> io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut byte)?;
        line.push(byte[0]);
        if line.len() > 64 * 1024 {
            return Err(io::Error::other("line over 64 KiB"));
        }
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| io::Error::other("line not UTF-8"))
}

/// Parse every response in `bytes` (as returned by `send`), GET framing.
/// Panics on a truncated response.
pub fn parse_responses(mut bytes: &[u8]) -> Vec<Response> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let end = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| {
                panic!(
                    "truncated response head: {:?}",
                    String::from_utf8_lossy(bytes)
                )
            })
            + 4;
        let mut resp = parse_head(&bytes[..end]).unwrap_or_else(|e| panic!("{e}"));
        bytes = &bytes[end..];
        if !(resp.status < 200 || resp.status == 204 || resp.status == 304) {
            let n = resp.content_length().expect("Content-Length") as usize;
            assert!(
                bytes.len() >= n,
                "body truncated: want {n}, have {}",
                bytes.len()
            );
            resp.body = bytes[..n].to_vec();
            bytes = &bytes[n..];
        }
        out.push(resp);
    }
    out
}

/// Try one GET; `Some(status line)` if anything came back. For servers that
/// may not listen yet, or no longer: a refusal or silence is `None`.
pub fn try_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    (n > 0).then(|| {
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    })
}

/// [`try_get`] `path` on `addr` every 20 ms from `started` until something
/// answers or `limit` (since `started`) passes: the first answer (when, and
/// its status line), and how many tries before `early` got nothing. For a
/// server still behind its startup barrier.
pub fn first_answer(
    addr: SocketAddr,
    path: &str,
    started: Instant,
    early: Duration,
    limit: Duration,
) -> (Option<(Duration, String)>, usize) {
    let mut tried_early = 0;
    while started.elapsed() < limit {
        match try_get(addr, path) {
            Some(line) => return (Some((started.elapsed(), line)), tried_early),
            None if started.elapsed() < early => tried_early += 1,
            None => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (None, tried_early)
}

/// A connection that asked for `/big.bin` (then sent `extra`) and read only
/// the first KiB of the answer, so the worker is left writing to it; and
/// the length of the response head within that KiB.
pub fn slow_download(addr: SocketAddr, extra: &str) -> (TcpStream, usize) {
    let mut s = connect(addr);
    s.write_all(format!("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n{extra}").as_bytes())
        .unwrap();
    let mut first = [0u8; 1024];
    s.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"HTTP/1.1 200"));
    let head_len = first.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (s, head_len)
}

/// The value of a series in a Prometheus text exposition; `None` when no
/// line matches. `name` alone is the unlabelled series (a server total);
/// `name{a="x",b="y"}` is the sum of every series of `name` whose labels
/// include those (so `servery_requests_total{worker="0"}` adds up the
/// worker's series of each protocol).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    let Some((name, labels)) = series.split_once('{') else {
        return text
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok());
    };
    let wanted: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((have, value)) = rest.split_once("} ") else {
            continue;
        };
        let have: Vec<&str> = have.split(',').collect();
        if wanted.iter().all(|w| have.contains(w)) {
            if let Ok(v) = value.trim().parse::<f64>() {
                *found.get_or_insert(0.0) += v;
            }
        }
    }
    found
}
