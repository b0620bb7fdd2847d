//! A worker's UDP socket: datagrams in by batches (`recvmmsg`, GRO), out by
//! GSO batches, through quinn-udp on the socket's fd; monoio only says when
//! the socket is readable or writable.
//!
//! monoio's own `UdpSocket` passes no control messages (no GRO segment
//! size, no ECN, no destination address), so it is used for readiness
//! alone, on a duplicate of the fd: the kernel's socket is the same.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use quinn_udp::{RecvMeta, Transmit, UdpSocketState};
use socket2::Socket;

/// Datagrams read by one `recvmmsg`.
pub(super) const BATCH: usize = if quinn_udp::BATCH_SIZE < 8 {
    quinn_udp::BATCH_SIZE
} else {
    8
};
/// One receive buffer: the most a datagram, or a GRO train of them, can be.
const RECV_BYTES: usize = 64 * 1024;

/// The socket, its readiness half and quinn-udp's state for it.
pub(super) struct Udp {
    socket: Socket,
    ready: monoio::net::udp::UdpSocket,
    state: UdpSocketState,
    local: SocketAddr,
}

impl Udp {
    /// Take `socket` (bound; a member of its port's group).
    pub(super) fn new(socket: Socket) -> io::Result<Udp> {
        socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&socket).into())?;
        let local = socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("a UDP socket with no IP address"))?;
        let dup: std::net::UdpSocket = socket.try_clone()?.into();
        let ready = monoio::net::udp::UdpSocket::from_std(dup)?;
        Ok(Udp {
            socket,
            ready,
            state,
            local,
        })
    }

    pub(super) fn local(&self) -> SocketAddr {
        self.local
    }

    /// Datagrams one send may carry as a GSO batch.
    pub(super) fn max_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Read what is there (one `recvmmsg`) into `bufs`: the number of
    /// entries of `bufs.meta` filled, `WouldBlock` when nothing is.
    pub(super) fn recv(&self, bufs: &mut RecvBufs) -> io::Result<usize> {
        let mut data = bufs.data.iter_mut();
        let mut slices: [IoSliceMut<'_>; BATCH] = std::array::from_fn(|_| {
            IoSliceMut::new(data.next().map_or(&mut [][..], |b| &mut b[..]))
        });
        self.state
            .recv((&self.socket).into(), &mut slices, &mut bufs.meta)
    }

    /// Send `contents` to `to`, as `segment` sized datagrams when given.
    /// `WouldBlock` when the socket's buffer is full.
    pub(super) fn send(
        &self,
        to: SocketAddr,
        contents: &[u8],
        segment: Option<usize>,
        ecn: Option<quinn_udp::EcnCodepoint>,
        src_ip: Option<std::net::IpAddr>,
    ) -> io::Result<()> {
        let t = Transmit {
            destination: to,
            ecn,
            contents,
            segment_size: segment,
            src_ip,
        };
        self.state.send((&self.socket).into(), &t)
    }

    /// Wait until a read may find something.
    pub(super) async fn readable(&self) -> io::Result<()> {
        self.ready.readable(false).await
    }

    /// Wait until a send may fit.
    pub(super) async fn writable(&self) -> io::Result<()> {
        self.ready.writable(false).await
    }
}

/// The buffers one `recvmmsg` fills, kept for the worker's life.
pub(super) struct RecvBufs {
    data: Vec<Box<[u8]>>,
    pub(super) meta: Vec<RecvMeta>,
}

impl RecvBufs {
    pub(super) fn new() -> RecvBufs {
        RecvBufs {
            data: (0..BATCH)
                .map(|_| vec![0u8; RECV_BYTES].into_boxed_slice())
                .collect(),
            meta: vec![RecvMeta::default(); BATCH],
        }
    }

    /// The bytes of entry `i` (of what `recv` said it filled).
    pub(super) fn datagrams(&self, i: usize) -> &[u8] {
        &self.data[i][..self.meta[i].len]
    }
}
