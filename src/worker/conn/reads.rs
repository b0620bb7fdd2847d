//! The reads of an HTTP/1.1 connection, apart from its state: one read
//! bounded in time, and the grace of an idle wait on each driver (io_uring
//! keeps a read with a pooled buffer in flight; epoll waits for readiness
//! first). docs/decisions/0001-idle-reads.md has the measurements behind
//! the grace.

use std::io;
use std::time::Duration;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, CancelableAsyncReadRent, Canceller};
use monoio::net::TcpStream;

use super::pool::Pool;

/// A read's outcome.
pub(super) enum Read {
    /// Bytes arrived; the buffer holds them after what it held before.
    Data(Vec<u8>),
    /// EOF, an error or a timeout; the buffer back when the read returned it.
    Closed(Option<Vec<u8>>),
}

/// One read after the bytes `buf` holds, within `wait`.
pub(super) async fn read_timed<S: AsyncReadRent>(
    stream: &mut S,
    buf: Vec<u8>,
    wait: Duration,
) -> Read {
    let len = buf.len();
    match monoio::time::timeout(wait, stream.read(buf.slice_mut(len..))).await {
        // The read is cancelled with its buffer; it is freed, not pooled.
        Err(_) => Read::Closed(None),
        Ok((res, slice)) => settle(res, slice.into_inner()),
    }
}

pub(super) fn settle(res: io::Result<usize>, buf: Vec<u8>) -> Read {
    match res {
        Ok(n) if n > 0 => Read::Data(buf),
        // The client closed (or a drain shut our read side), or an error.
        Ok(_) | Err(_) => Read::Closed(Some(buf)),
    }
}

/// The grace of an idle wait on io_uring: a read with a pooled buffer for
/// `grace`. `None` if nothing came: the read is cancelled and the buffer,
/// handed back by the cancellation, returned to the pool.
///
/// Cancelled through a `Canceller` and awaited to the end, not dropped: a
/// dropped read whose completion the kernel has posted but the runtime has
/// not reaped yet loses the bytes it read (possible wherever completions are
/// not deferred to our own wait, i.e. without `DEFER_TASKRUN`), and the
/// connection would then wait for a request that already came. The awaited
/// cancellation returns those bytes instead.
pub(super) async fn read_grace_uring(
    tcp: &mut TcpStream,
    pool: &Pool,
    grace: Duration,
    canceller: &mut Canceller,
) -> Option<Read> {
    let buf = pool.take();
    let cap = buf.capacity();
    let mut read = std::pin::pin!(tcp.cancelable_read(buf.slice_mut(0..cap), canceller.handle()));
    let early = monoio::select! {
        r = &mut read => Some(r),
        _ = monoio::time::sleep(grace) => None,
    };
    let (res, slice) = match early {
        Some(r) => r,
        None => {
            // `cancel` consumes the canceller and hands back a fresh one.
            *canceller = std::mem::take(canceller).cancel();
            read.await
        }
    };
    let buf = slice.into_inner();
    match res {
        Ok(n) if n > 0 => Some(Read::Data(buf)),
        // Cancelled by us: the connection parks, holding nothing.
        Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {
            pool.give(buf);
            None
        }
        Ok(_) | Err(_) => Some(Read::Closed(Some(buf))),
    }
}

/// The grace of an idle wait on epoll: readiness within `grace`, then one
/// read with a pooled buffer; `None` if the client stayed silent.
pub(super) async fn read_grace_ready(
    tcp: &mut TcpStream,
    pool: &Pool,
    grace: Duration,
) -> Option<Read> {
    match monoio::time::timeout(grace, tcp.readable(false)).await {
        Err(_) => None,
        Ok(Err(_)) => Some(Read::Closed(None)),
        Ok(Ok(())) => Some(read_timed(tcp, pool.take(), grace.max(READY_READ_WAIT)).await),
    }
}

/// Bound on the read that follows readiness (the bytes are already there;
/// this only guards against a spurious wake-up).
const READY_READ_WAIT: Duration = Duration::from_secs(1);
