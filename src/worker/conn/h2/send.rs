//! A stream's response on the wire: its head finished for HTTP/2, its body
//! handed over within the peer's flow-control window and the connection's
//! output budget (`outbox`).
//!
//! Flow:
//! 1. The head is finished (`:status`, the service's fields less the
//!    connection-specific ones RFC 9113 §8.2.2 forbids, `content-length`
//!    when known, `server`, `date`); HEAD, 204 and 304 end the stream there.
//! 2. Every body byte is granted by the outbox before it is read or handed
//!    over, and counted until the socket takes it: a connection holds at
//!    most `--output-buffer-bytes` however many streams it has, and the
//!    worker at most `--worker-output-bytes` (plus a slice per connection).
//! 3. Small bodies (up to [`EAGER_BYTES`]) are handed over at once, with
//!    the head in the same write. Larger ones wait for credit first: a piece
//!    never waits in our buffers for more credit than the stream has; file
//!    ranges are read from the page cache one grant at a time, at most
//!    [`FILE_CHUNK_BYTES`]. A peer that gives no credit for
//!    `--send-timeout` has the stream reset.
//! 4. A stream whose answer ends with bytes still queued leaves them in its
//!    slot (`wire`), counted until they leave or the stream is reset.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;

use super::super::budget::{Ticket, SLICE_BYTES};
use super::super::dispatch::refusal_of;
use super::super::Ctx;
use super::super::{fields, heads};
use super::outbox::Outbox;
use super::shared::Shared;
use super::wire::{SendResponse, SendStream};
use crate::app::response::Kind;
use crate::app::{Body, BodyError};
use crate::http::h2::hpack::encode;
use crate::http::h2::ErrorCode;
use crate::http::Part;
use crate::sys::iovec::read_at_into;
use crate::telemetry::Protocol;

/// Bodies (and stream frames) up to this size are handed over without
/// waiting for credit: the stream's slot holds them until the window opens.
/// One budget slice (`budget::SLICE_BYTES`), so a grant for one is all or
/// nothing.
pub(super) const EAGER_BYTES: usize = 16 * 1024;
/// Largest read of a file range for one DATA run.
const FILE_CHUNK_BYTES: usize = 64 * 1024;
/// The buffers a file chunk is read into: one DATA frame each at the
/// default SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.5.2).
const FRAME_BYTES: usize = 16 * 1024;

/// Count `n` body bytes sent, when a log is kept.
fn count(tally: Option<&Tally>, n: usize) {
    if let Some(t) = tally {
        t.bytes.set(t.bytes.get() + n as u64);
    }
}

/// A stream's sending half with its place in the connection's outbox.
struct Out<'a> {
    stream: Option<SendStream>,
    outbox: &'a Outbox,
    id: u32,
    ticket: Ticket,
    timeout: Duration,
    /// Granted before the head went out (`turn`) and not used yet.
    banked: usize,
}

impl<'a> Out<'a> {
    fn new(stream: SendStream, outbox: &'a Outbox, timeout: Duration, banked: usize) -> Out<'a> {
        Out {
            id: stream.stream_id(),
            stream: Some(stream),
            outbox,
            ticket: Ticket::default(),
            timeout,
            banked,
        }
    }

    fn stream(&mut self) -> Result<&mut SendStream, Gone> {
        self.stream.as_mut().ok_or(Gone::Reset)
    }

    /// The stream is gone: what it was granted and had not handed over goes
    /// back (its slot gave back what was queued).
    fn gone(&mut self, why: Gone) -> Gone {
        self.outbox.unused(self.id, usize::MAX);
        why
    }

    /// Reset the stream with `code`.
    fn cut(&mut self, code: ErrorCode) -> Gone {
        if let Some(s) = self.stream.as_mut() {
            s.send_reset(code);
        }
        self.gone(Gone::Cut)
    }

    /// A grant of up to `want` bytes (all of a `want` up to a slice), in
    /// turn with the connection's other streams.
    async fn grant(&mut self, want: usize) -> Result<usize, Gone> {
        if self.banked > 0 {
            let n = self.banked.min(want);
            self.banked -= n;
            return Ok(n);
        }
        let (outbox, id) = (self.outbox, self.id);
        let Out { stream, ticket, .. } = self;
        let Some(stream) = stream.as_mut() else {
            return Err(Gone::Reset);
        };
        let got = poll_fn(|cx| {
            if stream.poll_reset(cx).is_ready() {
                outbox.leave(ticket);
                return Poll::Ready(None);
            }
            outbox.poll_take(cx, ticket, id, want).map(Some)
        })
        .await;
        match got {
            Some(n) => Ok(n),
            None => Err(self.gone(Gone::Reset)),
        }
    }

    /// Hand `data` (granted) over; `end` ends the stream with it.
    fn hand(&mut self, data: Bytes, end: bool, tally: Option<&Tally>) -> Result<(), Gone> {
        let n = data.len();
        match self.stream()?.send_data(data, end) {
            Ok(()) => {
                self.outbox.handed(self.id, n);
                count(tally, n);
                Ok(())
            }
            Err(_) => Err(self.gone(Gone::Reset)),
        }
    }

    /// End the stream with an empty DATA frame.
    fn end(&mut self) -> Result<(), Gone> {
        match self.stream()?.send_data(Bytes::new(), true) {
            Ok(()) => Ok(()),
            Err(_) => Err(self.gone(Gone::Reset)),
        }
    }

    /// Wait for `want` bytes of credit (at least one), for at most the send
    /// timeout. The timer is made only when the credit is not there at once,
    /// and boxed: a monoio `Sleep` is 640 bytes, which every stream's future
    /// would carry otherwise.
    async fn credit(&mut self, want: usize) -> Result<usize, Gone> {
        let timeout = self.timeout;
        let got = {
            let out = self.stream()?;
            let ready = out.capacity();
            if ready > 0 {
                return Ok(ready.min(want));
            }
            let mut deadline: Option<Pin<Box<monoio::time::Sleep>>> = None;
            poll_fn(|cx| match out.poll_capacity(cx) {
                Poll::Ready(Ok(n)) => Poll::Ready(Some(Some(n.min(want)))),
                Poll::Ready(Err(_)) => Poll::Ready(Some(None)),
                Poll::Pending => {
                    let sleep =
                        deadline.get_or_insert_with(|| Box::pin(monoio::time::sleep(timeout)));
                    match sleep.as_mut().poll(cx) {
                        Poll::Ready(()) => Poll::Ready(None),
                        Poll::Pending => Poll::Pending,
                    }
                }
            })
            .await
        };
        match got {
            Some(Some(n)) => Ok(n),
            Some(None) => Err(self.gone(Gone::Reset)),
            None => {
                tracing::debug!("no HTTP/2 flow-control credit for the send timeout; stream reset");
                Err(self.cut(ErrorCode::CANCEL))
            }
        }
    }

    /// Send `data` as the window and the budget allow; `end` ends the stream
    /// with its last bytes.
    async fn put(&mut self, mut data: Bytes, end: bool, tally: Option<&Tally>) -> Result<(), Gone> {
        if data.is_empty() {
            return if end { self.end() } else { Ok(()) };
        }
        if data.len() <= EAGER_BYTES {
            // Small enough to hand over whole: it goes out as the window
            // allows, with the head in the same write, without a round of
            // credit first.
            self.grant(data.len()).await?;
            return self.hand(data, end, tally);
        }
        while !data.is_empty() {
            let room = self.credit(data.len().min(FILE_CHUNK_BYTES)).await?;
            let n = self.grant(room.min(data.len())).await?;
            let chunk = data.split_to(n);
            self.hand(chunk, end && data.is_empty(), tally)?;
        }
        Ok(())
    }

    /// Send the static files' pieces: in-memory parts as they are, file
    /// ranges read one grant (at most [`FILE_CHUNK_BYTES`]) at a time.
    async fn pieces(&mut self, pieces: Vec<Part>, tally: Option<&Tally>) -> Result<(), Gone> {
        let n = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let last = i + 1 == n;
            match piece {
                Part::Bytes(b) => {
                    if b.is_empty() && !last {
                        continue;
                    }
                    self.put(b, last, tally).await?;
                }
                Part::File(range) => {
                    let (mut offset, mut left) = (range.offset, range.len);
                    while left > 0 {
                        let want = (left as usize).min(FILE_CHUNK_BYTES);
                        let room = self.credit(want).await?.min(want);
                        let granted = self.grant(room).await?;
                        // One buffer per DATA frame, read by one system
                        // call: each is freed as its frame leaves, so what
                        // is allocated follows what the budget counts.
                        let mut bufs: [Vec<u8>; FILE_CHUNK_BYTES / FRAME_BYTES] =
                            Default::default();
                        let used = granted.div_ceil(FRAME_BYTES);
                        for (i, b) in bufs[..used].iter_mut().enumerate() {
                            *b = Vec::with_capacity(FRAME_BYTES.min(granted - i * FRAME_BYTES));
                        }
                        let got = match read_at_into(&range.file, offset, &mut bufs[..used]) {
                            Ok(0) | Err(_) => {
                                tracing::warn!(
                                    "file ended or failed before its range; stream reset"
                                );
                                return Err(self.cut(ErrorCode::INTERNAL_ERROR));
                            }
                            Ok(got) => got,
                        };
                        self.outbox.unused(self.id, granted - got);
                        offset += got as u64;
                        left -= got as u64;
                        let filled = bufs[..used].iter().take_while(|b| !b.is_empty()).count();
                        for (i, buf) in bufs.into_iter().take(filled).enumerate() {
                            let end = last && left == 0 && i + 1 == filled;
                            self.hand(Bytes::from(buf), end, tally)?;
                        }
                    }
                    if last && range.len == 0 {
                        self.end()?;
                    }
                }
            }
        }
        if n == 0 {
            self.end()?;
        }
        Ok(())
    }
}

impl Drop for Out<'_> {
    fn drop(&mut self) {
        self.outbox.leave(&mut self.ticket);
        self.outbox
            .unused(self.id, std::mem::take(&mut self.banked));
    }
}

/// Send `resp` on the stream, through the connection's outbox, with its
/// `Alt-Svc` if any. `failed` is the request body's state while it
/// may still be read: a body that breaks the rules mid-response resets the
/// stream (its head is gone; the status cannot change).
///
/// `banked` is the stream's first grant when the caller waited for it
/// ([`turn`]); else `send` waits for it here.
#[allow(clippy::too_many_arguments)]
pub(super) async fn send<H>(
    ctx: &Ctx<H>,
    (outbox, alt_svc): (&Outbox, Option<&http::HeaderValue>),
    respond: &mut SendResponse,
    resp: http::Response<Body>,
    head_only: bool,
    failed: Option<&Cell<Option<BodyError>>>,
    tally: Option<&Tally>,
    banked: Option<usize>,
) -> Result<(), Gone> {
    let (mut parts, body) = resp.into_parts();
    let len = body.len();
    let bodiless = fields::finish(ctx, &mut parts, head_only, len, Protocol::Http2, alt_svc);
    let status = parts.status;
    if let Some(t) = tally {
        t.status.set(status.as_u16());
    }
    // A stream with a body waits for its first grant before its head goes
    // out: while the connection's budget is taken (a client that does not
    // read), later streams wait here, small, in turn.
    let id = respond.stream_id();
    let banked = match banked {
        Some(n) => n,
        None => {
            let want = first_want(status.as_u16(), head_only, len);
            turn(outbox, respond, want).await?
        }
    };
    let Ok(out) = respond.send_response(parts, bodiless) else {
        outbox.unused(id, usize::MAX);
        return Err(Gone::Reset);
    };
    if bodiless {
        return Ok(());
    }
    let out = Out::new(out, outbox, ctx.settings.send_timeout, banked);
    send_kind(out, body.kind, failed, tally).await
}

/// Send a body of `kind` through `out`.
async fn send_kind(
    out: Out<'_>,
    kind: Kind,
    failed: Option<&Cell<Option<BodyError>>>,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    match send_now(out, kind, tally) {
        Ok(sent) => sent,
        // Boxed: a small answer's future (the one every stream carries,
        // waiting streams included) stays small. The static files' pieces
        // alone: theirs is the one every large download keeps.
        Err((out, Kind::Pieces(pieces))) => Box::pin(send_pieces(out, pieces, tally)).await,
        Err((out, kind)) => Box::pin(send_body(out, kind, failed, tally)).await,
    }
}

/// Send a body that needs no wait (none, or bytes within the grant taken
/// before the head); any other is given back.
#[allow(clippy::result_large_err)]
fn send_now<'a>(
    out: Out<'a>,
    kind: Kind,
    tally: Option<&Tally>,
) -> Result<Result<(), Gone>, (Out<'a>, Kind)> {
    match kind {
        Kind::Empty => {
            let mut out = out;
            Ok(out.end())
        }
        Kind::Bytes(b) if b.len() <= out.banked => {
            let mut out = out;
            out.banked -= b.len();
            Ok(out.hand(b, true, tally))
        }
        kind => Err((out, kind)),
    }
}

/// Send a response the static files made (or a refusal): a prebuilt head
/// of 200 from its HPACK encoding kept with the head (`heads::hpack`),
/// with the connection's `date` and `alt-svc` after it, and no header map
/// made; any other through [`send`]. Its first grant was taken
/// (`banked`, [`turn`]).
pub(super) async fn send_static<H>(
    ctx: &Ctx<H>,
    shared: &Shared,
    respond: &mut SendResponse,
    resp: crate::http::Response,
    head_only: bool,
    tally: Option<&Tally>,
    banked: usize,
) -> Result<(), Gone> {
    let prebuilt = match &resp.fields {
        crate::http::Fields::Prebuilt(block) if resp.status == crate::http::Status::OK => {
            Some(block)
        }
        _ => None,
    };
    let Some(block) = prebuilt else {
        // Boxed: the header-map path's state would widen every stream's
        // answer (what each waiting stream holds, and what is moved into
        // the connection's set of streams).
        let resp = heads::response(resp);
        let out = shared.out();
        let sent = send(
            ctx,
            out,
            respond,
            resp,
            head_only,
            None,
            tally,
            Some(banked),
        );
        return Box::pin(sent).await;
    };
    let body = crate::app::Body::from_static(resp.body);
    match static_head(
        ctx,
        shared,
        respond,
        block,
        body.len(),
        head_only,
        tally,
        banked,
    )? {
        Some(out) => send_kind(out, body.kind, None, tally).await,
        None => Ok(()),
    }
}

/// Answer a response the static files made at once, with no future, when
/// nothing in it can wait: a prebuilt head of 200 and a body of bytes
/// within `banked`, the stream's first grant (or none). Any other comes
/// back untouched, for [`send_static`].
#[allow(clippy::result_large_err)]
pub(super) fn send_static_now<H>(
    ctx: &Ctx<H>,
    shared: &Shared,
    respond: &mut SendResponse,
    resp: crate::http::Response,
    head_only: bool,
    tally: Option<&Tally>,
    banked: usize,
) -> Result<Result<(), Gone>, crate::http::Response> {
    let now = match &resp.body {
        crate::http::Body::Empty => true,
        crate::http::Body::Bytes(b) => head_only || b.len() <= banked,
        _ => false,
    };
    let (block, body) = match resp {
        crate::http::Response {
            status: crate::http::Status::OK,
            fields: crate::http::Fields::Prebuilt(block),
            body,
        } if now => (block, body),
        resp => return Err(resp),
    };
    let body = crate::app::Body::from_static(body);
    let len = body.len();
    let out = match static_head(ctx, shared, respond, &block, len, head_only, tally, banked) {
        Ok(Some(out)) => out,
        Ok(None) => return Ok(Ok(())),
        Err(gone) => return Ok(Err(gone)),
    };
    Ok(match send_now(out, body.kind, tally) {
        Ok(sent) => sent,
        // Not reached: the body was checked to fit.
        Err((mut out, _)) => Err(out.cut(ErrorCode::INTERNAL_ERROR)),
    })
}

/// A static response's head from its prebuilt HPACK bytes, sent; what
/// sends its body after it (`None`: it has none).
#[allow(clippy::too_many_arguments)]
fn static_head<'s, H>(
    ctx: &Ctx<H>,
    shared: &'s Shared,
    respond: &mut SendResponse,
    block: &crate::http::response::HeadBlock,
    len: Option<u64>,
    head_only: bool,
    tally: Option<&Tally>,
    banked: usize,
) -> Result<Option<Out<'s>>, Gone> {
    let outbox = &*shared.outbox;
    let fields = block.hpack(heads::hpack).clone();
    let bodiless = head_only || len == Some(0);
    ctx.stats.response(Protocol::Http2, 200);
    if let Some(t) = tally {
        t.status.set(200);
    }
    let id = respond.stream_id();
    let sent = {
        let date = encode::date(ctx.date.borrow_mut().now());
        // `:status: 200` is static index 8 (RFC 7541 Appendix A).
        let parts = [&[0x88][..], &fields, &date, shared.alt_svc_field()];
        respond.send_encoded(&parts, bodiless)
    };
    let Ok(out) = sent else {
        outbox.unused(id, usize::MAX);
        return Err(Gone::Reset);
    };
    if bodiless {
        return Ok(None);
    }
    Ok(Some(Out::new(
        out,
        outbox,
        ctx.settings.send_timeout,
        banked,
    )))
}

/// The first grant a response needs: none without a body, else its first
/// slice (all of a body up to a slice, which then goes out with its head).
pub(super) fn first_want(status: u16, head_only: bool, len: Option<u64>) -> usize {
    let bodiless = head_only || (100..200).contains(&status) || status == 204 || status == 304;
    match len {
        _ if bodiless => 0,
        None => SLICE_BYTES,
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(SLICE_BYTES),
    }
}

/// Wait for the stream's first grant of `want` bytes (all of them: at most a
/// slice), in turn with the connection's other streams; 0 at once for 0.
pub(super) async fn turn(
    outbox: &Outbox,
    respond: &mut SendResponse,
    want: usize,
) -> Result<usize, Gone> {
    if want == 0 {
        return Ok(0);
    }
    let id = respond.stream_id();
    /// Leaves the queue if the wait is dropped.
    struct Place<'a>(&'a Outbox, Ticket);
    impl Drop for Place<'_> {
        fn drop(&mut self) {
            self.0.leave(&mut self.1);
        }
    }
    let mut place = Place(outbox, Ticket::default());
    let got = poll_fn(|cx| {
        if respond.poll_reset(cx).is_ready() {
            return Poll::Ready(None);
        }
        outbox.poll_take(cx, &mut place.1, id, want).map(Some)
    })
    .await;
    got.ok_or(Gone::Reset)
}

/// Send the static files' pieces.
async fn send_pieces(
    mut out: Out<'_>,
    pieces: Vec<Part>,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    out.pieces(pieces, tally).await
}

/// Send a body that may wait for credit or for its frames.
async fn send_body(
    mut out: Out<'_>,
    kind: Kind,
    failed: Option<&Cell<Option<BodyError>>>,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    let mut held = None;
    match kind {
        Kind::Empty => out.end(),
        Kind::Bytes(b) => out.put(b, true, tally).await,
        Kind::Pieces(pieces) => out.pieces(pieces, tally).await,
        Kind::Stream(mut stream) => loop {
            let frame = next_frames(&mut stream, &mut held).await;
            if let Some(e) = failed.and_then(Cell::get).and_then(refusal_of) {
                tracing::debug!(refusal = %e, "request body refused mid-response; stream reset");
                break Err(out.cut(ErrorCode::CANCEL));
            }
            match frame {
                None => break out.end(),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => out.put(data, false, tally).await?,
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            let sent = out.stream()?.send_trailers(trailers);
                            break sent.map_err(|_| out.gone(Gone::Reset));
                        }
                    }
                },
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "response stream failed; stream reset");
                    break Err(out.cut(ErrorCode::INTERNAL_ERROR));
                }
            }
        },
    }
}

/// A streamed body, boxed.
type Stream = std::pin::Pin<Box<dyn http_body::Body<Data = Bytes, Error = crate::app::BoxError>>>;
/// One of its frames, as polled.
type Polled = Option<Result<http_body::Frame<Bytes>, crate::app::BoxError>>;

/// The next frame of a streamed body, data frames ready at once joined (up
/// to [`EAGER_BYTES`]) into one: a service writing many small chunks must
/// not cost the client a DATA frame each (h2 clients, the `h2` crate's among
/// them, close connections that send floods of tiny frames). A frame that
/// is not data, found while joining, waits in `held` for the next call.
async fn next_frames(stream: &mut Stream, held: &mut Option<Polled>) -> Polled {
    if let Some(frame) = held.take() {
        return frame;
    }
    let data = match poll_fn(|cx| stream.as_mut().poll_frame(cx)).await {
        Some(Ok(frame)) => match frame.into_data() {
            Ok(data) => data,
            Err(frame) => return Some(Ok(frame)),
        },
        other => return other,
    };
    if data.len() >= EAGER_BYTES {
        return Some(Ok(http_body::Frame::data(data)));
    }
    let mut joined: Option<bytes::BytesMut> = None;
    let mut first = Some(data);
    poll_fn(|cx| {
        loop {
            let len = joined.as_ref().map_or(0, |j| j.len()) + first.as_ref().map_or(0, Bytes::len);
            if len >= EAGER_BYTES || stream.is_end_stream() {
                break;
            }
            match stream.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(more) => {
                        let j = joined.get_or_insert_with(|| {
                            let mut j = bytes::BytesMut::with_capacity(EAGER_BYTES);
                            j.extend_from_slice(&first.take().unwrap_or_default());
                            j
                        });
                        j.extend_from_slice(&more);
                    }
                    Err(frame) => {
                        *held = Some(Some(Ok(frame)));
                        break;
                    }
                },
                Poll::Ready(other) => {
                    *held = Some(other);
                    break;
                }
                Poll::Pending => break,
            }
        }
        Poll::Ready(())
    })
    .await;
    let data = match joined {
        Some(j) => j.freeze(),
        None => first.unwrap_or_default(),
    };
    Some(Ok(http_body::Frame::data(data)))
}

/// Why a stream ended before its response did.
#[derive(Debug)]
pub(super) enum Gone {
    /// The client reset it (or the connection ended).
    Reset,
    /// We reset it (no credit for the send timeout, a body that failed).
    Cut,
}

/// What a stream's answer sent: its status (0 before the head) and the
/// body bytes handed over.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) status: Cell<u16>,
    pub(super) bytes: Cell<u64>,
}
