//! A worker's QUIC endpoint: HTTP/3's transport on the worker's own thread
//! and monoio loop, one UDP socket per worker in its port's `SO_REUSEPORT`
//! group, driven by quinn-proto.
//!
//! Owns: the endpoint's settings ([`Http3Conn`], its transport and TLS
//! configuration: [`config`]), the driver task ([`drive`]) that reads
//! datagrams, runs timers and sends what connections have to send, the
//! shared state of the endpoint and its connections (`endpoint`), the
//! socket's I/O (`udp`), and the `h3` crate's view of a connection
//! (`streams`). Does not own HTTP/3 itself (`conn::h3` serves a connection
//! it is handed), the sockets' creation and steering (`net`, `quic`).
//!
//! Flow:
//! 1. The worker starts [`drive`] for each UDP socket with a function that
//!    serves a connection once its handshake completes (`conn::h3::serve`,
//!    spawned as a task of its own).
//! 2. The driver reads every datagram there is (`recvmmsg`, GRO trains cut
//!    into their datagrams) into the endpoint; a new connection is accepted
//!    unless the worker is at `--max-connections` or draining.
//! 3. It runs the timers that are due, then takes each touched
//!    connection's events (waking the tasks that wait on them) and sends
//!    its datagrams, GSO batches, a few batches per connection per turn.
//! 4. It waits for the socket, the next timer, or a task touching a
//!    connection. At a drain it refuses new connections and returns once
//!    the last one has closed.
//!
//! A datagram whose connection ID names another worker is handed to that
//! worker's inbox (`forward`): one of this generation when the steering
//! program is not attached (counted, `servery_quic_misrouted_total`), one
//! of an older generation during a reload (`servery_quic_handed_total`).
//! One whose owner is gone is dropped, counted (`servery_quic_lost_total`).
//! At a reload the old worker is told (`Control::Handover`) and stops
//! reading the socket; what it still needs comes through its inbox.

mod answer;
mod endpoint;
mod forward;
mod streams;
mod udp;
mod window;

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use quinn_proto::{EndpointConfig, IdleTimeout, ServerConfig, TransportConfig, VarInt};
use socket2::Socket;

use crate::choice::choice;
use crate::quic::cid::{Owner, WorkerCids};
use crate::quic::steer::{self, Route};
use crate::telemetry::WorkerStats;
pub(crate) use answer::{Answer, Ended};
pub(crate) use endpoint::{Limits, Quic, H3_NO_ERROR};
pub(crate) use forward::{Inbox, Post};
pub(crate) use streams::{Conn, Watch};
use udp::{RecvBufs, Udp};

choice! {
    /// Whether HTTP/3 is served (`--h3`).
    pub enum Switch {
        /// On the UDP port of every TLS listener.
        On = "on",
        /// Not at all: no UDP socket is opened and no `Alt-Svc` is sent.
        Off = "off",
    }
}

choice! {
    /// Whether a resuming client may send its first requests as 0-RTT
    /// data (`--h3-0rtt`).
    pub enum ZeroRtt {
        /// Not offered: a resuming client sends its requests after the
        /// handshake, one round trip later.
        Off = "off",
        /// Offered in session tickets: early requests are taken, within
        /// the receive windows, and answered once the handshake completes
        /// (never before, so a replayed first flight, which cannot
        /// complete it, is never answered).
        On = "on",
    }
}

/// What every HTTP/3 connection of a worker applies: the settings marked
/// `h3` in `config/raw.rs`'s table, by name (as `h2::Http2Conn`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Http3Conn {
    /// `--h3`.
    pub switch: Switch,
    /// `--h3-max-streams`.
    pub max_streams: usize,
    /// `--h3-idle-timeout`.
    pub idle_timeout: Duration,
    /// `--h3-stream-window-bytes`.
    pub stream_window_bytes: usize,
    /// `--h3-connection-window-bytes`.
    pub connection_window_bytes: usize,
    /// `--h3-retry-threshold`.
    pub retry_threshold: usize,
    /// `--h3-0rtt`.
    pub zero_rtt: ZeroRtt,
    /// `--h3-max-resets`: client resets per connection in `conn::h3`'s
    /// window.
    pub max_resets: usize,
    /// `--alt-svc-max-age`.
    pub alt_svc_max_age: Duration,
}

impl Http3Conn {
    pub fn on(&self) -> bool {
        self.switch == Switch::On
    }
}

/// Unidirectional streams a client may open: HTTP/3's control stream, the
/// two QPACK streams, and room for the reserved ("grease") streams clients
/// send to keep the extension point open (RFC 9114 §6.2.3).
const UNI_STREAMS: u32 = 8;
/// GSO batches one connection sends per turn before the others get theirs.
const BATCHES_PER_TURN: usize = 4;
/// Datagrams in one GSO batch, at most: a batch is one UDP send of at most
/// 64 KiB in all (its length is 16 bits), so 64 datagrams of 1,452 bytes
/// (what the kernel would take in number) fail with EMSGSIZE, which
/// quinn-udp takes for a lost MTU probe and drops in silence: every batch
/// lost, the congestion window halved. As many as fit in 65,000 bytes at
/// quinn-proto's largest datagram (its MTU discovery's upper bound).
const MAX_BATCH: usize = 65_000 / MAX_DATAGRAM;
/// quinn-proto's largest datagram: `MtuDiscoveryConfig`'s default upper
/// bound, which `config` leaves as it is.
const MAX_DATAGRAM: usize = 1452;
/// `recvmmsg` calls per turn before timers and sends get theirs.
const RECV_ROUNDS: usize = 16;

/// Why the endpoint could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the TLS configuration cannot do QUIC: {0}")]
    Tls(String),
    #[error("worker slot {0} is past the 256 a UDP port can steer to")]
    Slot(usize),
    #[error("--h3-idle-timeout: {0}")]
    IdleTimeout(String),
}

/// The endpoint's configuration for worker `slot` of `generation`: IDs
/// that name it, our transport limits, and `tls` with ALPN `h3` and TLS
/// 1.3 (QUIC's), its certificates, SNI and tickets shared with the TCP
/// listeners.
pub(crate) fn config(
    slot: usize,
    generation: u64,
    settings: &Http3Conn,
    tls: &rustls::ServerConfig,
) -> Result<(EndpointConfig, ServerConfig), Error> {
    WorkerCids::new(slot, generation).ok_or(Error::Slot(slot))?;
    let mut endpoint = EndpointConfig::default();
    endpoint.cid_generator(move || {
        Box::new(WorkerCids::new(slot, generation).expect("the slot was checked"))
    });

    let mut t = TransportConfig::default();
    let streams = u32::try_from(settings.max_streams).unwrap_or(u32::MAX);
    t.max_concurrent_bidi_streams(VarInt::from_u32(streams));
    t.max_concurrent_uni_streams(VarInt::from_u32(UNI_STREAMS));
    let idle = IdleTimeout::try_from(settings.idle_timeout)
        .map_err(|e| Error::IdleTimeout(e.to_string()))?;
    t.max_idle_timeout(Some(idle));
    let window = |n: usize| VarInt::from_u64(n as u64).unwrap_or(VarInt::MAX);
    t.stream_receive_window(window(settings.stream_window_bytes));
    t.receive_window(window(settings.connection_window_bytes));
    // Response bytes a connection holds unacknowledged: a base, and what
    // the worker's output budget lends it (`window`).
    t.send_window(window::BASE);
    t.datagram_receive_buffer_size(None);

    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // 0-RTT only with --h3-0rtt on. QUIC's tickets allow all or nothing
    // (RFC 9001 §4.6.1: 0xffffffff); what early data a client may send is
    // bounded by the receive windows it was given. It is safe from replay
    // here because a connection reaches `h3` only once its handshake has
    // completed (`drive`, `Event::Connected`), which a replayed first
    // flight cannot do (RFC 8470 §3).
    // rustls offers early data only with stateful resumption: a session
    // is then taken from the store once, so a replayed ClientHello finds
    // it gone (RFC 8446 §8.1). The store is the process's, so a client
    // whose first packet the kernel sends to another worker resumes there.
    if settings.zero_rtt == ZeroRtt::On {
        tls.max_early_data_size = u32::MAX;
        tls.ticketer = Arc::new(StatefulOnly);
        tls.session_storage = early_sessions();
    } else {
        tls.max_early_data_size = 0;
    }
    tls.enable_secret_extraction = false;
    let crypto = quinn_proto::crypto::rustls::QuicServerConfig::try_from(Arc::new(tls))
        .map_err(|e| Error::Tls(e.to_string()))?;
    let mut server = ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(t));
    Ok((endpoint, server))
}

/// Sessions kept for resumption with 0-RTT, for every worker of the
/// process: at most [`EARLY_SESSIONS`], the oldest dropped first.
fn early_sessions() -> Arc<dyn rustls::server::StoresServerSessions> {
    static STORE: std::sync::OnceLock<Arc<rustls::server::ServerSessionMemoryCache>> =
        std::sync::OnceLock::new();
    STORE
        .get_or_init(|| rustls::server::ServerSessionMemoryCache::new(EARLY_SESSIONS))
        .clone()
}

/// Sessions the 0-RTT store holds (a few hundred bytes each).
const EARLY_SESSIONS: usize = 16_384;

/// No session tickets: with 0-RTT on, resumption is by the stored session
/// (`early_sessions`), which rustls requires for early data.
#[derive(Debug)]
struct StatefulOnly;

impl rustls::server::ProducesTickets for StatefulOnly {
    fn enabled(&self) -> bool {
        false
    }
    fn lifetime(&self) -> u32 {
        0
    }
    fn encrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
    fn decrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// Make worker `slot`'s endpoint.
pub(crate) fn endpoint(
    endpoint: EndpointConfig,
    server: ServerConfig,
    stats: Arc<WorkerStats>,
    output: Rc<crate::worker::budget::WorkerBudget>,
    limits: endpoint::Limits,
    port: u16,
) -> Rc<Quic> {
    let e = quinn_proto::Endpoint::new(Arc::new(endpoint), Some(Arc::new(server)), true, None);
    Rc::new(Quic::new(e, stats, output, limits, port))
}

/// Take a UDP socket for the driver.
pub(crate) fn socket(s: Socket) -> io::Result<UdpHandle> {
    Udp::new(s).map(UdpHandle)
}

/// A UDP socket ready for [`drive`].
pub(crate) struct UdpHandle(Udp);

/// One port's sockets an endpoint reads: its worker's own group member
/// first (which it also sends from), then any a lowered worker count left
/// to it (`net::ListenerPlan::udp_of_slot`).
pub(crate) struct Sockets(Vec<Udp>);

impl Sockets {
    /// `own` and the rest, in that order; at least one.
    pub(crate) fn new(sockets: Vec<UdpHandle>) -> Sockets {
        debug_assert!(!sockets.is_empty());
        Sockets(sockets.into_iter().map(|s| s.0).collect())
    }

    pub(crate) fn port(&self) -> u16 {
        self.0[0].local().port()
    }
}

/// Run the endpoint on `sockets` until it has drained: `serve` is given
/// each connection whose handshake completed.
pub(crate) async fn drive(
    quic: Rc<Quic>,
    sockets: Sockets,
    owner: Owner,
    stats: Arc<WorkerStats>,
    post: Rc<Post>,
    serve: impl Fn(Conn),
) {
    let all = sockets.0;
    let udp = &all[0];
    let mut bufs = RecvBufs::new();
    let mut out: Vec<u8> = Vec::new();
    let mut wire: Vec<u8> = Vec::new();
    type Ready<'a> = Option<Pin<Box<dyn Future<Output = io::Result<()>> + 'a>>>;
    let mut readable: Vec<Ready<'_>> = all.iter().map(|_| None).collect();
    tracing::debug!(addr = %udp.local(), sockets = all.len(), "QUIC endpoint running");
    let mut here = Here {
        quic: &quic,
        sockets: &all,
        udp,
        owner,
        stats: &stats,
        post: &post,
    };
    loop {
        let now = Instant::now();
        if !quic.handed_over() {
            here.receive(&mut bufs, &mut out, &mut wire, now);
        }
        quic.fire_timers(now);
        loop {
            let connected = quic.take_connected();
            for h in &connected {
                WorkerStats::add(&stats.h3_connections, 1);
                serve(Conn::new(quic.clone(), *h));
            }
            if !send_touched(&quic, udp, &mut out).await && connected.is_empty() {
                break;
            }
        }
        stats
            .h3_open
            .store(quic.open() as u64, std::sync::atomic::Ordering::Relaxed);
        if quic.draining() && quic.open() == 0 {
            tracing::debug!(addr = %udp.local(), "QUIC endpoint drained");
            return;
        }
        let deadline = quic.next_deadline();
        let mut sleep = deadline.map(|d| {
            Box::pin(monoio::time::sleep_until(monoio::time::Instant::from_std(
                d,
            )))
        });
        if quic.handed_over() {
            readable.iter_mut().for_each(|r| *r = None);
        }
        poll_fn(|cx| {
            if quic.has_touched() || (quic.draining() && quic.open() == 0) {
                return Poll::Ready(());
            }
            quic.park_driver(cx.waker());
            if !quic.handed_over() {
                let mut ready = false;
                for (r, socket) in readable.iter_mut().zip(&all) {
                    let f = r.get_or_insert_with(|| Box::pin(socket.readable()));
                    if f.as_mut().poll(cx).is_ready() {
                        *r = None;
                        ready = true;
                    }
                }
                if ready {
                    return Poll::Ready(());
                }
            }
            match sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(()),
                _ => Poll::Pending,
            }
        })
        .await;
    }
}

/// What the driver's receiving needs: whose it is and where to hand
/// datagrams that are another worker's.
struct Here<'a> {
    quic: &'a Quic,
    /// Every socket it reads.
    sockets: &'a [Udp],
    /// The one it sends from.
    udp: &'a Udp,
    owner: Owner,
    stats: &'a WorkerStats,
    post: &'a Post,
}

impl Here<'_> {
    /// Read and take in (or hand over) what the sockets hold, a bounded
    /// number of batches each.
    fn receive(
        &mut self,
        bufs: &mut RecvBufs,
        out: &mut Vec<u8>,
        wire: &mut Vec<u8>,
        now: Instant,
    ) {
        for socket in self.sockets {
            self.receive_from(socket, bufs, out, wire, now);
        }
    }

    fn receive_from(
        &self,
        socket: &Udp,
        bufs: &mut RecvBufs,
        out: &mut Vec<u8>,
        wire: &mut Vec<u8>,
        now: Instant,
    ) {
        for _ in 0..RECV_ROUNDS {
            let n = match socket.recv(bufs) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::debug!(error = %e, "QUIC receive failed");
                    return;
                }
            };
            for i in 0..n {
                let meta = bufs.meta[i];
                for datagram in bufs.datagrams(i).chunks(meta.stride.max(1)) {
                    if let Route::Owner(o) = steer::route(datagram) {
                        if o != self.owner {
                            let handed = forward::Handed {
                                remote: meta.addr,
                                port: self.udp.local().port(),
                                local_ip: meta.dst_ip,
                                ecn: meta.ecn.map(|e| e as u8),
                                data: datagram,
                            };
                            self.hand(o, &handed, wire);
                            continue;
                        }
                    }
                    let ecn = meta
                        .ecn
                        .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
                    self.take(now, meta.addr, meta.dst_ip, ecn, datagram, out);
                }
            }
        }
    }

    /// Give one datagram to the endpoint, and send what it answers itself.
    fn take(
        &self,
        now: Instant,
        remote: std::net::SocketAddr,
        local_ip: Option<std::net::IpAddr>,
        ecn: Option<quinn_proto::EcnCodepoint>,
        datagram: &[u8],
        out: &mut Vec<u8>,
    ) {
        if let Some(r) = self
            .quic
            .datagram(now, remote, local_ip, ecn, datagram, out)
        {
            // The endpoint's own answers (a refusal, a version negotiation,
            // a stateless reset) are not retried: a client whose packet
            // they answer sends it again.
            let t = r.transmit;
            let _ = self.udp.send(
                t.destination,
                &out[..t.size],
                t.segment_size,
                udp_ecn(t.ecn),
                t.src_ip,
            );
        }
    }

    /// Hand a datagram to the worker its connection ID names.
    fn hand(&self, to: Owner, handed: &forward::Handed<'_>, wire: &mut Vec<u8>) {
        forward::encode(wire, handed);
        let counter = if to.generation == self.owner.generation {
            &self.stats.quic_misrouted
        } else {
            &self.stats.quic_handed
        };
        if self.post.send(to, wire) {
            WorkerStats::add(counter, 1);
        } else {
            WorkerStats::add(&self.stats.quic_lost, 1);
        }
    }
}

/// Tells the inbox's reader that the last endpoint has drained.
#[derive(Default)]
pub(crate) struct Stop {
    done: std::cell::Cell<bool>,
    waiter: std::cell::Cell<Option<std::task::Waker>>,
}

impl Stop {
    pub(crate) fn stop(&self) {
        self.done.set(true);
        if let Some(w) = self.waiter.take() {
            w.wake();
        }
    }
}

/// Read the worker's inbox until `stop`: each handed datagram goes to the
/// endpoint of the port it was sent to. It must end before the worker's
/// runtime does: a task parked on a socket's readiness holds the socket,
/// whose operation holds the task, and neither would ever be freed (the
/// ring and its descriptors with them).
pub(crate) async fn read_inbox(
    inbox: Inbox,
    endpoints: Vec<Rc<Quic>>,
    stats: Arc<WorkerStats>,
    stop: Rc<Stop>,
) {
    let mut buf = vec![0u8; forward::WIRE_BYTES];
    let mut out = Vec::new();
    loop {
        let mut readable = std::pin::pin!(inbox.readable());
        let ready = poll_fn(|cx| {
            if stop.done.get() {
                return Poll::Ready(false);
            }
            stop.waiter.set(Some(cx.waker().clone()));
            readable.as_mut().poll(cx).map(|r| r.is_ok())
        })
        .await;
        if !ready {
            return;
        }
        let now = Instant::now();
        let mut fed: Vec<&Rc<Quic>> = Vec::new();
        for _ in 0..64 {
            let wire = match inbox.recv(&mut buf) {
                Ok(w) => w,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!(error = %e, "QUIC inbox read failed");
                    return;
                }
            };
            let Some(h) = forward::decode(wire) else {
                WorkerStats::add(&stats.quic_lost, 1);
                continue;
            };
            let Some(q) = endpoints.iter().find(|q| q.port() == h.port) else {
                WorkerStats::add(&stats.quic_lost, 1);
                continue;
            };
            let ecn = h.ecn.and_then(quinn_proto::EcnCodepoint::from_bits);
            // A stateless answer to a handed datagram is not sent: the
            // connection it names is not here.
            let _ = q.datagram(now, h.remote, h.local_ip, ecn, h.data, &mut out);
            if !fed.iter().any(|f| Rc::ptr_eq(f, q)) {
                fed.push(q);
            }
        }
        for q in fed {
            q.wake();
        }
    }
}

fn udp_ecn(e: Option<quinn_proto::EcnCodepoint>) -> Option<quinn_udp::EcnCodepoint> {
    e.and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8))
}

/// Take each touched connection's events and send its datagrams; whether
/// any connection was touched.
async fn send_touched(quic: &Quic, udp: &Udp, out: &mut Vec<u8>) -> bool {
    let mut any = false;
    let now = Instant::now();
    let segments = udp.max_segments().clamp(1, MAX_BATCH);
    while let Some(h) = quic.next_touched() {
        any = true;
        if !quic.process(h) {
            continue;
        }
        let mut batches = 0;
        while let Some(t) = quic.poll_transmit(h, now, segments, out) {
            loop {
                match udp.send(
                    t.destination,
                    &out[..t.size],
                    t.segment_size,
                    udp_ecn(t.ecn),
                    t.src_ip,
                ) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if udp.writable().await.is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "QUIC send failed");
                        break;
                    }
                }
            }
            batches += 1;
            if batches == BATCHES_PER_TURN {
                quic.touch(h);
                break;
            }
        }
        // Sending set the loss and pacing timers; a close may have ended it.
        if quic.process(h) {
            quic.rearm(h);
        }
    }
    any
}
