//! A request body an app pulls, and the connection's end that feeds it.
//!
//! Owns the hand-over between a service reading a body ([`RequestBody`])
//! and the connection that reads the socket (`Feed`), both on the
//! worker's thread. The rule is pull: the connection reads (and decodes)
//! body bytes only once the reader asks for them and is waiting, and hands
//! over one chunk at a time, so a body is never read ahead of the service
//! beyond one chunk and a service that stops reading stops the client
//! (TCP backpressure). That is also when a connection answers
//! `Expect: 100-continue` (on the first want), and what it waits on for the
//! body read timeout. A reader that drops its body tells the connection to
//! discard the rest (within its bound); a connection that goes away ends the
//! body with [`BodyError::Closed`].
//!
//! The two ends share their state through an `Arc<Mutex>` although both
//! live on one worker thread: a body must be `Send` for tower services
//! (axum's `Router` boxes its request body as `Send`). The lock is never
//! contended, so it costs an uncontended atomic pair per hand-over.
//!
//! Does not own reading, decoding or limits (`worker::conn` with
//! `http::body::Decoder`, `--max-body-bytes`): it carries what they yield,
//! including their errors.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};

/// Why a body could not be read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Past `--max-body-bytes`, or past the limit given to
    /// [`RequestBody::collect`] (answered 413).
    #[error("request body larger than {limit} bytes")]
    TooLarge { limit: u64 },
    /// Not valid framing (a malformed chunk; answered 400).
    #[error("malformed request body")]
    Malformed,
    /// The client sent nothing for the body read timeout.
    #[error("request body timed out")]
    TimedOut,
    /// The connection ended before the body did.
    #[error("connection closed before the end of the request body")]
    Closed,
}

/// What the connection learns when it waits on the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// The reader took what it had and waits for more.
    More,
    /// The reader dropped the body: discard the rest.
    Gone,
}

#[derive(Default)]
struct State {
    /// Handed over by the connection, not yet taken (at most one).
    chunk: Option<Bytes>,
    /// The reader is waiting for a chunk.
    wanted: bool,
    /// How the body ended, once it has (after the last chunk is taken).
    end: Option<Result<http::HeaderMap, BodyError>>,
    /// Trailers not yet handed to an `http_body` reader.
    trailers_taken: bool,
    reader: Option<Waker>,
    feeder: Option<Waker>,
    /// The reader dropped its end.
    dropped: bool,
}

/// The lock of a channel. A panic while it was held (only in this module's
/// short critical sections, none of which panic) would poison it; the state
/// is still coherent, so the poison is ignored.
fn lock(channel: &Mutex<State>) -> MutexGuard<'_, State> {
    channel.lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    fn wake_reader(&mut self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }
    fn wake_feeder(&mut self) {
        if let Some(w) = self.feeder.take() {
            w.wake();
        }
    }
}

/// A request's body, pulled by the service that answers it.
pub struct RequestBody {
    channel: Option<Arc<Mutex<State>>>,
}

/// The connection's end of a [`RequestBody`].
pub(crate) struct Feed {
    channel: Arc<Mutex<State>>,
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBody")
            .field("empty", &self.channel.is_none())
            .finish()
    }
}

impl RequestBody {
    /// A request without a body.
    pub fn empty() -> RequestBody {
        RequestBody { channel: None }
    }

    /// A body and the end the connection feeds it through.
    pub(crate) fn channel() -> (Feed, RequestBody) {
        let channel = Arc::new(Mutex::new(State::default()));
        (
            Feed {
                channel: channel.clone(),
            },
            RequestBody {
                channel: Some(channel),
            },
        )
    }

    /// The next chunk, `None` at the end. Asking is what makes the
    /// connection read.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, BodyError>> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BodyError>>> {
        let Some(channel) = &self.channel else {
            return Poll::Ready(None);
        };
        let mut s = lock(channel);
        if let Some(chunk) = s.chunk.take() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        match &s.end {
            Some(Ok(_)) => return Poll::Ready(None),
            Some(Err(e)) => return Poll::Ready(Some(Err(*e))),
            None => {}
        }
        if !s.wanted {
            s.wanted = true;
            s.wake_feeder();
        }
        s.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The whole body, refusing one past `limit` bytes (the limit is the
    /// service's, on top of the server's `--max-body-bytes`). Borrows the
    /// body, so [`RequestBody::trailers`] can be read after it.
    pub async fn collect(&mut self, limit: usize) -> Result<Bytes, BodyError> {
        let mut first: Option<Bytes> = None;
        let mut more = BytesMut::new();
        let mut len = 0usize;
        while let Some(chunk) = self.chunk().await {
            let chunk = chunk?;
            len += chunk.len();
            if len > limit {
                return Err(BodyError::TooLarge {
                    limit: limit as u64,
                });
            }
            match &first {
                None => first = Some(chunk),
                Some(f) => {
                    if more.is_empty() {
                        more.extend_from_slice(f);
                    }
                    more.extend_from_slice(&chunk);
                }
            }
        }
        // One chunk: no copy at all.
        Ok(match (first, more.is_empty()) {
            (Some(only), true) => only,
            (None, _) => Bytes::new(),
            (Some(_), false) => more.freeze(),
        })
    }

    /// The trailer fields, once the body has been read to its end (empty
    /// when the body had none, or was not chunked).
    pub fn trailers(&self) -> Option<http::HeaderMap> {
        let channel = self.channel.as_ref()?;
        match &lock(channel).end {
            Some(Ok(t)) => Some(t.clone()),
            _ => None,
        }
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        if let Some(channel) = &self.channel {
            let mut s = lock(channel);
            s.dropped = true;
            s.chunk = None;
            s.wake_feeder();
        }
    }
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        match this.poll_chunk(cx) {
            Poll::Ready(Some(Ok(data))) => Poll::Ready(Some(Ok(http_body::Frame::data(data)))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                let Some(channel) = &this.channel else {
                    return Poll::Ready(None);
                };
                let mut s = lock(channel);
                if s.trailers_taken {
                    return Poll::Ready(None);
                }
                s.trailers_taken = true;
                match &s.end {
                    Some(Ok(t)) if !t.is_empty() => {
                        Poll::Ready(Some(Ok(http_body::Frame::trailers(t.clone()))))
                    }
                    _ => Poll::Ready(None),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.channel {
            None => true,
            Some(c) => {
                let s = lock(c);
                s.chunk.is_none() && s.end.is_some()
            }
        }
    }
}

impl Feed {
    /// Wait until the reader wants a chunk (it took the last one and is
    /// waiting), or has dropped its body.
    pub(crate) async fn want(&self) -> Want {
        poll_fn(|cx| {
            let mut s = lock(&self.channel);
            if s.dropped {
                return Poll::Ready(Want::Gone);
            }
            if s.wanted && s.chunk.is_none() {
                return Poll::Ready(Want::More);
            }
            s.feeder = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Hand over the next chunk (after [`Feed::want`] said `More`); an
    /// empty one is not handed over. Returns false when the reader is gone.
    pub(crate) fn push(&self, chunk: Bytes) -> bool {
        let mut s = lock(&self.channel);
        if s.dropped {
            return false;
        }
        if chunk.is_empty() {
            return true;
        }
        debug_assert!(
            s.chunk.is_none(),
            "a chunk handed over before the last was taken"
        );
        s.chunk = Some(chunk);
        s.wanted = false;
        s.wake_reader();
        true
    }

    /// The body ended, with these trailers (empty if none).
    pub(crate) fn finish(self, trailers: http::HeaderMap) {
        self.end(Ok(trailers));
    }

    /// The body cannot be read to its end.
    pub(crate) fn fail(self, error: BodyError) {
        self.end(Err(error));
    }

    fn end(&self, end: Result<http::HeaderMap, BodyError>) {
        let mut s = lock(&self.channel);
        if s.end.is_none() {
            s.end = Some(end);
        }
        s.wanted = false;
        s.wake_reader();
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        // Ended without `finish` or `fail`: the connection went away.
        self.end(Err(BodyError::Closed));
    }
}

#[cfg(test)]
mod tests;
