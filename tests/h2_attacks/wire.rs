//! The attack tests' HTTP/2 client, written by hand so a test can send what
//! no well-behaved client library would: frames (RFC 9113 §4.1: a 24-bit
//! length, a type, flags, a 31-bit stream id, the payload), HPACK blocks
//! (RFC 7541) encoded field by field, and a connection that reads frames
//! back with a bound, answering PING and SETTINGS as a client must.
//!
//! Owns, in order: the frame and error-code numbers ([`kind`], [`flag`],
//! [`setting`], [`Code`]), [`Frame`] (encoding, decoding, and a readable
//! `Display` for assertion messages), [`Block`] (the HPACK encoder) and the
//! one field a test reads from a response block ([`Frame::status`]),
//! [`Conn`] (the connection: handshake, writes, bounded reads), and
//! [`flood`] (a writer thread for floods the server may stop reading).
//!
//! Does not own a server, RSS, or what a test asserts (`h2_attacks.rs`).
//!
//! It is the protocol's vocabulary, so not every test uses every word:
//! hence the `dead_code` allowance.
#![allow(dead_code)]

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The frame header's length (RFC 9113 §4.1).
pub const HEADER_LEN: usize = 9;
/// The largest frame payload either side may send before SETTINGS say
/// otherwise (SETTINGS_MAX_FRAME_SIZE's initial value, RFC 9113 §6.5.2).
pub const MAX_FRAME: usize = 16_384;
/// The largest frame the reader accepts (2^24 - 1, the field's limit).
const MAX_READ_FRAME: usize = (1 << 24) - 1;

/// Frame types (RFC 9113 §6).
pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (RFC 9113 §6).
pub mod flag {
    /// DATA, HEADERS.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION.
    pub const END_HEADERS: u8 = 0x4;
}

/// SETTINGS parameters (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// An error code of RST_STREAM and GOAWAY (RFC 9113 §7).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Code(pub u32);

impl Code {
    pub const NO_ERROR: Code = Code(0x0);
    pub const PROTOCOL_ERROR: Code = Code(0x1);
    pub const INTERNAL_ERROR: Code = Code(0x2);
    pub const FLOW_CONTROL_ERROR: Code = Code(0x3);
    pub const STREAM_CLOSED: Code = Code(0x5);
    pub const FRAME_SIZE_ERROR: Code = Code(0x6);
    pub const REFUSED_STREAM: Code = Code(0x7);
    pub const CANCEL: Code = Code(0x8);
    pub const COMPRESSION_ERROR: Code = Code(0x9);
    pub const ENHANCE_YOUR_CALM: Code = Code(0xb);

    fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0 => "NO_ERROR",
            0x1 => "PROTOCOL_ERROR",
            0x2 => "INTERNAL_ERROR",
            0x3 => "FLOW_CONTROL_ERROR",
            0x4 => "SETTINGS_TIMEOUT",
            0x5 => "STREAM_CLOSED",
            0x6 => "FRAME_SIZE_ERROR",
            0x7 => "REFUSED_STREAM",
            0x8 => "CANCEL",
            0x9 => "COMPRESSION_ERROR",
            0xa => "CONNECT_ERROR",
            0xb => "ENHANCE_YOUR_CALM",
            0xc => "INADEQUATE_SECURITY",
            0xd => "HTTP_1_1_REQUIRED",
            _ => return None,
        })
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "0x{:x}", self.0),
        }
    }
}

/// One frame, as sent or as read.
#[derive(Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    /// The 31-bit stream identifier (the reserved bit cleared on read).
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn new(kind: u8, flags: u8, stream: u32, payload: Vec<u8>) -> Frame {
        Frame {
            kind,
            flags,
            stream,
            payload,
        }
    }

    /// The frame on the wire: header, then payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        self.encode_into(&mut out);
        out
    }

    /// Append the frame's wire form to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let len = self.payload.len();
        assert!(len < 1 << 24, "frame payload of {len} B");
        out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
        out.push(self.kind);
        out.push(self.flags);
        out.extend_from_slice(&(self.stream & 0x7fff_ffff).to_be_bytes());
        out.extend_from_slice(&self.payload);
    }

    /// SETTINGS with these (parameter, value) pairs (RFC 9113 §6.5).
    pub fn settings(params: &[(u16, u32)]) -> Frame {
        let mut p = Vec::with_capacity(params.len() * 6);
        for &(id, value) in params {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&value.to_be_bytes());
        }
        Frame::new(kind::SETTINGS, 0, 0, p)
    }

    pub fn settings_ack() -> Frame {
        Frame::new(kind::SETTINGS, flag::ACK, 0, Vec::new())
    }

    /// HEADERS carrying `block`; `flags` from [`flag`] (END_HEADERS is not
    /// implied: a CONTINUATION test leaves it off).
    pub fn headers(stream: u32, flags: u8, block: &[u8]) -> Frame {
        Frame::new(kind::HEADERS, flags, stream, block.to_vec())
    }

    pub fn continuation(stream: u32, end_headers: bool, block: &[u8]) -> Frame {
        let flags = if end_headers { flag::END_HEADERS } else { 0 };
        Frame::new(kind::CONTINUATION, flags, stream, block.to_vec())
    }

    pub fn data(stream: u32, end_stream: bool, data: &[u8]) -> Frame {
        let flags = if end_stream { flag::END_STREAM } else { 0 };
        Frame::new(kind::DATA, flags, stream, data.to_vec())
    }

    pub fn rst_stream(stream: u32, code: Code) -> Frame {
        Frame::new(kind::RST_STREAM, 0, stream, code.0.to_be_bytes().to_vec())
    }

    pub fn ping(payload: [u8; 8]) -> Frame {
        Frame::new(kind::PING, 0, 0, payload.to_vec())
    }

    pub fn window_update(stream: u32, increment: u32) -> Frame {
        Frame::new(
            kind::WINDOW_UPDATE,
            0,
            stream,
            (increment & 0x7fff_ffff).to_be_bytes().to_vec(),
        )
    }

    pub fn has(&self, f: u8) -> bool {
        self.flags & f == f
    }

    /// A GOAWAY's (last stream id, error code, debug data) (RFC 9113 §6.8).
    pub fn goaway(&self) -> Option<(u32, Code, &[u8])> {
        if self.kind != kind::GOAWAY || self.payload.len() < 8 {
            return None;
        }
        let last = be32(&self.payload[0..4]) & 0x7fff_ffff;
        Some((last, Code(be32(&self.payload[4..8])), &self.payload[8..]))
    }

    /// A RST_STREAM's error code (RFC 9113 §6.4).
    pub fn rst_code(&self) -> Option<Code> {
        (self.kind == kind::RST_STREAM && self.payload.len() == 4)
            .then(|| Code(be32(&self.payload)))
    }

    /// A SETTINGS frame's (parameter, value) pairs.
    pub fn params(&self) -> Vec<(u16, u32)> {
        if self.kind != kind::SETTINGS {
            return Vec::new();
        }
        self.payload
            .chunks_exact(6)
            .map(|c| (u16::from_be_bytes([c[0], c[1]]), be32(&c[2..6])))
            .collect()
    }

    /// The `:status` of a response HEADERS frame: the first field of its
    /// block, as the server's encoder writes it (an indexed static entry, or
    /// a literal with the static name `:status`, plain or Huffman-coded).
    /// `None` for anything else (such as a status the encoder put in its
    /// dynamic table earlier on the connection).
    pub fn status(&self) -> Option<u16> {
        if self.kind != kind::HEADERS {
            return None;
        }
        let block = &self.payload;
        let first = *block.first()?;
        if first & 0x80 != 0 {
            // RFC 7541 Appendix A: static entries 8..=14 are :status.
            return match first & 0x7f {
                8 => Some(200),
                9 => Some(204),
                10 => Some(206),
                11 => Some(304),
                12 => Some(400),
                13 => Some(404),
                14 => Some(500),
                _ => None,
            };
        }
        // Literal with incremental indexing (6-bit name index) or without
        // indexing / never indexed (4-bit): the name must be static entry 8.
        let name_index = if first & 0x40 != 0 {
            first & 0x3f
        } else {
            first & 0x0f
        };
        if name_index != 8 {
            return None;
        }
        let (&len_byte, rest) = block[1..].split_first()?;
        let len = usize::from(len_byte & 0x7f);
        let raw = rest.get(..len)?;
        let text = if len_byte & 0x80 != 0 {
            huffman_digits(raw)?
        } else {
            String::from_utf8(raw.to_vec()).ok()?
        };
        text.parse().ok()
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = self.stream;
        let n = self.payload.len();
        let end = if self.has(flag::END_STREAM) {
            ", END_STREAM"
        } else {
            ""
        };
        match self.kind {
            kind::DATA => write!(f, "DATA({id}, {n} B{end})"),
            kind::HEADERS => match self.status() {
                Some(s) => write!(f, "HEADERS({id}, :status {s}{end})"),
                None => write!(f, "HEADERS({id}, {n} B{end})"),
            },
            kind::RST_STREAM => match self.rst_code() {
                Some(c) => write!(f, "RST_STREAM({id}, {c:?})"),
                None => write!(f, "RST_STREAM({id}, {n} B)"),
            },
            kind::SETTINGS if self.has(flag::ACK) => write!(f, "SETTINGS(ACK)"),
            kind::SETTINGS => write!(f, "SETTINGS({:?})", self.params()),
            kind::PING if self.has(flag::ACK) => write!(f, "PING(ACK)"),
            kind::PING => write!(f, "PING"),
            kind::GOAWAY => match self.goaway() {
                Some((last, code, debug)) => write!(
                    f,
                    "GOAWAY(last {last}, {code:?}, {:?})",
                    String::from_utf8_lossy(debug)
                ),
                None => write!(f, "GOAWAY({n} B)"),
            },
            kind::WINDOW_UPDATE => write!(f, "WINDOW_UPDATE({id})"),
            kind::CONTINUATION => write!(f, "CONTINUATION({id}, {n} B)"),
            kind::PRIORITY => write!(f, "PRIORITY({id})"),
            kind::PUSH_PROMISE => write!(f, "PUSH_PROMISE({id})"),
            k => write!(f, "frame type 0x{k:x}({id}, {n} B)"),
        }
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Decode a Huffman-coded string of decimal digits (RFC 7541 Appendix B:
/// '0'..'2' are 5-bit codes 0..=2, '3'..'9' 6-bit codes 0x19..=0x1f); the
/// padding is the EOS prefix, all ones.
fn huffman_digits(raw: &[u8]) -> Option<String> {
    let bits: Vec<bool> = raw
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| b >> i & 1 == 1))
        .collect();
    let mut out = String::new();
    let mut at = 0;
    while at < bits.len() {
        let rest = &bits[at..];
        if rest.len() < 8 && rest.iter().all(|&b| b) {
            break;
        }
        let value = |n: usize| -> Option<u8> {
            (rest.len() >= n).then(|| rest[..n].iter().fold(0u8, |v, &b| v << 1 | b as u8))
        };
        if let Some(v @ 0..=2) = value(5) {
            out.push(char::from(b'0' + v));
            at += 5;
            continue;
        }
        match value(6) {
            Some(v @ 0x19..=0x1f) => {
                out.push(char::from(b'3' + (v - 0x19)));
                at += 6;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// An HPACK field block (RFC 7541 §6), built a representation at a time.
/// Strings are never Huffman-coded: the attacks want their byte counts
/// exact.
#[derive(Clone, Default)]
pub struct Block(pub Vec<u8>);

/// Static-table indices (RFC 7541 Appendix A) the requests use.
pub mod index {
    pub const AUTHORITY: usize = 1;
    pub const GET: usize = 2;
    pub const POST: usize = 3;
    pub const PATH_ROOT: usize = 4;
    pub const PATH: usize = 4;
    pub const SCHEME_HTTP: usize = 6;
    /// The first dynamic-table entry: the one inserted last.
    pub const FIRST_DYNAMIC: usize = 62;
}

impl Block {
    pub fn new() -> Block {
        Block(Vec::new())
    }

    /// A request for `path` with `method` (a static index: [`index::GET`]
    /// or [`index::POST`]), `:scheme http` and `:authority test`.
    pub fn request(method: usize, path: &str) -> Block {
        let b = Block::new().indexed(method).indexed(index::SCHEME_HTTP);
        let b = if path == "/" {
            b.indexed(index::PATH_ROOT)
        } else {
            b.literal(index::PATH, path.as_bytes())
        };
        b.literal(index::AUTHORITY, b"test")
    }

    /// `GET path`.
    pub fn get(path: &str) -> Block {
        Block::request(index::GET, path)
    }

    /// Indexed field (§6.1): `1xxxxxxx`.
    pub fn indexed(mut self, i: usize) -> Block {
        int(&mut self.0, 0x80, 7, i);
        self
    }

    /// Literal without indexing, name from the table (§6.2.2): `0000xxxx`.
    pub fn literal(mut self, name_index: usize, value: &[u8]) -> Block {
        int(&mut self.0, 0x00, 4, name_index);
        string(&mut self.0, value);
        self
    }

    /// Literal without indexing, new name (§6.2.2).
    pub fn literal_new(mut self, name: &[u8], value: &[u8]) -> Block {
        self.0.push(0x00);
        string(&mut self.0, name);
        string(&mut self.0, value);
        self
    }

    /// Literal with incremental indexing, new name (§6.2.1): the field goes
    /// into the decoder's dynamic table as entry 62.
    pub fn literal_indexed_new(mut self, name: &[u8], value: &[u8]) -> Block {
        self.0.push(0x40);
        string(&mut self.0, name);
        string(&mut self.0, value);
        self
    }

    /// Dynamic table size update (§6.3): `001xxxxx`.
    pub fn size_update(mut self, size: usize) -> Block {
        int(&mut self.0, 0x20, 5, size);
        self
    }

    /// Append another block's representations.
    pub fn then(mut self, other: &Block) -> Block {
        self.0.extend_from_slice(&other.0);
        self
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1), the prefix's other
/// bits set to `high`.
fn int(out: &mut Vec<u8>, high: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// A string literal, not Huffman-coded (RFC 7541 §5.2).
fn string(out: &mut Vec<u8>, s: &[u8]) {
    int(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

/// How a bounded read of frames ended.
#[derive(Debug)]
pub enum End {
    /// The frame the caller waited for.
    Matched(Frame),
    /// EOF, or a reset (`reset: true`): the server closed the connection.
    Closed { reset: bool },
    /// Nothing ended the read within its bound.
    Silent,
}

impl End {
    pub fn closed(&self) -> bool {
        matches!(self, End::Closed { .. })
    }
}

/// What one bounded read saw: every frame read before its end, and the end.
#[derive(Debug)]
pub struct Seen {
    pub frames: Vec<Frame>,
    pub end: End,
}

impl Seen {
    /// The first GOAWAY among the frames, or the matched frame if a GOAWAY.
    pub fn goaway(&self) -> Option<(u32, Code)> {
        self.frames
            .iter()
            .chain(match &self.end {
                End::Matched(f) => Some(f),
                _ => None,
            })
            .find_map(|f| f.goaway().map(|(last, code, _)| (last, code)))
    }

    /// The frames as one line, for assertion messages (at most `max`).
    pub fn summary(&self, max: usize) -> String {
        let mut s: Vec<String> = self
            .frames
            .iter()
            .take(max)
            .map(|f| f.to_string())
            .collect();
        if self.frames.len() > max {
            s.push(format!("… {} more", self.frames.len() - max));
        }
        format!("[{}] then {:?}", s.join(", "), self.end)
    }
}

/// A client HTTP/2 connection over plain TCP (h2c with prior knowledge).
pub struct Conn {
    pub s: TcpStream,
    /// Bytes read but not yet a whole frame.
    buf: Vec<u8>,
    /// Answer the server's PINGs and SETTINGS (as a client must): on unless a
    /// test wants to see the server wait for its ACKs.
    pub auto_ack: bool,
    /// The server's first SETTINGS.
    pub server_settings: Vec<(u16, u32)>,
}

impl Conn {
    /// A TCP connection to `addr`, nothing sent yet.
    pub fn connect(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        Conn::over(s)
    }

    /// [`Conn::connect`] with a receive buffer as small as the kernel
    /// allows, set before connecting so the advertised TCP window stays
    /// small: a client that stops reading stops the server's writes within
    /// a few KiB.
    pub fn connect_small_window(addr: SocketAddr) -> Conn {
        use socket2::{Domain, Protocol, Socket, Type};
        let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
        sock.set_recv_buffer_size(4 * 1024).expect("SO_RCVBUF");
        sock.connect_timeout(&addr.into(), Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        Conn::over(sock.into())
    }

    fn over(s: TcpStream) -> Conn {
        s.set_nodelay(true).expect("nodelay");
        s.set_write_timeout(Some(Duration::from_secs(5)))
            .expect("write timeout");
        Conn {
            s,
            buf: Vec::new(),
            auto_ack: true,
            server_settings: Vec::new(),
        }
    }

    /// Connect, send the preface and SETTINGS(`settings`), read the server's
    /// SETTINGS and acknowledge them.
    pub fn open(addr: SocketAddr, settings: &[(u16, u32)]) -> Conn {
        Conn::connect(addr).hello(settings)
    }

    /// The preface and SETTINGS(`settings`) on a connection made by
    /// [`Conn::connect`] or [`Conn::connect_small_window`], as
    /// [`Conn::open`] does.
    pub fn hello(mut self, settings: &[(u16, u32)]) -> Conn {
        let c = &mut self;
        let mut hello = PREFACE.to_vec();
        Frame::settings(settings).encode_into(&mut hello);
        c.send(&hello).expect("write the preface and SETTINGS");
        // Both the server's SETTINGS (auto_ack acknowledges them as they are
        // read) and its ACK of ours, in either order.
        let mut theirs = None;
        let mut acked = false;
        let seen = c.until(Duration::from_secs(5), |f| {
            if f.kind == kind::SETTINGS {
                if f.has(flag::ACK) {
                    acked = true;
                } else {
                    theirs.get_or_insert_with(|| f.params());
                }
            }
            acked && theirs.is_some()
        });
        match (theirs, seen.end) {
            (Some(params), End::Matched(_)) => c.server_settings = params,
            (_, end) => panic!(
                "handshake: want the server's SETTINGS and its ACK, got {:?} then {end:?}",
                seen.frames
            ),
        }
        self
    }

    /// The value the server advertised for `id`, if it did.
    pub fn server_setting(&self, id: u16) -> Option<u32> {
        self.server_settings
            .iter()
            .find(|(i, _)| *i == id)
            .map(|&(_, v)| v)
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.s.write_all(bytes)
    }

    pub fn send_frame(&mut self, f: &Frame) -> io::Result<()> {
        self.send(&f.encode())
    }

    /// Send frames in one write.
    pub fn send_frames(&mut self, frames: &[Frame]) -> io::Result<()> {
        let mut out = Vec::new();
        for f in frames {
            f.encode_into(&mut out);
        }
        self.send(&out)
    }

    /// The next frame, within `limit`: `Ok(frame)`, or how the read ended.
    pub fn next(&mut self, limit: Duration) -> Result<Frame, End> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(f) = self.take_frame() {
                if self.auto_ack {
                    self.acknowledge(&f);
                }
                return Ok(f);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(End::Silent);
            }
            self.s.set_read_timeout(Some(left)).expect("read timeout");
            let mut chunk = [0u8; 64 * 1024];
            match self.s.read(&mut chunk) {
                Ok(0) => return Err(End::Closed { reset: false }),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(End::Silent)
                }
                Err(_) => return Err(End::Closed { reset: true }),
            }
        }
    }

    /// Read frames until `want` holds for one (it ends the read, not kept
    /// in `frames`), the server closes, or `limit` passes.
    pub fn until(&mut self, limit: Duration, mut want: impl FnMut(&Frame) -> bool) -> Seen {
        let deadline = Instant::now() + limit;
        let mut frames = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left) {
                Ok(f) if want(&f) => {
                    return Seen {
                        frames,
                        end: End::Matched(f),
                    }
                }
                Ok(f) => frames.push(f),
                Err(end) => return Seen { frames, end },
            }
        }
    }

    /// Read until the server closes the connection (or `limit` passes).
    pub fn until_closed(&mut self, limit: Duration) -> Seen {
        self.until(limit, |_| false)
    }

    /// Send a PING and read until its ACK: every frame before it, and how
    /// the read ended. The server answers PINGs in order, so everything it
    /// did about frames sent before the PING is among `frames`.
    pub fn ping_pong(&mut self, payload: [u8; 8], limit: Duration) -> Seen {
        if self.send_frame(&Frame::ping(payload)).is_err() {
            return self.until_closed(limit);
        }
        self.until(limit, |f| {
            f.kind == kind::PING && f.has(flag::ACK) && f.payload == payload
        })
    }

    fn take_frame(&mut self) -> Option<Frame> {
        if self.buf.len() < HEADER_LEN {
            return None;
        }
        let len = be32(&[0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
        assert!(len <= MAX_READ_FRAME);
        if self.buf.len() < HEADER_LEN + len {
            return None;
        }
        let f = Frame {
            kind: self.buf[3],
            flags: self.buf[4],
            stream: be32(&self.buf[5..9]) & 0x7fff_ffff,
            payload: self.buf[HEADER_LEN..HEADER_LEN + len].to_vec(),
        };
        self.buf.drain(..HEADER_LEN + len);
        Some(f)
    }

    /// A client's duty: ACK a PING and a SETTINGS (a failed write is the
    /// server having closed; the next read says so).
    fn acknowledge(&mut self, f: &Frame) {
        let ack = match f.kind {
            kind::PING if !f.has(flag::ACK) => {
                Frame::new(kind::PING, flag::ACK, 0, f.payload.clone())
            }
            kind::SETTINGS if !f.has(flag::ACK) => Frame::settings_ack(),
            _ => return,
        };
        let _ = self.send_frame(&ack);
    }

    /// Shut both halves: a writer thread blocked on the socket gets an error.
    pub fn shutdown(&self) {
        let _ = self.s.shutdown(Shutdown::Both);
    }
}

/// Write `bytes` on a clone of `s` from a thread, in 64 KiB writes, until
/// all are written or a write fails (the server closed, or the test shut
/// the socket): the bytes written. The server may stop reading at any point,
/// so the test reads (or sleeps) while this writes.
pub fn flood(s: &TcpStream, bytes: Vec<u8>) -> JoinHandle<u64> {
    let mut s = s.try_clone().expect("clone the socket");
    std::thread::spawn(move || {
        let mut written = 0u64;
        for chunk in bytes.chunks(64 * 1024) {
            if s.write_all(chunk).is_err() {
                break;
            }
            written += chunk.len() as u64;
        }
        written
    })
}

/// `frames` encoded back to back.
pub fn encode_all(frames: impl IntoIterator<Item = Frame>) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        f.encode_into(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_header_is_length_type_flags_stream() {
        let f = Frame::new(kind::HEADERS, flag::END_HEADERS, 0x8000_0003, vec![1, 2, 3]);
        assert_eq!(f.encode(), [0, 0, 3, 1, 4, 0, 0, 0, 3, 1, 2, 3]);
    }

    #[test]
    fn integers_use_the_prefix_then_continuation_bytes() {
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        int(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
        let mut out = Vec::new();
        int(&mut out, 0x80, 7, 62);
        assert_eq!(out, [0xbe]);
    }

    #[test]
    fn huffman_status_digits_decode() {
        // "431" (RFC 7541 Appendix B): 011010 00001 011001, EOS-padded.
        assert_eq!(huffman_digits(&[0x69, 0x90, 0xff]).as_deref(), Some("431"));
        // "302" from RFC 7541 C.6.1: 0x64 0x02.
        assert_eq!(huffman_digits(&[0x64, 0x02]).as_deref(), Some("302"));
    }
}
