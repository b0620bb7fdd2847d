//! One client connection's state: its socket, lifecycle phase, buffers and requests in flight.
//! A slot outlives its sockets: when a connection ends, the slot opens the next one.

use std::collections::VecDeque;
use std::time::Instant;

use mio::net::TcpStream;

use crate::http::response::Parser;
use crate::sys::epoll::Interest;

/// Where a slot's connection is in its life. Changed only by the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No socket; open loop with `--churn` waits here for the next scheduled request.
    Idle,
    /// The last connect failed; the next attempt is at `until`.
    Backoff { until: Instant },
    /// Non-blocking connect in progress since `since`; requests may already be queued.
    Connecting { since: Instant },
    /// Connected; requests are written and responses read.
    Open,
    /// The server said `Connection: close`; waiting (since `since`) for its FIN so that the
    /// server, the side that closed first, holds TIME_WAIT rather than the client's port pool.
    Closing { since: Instant },
}

/// A request written (or queued to be written) and not yet answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    /// Index into the serialized requests.
    pub(crate) path: usize,
    /// Where latency counts from: the send time (closed loop) or the scheduled time (open).
    pub(crate) origin: Instant,
    /// When it was last handed to this connection; the timeout counts from here.
    pub(crate) sent: Instant,
    /// Part of the timed window (its origin is at or after the window's start).
    pub(crate) counted: bool,
}

pub(crate) struct Slot {
    /// The current socket; closing it also removes it from epoll.
    pub(crate) stream: Option<TcpStream>,
    pub(crate) phase: Phase,
    /// Request bytes not yet written; `written` of them already went out.
    pub(crate) out: Vec<u8>,
    pub(crate) written: usize,
    /// Unparsed tail of the last read (a partial head or chunk line), at most
    /// `MAX_HEAD_BYTES`.
    pub(crate) carry: Vec<u8>,
    pub(crate) parser: Parser,
    /// Requests in the order the server will answer them.
    pub(crate) in_flight: VecDeque<Pending>,
    /// Status of the response being read.
    pub(crate) status: u16,
    /// Bytes (head, framing and body) of the response being read so far.
    pub(crate) response_bytes: u64,
    /// What the socket is registered for now, to skip redundant epoll_ctl calls.
    pub(crate) interest: Interest,
    /// In the worker's open-loop `ready` stack.
    pub(crate) ready: bool,
    /// In the worker's list of slots to flush this turn.
    pub(crate) dirty: bool,
}

impl Slot {
    /// A slot with buffers sized once for `pipeline` requests of up to `request_len` bytes.
    pub(crate) fn new(pipeline: usize, request_len: usize) -> Slot {
        Slot {
            stream: None,
            phase: Phase::Idle,
            out: Vec::with_capacity(pipeline * request_len),
            written: 0,
            carry: Vec::new(),
            parser: Parser::new(),
            in_flight: VecDeque::with_capacity(pipeline),
            status: 0,
            response_bytes: 0,
            interest: Interest::Read,
            ready: false,
            dirty: false,
        }
    }

    /// Drops the socket and everything tied to it, keeping `in_flight` for the caller to
    /// resend or count as failed.
    pub(crate) fn teardown(&mut self) {
        self.stream = None;
        self.phase = Phase::Idle;
        self.out.clear();
        self.written = 0;
        self.carry.clear();
        self.parser.reset();
        self.response_bytes = 0;
    }
}
