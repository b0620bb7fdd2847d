//! A response on its way out over HTTP/3: its frames written straight to
//! quinn-proto (`worker::quic::Answer`, `frames`), its body's pieces
//! counted in the connection's and the worker's output budgets (issue 16's,
//! as over HTTP/1.1 and HTTP/2), and its send timeout.
//!
//! Why the budgets: a stream hands quinn-proto one piece while it holds the
//! next, and a client may open `--h3-max-streams` streams on each of
//! `--max-connections` connections and read none. Counted, the pieces a
//! worker holds are at most `--output-buffer-bytes` a connection and
//! `--worker-output-bytes` in all (plus one piece for a connection that
//! holds nothing: a new client is served while slow ones wait); past that a
//! stream waits for bytes to leave before it reads more of its file.
//!
//! Flow: the head's HEADERS frame waits ([`Out::head`]) to go out with the
//! first DATA frame, or alone at the end; [`Out::grant`] before a piece is
//! read or cut; [`Out::send`] hands it over and gives the grant back once
//! quinn-proto has taken it all (from there quinn-proto's send window
//! bounds it, `worker::quic::window`). A write not done, or a grant not
//! had, within `--send-timeout` (a client that grants no flow-control
//! credit, or acknowledges nothing) ends the stream with
//! H3_REQUEST_CANCELLED. Whatever is still held goes back when the answer
//! ends, however it ends.

use std::cell::Cell;
use std::future::poll_fn;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use h3::server::RequestStream;

use super::super::budget::{ConnBudget, Ticket};
use super::{frames, timed};
use crate::worker::quic::{Answer, Ended};

/// H3_REQUEST_CANCELLED (RFC 9114 §8.1): a response we stopped.
pub(super) const REQUEST_CANCELLED: u64 = 0x10c;

/// What a stream's answer sent, for its log line.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) status: Cell<u16>,
    pub(super) bytes: Cell<u64>,
}

/// Why a response did not go out whole.
pub(super) enum Gone {
    /// The client reset the stream or stopped reading it.
    Reset,
    /// The connection ended, or we ended the stream.
    Ended,
}

/// One response's writer and its hold on the output budget.
pub(super) struct Out<'a> {
    answer: Answer,
    /// The HEADERS frame, until the first DATA frame (or the end) takes it.
    head: Option<BytesMut>,
    budget: &'a ConnBudget,
    ticket: Ticket,
    /// Granted for the piece being handed over.
    held: usize,
    send_timeout: Duration,
    tally: Option<&'a Tally>,
}

impl<'a> Out<'a> {
    pub(super) fn new(
        answer: Answer,
        budget: &'a ConnBudget,
        send_timeout: Duration,
        tally: Option<&'a Tally>,
    ) -> Out<'a> {
        Out {
            answer,
            head: None,
            budget,
            ticket: Ticket::default(),
            held: 0,
            send_timeout,
            tally,
        }
    }

    /// The response's HEADERS frame, to go out with what follows.
    pub(super) fn head(&mut self, frame: BytesMut) {
        self.head = Some(frame);
    }

    /// Up to `want` bytes of budget (at least a slice, or all of a smaller
    /// `want`), in the connection's turn, for a piece of `stream`.
    pub(super) async fn grant<S: h3::quic::SendStream<Bytes>>(
        &mut self,
        stream: &mut RequestStream<S, Bytes>,
        want: usize,
    ) -> Result<usize, Gone> {
        let (budget, ticket) = (self.budget, &mut self.ticket);
        let waited = timed(
            self.send_timeout,
            poll_fn(|cx| budget.poll_take(cx, ticket, want)),
        )
        .await;
        waited.ok_or_else(|| stalled(stream))
    }

    /// Hand `piece`, for which `granted` was taken, to `stream` as a DATA
    /// frame.
    pub(super) async fn send<S: h3::quic::SendStream<Bytes>>(
        &mut self,
        stream: &mut RequestStream<S, Bytes>,
        piece: Bytes,
        granted: usize,
    ) -> Result<(), Gone> {
        let n = piece.len() as u64;
        self.held = granted;
        let (header, len) = frames::data_header(n);
        let framing = match self.head.take() {
            Some(mut head) => {
                head.extend_from_slice(&header[..len]);
                head.freeze()
            }
            None => Bytes::copy_from_slice(&header[..len]),
        };
        self.write(stream, [framing, piece]).await?;
        self.budget.give(std::mem::take(&mut self.held));
        if let Some(t) = self.tally {
            t.bytes.set(t.bytes.get() + n);
        }
        Ok(())
    }

    /// End the response with `trailers` (if any), then the stream.
    pub(super) async fn finish<S: h3::quic::SendStream<Bytes>>(
        &mut self,
        stream: &mut RequestStream<S, Bytes>,
        trailers: Option<&http::HeaderMap>,
    ) -> Result<(), Gone> {
        let mut last = self.head.take().unwrap_or_default();
        if let Some(t) = trailers {
            frames::trailers(&mut last, t);
        }
        if !last.is_empty() {
            self.write(stream, [last.freeze(), Bytes::new()]).await?;
        }
        self.answer.finish().map_err(gone)
    }

    async fn write<S: h3::quic::SendStream<Bytes>>(
        &mut self,
        stream: &mut RequestStream<S, Bytes>,
        mut chunks: [Bytes; 2],
    ) -> Result<(), Gone> {
        let answer = &mut self.answer;
        let written = timed(
            self.send_timeout,
            poll_fn(|cx| answer.poll_write(cx, &mut chunks)),
        )
        .await;
        match written {
            Some(r) => r.map_err(gone),
            None => Err(stalled(stream)),
        }
    }
}

impl Drop for Out<'_> {
    fn drop(&mut self) {
        self.budget.give(self.held);
        self.budget.leave(&mut self.ticket);
    }
}

/// What an ended answer means for the request.
fn gone(e: Ended) -> Gone {
    match e {
        Ended::Stopped => Gone::Reset,
        Ended::Gone => Gone::Ended,
    }
}

/// A response that could not go on within `--send-timeout`: its stream is
/// reset.
fn stalled<S: h3::quic::SendStream<Bytes>>(stream: &mut RequestStream<S, Bytes>) -> Gone {
    tracing::debug!("HTTP/3 response stalled past --send-timeout; stream reset");
    stream.stop_stream(h3::error::Code::from(REQUEST_CANCELLED));
    Gone::Ended
}
