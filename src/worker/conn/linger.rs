//! Lingering close (RFC 9112 §9.6).
//!
//! When the server closes a connection the client is still sending on (an
//! error answered before the whole head or body arrived, pipelined requests
//! after a `Connection: close`), closing at once makes the kernel answer the
//! unread bytes with a reset, and a reset can destroy the response in the
//! client's receive buffer before it is read. So, like nginx's
//! `lingering_close`, the server half-closes (FIN after the response; TLS
//! sends close_notify first), then reads and discards what keeps coming
//! until the client closes, bounded three ways:
//! - `lingering_time` in all (nginx: 30 s),
//! - `lingering_timeout` of silence between reads (nginx: 5 s),
//! - `lingering_bytes` discarded in all (nginx has no byte bound; a client
//!   streaming at line rate would otherwise cost a worker's CPU for the
//!   whole `lingering_time`).
//!
//! The connection is marked idle meanwhile: a drain does not wait for it.

use std::time::{Duration, Instant};

use monoio::buf::IoBufMut;

use super::transport::Transport;

/// The bounds of one lingering close, from the worker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Linger {
    /// Longest time spent discarding in all.
    pub(crate) time: Duration,
    /// Longest silence between two reads.
    pub(crate) timeout: Duration,
    /// Most bytes discarded.
    pub(crate) bytes: u64,
}

/// Why a lingering close ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The client closed (or reset) its side: the clean end.
    PeerClosed,
    /// `lingering_time` ran out.
    Time,
    /// The client went silent for `lingering_timeout`.
    Silence,
    /// `lingering_bytes` were discarded.
    Bytes,
}

/// Half-close `stream`, then discard input into `buf` within `bounds`.
/// Returns the buffer (for the pool) and why it ended.
pub(crate) async fn linger<S: Transport>(
    stream: &mut S,
    mut buf: Vec<u8>,
    bounds: Linger,
) -> (Vec<u8>, End) {
    let start = Instant::now();
    // Our FIN (after close_notify on TLS): the client sees the end of the
    // response and, read or not, stops waiting for more.
    if monoio::time::timeout(bounds.timeout, stream.shutdown())
        .await
        .is_err()
    {
        return (buf, End::Silence);
    }
    let mut discarded: u64 = 0;
    loop {
        if discarded >= bounds.bytes {
            return (buf, End::Bytes);
        }
        let Some(left) = bounds.time.checked_sub(start.elapsed()) else {
            return (buf, End::Time);
        };
        buf.clear();
        let wait = left.min(bounds.timeout);
        let cap = buf.capacity();
        match monoio::time::timeout(wait, stream.read(buf.slice_mut(0..cap))).await {
            Err(_) if wait < bounds.timeout => return (Vec::new(), End::Time),
            Err(_) => return (Vec::new(), End::Silence),
            Ok((res, slice)) => {
                buf = slice.into_inner();
                match res {
                    Ok(0) | Err(_) => return (buf, End::PeerClosed),
                    Ok(n) => discarded += n as u64,
                }
            }
        }
    }
}
