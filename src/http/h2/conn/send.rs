//! The sending half of a connection: response heads and bodies framed
//! within the peer's windows, credit given back, resets and GOAWAY, all
//! written into the connection's [`Output`].

use std::collections::VecDeque;

use bytes::Bytes;

use super::super::frame::{self, flag, kind, MAX_FRAME};
use super::super::hpack::encode;
use super::super::ErrorCode;
use super::{Closed, Conn, COPY_BELOW, DEFAULT_WINDOW, DRAIN_PING};

/// Bytes to write, in order: frames written here, with payloads kept as
/// the [`Bytes`] they came in (spliced at their offsets). What the socket
/// took is dropped as it goes ([`Output::advance`]): a payload is freed
/// once written, not when the whole output is.
#[derive(Debug, Default)]
pub struct Output {
    bytes: Vec<u8>,
    /// `bytes[..start]` has been written.
    start: usize,
    /// (offset in `bytes` the payload goes before, payload).
    pieces: VecDeque<(usize, Bytes)>,
    /// Payload bytes in `pieces`.
    piece_bytes: usize,
}

/// Written frame bytes past which the written prefix is cut off.
const COMPACT_BYTES: usize = 16 * 1024;

impl Output {
    /// Bytes to write.
    pub fn len(&self) -> usize {
        self.bytes.len() - self.start + self.piece_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frame bytes to write (control frames, heads, small payloads): what
    /// `Conn::wants_read` bounds.
    pub fn frame_bytes(&self) -> usize {
        self.bytes.len() - self.start
    }

    /// Append frame bytes.
    pub fn extend(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }

    /// The buffer frames are written into.
    pub(super) fn frames(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// The bytes to write in order, as slices.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        let mut at = self.start;
        let mut pieces = self.pieces.iter();
        let mut next = pieces.next();
        std::iter::from_fn(move || loop {
            match next {
                Some((off, p)) if *off <= at => {
                    next = pieces.next();
                    if !p.is_empty() {
                        return Some(&p[..]);
                    }
                }
                Some((off, _)) => {
                    let s = &self.bytes[at..*off];
                    at = *off;
                    return Some(s);
                }
                None if at < self.bytes.len() => {
                    let s = &self.bytes[at..];
                    at = self.bytes.len();
                    return Some(s);
                }
                None => return None,
            }
        })
    }

    /// `n` bytes from the front were written: they go.
    pub fn advance(&mut self, mut n: usize) {
        while n > 0 {
            match self.pieces.front_mut() {
                Some((off, p)) if *off <= self.start => {
                    let k = n.min(p.len());
                    bytes::Buf::advance(p, k);
                    self.piece_bytes -= k;
                    n -= k;
                    if p.is_empty() {
                        self.pieces.pop_front();
                    }
                }
                next => {
                    let end = next.map_or(self.bytes.len(), |(off, _)| *off);
                    let k = n.min(end - self.start);
                    if k == 0 {
                        break;
                    }
                    self.start += k;
                    n -= k;
                }
            }
        }
        if self.is_empty() {
            self.clear();
        } else if self.start >= COMPACT_BYTES {
            self.bytes.drain(..self.start);
            for (off, _) in &mut self.pieces {
                *off -= self.start;
            }
            self.start = 0;
        }
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.start = 0;
        self.pieces.clear();
        self.piece_bytes = 0;
    }

    /// Free the buffers if larger than `keep` (and empty).
    pub fn release(&mut self, keep: usize) {
        if self.is_empty() && self.bytes.capacity() > keep {
            self.bytes = Vec::new();
            self.pieces = VecDeque::new();
        }
    }

    pub(super) fn payload(&mut self, data: Bytes) {
        if data.len() < COPY_BELOW {
            self.bytes.extend_from_slice(&data);
        } else {
            self.piece_bytes += data.len();
            self.pieces.push_back((self.bytes.len(), data));
        }
    }
}

impl Conn {
    /// Reset `stream` (RST_STREAM with `code`); frames of it still in flight
    /// are ignored.
    pub fn reset(&mut self, stream: u32, code: ErrorCode) {
        let unreleased = self.streams.remove(&stream).map_or(0, |s| s.unreleased);
        frame::write_rst_stream(self.out.frames(), stream, code);
        self.remember(stream, Closed::ByUs);
        self.release_connection(unreleased as usize);
    }

    /// The task has read `n` body bytes of `stream` (or dropped them): their
    /// credit goes back, announced once half a window has gathered.
    pub fn release(&mut self, stream: u32, n: usize) {
        self.release_connection(n);
        let threshold = self.ours.initial_window / 2;
        if let Some(s) = self.streams.get_mut(&stream) {
            if !s.recv_open {
                return;
            }
            s.unreleased += n as u32;
            if s.unreleased >= threshold.max(1) {
                frame::write_window_update(self.out.frames(), stream, s.unreleased);
                s.recv_window += i64::from(s.unreleased);
                s.unreleased = 0;
            }
        }
    }

    pub(super) fn release_connection(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.unreleased += n as u32;
        let target = self.ours.initial_window.max(DEFAULT_WINDOW);
        if self.unreleased >= target / 2 {
            frame::write_window_update(self.out.frames(), 0, self.unreleased);
            self.recv_window += i64::from(self.unreleased);
            self.unreleased = 0;
        }
    }

    /// What `stream` may send now: the smaller of its window and the
    /// connection's; 0 for a stream we cannot send on.
    pub fn send_window(&self, stream: u32) -> usize {
        match self.streams.get(&stream) {
            Some(s) if s.send_open => s.send_window.min(self.send_window).max(0) as usize,
            _ => 0,
        }
    }

    /// Whether we may still send on `stream`.
    pub fn can_send(&self, stream: u32) -> bool {
        self.streams.get(&stream).is_some_and(|s| s.send_open)
    }

    /// Write a response head: HEADERS (and CONTINUATION past a frame) with
    /// the field block `parts` joined. `false`: the stream is gone.
    pub fn send_headers(&mut self, stream: u32, parts: &[&[u8]], end_stream: bool) -> bool {
        if !self.can_send(stream) {
            return false;
        }
        let update = std::mem::take(&mut self.table_update_due);
        let len: usize = parts.iter().map(|p| p.len()).sum::<usize>() + usize::from(update);
        let out = self.out.frames();
        let end = if end_stream { flag::END_STREAM } else { 0 };
        if len <= MAX_FRAME {
            frame::head(out, len, kind::HEADERS, end | flag::END_HEADERS, stream);
            if update {
                encode::size_update(out, 0);
            }
            for p in parts {
                out.extend_from_slice(p);
            }
        } else {
            let mut block = Vec::with_capacity(len);
            if update {
                encode::size_update(&mut block, 0);
            }
            for p in parts {
                block.extend_from_slice(p);
            }
            let mut chunks = block.chunks(MAX_FRAME).peekable();
            let mut first = true;
            while let Some(chunk) = chunks.next() {
                let last = chunks.peek().is_none();
                let (k, mut flags) = if first {
                    (kind::HEADERS, end)
                } else {
                    (kind::CONTINUATION, 0)
                };
                if last {
                    flags |= flag::END_HEADERS;
                }
                frame::head(out, chunk.len(), k, flags, stream);
                out.extend_from_slice(chunk);
                first = false;
            }
        }
        if end_stream {
            self.sent_end(stream);
        }
        true
    }

    /// Write as much of `data` as the windows allow as DATA frames (taking it
    /// from `data`); `end_stream` ends the stream with its last byte (or
    /// with an empty frame for empty `data`). Returns the bytes taken.
    pub fn send_data(&mut self, stream: u32, data: &mut Bytes, end_stream: bool) -> usize {
        let window = self.send_window(stream);
        if !self.can_send(stream) {
            return 0;
        }
        let n = data.len().min(window);
        let ends = end_stream && n == data.len();
        if n == 0 && !ends {
            return 0;
        }
        let mut left = data.split_to(n);
        loop {
            let chunk = left.split_to(left.len().min(MAX_FRAME));
            let flags = if ends && left.is_empty() {
                flag::END_STREAM
            } else {
                0
            };
            frame::head(self.out.frames(), chunk.len(), kind::DATA, flags, stream);
            self.out.payload(chunk);
            if left.is_empty() {
                break;
            }
        }
        self.send_window -= n as i64;
        if let Some(s) = self.streams.get_mut(&stream) {
            s.send_window -= n as i64;
        }
        if ends {
            self.sent_end(stream);
        }
        n
    }

    /// Our side of `stream` ended. A request body still coming is not
    /// wanted: RST_STREAM NO_ERROR stops it (RFC 9113 §8.1).
    fn sent_end(&mut self, stream: u32) {
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        s.send_open = false;
        if s.recv_open {
            self.reset(stream, ErrorCode::NO_ERROR);
        } else {
            self.close_if_done(stream);
        }
    }

    /// End the connection gracefully (RFC 9113 §6.8): GOAWAY with the
    /// largest id, a PING, and at its acknowledgement GOAWAY with the last
    /// stream taken; streams up to it finish.
    pub fn drain(&mut self) {
        if self.going_away() {
            return;
        }
        frame::write_goaway(self.out.frames(), frame::MAX_WINDOW, ErrorCode::NO_ERROR);
        frame::write_ping(self.out.frames(), false, DRAIN_PING);
        self.draining = true;
    }

    /// GOAWAY with the last stream taken: streams after it are ignored.
    pub fn go_away(&mut self, code: ErrorCode) {
        if self.goaway.is_some() && code == ErrorCode::NO_ERROR {
            return;
        }
        frame::write_goaway(self.out.frames(), self.last_taken, code);
        self.goaway = Some(self.last_taken);
        self.draining = false;
    }
}
