//! What one HTTP/2 connection's task and its streams share: the protocol
//! state (`http::h2::Conn`, which frames and checks everything), each open
//! stream's slot, and the handles a stream's answer holds
//! ([`RecvStream`], [`SendResponse`], [`SendStream`]).
//!
//! Owns a stream's received body until its service takes it (credit goes
//! back as it does), the body bytes a stream has handed over and the peer's
//! windows do not admit yet, and the one waker of each stream's future.
//! Does not own the socket (`h2::serve`) nor the output budgets
//! (`outbox`), which it tells what was handed, framed and dropped.
//!
//! Flow:
//! 1. The task feeds events of `Conn::recv` to [`Wire::deliver`]: a
//!    request opens a slot, DATA and trailers wait in it, a reset marks it;
//!    each wakes the stream's future.
//! 2. A stream's answer sends its head through [`SendResponse`] and its body
//!    through [`SendStream`], which queues the bytes in its slot.
//! 3. At the end of each pass the task calls [`Wire::frame_queued`]: queued
//!    bytes become DATA frames as the windows allow, then trailers or the
//!    stream's end; the task writes `Conn::output`.
//! 4. A slot goes when its answer is over and nothing of it is queued.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::BuildHasherDefault;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use super::outbox::Outbox;
use crate::http::h2::conn::IdHasher;
use crate::http::h2::hpack::encode;
use crate::http::h2::{Conn, ErrorCode, Event};

/// Why a stream's handle cannot go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gone(pub(crate) ErrorCode);

/// One open stream's state on our side.
#[derive(Default)]
struct Slot {
    /// Body bytes received and not taken.
    recv: VecDeque<Bytes>,
    /// Of `recv`, bytes whose credit has not gone back.
    recv_held: usize,
    /// The request's end came (END_STREAM or trailers).
    recv_end: bool,
    trailers: Option<Box<http::HeaderMap>>,
    /// Nobody reads the body any more: what comes is given back at once.
    recv_dropped: bool,
    /// Body bytes handed over and not yet framed.
    send: VecDeque<Bytes>,
    send_bytes: usize,
    /// The stream ends after `send` (with trailers if any).
    send_end: bool,
    send_trailers: Option<Box<[u8]>>,
    /// The stream was reset (by the peer, or by us).
    reset: Option<ErrorCode>,
    /// Handles of the answer alive ([`SendResponse`], [`SendStream`]).
    handles: u8,
    /// The stream's answer is over: the slot lives on only for `send`.
    done: bool,
    waker: Option<Waker>,
}

impl Slot {
    fn wake(&mut self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    fn park(&mut self, cx: &Context<'_>) {
        match &self.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => self.waker = Some(cx.waker().clone()),
        }
    }
}

/// A connection's protocol state and its streams, shared.
pub(crate) struct Wire {
    pub(super) conn: RefCell<Conn>,
    slots: RefCell<HashMap<u32, Slot, BuildHasherDefault<IdHasher>>>,
    /// Streams with bytes, trailers or an end queued.
    queued: RefCell<Vec<u32>>,
    pub(super) outbox: Rc<Outbox>,
    /// The date and server fields' encoding is made per response; the rest
    /// of a head into this scratch buffer.
    head: RefCell<Vec<u8>>,
    /// Something was handed over or released since the task last wrote.
    pub(super) dirty: Cell<bool>,
}

impl Wire {
    pub(super) fn new(conn: Conn, outbox: Rc<Outbox>) -> Wire {
        Wire {
            conn: RefCell::new(conn),
            slots: RefCell::default(),
            queued: RefCell::default(),
            outbox,
            head: RefCell::default(),
            dirty: Cell::new(false),
        }
    }

    /// Give back what an idle connection need not hold (`Conn::shed`, and
    /// the tables of slots).
    pub(super) fn shed(&self) {
        self.conn.borrow_mut().shed();
        self.slots.borrow_mut().shrink_to_fit();
        *self.queued.borrow_mut() = Vec::new();
        *self.head.borrow_mut() = Vec::new();
        self.outbox.shed();
    }

    /// Streams with a slot (answers running, or bytes of them queued).
    pub(super) fn slots(&self) -> usize {
        self.slots.borrow().len()
    }

    /// Apply an event of `Conn::recv`; a request is handed back for the
    /// task to answer.
    pub(super) fn deliver(&self, event: Event) -> Option<Event> {
        let mut slots = self.slots.borrow_mut();
        match event {
            Event::Request { stream, .. } | Event::TooLarge { stream, .. } => {
                let end = matches!(
                    event,
                    Event::Request {
                        end_stream: true,
                        ..
                    } | Event::TooLarge {
                        end_stream: true,
                        ..
                    }
                );
                slots.insert(
                    stream,
                    Slot {
                        recv_end: end,
                        ..Slot::default()
                    },
                );
                return Some(event);
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => {
                let Some(slot) = slots.get_mut(&stream) else {
                    self.conn.borrow_mut().release(stream, data.len());
                    return None;
                };
                if slot.recv_dropped {
                    self.conn.borrow_mut().release(stream, data.len());
                } else if !data.is_empty() {
                    slot.recv_held += data.len();
                    slot.recv.push_back(data);
                }
                slot.recv_end |= end_stream;
                slot.wake();
            }
            Event::Trailers { stream, fields } => {
                if let Some(slot) = slots.get_mut(&stream) {
                    slot.trailers = Some(Box::new(trailer_map(&fields)));
                    slot.recv_end = true;
                    slot.wake();
                }
                self.conn.borrow_mut().recycle(fields);
            }
            Event::Reset { stream, code, .. } => {
                if let Some(slot) = slots.get_mut(&stream) {
                    slot.reset = Some(code);
                    self.drop_queued(stream, slot);
                    let held = std::mem::take(&mut slot.recv_held);
                    slot.recv.clear();
                    self.conn.borrow_mut().release(stream, held);
                    slot.wake();
                    if slot.done {
                        slots.remove(&stream);
                    }
                }
                return Some(event);
            }
            Event::GoAway { .. } => return Some(event),
        }
        None
    }

    /// A reset stream's queued bytes will never be framed: their count goes
    /// back.
    fn drop_queued(&self, stream: u32, slot: &mut Slot) {
        if slot.send_bytes > 0 {
            self.outbox.dropped(stream, slot.send_bytes);
        }
        slot.send.clear();
        slot.send_bytes = 0;
        slot.send_trailers = None;
        slot.send_end = false;
    }

    /// Wake every stream (a window grew, the connection is ending).
    pub(super) fn wake_all(&self) {
        for slot in self.slots.borrow_mut().values_mut() {
            slot.wake();
        }
    }

    /// Frame what streams have queued, as the windows allow.
    pub(super) fn frame_queued(&self) {
        let mut queued = self.queued.borrow_mut();
        if queued.is_empty() {
            return;
        }
        let mut conn = self.conn.borrow_mut();
        let mut slots = self.slots.borrow_mut();
        queued.retain(|&id| {
            let Some(slot) = slots.get_mut(&id) else {
                return false;
            };
            while let Some(mut front) = slot.send.pop_front() {
                let last = slot.send.is_empty();
                let end = last && slot.send_end && slot.send_trailers.is_none();
                let len = front.len();
                let n = conn.send_data(id, &mut front, end);
                slot.send_bytes -= n;
                if n < len || (n == 0 && end && conn.can_send(id)) {
                    if !conn.can_send(id) {
                        // Reset meanwhile: nothing more of it goes out.
                        slot.send_bytes += front.len();
                        self.drop_queued(id, slot);
                        break;
                    }
                    slot.send.push_front(front);
                    return true;
                }
            }
            if slot.send.is_empty() {
                if let Some(t) = slot.send_trailers.take() {
                    conn.send_headers(id, &[&t], true);
                } else if slot.send_end && conn.can_send(id) {
                    conn.send_data(id, &mut Bytes::new(), true);
                }
                slot.send_end = false;
            }
            if slot.done {
                slots.remove(&id);
            }
            false
        });
    }

    fn slot<T>(&self, id: u32, f: impl FnOnce(&mut Slot) -> T) -> Option<T> {
        self.slots.borrow_mut().get_mut(&id).map(f)
    }

    fn hold(&self, id: u32) {
        self.slot(id, |s| s.handles += 1);
    }

    /// A handle of stream `id`'s answer is dropped; with the last, the
    /// answer is over.
    fn answered(&self, id: u32) {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(&id) {
            slot.handles = slot.handles.saturating_sub(1);
            if slot.handles > 0 {
                return;
            }
            slot.done = true;
            slot.waker = None;
            if slot.send.is_empty() && slot.send_trailers.is_none() && !slot.send_end {
                slots.remove(&id);
            }
        }
    }

    fn queue(&self, id: u32) {
        let mut q = self.queued.borrow_mut();
        if !q.contains(&id) {
            q.push(id);
        }
        self.dirty.set(true);
    }
}

/// The trailer fields of a request, as a map (names are lowercase tokens
/// and values checked by `http::h2::request`; one that `http` refuses all
/// the same is left out).
fn trailer_map(fields: &crate::http::h2::hpack::FieldList) -> http::HeaderMap {
    let mut map = http::HeaderMap::with_capacity(fields.len());
    for (name, value) in fields.iter() {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        }
    }
    map
}

/// A request's body as its stream receives it.
pub(crate) struct RecvStream {
    id: u32,
    wire: Rc<Wire>,
}

impl RecvStream {
    pub(super) fn new(id: u32, wire: Rc<Wire>) -> RecvStream {
        RecvStream { id, wire }
    }

    /// The request has no body left to come or take.
    pub(crate) fn is_end_stream(&self) -> bool {
        self.wire
            .slot(self.id, |s| s.recv.is_empty() && s.recv_end)
            .unwrap_or(true)
    }

    /// The next chunk; `None` at the body's end; `Err` once reset. Its
    /// credit goes back by [`RecvStream::release_capacity`].
    pub(crate) async fn data(&mut self) -> Option<Result<Bytes, Gone>> {
        poll_fn(|cx| {
            self.wire
                .slot(self.id, |s| {
                    if let Some(code) = s.reset {
                        return Poll::Ready(Some(Err(Gone(code))));
                    }
                    if let Some(b) = s.recv.pop_front() {
                        return Poll::Ready(Some(Ok(b)));
                    }
                    if s.recv_end {
                        return Poll::Ready(None);
                    }
                    s.park(cx);
                    Poll::Pending
                })
                .unwrap_or(Poll::Ready(Some(Err(Gone(ErrorCode::CANCEL)))))
        })
        .await
    }

    /// The trailer section, once the body has ended.
    pub(crate) async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, Gone> {
        poll_fn(|cx| {
            self.wire
                .slot(self.id, |s| {
                    if let Some(code) = s.reset {
                        return Poll::Ready(Err(Gone(code)));
                    }
                    if s.recv_end && s.recv.is_empty() {
                        return Poll::Ready(Ok(s.trailers.take().map(|t| *t)));
                    }
                    s.park(cx);
                    Poll::Pending
                })
                .unwrap_or(Poll::Ready(Err(Gone(ErrorCode::CANCEL))))
        })
        .await
    }

    /// `n` bytes taken by the service: their credit goes back.
    pub(crate) fn release_capacity(&self, n: usize) {
        if n == 0 {
            return;
        }
        let released = self
            .wire
            .slot(self.id, |s| {
                let n = n.min(s.recv_held);
                s.recv_held -= n;
                n
            })
            .unwrap_or(0);
        if released > 0 {
            self.wire.conn.borrow_mut().release(self.id, released);
            self.wire.dirty.set(true);
        }
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        // What waits untaken, and what comes later, is given back.
        let held = self
            .wire
            .slot(self.id, |s| {
                s.recv_dropped = true;
                s.recv.clear();
                std::mem::take(&mut s.recv_held)
            })
            .unwrap_or(0);
        if held > 0 {
            self.wire.conn.borrow_mut().release(self.id, held);
            self.wire.dirty.set(true);
        }
    }
}

/// A stream's answer before its head went out.
pub(crate) struct SendResponse {
    id: u32,
    wire: Rc<Wire>,
}

impl SendResponse {
    pub(super) fn new(id: u32, wire: Rc<Wire>) -> SendResponse {
        wire.hold(id);
        SendResponse { id, wire }
    }

    pub(crate) fn stream_id(&self) -> u32 {
        self.id
    }

    /// Ready once the stream is reset.
    pub(crate) fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<ErrorCode> {
        poll_reset(&self.wire, self.id, cx)
    }

    /// Send the response head (`end`: no body follows); the body goes
    /// through the returned stream.
    pub(crate) fn send_response(
        &mut self,
        head: http::response::Parts,
        end: bool,
    ) -> Result<SendStream, Gone> {
        let wire = self.wire.clone();
        let mut block = wire.head.borrow_mut();
        block.clear();
        encode_head(&mut block, &head);
        self.send_encoded(&[&block], end)
    }

    /// Send an interim (1xx) head with `status` and no fields.
    pub(crate) fn send_interim(&mut self, status: u16) {
        let mut block = Vec::with_capacity(5);
        encode::status(&mut block, status);
        self.wire
            .conn
            .borrow_mut()
            .send_headers(self.id, &[&block], false);
        self.wire.dirty.set(true);
    }

    /// Send a response head already HPACK-encoded in `parts` (joined in
    /// order); the body goes through the returned stream.
    pub(crate) fn send_encoded(&mut self, parts: &[&[u8]], end: bool) -> Result<SendStream, Gone> {
        if let Some(code) = self.wire.slot(self.id, |s| s.reset).flatten() {
            return Err(Gone(code));
        }
        let sent = self
            .wire
            .conn
            .borrow_mut()
            .send_headers(self.id, parts, end);
        self.wire.dirty.set(true);
        if !sent {
            return Err(Gone(ErrorCode::STREAM_CLOSED));
        }
        self.wire.hold(self.id);
        Ok(SendStream {
            id: self.id,
            wire: self.wire.clone(),
        })
    }
}

impl Drop for SendResponse {
    fn drop(&mut self) {
        self.wire.answered(self.id);
    }
}

/// A stream's response body on its way out.
pub(crate) struct SendStream {
    id: u32,
    wire: Rc<Wire>,
}

impl SendStream {
    pub(crate) fn stream_id(&self) -> u32 {
        self.id
    }

    /// Hand `data` over (`end`: the body ends with it). It is framed as the
    /// windows allow; until then it counts as handed in the outbox.
    pub(crate) fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), Gone> {
        self.queue(|s| {
            s.send_bytes += data.len();
            if !data.is_empty() {
                s.send.push_back(data);
            }
            s.send_end |= end;
        })
    }

    /// Change the slot with `f` unless the stream was reset, and have the
    /// connection frame what it queued.
    fn queue(&mut self, f: impl FnOnce(&mut Slot)) -> Result<(), Gone> {
        let queued = self.wire.slot(self.id, |s| match s.reset {
            Some(code) => Err(Gone(code)),
            None => {
                f(s);
                Ok(())
            }
        });
        match queued {
            Some(Ok(())) => {
                self.wire.queue(self.id);
                Ok(())
            }
            Some(Err(e)) => Err(e),
            None => Err(Gone(ErrorCode::STREAM_CLOSED)),
        }
    }

    /// End the body with trailer fields.
    pub(crate) fn send_trailers(&mut self, trailers: http::HeaderMap) -> Result<(), Gone> {
        let mut block = Vec::new();
        for (name, value) in &trailers {
            encode::field(&mut block, name.as_str().as_bytes(), value.as_bytes());
        }
        self.queue(|s| {
            s.send_trailers = Some(block.into_boxed_slice());
            s.send_end = true;
        })
    }

    /// Credit the stream has now, less what it has queued.
    pub(crate) fn capacity(&self) -> usize {
        let window = self.wire.conn.borrow().send_window(self.id);
        let queued = self.wire.slot(self.id, |s| s.send_bytes).unwrap_or(0);
        window.saturating_sub(queued)
    }

    /// Ready with the credit the stream has (at least a byte); `Err` once
    /// reset.
    pub(crate) fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, Gone>> {
        if let Some(code) = self.wire.slot(self.id, |s| s.reset).flatten() {
            return Poll::Ready(Err(Gone(code)));
        }
        if !self.wire.conn.borrow().can_send(self.id) {
            return Poll::Ready(Err(Gone(ErrorCode::STREAM_CLOSED)));
        }
        let n = self.capacity();
        if n > 0 {
            return Poll::Ready(Ok(n));
        }
        self.wire.slot(self.id, |s| s.park(cx));
        Poll::Pending
    }

    pub(crate) fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<ErrorCode> {
        poll_reset(&self.wire, self.id, cx)
    }

    /// Reset the stream: what it queued is dropped.
    pub(crate) fn send_reset(&mut self, code: ErrorCode) {
        reset(&self.wire, self.id, code);
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        self.wire.answered(self.id);
    }
}

fn poll_reset(wire: &Wire, id: u32, cx: &Context<'_>) -> Poll<ErrorCode> {
    wire.slot(id, |s| match s.reset {
        Some(code) => Poll::Ready(code),
        None => {
            s.park(cx);
            Poll::Pending
        }
    })
    .unwrap_or(Poll::Ready(ErrorCode::CANCEL))
}

fn reset(wire: &Wire, id: u32, code: ErrorCode) {
    let known = wire
        .slot(id, |s| {
            if s.reset.is_some() {
                return false;
            }
            s.reset = Some(code);
            true
        })
        .unwrap_or(false);
    if known {
        if let Some(slot) = wire.slots.borrow_mut().get_mut(&id) {
            wire.drop_queued(id, slot);
        }
        wire.conn.borrow_mut().reset(id, code);
        wire.dirty.set(true);
    }
}

/// HPACK-encode a response head: `:status`, then each field (names are
/// lowercase in `http`'s map); values Huffman-coded where shorter, but
/// `date` and `content-length` (made per response) as they are.
pub(super) fn encode_head(out: &mut Vec<u8>, head: &http::response::Parts) {
    encode::status(out, head.status.as_u16());
    for (name, value) in &head.headers {
        let n = name.as_str().as_bytes();
        if name == http::header::DATE || name == http::header::CONTENT_LENGTH {
            encode::field_raw(out, n, value.as_bytes());
        } else {
            encode::field(out, n, value.as_bytes());
        }
    }
}
