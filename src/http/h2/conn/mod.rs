//! One server connection's HTTP/2 state (RFC 9113), without I/O: bytes in,
//! [`Event`]s and bytes out.
//!
//! Owns the connection preface and SETTINGS both ways, stream states
//! (§5.1), field blocks across CONTINUATION, HPACK decoding, flow control
//! both ways (§5.2, §6.9), PING, RST_STREAM and GOAWAY, and the bounds a
//! client cannot push past. Does not own sockets, timers, what a request
//! means, nor how many resets a client may make in a while (the connection
//! task above it, which has a clock).
//!
//! Flow:
//! 1. [`Conn::new`] writes our SETTINGS (and the connection window's
//!    increase) into [`Conn::output`].
//! 2. [`Conn::recv`] takes whole frames from the read buffer: the preface,
//!    then frames, each checked (`frame::read`) and applied. Requests,
//!    their DATA and trailers, and the peer's resets become events
//!    ([`Conn::event`]); our answers to it (SETTINGS and PING
//!    acknowledgements, WINDOW_UPDATE, RST_STREAM) go to the output.
//! 3. The task answers through [`Conn::send_headers`] and
//!    [`Conn::send_data`] (within [`Conn::send_window`]), gives credit back
//!    as its services read ([`Conn::release`]), resets streams
//!    ([`Conn::reset`]) and ends the connection ([`Conn::drain`],
//!    [`Conn::go_away`]).
//! 4. A connection error writes GOAWAY with its code and every later call
//!    of `recv` fails.
//!
//! Here the receiving half (preface, SETTINGS, DATA and the control frames);
//! `blocks` the field blocks (HEADERS, CONTINUATION, trailers); `send` the
//! sending half and the [`Output`] it writes to.
//!
//! Bounds (each a constant here or a setting): a field block's bytes and its
//! CONTINUATION frames; the header list kept (past it: 431 for the task to
//! answer); control frames queued (past [`CONTROL_BYTES`] `recv` stops
//! taking frames, so a client that floods SETTINGS or PING and never reads
//! stops itself); empty DATA frames; our own stream errors; the closed
//! streams remembered.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use bytes::{Buf, Bytes, BytesMut};

use super::frame::{self, flag, kind, setting, Frame, Head, Refused, HEADER_LEN, MAX_FRAME};
use super::hpack::{Decoder, FieldList};
use super::request::Pseudo;
use super::{ErrorCode, PREFACE};

/// What we advertise and enforce.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: past it, REFUSED_STREAM.
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a larger list is answered 431.
    pub max_header_list_bytes: usize,
    /// SETTINGS_HEADER_TABLE_SIZE: our decoder's table.
    pub header_table_bytes: usize,
    /// SETTINGS_INITIAL_WINDOW_SIZE, and the connection's window.
    pub initial_window: u32,
}

/// The protocol's initial window and table size (RFC 9113 §6.5.2).
const DEFAULT_WINDOW: u32 = 65_535;
const DEFAULT_TABLE: usize = 4_096;
/// Control frames queued and unwritten past which `recv` takes no more
/// frames (h2 keeps one pending acknowledgement; this is ~1,000 of them).
pub const CONTROL_BYTES: usize = 16 * 1024;
/// Empty DATA frames without END_STREAM a connection may send in a row (no
/// DATA with a payload between them): they cost no credit, so only a count
/// stops a flood of them.
const MAX_EMPTY_DATA: u32 = 100;
/// Streams we may reset for the client's errors in a connection's life.
const MAX_STREAM_ERRORS: u32 = 1024;
/// Closed streams whose end is remembered, to tell a late frame on a stream
/// we reset (ignored) from one on a stream the client ended (an error).
const REMEMBERED: usize = 128;
/// What each CONTINUATION frame costs at least against the block bound: a
/// flood of empty ones ends as soon as one of large fields would.
const CONTINUATION_COST: usize = 1024;
/// DATA payloads shorter than this are copied out of the read buffer, so a
/// small frame does not keep a whole read buffer alive while it waits.
const COPY_BELOW: usize = 1024;
/// The PING of a graceful GOAWAY (RFC 9113 §6.8).
const DRAIN_PING: [u8; 8] = *b"svrdrain";

/// What the peer did, for the task.
#[derive(Debug)]
pub enum Event {
    /// A new request's head; `end_stream`: it has no body.
    Request {
        stream: u32,
        head: RequestHead,
        end_stream: bool,
    },
    /// A request whose header list passed SETTINGS_MAX_HEADER_LIST_SIZE
    /// (RFC 9113 §10.5.1): the task answers 431; its body is discarded.
    TooLarge { stream: u32, end_stream: bool },
    /// Body bytes; their credit returns by [`Conn::release`].
    Data {
        stream: u32,
        data: Bytes,
        end_stream: bool,
    },
    /// The request's trailer section, which ends it.
    Trailers { stream: u32, fields: FieldList },
    /// The stream is gone: reset by the peer, or by us for its error.
    Reset {
        stream: u32,
        code: ErrorCode,
        by_peer: bool,
    },
    /// The peer will open no more streams than `last` (it sent GOAWAY).
    GoAway { last: u32, code: ErrorCode },
}

/// A request's fields, decoded, and where its pseudo-header fields are.
#[derive(Debug)]
pub struct RequestHead {
    pub fields: FieldList,
    pub pseudo: Pseudo,
}

/// The connection failed with `code` (GOAWAY is in the output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 connection error {code:?}")]
pub struct ConnError {
    pub code: ErrorCode,
}

/// One stream's state while it is open or half-closed (RFC 9113 §5.1).
#[derive(Debug)]
struct Stream {
    /// The peer has not ended its side.
    recv_open: bool,
    /// We have not ended ours.
    send_open: bool,
    send_window: i64,
    /// Credit the peer has left on this stream.
    recv_window: i64,
    /// Bytes the task gave back and we have not announced yet.
    unreleased: u32,
    received: u64,
    content_length: Option<u64>,
}

/// How a remembered stream closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    /// We reset it: the peer's frames in flight are ignored.
    ByUs,
    /// Ended both ways, or reset by the peer.
    Done,
}

/// What a field block being received is for.
#[derive(Debug, Clone, Copy)]
enum Block {
    Request,
    Trailers,
    /// Decoded for the table's sake, then the stream is reset with this.
    Refuse(ErrorCode),
    /// Decoded for the table's sake only (a stream past our GOAWAY, or
    /// one we reset).
    Ignore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Preface,
    /// The preface came; the first frame must be SETTINGS.
    FirstSettings,
    Open,
}

/// Hashes a stream id with one multiplication (ids are the client's odd
/// numbers; SipHash would cost more than the lookup). Also the worker's
/// tables of a connection's streams.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        let x = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = x ^ (x >> 29);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A server connection's HTTP/2 state.
pub struct Conn {
    ours: Settings,
    phase: Phase,
    /// Our SETTINGS were acknowledged: the peer uses our values.
    acked: bool,
    /// The peer's SETTINGS (not an acknowledgement) came.
    peer_settings: bool,
    decoder: Decoder,
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE.
    peer_window: u32,
    /// The peer lowered its table: our next field block starts with a size
    /// update (RFC 7541 §4.2).
    table_update_due: bool,
    streams: HashMap<u32, Stream, BuildHasherDefault<IdHasher>>,
    closed: VecDeque<(u32, Closed)>,
    /// The highest stream id the peer has opened.
    last_stream: u32,
    /// The highest stream handed to the task (a request or a 431): what a
    /// GOAWAY names as processed (RFC 9113 §6.8).
    last_taken: u32,
    send_window: i64,
    recv_window: i64,
    /// Connection credit given back by the task, not yet announced.
    unreleased: u32,
    /// The field block being received: its stream, END_STREAM, purpose,
    /// bytes so far and their cost against the bound.
    pending: Option<(u32, bool, Block)>,
    block: Vec<u8>,
    block_cost: usize,
    /// Field lists to reuse.
    spare: Vec<FieldList>,
    empty_data: u32,
    stream_errors: u32,
    /// GOAWAY sent: its last stream id.
    goaway: Option<u32>,
    /// A graceful GOAWAY waits for its PING.
    draining: bool,
    failed: Option<ErrorCode>,
    /// A window grew since [`Conn::windows_grew`] was last asked.
    grew: bool,
    events: VecDeque<Event>,
    out: Output,
}

impl Conn {
    pub fn new(ours: Settings) -> Conn {
        let mut out = Output::default();
        let mut params = vec![
            (setting::MAX_CONCURRENT_STREAMS, ours.max_concurrent_streams),
            (setting::INITIAL_WINDOW_SIZE, ours.initial_window),
            (
                setting::MAX_HEADER_LIST_SIZE,
                ours.max_header_list_bytes as u32,
            ),
            (setting::ENABLE_PUSH, 0),
        ];
        if ours.header_table_bytes != DEFAULT_TABLE {
            params.push((setting::HEADER_TABLE_SIZE, ours.header_table_bytes as u32));
        }
        frame::write_settings(out.frames(), &params);
        let mut recv_window = i64::from(DEFAULT_WINDOW);
        if ours.initial_window > DEFAULT_WINDOW {
            frame::write_window_update(out.frames(), 0, ours.initial_window - DEFAULT_WINDOW);
            recv_window = i64::from(ours.initial_window);
        }
        Conn {
            ours,
            phase: Phase::Preface,
            acked: false,
            peer_settings: false,
            // Until our SETTINGS are acknowledged the peer may use the
            // protocol's default table.
            decoder: Decoder::new(ours.header_table_bytes.max(DEFAULT_TABLE)),
            peer_window: DEFAULT_WINDOW,
            table_update_due: false,
            streams: HashMap::default(),
            closed: VecDeque::new(),
            last_stream: 0,
            last_taken: 0,
            send_window: i64::from(DEFAULT_WINDOW),
            recv_window,
            unreleased: 0,
            pending: None,
            block: Vec::new(),
            block_cost: 0,
            spare: Vec::new(),
            empty_data: 0,
            stream_errors: 0,
            goaway: None,
            draining: false,
            failed: None,
            grew: false,
            events: VecDeque::new(),
            out,
        }
    }

    /// What to write next; the caller clears it once written.
    pub fn output(&mut self) -> &mut Output {
        &mut self.out
    }

    pub fn event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether `recv` would take frames now: not while control frames past
    /// [`CONTROL_BYTES`] wait to be written, nor after a connection error.
    pub fn wants_read(&self) -> bool {
        self.failed.is_none() && self.out.frame_bytes() <= CONTROL_BYTES
    }

    /// The client's preface and SETTINGS have come.
    pub fn ready(&self) -> bool {
        self.peer_settings
    }

    /// The connection error that ended the connection, if one did.
    pub fn failure(&self) -> Option<ErrorCode> {
        self.failed
    }

    /// A GOAWAY with the last stream has gone out: no stream after it will
    /// be taken (a graceful drain's first GOAWAY does not count).
    pub fn goaway_final(&self) -> bool {
        self.goaway.is_some()
    }

    /// Nothing waits to be written.
    pub fn output_is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Give back what an idle connection need not hold: spare field lists,
    /// the block buffer, grown tables of streams and events, the output's
    /// buffer, and the remembered ends of streams the client closed (a late
    /// frame of one is then a stream error instead of STREAM_CLOSED's
    /// connection error: after an idle while, none is in flight). What
    /// stays: the HPACK table, the settings, the windows.
    pub fn shed(&mut self) {
        self.spare = Vec::new();
        self.block = Vec::new();
        self.decoder.shed();
        self.events = VecDeque::new();
        self.streams.shrink_to_fit();
        self.closed.retain(|(_, how)| *how == Closed::ByUs);
        self.closed.shrink_to_fit();
        self.out.release(0);
    }

    /// Streams open or half-closed.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The highest stream id handed to the task.
    pub fn last_taken(&self) -> u32 {
        self.last_taken
    }

    /// GOAWAY was sent (gracefully or not).
    pub fn going_away(&self) -> bool {
        self.goaway.is_some() || self.draining
    }

    /// Whether a window grew since last asked (streams waiting for credit
    /// should look again).
    pub fn windows_grew(&mut self) -> bool {
        std::mem::take(&mut self.grew)
    }

    /// A field list back for reuse.
    pub fn recycle(&mut self, mut list: FieldList) {
        if self.spare.len() < 4 && list.bytes.capacity() <= 2 * self.ours.max_header_list_bytes {
            list.clear();
            self.spare.push(list);
        }
    }

    /// Take every whole frame `buf` holds (fewer while control frames wait
    /// to be written), leaving a partial one for later.
    pub fn recv(&mut self, buf: &mut BytesMut) -> Result<(), ConnError> {
        if let Some(code) = self.failed {
            return Err(ConnError { code });
        }
        if self.phase == Phase::Preface {
            let n = buf.len().min(PREFACE.len());
            if buf[..n] != PREFACE[..n] {
                return Err(self.fail(ErrorCode::PROTOCOL_ERROR));
            }
            if n < PREFACE.len() {
                return Ok(());
            }
            buf.advance(PREFACE.len());
            self.phase = Phase::FirstSettings;
        }
        while buf.len() >= HEADER_LEN && self.wants_read() {
            let head = Head::read(buf);
            if head.len > MAX_FRAME {
                return Err(self.fail(ErrorCode::FRAME_SIZE_ERROR));
            }
            if buf.len() < HEADER_LEN + head.len {
                buf.reserve(HEADER_LEN + head.len - buf.len());
                break;
            }
            if self.phase == Phase::FirstSettings {
                // §3.4: the preface ends with a SETTINGS frame. (One that
                // acknowledges ours first is let pass: some clients answer
                // our SETTINGS before sending theirs.)
                if head.kind != kind::SETTINGS {
                    return Err(self.fail(ErrorCode::PROTOCOL_ERROR));
                }
                self.phase = Phase::Open;
            }
            let result = if head.kind == kind::DATA {
                let frame = buf.split_to(HEADER_LEN + head.len);
                self.data(&head, frame)
            } else {
                let result = self.frame(&head, &buf[HEADER_LEN..HEADER_LEN + head.len]);
                buf.advance(HEADER_LEN + head.len);
                result
            };
            if let Err(code) = result {
                return Err(self.fail(code));
            }
        }
        Ok(())
    }

    /// End the connection with `code`: GOAWAY with the last stream we took.
    fn fail(&mut self, code: ErrorCode) -> ConnError {
        if self.failed.is_none() {
            self.failed = Some(code);
            frame::write_goaway(self.out.frames(), self.last_taken, code);
            self.goaway = Some(self.last_taken);
        }
        ConnError { code }
    }

    fn data(&mut self, head: &Head, frame: BytesMut) -> Result<(), ErrorCode> {
        if self.pending.is_some() {
            return Err(ErrorCode::PROTOCOL_ERROR);
        }
        let (len, flow, end_stream) = match frame::read(head, &frame[HEADER_LEN..]) {
            Ok(Frame::Data {
                data,
                flow,
                end_stream,
                ..
            }) => (data.len(), flow, end_stream),
            Ok(_) => unreachable!("a DATA header reads as DATA"),
            Err(Refused::Connection(code)) => return Err(code),
            Err(Refused::Stream(e)) => return self.stream_error(e.stream, e.code),
        };
        let id = head.stream;
        // §6.9: every DATA frame counts against the connection's window.
        if flow as i64 > self.recv_window {
            return Err(ErrorCode::FLOW_CONTROL_ERROR);
        }
        self.recv_window -= flow as i64;
        if len == 0 && !end_stream {
            self.empty_data += 1;
            if self.empty_data > MAX_EMPTY_DATA {
                return Err(ErrorCode::ENHANCE_YOUR_CALM);
            }
        } else if len > 0 {
            self.empty_data = 0;
        }
        let Some(s) = self.streams.get_mut(&id) else {
            self.release_connection(flow);
            if id > self.last_stream {
                // §5.1: DATA on an idle stream.
                return Err(ErrorCode::PROTOCOL_ERROR);
            }
            return match self.closed_how(id) {
                Some(Closed::ByUs) => Ok(()),
                _ => self.stream_error(id, ErrorCode::STREAM_CLOSED),
            };
        };
        if !s.recv_open {
            self.release_connection(flow);
            return self.stream_error(id, ErrorCode::STREAM_CLOSED);
        }
        if flow as i64 > s.recv_window {
            self.release_connection(flow);
            return self.stream_error(id, ErrorCode::FLOW_CONTROL_ERROR);
        }
        s.recv_window -= flow as i64;
        s.received += len as u64;
        let over = s.content_length.is_some_and(|n| s.received > n);
        let short = end_stream && s.content_length.is_some_and(|n| s.received != n);
        if over || short {
            // §8.1.1: the body disagrees with content-length.
            self.release_connection(flow);
            return self.stream_error(id, ErrorCode::PROTOCOL_ERROR);
        }
        if end_stream {
            s.recv_open = false;
        }
        // Padding is nobody's to read: its credit goes back now.
        let padding = flow - len;
        if padding > 0 {
            self.release(id, padding);
        }
        let start = HEADER_LEN + usize::from(head.has(flag::PADDED));
        let data = if len < COPY_BELOW {
            Bytes::copy_from_slice(&frame[start..start + len])
        } else {
            frame.freeze().slice(start..start + len)
        };
        self.events.push_back(Event::Data {
            stream: id,
            data,
            end_stream,
        });
        if end_stream {
            self.close_if_done(id);
        }
        Ok(())
    }

    fn frame(&mut self, head: &Head, payload: &[u8]) -> Result<(), ErrorCode> {
        let frame = match frame::read(head, payload) {
            Ok(f) => f,
            Err(Refused::Connection(code)) => return Err(code),
            Err(Refused::Stream(e)) => {
                if self.pending.is_some() {
                    return Err(ErrorCode::PROTOCOL_ERROR);
                }
                return self.stream_error(e.stream, e.code);
            }
        };
        if let Some((stream, _, _)) = self.pending {
            // §6.10: nothing but the block's CONTINUATION frames until it ends.
            match frame {
                Frame::Continuation { stream: s, .. } if s == stream => {}
                _ => return Err(ErrorCode::PROTOCOL_ERROR),
            }
        }
        match frame {
            Frame::Data { .. } => unreachable!("DATA is read by `data`"),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                priority,
                block,
            } => {
                let mut purpose = self.block_for(stream, end_stream)?;
                if priority.is_some_and(|p| p.dependency == stream) {
                    // §5.3.1: a stream cannot depend on itself.
                    purpose = Block::Refuse(ErrorCode::PROTOCOL_ERROR);
                }
                self.block.clear();
                self.block_cost = 0;
                self.pending = Some((stream, end_stream, purpose));
                self.block_part(block, end_headers)
            }
            Frame::Continuation {
                block, end_headers, ..
            } => {
                if self.pending.is_none() {
                    return Err(ErrorCode::PROTOCOL_ERROR);
                }
                self.block_cost += block.len().max(CONTINUATION_COST) - block.len();
                self.block_part(block, end_headers)
            }
            Frame::Priority { .. } | Frame::Unknown => Ok(()),
            Frame::RstStream { stream, code } => {
                if stream > self.last_stream {
                    return Err(ErrorCode::PROTOCOL_ERROR);
                }
                if self.streams.remove(&stream).is_some() {
                    self.remember(stream, Closed::Done);
                    self.events.push_back(Event::Reset {
                        stream,
                        code,
                        by_peer: true,
                    });
                }
                Ok(())
            }
            Frame::Settings { ack: true, .. } => {
                if !self.acked {
                    self.acked = true;
                    self.decoder.set_limit(self.ours.header_table_bytes);
                }
                Ok(())
            }
            Frame::Settings { params, .. } => {
                self.peer_settings = true;
                for (id, value) in frame::settings(params) {
                    self.setting(id, value)?;
                }
                frame::write_settings_ack(self.out.frames());
                Ok(())
            }
            Frame::PushPromise => Err(ErrorCode::PROTOCOL_ERROR),
            Frame::Ping { ack: false, data } => {
                frame::write_ping(self.out.frames(), true, data);
                Ok(())
            }
            Frame::Ping { ack: true, data } => {
                if data == DRAIN_PING && self.draining {
                    self.draining = false;
                    self.go_away(ErrorCode::NO_ERROR);
                }
                Ok(())
            }
            Frame::GoAway { last, code } => {
                self.events.push_back(Event::GoAway { last, code });
                Ok(())
            }
            Frame::WindowUpdate {
                stream: 0,
                increment,
            } => {
                self.send_window += i64::from(increment);
                if self.send_window > i64::from(frame::MAX_WINDOW) {
                    return Err(ErrorCode::FLOW_CONTROL_ERROR);
                }
                self.grew = true;
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => {
                if stream > self.last_stream {
                    return Err(ErrorCode::PROTOCOL_ERROR);
                }
                let Some(s) = self.streams.get_mut(&stream) else {
                    // Closed: frames in flight are allowed (§6.9).
                    return Ok(());
                };
                s.send_window += i64::from(increment);
                if s.send_window > i64::from(frame::MAX_WINDOW) {
                    return self.stream_error(stream, ErrorCode::FLOW_CONTROL_ERROR);
                }
                self.grew = true;
                Ok(())
            }
        }
    }

    /// One SETTINGS parameter of the peer's (RFC 9113 §6.5.2).
    fn setting(&mut self, id: u16, value: u32) -> Result<(), ErrorCode> {
        match id {
            setting::HEADER_TABLE_SIZE if (value as usize) < DEFAULT_TABLE => {
                self.table_update_due = true;
            }
            setting::ENABLE_PUSH if value > 1 => return Err(ErrorCode::PROTOCOL_ERROR),
            setting::INITIAL_WINDOW_SIZE => {
                if value > frame::MAX_WINDOW {
                    return Err(ErrorCode::FLOW_CONTROL_ERROR);
                }
                // §6.9.2: every stream's window moves by the difference.
                let delta = i64::from(value) - i64::from(self.peer_window);
                self.peer_window = value;
                for s in self.streams.values_mut() {
                    s.send_window += delta;
                    if s.send_window > i64::from(frame::MAX_WINDOW) {
                        return Err(ErrorCode::FLOW_CONTROL_ERROR);
                    }
                }
                if delta > 0 {
                    self.grew = true;
                }
            }
            setting::MAX_FRAME_SIZE if !(MAX_FRAME as u32..1 << 24).contains(&value) => {
                return Err(ErrorCode::PROTOCOL_ERROR)
            }
            _ => {}
        }
        Ok(())
    }

    /// Reset `stream` for the peer's error (RFC 9113 §5.4.2).
    fn stream_error(&mut self, stream: u32, code: ErrorCode) -> Result<(), ErrorCode> {
        self.stream_errors += 1;
        if self.stream_errors > MAX_STREAM_ERRORS {
            return Err(ErrorCode::ENHANCE_YOUR_CALM);
        }
        let known = self.streams.contains_key(&stream);
        self.reset(stream, code);
        if known {
            self.events.push_back(Event::Reset {
                stream,
                code,
                by_peer: false,
            });
        }
        Ok(())
    }

    fn closed_how(&self, stream: u32) -> Option<Closed> {
        self.closed
            .iter()
            .rev()
            .find(|(id, _)| *id == stream)
            .map(|(_, how)| *how)
    }

    fn remember(&mut self, stream: u32, how: Closed) {
        if self.closed.len() == REMEMBERED {
            self.closed.pop_front();
        }
        self.closed.push_back((stream, how));
    }

    /// Forget a stream ended both ways.
    fn close_if_done(&mut self, stream: u32) {
        if let Some(s) = self.streams.get(&stream) {
            if !s.recv_open && !s.send_open {
                self.streams.remove(&stream);
                self.remember(stream, Closed::Done);
            }
        }
    }
}

mod blocks;
mod send;

pub use send::Output;

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
