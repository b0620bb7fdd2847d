//! Responses and their serialisation.
//!
//! A response is a status, header fields and a body. Handlers that answer the
//! same bytes again and again (the small-file cache) hand over a prebuilt head
//! block instead of a field list, so a cache hit costs one short memcpy of
//! the head into the connection's head buffer and no formatting; the body is
//! written from the cache's own `Bytes`. The connection adds the
//! per-request fields (`Date`, `Connection`) and the blank line.
//!
//! A streamed body of unknown length is framed here too ([`chunk_size_line`],
//! [`CHUNK_END`], [`last_chunk_with_trailers`]): the connection writes what
//! these return and knows nothing of the wire format.

use std::borrow::Cow;
use std::fs::File;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use bytes::{BufMut, Bytes};

use super::finish::{connection_field, SERVER_FIELD};

/// An HTTP status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(u16);

impl Status {
    pub const OK: Status = Status(200);
    pub const NO_CONTENT: Status = Status(204);
    pub const PARTIAL_CONTENT: Status = Status(206);
    pub const MOVED_PERMANENTLY: Status = Status(301);
    pub const NOT_MODIFIED: Status = Status(304);
    pub const BAD_REQUEST: Status = Status(400);
    pub const UNAUTHORIZED: Status = Status(401);
    pub const FORBIDDEN: Status = Status(403);
    pub const NOT_FOUND: Status = Status(404);
    pub const METHOD_NOT_ALLOWED: Status = Status(405);
    pub const REQUEST_TIMEOUT: Status = Status(408);
    pub const PRECONDITION_FAILED: Status = Status(412);
    pub const PAYLOAD_TOO_LARGE: Status = Status(413);
    pub const URI_TOO_LONG: Status = Status(414);
    pub const RANGE_NOT_SATISFIABLE: Status = Status(416);
    pub const MISDIRECTED_REQUEST: Status = Status(421);
    pub const TOO_MANY_REQUESTS: Status = Status(429);
    pub const REQUEST_HEADER_FIELDS_TOO_LARGE: Status = Status(431);
    pub const INTERNAL_SERVER_ERROR: Status = Status(500);
    pub const NOT_IMPLEMENTED: Status = Status(501);
    pub const SERVICE_UNAVAILABLE: Status = Status(503);

    /// A status from its code; `None` outside 100..=999.
    pub fn from_code(code: u16) -> Option<Status> {
        (100..=999).contains(&code).then_some(Status(code))
    }

    pub fn code(self) -> u16 {
        self.0
    }

    /// The class digit (1 to 5 for valid codes), used by the metrics.
    pub fn class(self) -> usize {
        usize::from(self.0 / 100)
    }

    /// RFC 9110 §15 reason phrases for the codes we send.
    pub fn reason(self) -> &'static str {
        match self.0 {
            200 => "OK",
            204 => "No Content",
            206 => "Partial Content",
            301 => "Moved Permanently",
            304 => "Not Modified",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            412 => "Precondition Failed",
            413 => "Content Too Large",
            414 => "URI Too Long",
            416 => "Range Not Satisfiable",
            421 => "Misdirected Request",
            429 => "Too Many Requests",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            503 => "Service Unavailable",
            _ => "",
        }
    }

    /// RFC 9110 §6.4.1: 1xx, 204 and 304 never carry content (nor, here, a
    /// Content-Length).
    pub fn has_no_body(self) -> bool {
        self.0 < 200 || self.0 == 204 || self.0 == 304
    }
}

/// A byte range of an open file, sent after the head.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub file: Rc<File>,
    pub offset: u64,
    pub len: u64,
}

/// What follows the head.
#[derive(Debug, Clone, Default)]
pub enum Body {
    #[default]
    Empty,
    /// Owned or shared bytes (a static buffer is `Bytes::from_static`).
    Bytes(Bytes),
    /// Part of a file, streamed (zero-copy where the driver allows).
    File(FileRange),
    /// A sequence of pieces (`multipart/byteranges`: part heads and ranges).
    Parts(Vec<Part>),
}

/// One piece of a [`Body::Parts`].
#[derive(Debug, Clone)]
pub enum Part {
    Bytes(Bytes),
    File(FileRange),
}

impl Part {
    pub fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::File(f) => f.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Body {
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File(f) => f.len,
            Body::Parts(p) => p.iter().map(Part::len).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The header part of a response.
#[derive(Debug, Clone)]
pub enum Fields {
    /// Header fields to format; `Server` and `Content-Length` are added.
    List(Vec<(Cow<'static, str>, Cow<'static, str>)>),
    /// A prebuilt head from [`prebuild_head`].
    Prebuilt(HeadBlock),
}

/// A response head built once and answered with many times (a cached small
/// file, a compressed variant): the HTTP/1.1 block (status line and every
/// field except `Date` and `Connection`, without the final blank line),
/// written as it is; the same head as a header map, which HTTP/3 answers
/// with, and HPACK-encoded, which HTTP/2 answers with, each made by the
/// first request over such a protocol and kept here, with the block, for as
/// long as the cache keeps the entry.
///
/// Cheap to clone (one reference count); `Send` and `Sync`, as the
/// compression cache is shared by the workers of a process.
#[derive(Debug, Clone)]
pub struct HeadBlock(Arc<Built>);

#[derive(Debug)]
struct Built {
    block: Bytes,
    map: OnceLock<http::HeaderMap>,
    hpack: OnceLock<Bytes>,
}

impl HeadBlock {
    /// The HTTP/1.1 block.
    pub fn block(&self) -> &Bytes {
        &self.0.block
    }

    /// The fields of the block as the list `prebuild_head` was given for
    /// `status`: without the status line and the `Server` and
    /// `Content-Length` lines it adds itself.
    fn fields(&self, status: Status) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
        let text = String::from_utf8_lossy(&self.0.block);
        let mut lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
        if !status.has_no_body() {
            lines.pop();
        }
        lines
            .iter()
            .skip(2)
            .filter_map(|l| l.split_once(": "))
            .map(|(n, v)| (Cow::Owned(n.to_owned()), Cow::Owned(v.to_owned())))
            .collect()
    }

    /// The head as a header map: made by `make` from the block the first
    /// time, the same map after.
    pub fn map(&self, make: impl FnOnce(&Bytes) -> http::HeaderMap) -> &http::HeaderMap {
        self.0.map.get_or_init(|| make(&self.0.block))
    }

    /// The head's fields HPACK-encoded (HTTP/2): made by `make` from the
    /// block the first time, the same bytes after.
    pub fn hpack(&self, make: impl FnOnce(&Bytes) -> Bytes) -> &Bytes {
        self.0.hpack.get_or_init(|| make(&self.0.block))
    }
}

/// A complete response as a handler returns it.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: Status,
    pub fields: Fields,
    pub body: Body,
}

impl Response {
    /// A response with a field list and a body.
    pub fn new(status: Status, body: Body) -> Response {
        Response {
            status,
            fields: Fields::List(Vec::new()),
            body,
        }
    }

    /// A short text body (error pages and the like).
    pub fn text(status: Status, text: &'static str) -> Response {
        Response::new(status, Body::Bytes(Bytes::from_static(text.as_bytes())))
            .header("Content-Type", "text/plain; charset=utf-8")
    }

    /// Add a header field. A prebuilt head is read back into a list first
    /// (rare: a prebuilt head is a cache's answer as it is), so the field
    /// is never lost.
    pub fn header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Response {
        if let Fields::Prebuilt(head) = &self.fields {
            self.fields = Fields::List(head.fields(self.status));
        }
        if let Fields::List(list) = &mut self.fields {
            list.push((name.into(), value.into()));
        }
        self
    }
}

/// How the `Connection` field must read on this response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// HTTP/1.1 persistent by default: no field.
    Default,
    /// An HTTP/1.0 client asked for keep-alive: `Connection: keep-alive`.
    KeepAlive,
    /// The connection closes after this response: `Connection: close`.
    Close,
}

/// Format a head block (status line, `Server`, the fields, `Content-Length`)
/// once, for reuse by [`write_head`] on every hit.
pub fn prebuild_head(
    status: Status,
    fields: &[(Cow<'static, str>, Cow<'static, str>)],
    content_length: u64,
) -> HeadBlock {
    let mut out = Vec::with_capacity(256);
    write_fields(&mut out, status, fields, content_length);
    HeadBlock(Arc::new(Built {
        block: Bytes::from(out),
        map: OnceLock::new(),
        hpack: OnceLock::new(),
    }))
}

fn write_fields(
    out: &mut impl BufMut,
    status: Status,
    fields: &[(Cow<'static, str>, Cow<'static, str>)],
    content_length: u64,
) {
    let mut code = itoa::Buffer::new();
    write_status_line(out, code.format(status.code()), status.reason());
    out.put_slice(SERVER_FIELD);
    for (name, value) in fields {
        write_field(out, name.as_bytes(), value.as_bytes());
    }
    if !status.has_no_body() {
        write_delimit(out, Delimit::Length(content_length));
    }
}

/// `HTTP/1.1 <code> <reason>` and its CRLF: every head's first line.
#[inline]
fn write_status_line(out: &mut impl BufMut, code: &str, reason: &str) {
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(code.as_bytes());
    out.put_u8(b' ');
    out.put_slice(reason.as_bytes());
    out.put_slice(b"\r\n");
}

/// One field line.
#[inline]
fn write_field(out: &mut impl BufMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// The framing field `delimit` says (RFC 9112 §6): a length, chunked, or none.
#[inline]
fn write_delimit(out: &mut impl BufMut, delimit: Delimit) {
    match delimit {
        Delimit::Length(n) => {
            out.put_slice(b"Content-Length: ");
            out.put_slice(itoa::Buffer::new().format(n).as_bytes());
            out.put_slice(b"\r\n");
        }
        Delimit::Chunked => out.put_slice(b"Transfer-Encoding: chunked\r\n"),
        Delimit::Neither => {}
    }
}

/// How a service's response body is delimited on the wire (RFC 9112 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimit {
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked` (HTTP/1.1, size unknown).
    Chunked,
    /// Neither: no body (1xx, 204, 304), a HEAD whose size is unknown, or an
    /// HTTP/1.0 body ended by closing the connection.
    Neither,
}

/// Append the complete head of a service's response: status line, `Server`
/// unless the service set its own, its fields (less those the connection
/// owns), the framing `delimit` says, `Date`, the connection's `extra`
/// lines, `Connection`, blank line.
pub fn write_service_head(
    out: &mut impl BufMut,
    status: http::StatusCode,
    fields: &http::HeaderMap,
    delimit: Delimit,
    date: &[u8],
    persistence: Persistence,
    extra: &[u8],
) {
    write_status_line(
        out,
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
    );
    if !fields.contains_key(http::header::SERVER) {
        out.put_slice(SERVER_FIELD);
    }
    for (name, value) in fields {
        if !connection_field(name) {
            write_field(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    write_delimit(out, delimit);
    write_tail(out, date, persistence, extra);
}

/// The end of a chunk's data (RFC 9112 §7.1).
pub const CHUNK_END: &[u8] = b"\r\n";
/// The last chunk of a chunked body without trailers, and the body's end.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The size line that opens a chunk of `len` bytes (hex, RFC 9112 §7.1).
pub fn chunk_size_line(len: usize) -> Bytes {
    Bytes::from(format!("{len:x}\r\n"))
}

/// The last chunk of a chunked body with its trailer fields, and the
/// body's end (RFC 9112 §7.1.2).
pub fn last_chunk_with_trailers(trailers: &http::HeaderMap) -> Bytes {
    let mut block = b"0\r\n".to_vec();
    for (name, value) in trailers {
        block.extend_from_slice(name.as_str().as_bytes());
        block.extend_from_slice(b": ");
        block.extend_from_slice(value.as_bytes());
        block.extend_from_slice(b"\r\n");
    }
    block.extend_from_slice(b"\r\n");
    Bytes::from(block)
}

/// Append the complete head of `resp` (ending in the blank line) to `out`
/// (a `Vec<u8>`, or the connection's `BytesMut` head buffer); `extra` is
/// the connection's own field lines, each ending in CRLF (`Alt-Svc` on a
/// TLS connection where HTTP/3 is served), or empty.
pub fn write_head(
    out: &mut impl BufMut,
    resp: &Response,
    date: &[u8],
    persistence: Persistence,
    extra: &[u8],
) {
    match &resp.fields {
        Fields::List(fields) => write_fields(out, resp.status, fields, resp.body.len()),
        Fields::Prebuilt(head) => out.put_slice(head.block()),
    }
    write_tail(out, date, persistence, extra);
}

/// `Date`, the connection's `extra` lines, `Connection` as `persistence`
/// says, and the blank line.
fn write_tail(out: &mut impl BufMut, date: &[u8], persistence: Persistence, extra: &[u8]) {
    out.put_slice(b"Date: ");
    out.put_slice(date);
    out.put_slice(b"\r\n");
    out.put_slice(extra);
    match persistence {
        Persistence::Default => {}
        Persistence::KeepAlive => out.put_slice(b"Connection: keep-alive\r\n"),
        Persistence::Close => out.put_slice(b"Connection: close\r\n"),
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    #[test]
    fn head_has_length_server_and_date() {
        let r = Response::text(Status::NOT_FOUND, "nope\n");
        let mut out = Vec::new();
        write_head(&mut out, &r, DATE, Persistence::Close, b"");
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("HTTP/1.1 404 Not Found\r\nServer: servery\r\n"));
        assert!(s.contains("Content-Length: 5\r\n"));
        assert!(s.contains("Connection: close\r\n"));
        assert!(s.ends_with("GMT\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn not_modified_has_no_content_length() {
        let r = Response::new(Status::NOT_MODIFIED, Body::Empty);
        let mut out = Vec::new();
        write_head(&mut out, &r, DATE, Persistence::Default, b"");
        assert!(!String::from_utf8(out).unwrap().contains("Content-Length"));
    }

    #[test]
    fn a_service_head_keeps_its_fields_but_not_its_framing() {
        let mut fields = http::HeaderMap::new();
        fields.insert("content-type", "application/json".parse().unwrap());
        fields.insert("content-length", "999".parse().unwrap());
        fields.insert("connection", "keep-alive".parse().unwrap());
        let mut out = Vec::new();
        write_service_head(
            &mut out,
            http::StatusCode::CREATED,
            &fields,
            Delimit::Chunked,
            DATE,
            Persistence::Default,
            b"",
        );
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.starts_with("HTTP/1.1 201 Created\r\nServer: servery\r\n"),
            "{s}"
        );
        assert!(s.contains("content-type: application/json\r\n"));
        assert!(s.contains("Transfer-Encoding: chunked\r\n"));
        assert!(!s.contains("999") && !s.contains("keep-alive"), "{s}");
        assert!(s.ends_with("GMT\r\n\r\n"));
    }

    #[test]
    fn a_service_may_name_its_own_server() {
        let mut fields = http::HeaderMap::new();
        fields.insert("server", "app/1".parse().unwrap());
        let mut out = Vec::new();
        write_service_head(
            &mut out,
            http::StatusCode::OK,
            &fields,
            Delimit::Length(0),
            DATE,
            Persistence::Close,
            b"Alt-Svc: h3=\":443\"; ma=60\r\n",
        );
        let s = String::from_utf8(out).unwrap();
        assert!(
            !s.contains("servery") && s.contains("server: app/1\r\n"),
            "{s}"
        );
        assert!(s.contains("Content-Length: 0\r\n"));
        assert!(
            s.ends_with("GMT\r\nAlt-Svc: h3=\":443\"; ma=60\r\nConnection: close\r\n\r\n"),
            "{s}"
        );
    }

    #[test]
    fn a_field_added_to_a_prebuilt_head_is_written_with_the_rest() {
        let fields = [
            ("Content-Type".into(), "text/plain".into()),
            ("ETag".into(), "\"x\"".into()),
        ];
        for status in [Status::OK, Status::NOT_MODIFIED] {
            let prebuilt = Response {
                status,
                fields: Fields::Prebuilt(prebuild_head(status, &fields, 3)),
                body: Body::Bytes(Bytes::from_static(b"abc")),
            }
            .header("X-Added", "1");
            let listed = Response {
                status,
                fields: Fields::List(fields.to_vec()),
                body: Body::Bytes(Bytes::from_static(b"abc")),
            }
            .header("X-Added", "1");
            let head = |r: &Response| {
                let mut out = Vec::new();
                write_head(&mut out, r, DATE, Persistence::Default, b"");
                String::from_utf8(out).unwrap()
            };
            assert_eq!(head(&prebuilt), head(&listed));
            assert!(head(&prebuilt).contains("X-Added: 1\r\n"));
        }
    }

    #[test]
    fn a_chunked_body_is_framed_as_rfc_9112_says() {
        assert_eq!(&chunk_size_line(0x1a2)[..], b"1a2\r\n");
        assert_eq!(&chunk_size_line(1)[..], b"1\r\n");
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-digest", http::HeaderValue::from_static("abc"));
        assert_eq!(
            &last_chunk_with_trailers(&trailers)[..],
            b"0\r\nx-digest: abc\r\n\r\n"
        );
        assert_eq!(
            &last_chunk_with_trailers(&http::HeaderMap::new())[..],
            LAST_CHUNK
        );
    }

    #[test]
    fn prebuilt_head_is_reused_verbatim() {
        let block = prebuild_head(
            Status::OK,
            &[("Content-Type".into(), "text/plain".into())],
            3,
        );
        let r = Response {
            status: Status::OK,
            fields: Fields::Prebuilt(block.clone()),
            body: Body::Bytes(Bytes::from_static(b"abc")),
        };
        let mut out = Vec::new();
        write_head(&mut out, &r, DATE, Persistence::KeepAlive, b"");
        assert!(out.starts_with(block.block()));
        assert!(out.ends_with(b"Connection: keep-alive\r\n\r\n"));
    }
}
