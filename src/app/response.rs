//! Response bodies: what a service hands back after the head.
//!
//! [`Body`] covers what the sender can write without a copy (nothing, a
//! `Bytes`, a range of an open file: sendfile on plain TCP) and anything
//! else as a stream of frames (`http_body::Body`), polled one frame at a
//! time, each written before the next is asked for. A service may return
//! any `http_body::Body` instead (axum's, `http_body_util::Full`): the
//! connection takes it as a stream, and a stream whose size is known and
//! whose one frame is ready at once still leaves in one write with its head.
//!
//! `Body` is itself an `http_body::Body`, so it can be handed on to code
//! that expects one; a file range is then read in 64 KiB chunks with
//! `pread` on the worker's thread (the connection never does that: it sends
//! the range itself).

use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::http::{FileRange, Part};

/// An error of a streamed body (any error type, boxed).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response to a request: the `http` crate's, with a [`Body`] unless said.
pub type Response<B = Body> = http::Response<B>;

/// A stream of frames, boxed.
type Stream = Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError>>>;

/// Chunk of a file range read when a `Body` is polled as a stream.
const FILE_READ_BYTES: u64 = 64 * 1024;

/// A response body.
pub struct Body {
    pub(crate) kind: Kind,
}

pub(crate) enum Kind {
    /// No body.
    Empty,
    /// In memory, written from where it lives.
    Bytes(Bytes),
    /// Pieces in order: in memory or file ranges (the static files'
    /// multipart ranges and large files).
    Pieces(Vec<Part>),
    /// Frames produced as the response is sent.
    Stream(Stream),
}

impl Body {
    /// No body.
    pub fn empty() -> Body {
        Body { kind: Kind::Empty }
    }

    /// `len` bytes of `file` from `offset`, sent zero-copy (sendfile) on
    /// plain TCP. The file must hold them: a file that shrinks underneath
    /// ends the response early and closes the connection.
    pub fn file(file: File, offset: u64, len: u64) -> Body {
        Body::from_pieces(vec![Part::File(FileRange {
            file: Rc::new(file),
            offset,
            len,
        })])
    }

    /// Frames from `body`, polled as the response is written.
    pub fn stream<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes, Error: Into<BoxError>> + 'static,
    {
        /// Boxes its errors; `Unpin`, as its body is pinned in its own box.
        struct Errors<B>(Pin<Box<B>>);
        impl<B> http_body::Body for Errors<B>
        where
            B: http_body::Body<Data = Bytes, Error: Into<BoxError>>,
        {
            type Data = Bytes;
            type Error = BoxError;
            fn poll_frame(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
                let inner = self.get_mut().0.as_mut();
                inner
                    .poll_frame(cx)
                    .map(|f| f.map(|r| r.map_err(Into::into)))
            }
            fn is_end_stream(&self) -> bool {
                self.0.is_end_stream()
            }
            fn size_hint(&self) -> SizeHint {
                self.0.size_hint()
            }
        }
        Body {
            kind: Kind::Stream(Box::pin(Errors(Box::pin(body)))),
        }
    }

    /// The pieces of a static-file body.
    pub(crate) fn from_pieces(pieces: Vec<Part>) -> Body {
        Body {
            kind: Kind::Pieces(pieces),
        }
    }

    /// The static files' body as a `Body`.
    pub(crate) fn from_static(body: crate::http::Body) -> Body {
        match body {
            crate::http::Body::Empty => Body::empty(),
            crate::http::Body::Bytes(b) => Body::from(b),
            crate::http::Body::File(f) => Body::from_pieces(vec![Part::File(f)]),
            crate::http::Body::Parts(p) => Body::from_pieces(p),
        }
    }

    /// Its length, when known before it is sent.
    pub fn len(&self) -> Option<u64> {
        match &self.kind {
            Kind::Empty => Some(0),
            Kind::Bytes(b) => Some(b.len() as u64),
            Kind::Pieces(p) => Some(p.iter().map(Part::len).sum()),
            Kind::Stream(s) => s.size_hint().exact(),
        }
    }

    /// Whether it is known to be empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Empty => "empty",
            Kind::Bytes(_) => "bytes",
            Kind::Pieces(_) => "pieces",
            Kind::Stream(_) => "stream",
        };
        f.debug_struct("Body")
            .field("kind", &kind)
            .field("len", &self.len())
            .finish()
    }
}

impl Default for Body {
    fn default() -> Body {
        Body::empty()
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Body {
        Body {
            kind: Kind::Bytes(b),
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        Body::from(Bytes::from(v))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Body::from(Bytes::from(s))
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Body {
        Body::from(Bytes::from_static(s.as_bytes()))
    }
}

impl From<&'static [u8]> for Body {
    fn from(s: &'static [u8]) -> Body {
        Body::from(Bytes::from_static(s))
    }
}

impl From<()> for Body {
    fn from(_: ()) -> Body {
        Body::empty()
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match &mut this.kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Bytes(b) => {
                let b = std::mem::take(b);
                this.kind = Kind::Empty;
                Poll::Ready((!b.is_empty()).then(|| Ok(Frame::data(b))))
            }
            Kind::Pieces(pieces) => Poll::Ready(next_piece(pieces).map(|r| r.map(Frame::data))),
            Kind::Stream(s) => s.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Bytes(b) => b.is_empty(),
            Kind::Pieces(p) => p.iter().all(Part::is_empty),
            Kind::Stream(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.len() {
            Some(n) => SizeHint::with_exact(n),
            None => match &self.kind {
                Kind::Stream(s) => s.size_hint(),
                _ => SizeHint::default(),
            },
        }
    }
}

/// A static-files response (`crate::http::Response`) as the `http` crate's,
/// for a static service called through [`Service::call`](super::Service).
/// A prebuilt head block is read back into fields (its status line,
/// `Server` and `Content-Length` are the connection's to write).
pub(crate) fn from_static(resp: crate::http::Response) -> Response<Body> {
    let headers = static_fields(&resp.fields);
    with_fields(resp, headers)
}

/// A static-files response with `headers` (its fields, already read) as
/// the `http` crate's.
pub(crate) fn with_fields(resp: crate::http::Response, headers: http::HeaderMap) -> Response<Body> {
    let mut out = Response::new(Body::from_static(resp.body));
    *out.status_mut() = http::StatusCode::from_u16(resp.status.code())
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    *out.headers_mut() = headers;
    out
}

/// The fields of a static-files response as a `HeaderMap`, less `Server`
/// and `Content-Length` (the connection's to write).
pub(crate) fn static_fields(fields: &crate::http::Fields) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    let mut add = |name: &[u8], value: &[u8]| {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            if n != http::header::CONTENT_LENGTH && n != http::header::SERVER {
                headers.append(n, v);
            }
        }
    };
    match fields {
        crate::http::Fields::List(list) => {
            for (n, v) in list {
                add(n.as_bytes(), v.as_bytes());
            }
        }
        crate::http::Fields::Prebuilt(block) => {
            // Past the status line, `Name: value` lines.
            for line in block.block().split(|&b| b == b'\n').skip(1) {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if let Some(colon) = line.iter().position(|&b| b == b':') {
                    let value = line[colon + 1..].trim_ascii_start();
                    add(&line[..colon], value);
                }
            }
        }
    }
    headers
}

/// The next bytes of a piece list read as a stream; file ranges by `pread`.
fn next_piece(pieces: &mut Vec<Part>) -> Option<Result<Bytes, BoxError>> {
    pieces.retain(|p| !p.is_empty());
    let first = pieces.first_mut()?;
    match first {
        Part::Bytes(_) => match pieces.remove(0) {
            Part::Bytes(b) => Some(Ok(b)),
            Part::File(_) => None,
        },
        Part::File(range) => {
            let n = range.len.min(FILE_READ_BYTES) as usize;
            let mut buf = vec![0; n];
            match range.file.read_at(&mut buf, range.offset) {
                Ok(0) => Some(Err("file ended before its range".into())),
                Ok(got) => {
                    buf.truncate(got);
                    range.offset += got as u64;
                    range.len -= got as u64;
                    Some(Ok(Bytes::from(buf)))
                }
                Err(e) => Some(Err(e.into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::task::Waker;

    use http_body::Body as _;

    use super::*;
    use crate::http::response::prebuild_head;
    use crate::http::{Fields, Status};

    fn frames(mut body: Body) -> Vec<Bytes> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
            out.push(frame.unwrap().into_data().unwrap());
        }
        out
    }

    #[test]
    fn in_memory_bodies_know_their_length_and_yield_once() {
        let body = Body::from("abc");
        assert_eq!(body.len(), Some(3));
        assert_eq!(body.size_hint().exact(), Some(3));
        assert_eq!(frames(body), [Bytes::from_static(b"abc")]);
        assert!(Body::empty().is_end_stream());
    }

    #[test]
    fn a_file_body_polled_as_a_stream_reads_its_range() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let body = Body::file(f, 2, 5);
        assert_eq!(body.len(), Some(5));
        assert_eq!(frames(body).concat(), b"23456");
    }

    #[test]
    fn own_bodies_pass_through_and_others_become_streams() {
        let own = crate::app::into_body(Body::from("x"));
        assert!(matches!(own.kind, Kind::Bytes(_)));
        let other = crate::app::into_body(Body::stream(Body::from("y")));
        assert!(matches!(other.kind, Kind::Stream(_)));
        assert_eq!(other.len(), Some(1), "a stream keeps its exact size");
    }

    #[test]
    fn a_prebuilt_static_head_reads_back_as_fields() {
        let block = prebuild_head(
            Status::OK,
            &[("Content-Type".into(), "text/plain".into())],
            3,
        );
        let resp = from_static(crate::http::Response {
            status: Status::OK,
            fields: Fields::Prebuilt(block),
            body: crate::http::Body::Bytes(Bytes::from_static(b"abc")),
        });
        assert_eq!(resp.status(), http::StatusCode::OK);
        assert_eq!(resp.headers()["content-type"], "text/plain");
        assert!(resp.headers().get("content-length").is_none());
        assert!(resp.headers().get("server").is_none());
        assert_eq!(resp.body().len(), Some(3));
    }
}
