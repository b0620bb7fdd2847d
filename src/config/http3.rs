//! HTTP/3: whether the TLS listeners' ports also take QUIC, what one HTTP/3
//! connection may cost, and how browsers learn of it (`--h3`, `--h3-*`,
//! `--alt-svc-max-age`).
//!
//! Owns the defaults and bounds of those settings. What each connection
//! applies, [`Http3Conn`], is the QUIC layer's type (`worker::quic`);
//! `raw`'s table fills its fields from the settings marked `h3`, as for
//! HTTP/2. Does not own the UDP sockets (`net`) nor enforcing the limits
//! (`worker::quic`).
//!
//! The defaults follow the peers: 100 concurrent request streams (quinn's,
//! h2o's, nginx's `http3_max_concurrent_streams` 128), a 30 s idle timeout
//! (Caddy's and quic-go's), and a day for `Alt-Svc` (the value Caddy and
//! Cloudflare send). The receive windows are HTTP/2's (64 KiB, RFC 9113's
//! default): a worker's connections may be sent at most
//! `--h3-connection-window-bytes` × `--max-connections` of request bodies
//! their services have not read, held to 1 GiB as for HTTP/2
//! (`limits::MAX_WORKER_BODY_WINDOWS`); peers' larger windows (quinn's
//! 1.25 MB a stream) suit clients, not a server of 16,384 connections a
//! worker. An upload-heavy app raises them and lowers `--max-connections`.

pub use crate::worker::{H3Switch as Switch, H3ZeroRtt as ZeroRtt, Http3Conn};

/// HTTP/3 is on wherever a TLS listener is.
pub const DEFAULT_H3: Switch = Switch::On;
/// Request streams a client may have open at once on one connection
/// (QUIC's `initial_max_streams_bidi`; a stream past it cannot be opened).
pub const DEFAULT_H3_MAX_STREAMS: u64 = 100;
/// An HTTP/3 connection silent this long is closed (QUIC's
/// `max_idle_timeout`; the smaller of ours and the client's applies).
pub const DEFAULT_H3_IDLE_TIMEOUT_S: f64 = 30.0;
/// Request-body bytes one stream may have in flight ahead of its service.
pub const DEFAULT_H3_STREAM_WINDOW_BYTES: u64 = 64 * 1024;
/// The same for all streams of one connection: with `--max-connections`
/// 16,384, 1 GiB a worker.
pub const DEFAULT_H3_CONNECTION_WINDOW_BYTES: u64 = 64 * 1024;
/// Requests a client may reset (or stop reading) per connection within
/// 10 s: QUIC gives a client's stream credit back as streams close, so
/// without it one connection could open and cancel requests as fast as its
/// link allows, each costing the worker a dispatch (HTTP/2's rapid reset,
/// CVE-2023-44487, in HTTP/3's clothes). The same as `--h2-max-resets`.
pub const DEFAULT_H3_MAX_RESETS: u64 = 200;
/// Handshakes in progress on one worker past which a new client's first
/// packet is answered with a Retry (RFC 9000 §8.1.2): it must echo a token
/// from its own address before the worker spends a handshake on it, so a
/// flood from spoofed addresses costs one stateless packet each. Below it,
/// handshakes start at once (a round trip saved), as in every peer.
pub const DEFAULT_H3_RETRY_THRESHOLD: u64 = 64;
/// 0-RTT is off: a resuming client waits one round trip, as over TCP with
/// TLS 1.3 here (nginx's `ssl_early_data` and Caddy's default are off too).
pub const DEFAULT_H3_0RTT: ZeroRtt = ZeroRtt::Off;
/// How long a browser may keep using the advertised HTTP/3 port.
pub const DEFAULT_ALT_SVC_MAX_AGE_S: f64 = 86_400.0;

/// `--h3-max-streams`.
pub(crate) const STREAMS: std::ops::RangeInclusive<usize> = 1..=4096;
/// `--h3-max-resets`.
pub(crate) const RESETS: std::ops::RangeInclusive<usize> = 1..=1_000_000;
/// `--h3-retry-threshold`: 0 (every new client is asked to retry) up.
pub(crate) const RETRY_THRESHOLD: std::ops::RangeInclusive<usize> = 0..=1_000_000;
/// `--h3-stream-window-bytes`: a packet's worth to 16 MiB.
pub(crate) const STREAM_WINDOW_BYTES: std::ops::RangeInclusive<usize> =
    16 * 1024..=16 * 1024 * 1024;
/// `--h3-connection-window-bytes`: up to 64 MiB.
pub(crate) const CONNECTION_WINDOW_BYTES: std::ops::RangeInclusive<usize> =
    64 * 1024..=64 * 1024 * 1024;
