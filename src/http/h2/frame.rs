//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte header, each frame type's
//! payload checked and read into a [`Frame`], and the frames a server
//! writes, encoded straight into the caller's buffer.
//!
//! Reading checks what one frame alone can break (its length for its type,
//! stream 0 or not, padding within the payload, a priority on itself);
//! what frames mean together (stream states, windows, CONTINUATION order)
//! is `conn`'s.

use super::{ErrorCode, StreamError};

/// A frame header's length (RFC 9113 §4.1).
pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value, and the most we accept and send
/// (we never raise it: RFC 9113 §6.5.2).
pub const MAX_FRAME: usize = 16_384;

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
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
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

/// The largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// A frame header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    /// Read the header at the start of `b` (at least [`HEADER_LEN`] bytes).
    pub fn read(b: &[u8]) -> Head {
        Head {
            len: usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            // The reserved bit is ignored (RFC 9113 §4.1).
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Append a frame header.
pub fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len < 1 << 24);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A frame header as bytes, for a payload written elsewhere.
pub fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEADER_LEN] {
    let s = stream.to_be_bytes();
    [
        (len >> 16) as u8,
        (len >> 8) as u8,
        len as u8,
        kind,
        flags,
        s[0],
        s[1],
        s[2],
        s[3],
    ]
}

/// A stream's dependency from HEADERS or PRIORITY (RFC 9113 §5.3, read and
/// otherwise ignored: §5.3.2 deprecates the scheme).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    pub weight: u8,
}

/// A frame's payload, read.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: u32,
        end_stream: bool,
        /// The payload less padding.
        data: &'a [u8],
        /// The whole payload, padding included: what flow control counts
        /// (RFC 9113 §6.1).
        flow: usize,
    },
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        /// The field block fragment, padding and priority removed.
        block: &'a [u8],
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: ErrorCode,
    },
    Settings {
        ack: bool,
        /// Six bytes a parameter: [`settings`] reads them.
        params: &'a [u8],
    },
    PushPromise,
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last: u32,
        code: ErrorCode,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// A type this endpoint does not know: ignored (RFC 9113 §4.1, §5.5).
    Unknown,
}

/// Why a frame could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A connection error.
    Connection(ErrorCode),
    /// A stream error: that stream is reset, the connection goes on.
    Stream(StreamError),
}

fn conn(code: ErrorCode) -> Refused {
    Refused::Connection(code)
}

/// Strip the padding of a PADDED payload (RFC 9113 §6.1, §6.2).
fn unpad<'a>(head: &Head, payload: &'a [u8]) -> Result<&'a [u8], Refused> {
    if !head.has(flag::PADDED) {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or(conn(ErrorCode::FRAME_SIZE_ERROR))?;
    let pad = usize::from(pad);
    if pad >= payload.len() {
        // §6.1: padding as long as the payload or longer.
        return Err(conn(ErrorCode::PROTOCOL_ERROR));
    }
    Ok(&rest[..rest.len() - pad])
}

fn priority(b: &[u8]) -> Priority {
    let word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Priority {
        dependency: word & MAX_WINDOW,
        exclusive: word & !MAX_WINDOW != 0,
        weight: b[4],
    }
}

/// Read a frame whose header is `head` and payload `payload` (its whole
/// length; the caller has checked it against SETTINGS_MAX_FRAME_SIZE).
pub fn read<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, Refused> {
    debug_assert_eq!(head.len, payload.len());
    let stream = head.stream;
    let on_stream = |f: Frame<'a>| {
        if stream == 0 {
            Err(conn(ErrorCode::PROTOCOL_ERROR))
        } else {
            Ok(f)
        }
    };
    let on_connection = |f: Frame<'a>| {
        if stream != 0 {
            Err(conn(ErrorCode::PROTOCOL_ERROR))
        } else {
            Ok(f)
        }
    };
    match head.kind {
        kind::DATA => {
            let data = unpad(head, payload)?;
            on_stream(Frame::Data {
                stream,
                end_stream: head.has(flag::END_STREAM),
                data,
                flow: payload.len(),
            })
        }
        kind::HEADERS => {
            if stream == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR));
            }
            let mut block = unpad(head, payload)?;
            let mut prio = None;
            if head.has(flag::PRIORITY) {
                if block.len() < 5 {
                    return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
                }
                // A dependency on itself (§5.3.1) is the connection's to
                // refuse: the block must still be decoded.
                prio = Some(priority(block));
                block = &block[5..];
            }
            Ok(Frame::Headers {
                stream,
                end_stream: head.has(flag::END_STREAM),
                end_headers: head.has(flag::END_HEADERS),
                priority: prio,
                block,
            })
        }
        kind::PRIORITY => {
            if stream == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR));
            }
            if payload.len() != 5 {
                return Err(Refused::Stream(StreamError {
                    stream,
                    code: ErrorCode::FRAME_SIZE_ERROR,
                }));
            }
            let p = priority(payload);
            if p.dependency == stream {
                return Err(Refused::Stream(StreamError {
                    stream,
                    code: ErrorCode::PROTOCOL_ERROR,
                }));
            }
            Ok(Frame::Priority {
                stream,
                priority: p,
            })
        }
        kind::RST_STREAM => {
            if payload.len() != 4 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            let code = ErrorCode(u32::from_be_bytes([
                payload[0], payload[1], payload[2], payload[3],
            ]));
            on_stream(Frame::RstStream { stream, code })
        }
        kind::SETTINGS => {
            if stream != 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR));
            }
            let ack = head.has(flag::ACK);
            if ack && !payload.is_empty() || payload.len() % 6 != 0 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            Ok(Frame::Settings {
                ack,
                params: payload,
            })
        }
        // §8.4: a client cannot push.
        kind::PUSH_PROMISE => Err(conn(ErrorCode::PROTOCOL_ERROR)),
        kind::PING => {
            if stream != 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR));
            }
            let data: [u8; 8] = payload
                .try_into()
                .map_err(|_| conn(ErrorCode::FRAME_SIZE_ERROR))?;
            Ok(Frame::Ping {
                ack: head.has(flag::ACK),
                data,
            })
        }
        kind::GOAWAY => {
            if payload.len() < 8 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
            on_connection(Frame::GoAway {
                last: last & MAX_WINDOW,
                code: ErrorCode(code),
            })
        }
        kind::WINDOW_UPDATE => {
            if payload.len() != 4 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            let increment =
                u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & MAX_WINDOW;
            if increment == 0 {
                // §6.9: a stream error on a stream, else a connection error.
                return Err(if stream == 0 {
                    conn(ErrorCode::PROTOCOL_ERROR)
                } else {
                    Refused::Stream(StreamError {
                        stream,
                        code: ErrorCode::PROTOCOL_ERROR,
                    })
                });
            }
            Ok(Frame::WindowUpdate { stream, increment })
        }
        kind::CONTINUATION => on_stream(Frame::Continuation {
            stream,
            end_headers: head.has(flag::END_HEADERS),
            block: payload,
        }),
        _ => Ok(Frame::Unknown),
    }
}

/// The parameters of a SETTINGS payload: (identifier, value).
pub fn settings(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params.chunks_exact(6).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
        )
    })
}

/// Append a SETTINGS frame.
pub fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    head(out, params.len() * 6, kind::SETTINGS, 0, 0);
    for (id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn write_settings_ack(out: &mut Vec<u8>) {
    head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

pub fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    head(out, 8, kind::PING, if ack { flag::ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

pub fn write_goaway(out: &mut Vec<u8>, last: u32, code: ErrorCode) {
    head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&last.to_be_bytes());
    out.extend_from_slice(&code.0.to_be_bytes());
}

pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.0.to_be_bytes());
}

pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> (Head, Vec<u8>) {
        let mut b = Vec::new();
        head(&mut b, payload.len(), kind, flags, stream);
        let h = Head::read(&b);
        assert_eq!(h.len, payload.len());
        (h, payload.to_vec())
    }

    fn read_one(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<String, Refused> {
        let (h, p) = frame(kind, flags, stream, payload);
        read(&h, &p).map(|f| format!("{f:?}"))
    }

    #[test]
    fn padding_is_stripped_and_counted() {
        let (h, p) = frame(
            kind::DATA,
            flag::PADDED | flag::END_STREAM,
            1,
            b"\x03abc\0\0\0",
        );
        assert_eq!(
            read(&h, &p),
            Ok(Frame::Data {
                stream: 1,
                end_stream: true,
                data: b"abc",
                flow: 7
            })
        );
        // All padding is fine; padding as long as the payload is not.
        assert!(read_one(kind::DATA, flag::PADDED, 1, b"\x03ab\0").is_ok());
        assert_eq!(
            read_one(kind::DATA, flag::PADDED, 1, b"\x04ab\0"),
            Err(Refused::Connection(ErrorCode::PROTOCOL_ERROR))
        );
        assert_eq!(
            read_one(kind::HEADERS, flag::PADDED, 1, b"\x05abc"),
            Err(Refused::Connection(ErrorCode::PROTOCOL_ERROR))
        );
    }

    #[test]
    fn frames_on_the_wrong_stream_or_of_the_wrong_length_are_refused() {
        use ErrorCode as C;
        let cases: &[(u8, u8, u32, &[u8], Refused)] = &[
            (
                kind::DATA,
                0,
                0,
                b"x",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::HEADERS,
                0,
                0,
                b"",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::PRIORITY,
                0,
                1,
                b"\0\0\0\0",
                Refused::Stream(StreamError {
                    stream: 1,
                    code: C::FRAME_SIZE_ERROR,
                }),
            ),
            (
                kind::PRIORITY,
                0,
                3,
                b"\0\0\0\x03\x10",
                Refused::Stream(StreamError {
                    stream: 3,
                    code: C::PROTOCOL_ERROR,
                }),
            ),
            (
                kind::RST_STREAM,
                0,
                1,
                b"\0\0\0",
                Refused::Connection(C::FRAME_SIZE_ERROR),
            ),
            (
                kind::RST_STREAM,
                0,
                0,
                b"\0\0\0\0",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::SETTINGS,
                0,
                1,
                b"",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::SETTINGS,
                flag::ACK,
                0,
                b"\0\x01\0\0\0\0",
                Refused::Connection(C::FRAME_SIZE_ERROR),
            ),
            (
                kind::SETTINGS,
                0,
                0,
                b"\0\x01\0",
                Refused::Connection(C::FRAME_SIZE_ERROR),
            ),
            (
                kind::PUSH_PROMISE,
                0,
                1,
                b"\0\0\0\x02",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::PING,
                0,
                0,
                b"1234567",
                Refused::Connection(C::FRAME_SIZE_ERROR),
            ),
            (
                kind::PING,
                0,
                1,
                b"12345678",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::GOAWAY,
                0,
                0,
                b"1234567",
                Refused::Connection(C::FRAME_SIZE_ERROR),
            ),
            (
                kind::GOAWAY,
                0,
                1,
                b"12345678",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::WINDOW_UPDATE,
                0,
                0,
                b"\0\0\0",
                Refused::Connection(C::FRAME_SIZE_ERROR),
            ),
            (
                kind::WINDOW_UPDATE,
                0,
                0,
                b"\0\0\0\0",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
            (
                kind::WINDOW_UPDATE,
                0,
                5,
                b"\0\0\0\0",
                Refused::Stream(StreamError {
                    stream: 5,
                    code: C::PROTOCOL_ERROR,
                }),
            ),
            (
                kind::CONTINUATION,
                0,
                0,
                b"",
                Refused::Connection(C::PROTOCOL_ERROR),
            ),
        ];
        for (k, f, s, p, want) in cases {
            assert_eq!(read_one(*k, *f, *s, p), Err(*want), "type {k} stream {s}");
        }
        assert_eq!(read_one(0xfa, 0xff, 7, b"anything"), Ok("Unknown".into()));
    }

    #[test]
    fn headers_with_priority_and_settings_read_back() {
        let (h, p) = frame(
            kind::HEADERS,
            flag::PRIORITY | flag::END_HEADERS,
            5,
            b"\x80\0\0\x03\x0f\x82",
        );
        assert_eq!(
            read(&h, &p),
            Ok(Frame::Headers {
                stream: 5,
                end_stream: false,
                end_headers: true,
                priority: Some(Priority {
                    dependency: 3,
                    exclusive: true,
                    weight: 15
                }),
                block: b"\x82",
            })
        );
        let mut out = Vec::new();
        write_settings(
            &mut out,
            &[(setting::INITIAL_WINDOW_SIZE, 1 << 20), (0x99, 7)],
        );
        let h = Head::read(&out);
        let Ok(Frame::Settings { ack: false, params }) = read(&h, &out[HEADER_LEN..]) else {
            panic!()
        };
        let got: Vec<_> = settings(params).collect();
        assert_eq!(got, [(setting::INITIAL_WINDOW_SIZE, 1 << 20), (0x99, 7)]);
    }
}
