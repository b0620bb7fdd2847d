//! HTTP/2 without I/O (RFC 9113, RFC 7541): frames, HPACK, what a request's
//! fields must be, and one server connection's state. Unit-tested and
//! fuzzed (`fuzz/`) as `http::parse` is.
//!
//! Owns the bytes of the protocol: `frame` reads and writes frames, `hpack`
//! compresses fields, `request` checks a request's fields, and `conn` is the
//! connection's state machine (streams, flow control, SETTINGS, PING,
//! GOAWAY, and the bounds of each). Does not own sockets, timers, budgets
//! of output or what a request means (`worker::conn::h2`).
//!
//! Flow: bytes read go to `Conn::recv`, which yields events (a request, its
//! DATA, trailers, resets); answers go out through `Conn::send_headers` and
//! `Conn::send_data`, written with the connection's control frames into
//! `Conn::output` for the task to write in one go.

pub mod conn;
pub mod frame;
pub mod hpack;
pub mod request;

pub use conn::{Conn, ConnError, Event, Output, RequestHead, Settings};

/// The connection preface every HTTP/2 client sends first (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 error code (RFC 9113 §7); unknown codes are kept as they came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const NO_ERROR: ErrorCode = ErrorCode(0x0);
    pub const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    pub const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    pub const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    pub const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    pub const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    pub const CANCEL: ErrorCode = ErrorCode(0x8);
    pub const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    pub const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    pub const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    pub const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    pub const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        match NAMES.get(self.0 as usize) {
            Some(name) => f.write_str(name),
            None => write!(f, "0x{:x}", self.0),
        }
    }
}

/// An error confined to one stream (RFC 9113 §5.4.2): it is reset with
/// `code`, the connection goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamError {
    pub stream: u32,
    pub code: ErrorCode,
}
