//! A request body read for a service: the connection's side of
//! `app::body`'s hand-over.
//!
//! The service pulls; this reads. [`Intake::feed`] runs only when the
//! service waits for a chunk ([`Intake::want`]), hands over at most one
//! chunk, and reads the socket only when nothing decodable is buffered, so
//! the body is never read ahead of the service beyond one read buffer
//! (backpressure reaches the client through TCP). Chunks are slices of the
//! received bytes (`Bytes`), never copies: a Content-Length body's chunk is
//! the read itself, a chunked one's is its data between the framing.
//!
//! Flow, per want:
//! 1. Decode what is buffered (`http::body::Decoder`); hand over the first
//!    data found, or the end with its trailers.
//! 2. Nothing buffered: before the first read, answer
//!    `Expect: 100-continue` (RFC 9110 §10.1.1: only once the body is
//!    wanted, and not when some of it has already come); then read, within
//!    the body timeout, after the unconsumed framing bytes.
//! 3. A malformed body, one past `--max-body-bytes`, a timeout or a closed
//!    connection ends the body with an error the service sees, and is kept
//!    here so the connection answers it (400, 413, 408) and closes.
//!
//! Once the service has answered, what it left unread is discarded
//! ([`Intake::discard`]) up to [`UNREAD_BODY_DISCARD_BYTES`]; a longer rest
//! closes the connection instead.

use std::time::Duration;

use bytes::Bytes;
use monoio::buf::IoBufMut;
use monoio::io::AsyncWriteRentExt;

use super::super::pool::Pool;
use super::super::transport::Transport;
use crate::app::body::{Feed, Want};
use crate::app::BodyError;
use crate::http::body::Decoder;
use crate::http::chunked;
use crate::http::error::{ParseError, Refusal};

/// Most body bytes the connection reads and discards after the service
/// answered without reading them (nginx discards unread bodies too): a
/// small upload the service ignored keeps the connection; a larger rest
/// closes it, which costs the client less than sending it for nothing.
pub(crate) const UNREAD_BODY_DISCARD_BYTES: u64 = 256 * 1024;

/// The interim response to `Expect: 100-continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Why a body ended early, as the connection answers it.
#[derive(Debug, Clone)]
pub(super) enum Failure {
    /// Malformed or past the limit (400, 413).
    Framing(chunked::Error),
    /// No byte for the body timeout (408).
    TimedOut,
    /// The client closed or reset: nobody to answer.
    Closed,
}

impl Failure {
    /// The refusal to answer with, unless nobody is there to hear it.
    pub(super) fn refusal(&self) -> Option<Refusal> {
        match self {
            Failure::Framing(e) => Some(Refusal::Parse(ParseError::Chunked(*e))),
            Failure::TimedOut => Some(Refusal::BodyTimedOut),
            Failure::Closed => None,
        }
    }

    fn body_error(&self, max_body: u64) -> BodyError {
        match self {
            Failure::Framing(chunked::Error::TooLarge { .. }) => {
                BodyError::TooLarge { limit: max_body }
            }
            Failure::Framing(_) => BodyError::Malformed,
            Failure::TimedOut => BodyError::TimedOut,
            Failure::Closed => BodyError::Closed,
        }
    }
}

/// What decoding the buffered bytes found.
enum Found {
    Chunk(Bytes),
    End,
    NeedRead,
    Failed(chunked::Error),
}

/// One request's body as the connection reads it.
pub(super) struct Intake {
    decoder: Decoder,
    /// Received bytes; `buf[off..]` not yet decoded.
    buf: Bytes,
    off: usize,
    /// The service's end, while it may still want chunks.
    feed: Option<Feed>,
    /// `Expect: 100-continue` still to answer before the first read.
    expect_continue: bool,
    /// Why the body ended early, if it did.
    pub(super) failure: Option<Failure>,
    max_body: u64,
}

impl Intake {
    /// The body after the head, whose bytes from `off` on are in `buf`.
    pub(super) fn new(
        decoder: Decoder,
        buf: Bytes,
        off: usize,
        feed: Option<Feed>,
        expect_continue: bool,
        max_body: u64,
    ) -> Intake {
        // Bytes after the head are the body's (`feed` is `None` for a request
        // without one): the client has started sending it, so no 100 is owed
        // (RFC 9110 §10.1.1), nor sent later before the read of its rest.
        let body_started = off < buf.len();
        Intake {
            decoder,
            buf,
            off,
            feed,
            expect_continue: expect_continue && !body_started,
            failure: None,
            max_body,
        }
    }

    /// The received bytes and where the undecoded ones start; the service's
    /// end, if it still has one, sees its body end.
    pub(super) fn into_rest(self) -> (Bytes, usize) {
        (self.buf, self.off)
    }

    /// Whether bytes past what is decoded are buffered (after a finished
    /// body: the next, pipelined, request).
    pub(super) fn has_rest(&self) -> bool {
        self.off < self.buf.len()
    }

    /// Whether the whole body has been taken.
    pub(super) fn is_done(&self) -> bool {
        self.decoder.is_done()
    }

    /// Wait until the service wants a chunk, or drops its body. Never
    /// returns once nothing more can be handed over.
    pub(super) async fn want(&self) -> Want {
        match &self.feed {
            Some(feed) => feed.want().await,
            None => std::future::pending().await,
        }
    }

    /// The service dropped its body: the rest is the discard's.
    pub(super) fn gone(&mut self) {
        self.feed = None;
    }

    /// Hand the service its next chunk, reading if need be (one want).
    pub(super) async fn feed<T: Transport>(
        &mut self,
        stream: &mut T,
        pool: &Pool,
        timeouts: (Duration, Duration),
    ) {
        loop {
            match self.found() {
                Found::Chunk(b) => {
                    if let Some(feed) = &self.feed {
                        if !feed.push(b) {
                            self.feed = None;
                        }
                    }
                    return;
                }
                Found::End => {
                    if let Some(feed) = self.feed.take() {
                        feed.finish(self.trailers());
                    }
                    return;
                }
                Found::Failed(e) => return self.fail(Failure::Framing(e)),
                Found::NeedRead => {
                    if let Err(f) = self.read(stream, pool, timeouts).await {
                        return self.fail(f);
                    }
                }
            }
        }
    }

    /// After the answer: read and drop what the service left of the body,
    /// at most [`UNREAD_BODY_DISCARD_BYTES`]. `false` when the connection
    /// must close instead (too much left, or the body failed).
    pub(super) async fn discard<T: Transport>(
        &mut self,
        stream: &mut T,
        pool: &Pool,
        timeouts: (Duration, Duration),
    ) -> bool {
        // Dropped first: a service still holding its body sees it end.
        self.feed = None;
        let mut dropped = 0u64;
        while self.failure.is_none() {
            match self.found() {
                Found::Chunk(b) => {
                    dropped += b.len() as u64;
                    if dropped > UNREAD_BODY_DISCARD_BYTES {
                        return false;
                    }
                }
                Found::End => return true,
                Found::Failed(e) => self.failure = Some(Failure::Framing(e)),
                Found::NeedRead => {
                    // Nobody wants these bytes: no 100 Continue for them.
                    self.expect_continue = false;
                    if let Err(f) = self.read(stream, pool, timeouts).await {
                        self.failure = Some(f);
                    }
                }
            }
        }
        false
    }

    /// Whether the client still waits for a 100 Continue it will not get
    /// (the service answered without reading): it may never send the body,
    /// so the rest cannot be discarded, only the connection closed.
    pub(super) fn owes_continue(&self) -> bool {
        self.expect_continue && !self.is_done()
    }

    /// Whether so much of the body is left unread that discarding it is
    /// not worth it (a declared length past the discard bound).
    pub(super) fn too_much_left(&self) -> bool {
        match &self.decoder {
            Decoder::Length(left) => {
                let buffered = (self.buf.len() - self.off) as u64;
                left.saturating_sub(buffered) > UNREAD_BODY_DISCARD_BYTES
            }
            Decoder::Chunked(_) => false,
        }
    }

    fn fail(&mut self, failure: Failure) {
        if let Some(feed) = self.feed.take() {
            feed.fail(failure.body_error(self.max_body));
        }
        self.failure = Some(failure);
    }

    fn found(&mut self) -> Found {
        loop {
            if self.decoder.is_done() {
                return Found::End;
            }
            let rest = &self.buf[self.off..];
            if rest.is_empty() {
                return Found::NeedRead;
            }
            let step = match self.decoder.decode(rest) {
                Ok(step) => step,
                Err(e) => return Found::Failed(e),
            };
            let data = self
                .buf
                .slice(self.off + step.data.start..self.off + step.data.end);
            self.off += step.consumed;
            if !data.is_empty() {
                return Found::Chunk(data);
            }
            if step.done {
                return Found::End;
            }
            if step.consumed == 0 {
                return Found::NeedRead;
            }
        }
    }

    /// The trailer fields of a chunked body that has ended, as `http` types
    /// (a field `http` refuses is dropped: `chunked` validated the syntax).
    fn trailers(&self) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        if let Some(t) = self.decoder.trailers() {
            for (name, value) in t.iter() {
                if let (Ok(n), Ok(v)) = (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_bytes(value),
                ) {
                    map.append(n, v);
                }
            }
        }
        map
    }

    /// One read after the undecoded bytes, within the body timeout
    /// (`timeouts.0`); the 100 Continue first, if still owed, within the
    /// send timeout (`timeouts.1`).
    async fn read<T: Transport>(
        &mut self,
        stream: &mut T,
        pool: &Pool,
        (body_timeout, send_timeout): (Duration, Duration),
    ) -> Result<(), Failure> {
        if std::mem::take(&mut self.expect_continue) {
            match monoio::time::timeout(send_timeout, stream.write_all(CONTINUE)).await {
                Ok((Ok(_), _)) => {}
                Ok((Err(_), _)) => return Err(Failure::Closed),
                Err(_) => return Err(Failure::TimedOut),
            }
        }
        let mut next = pool.take();
        next.extend_from_slice(&self.buf[self.off..]);
        if next.len() == next.capacity() {
            next.reserve(next.len());
        }
        let len = next.len();
        let read = monoio::time::timeout(body_timeout, stream.read(next.slice_mut(len..))).await;
        let next = match read {
            Err(_) => return Err(Failure::TimedOut),
            Ok((Ok(0), _)) | Ok((Err(_), _)) => return Err(Failure::Closed),
            Ok((Ok(_), slice)) => slice.into_inner(),
        };
        let old = std::mem::replace(&mut self.buf, Bytes::from(next));
        self.off = 0;
        recycle(old, pool);
        Ok(())
    }
}

/// Return a received buffer to the pool once nothing else holds it (a
/// service may keep a chunk, or a header value, as long as it likes).
fn recycle(bytes: Bytes, pool: &Pool) {
    match bytes.try_into_mut() {
        Ok(unique) => pool.give(Vec::from(unique)),
        Err(_) => pool.forget(),
    }
}
