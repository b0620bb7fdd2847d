//! What one client may cost a worker: connection caps, per-connection
//! timeouts, lingering close, and the request head limits.
//!
//! Owns those defaults and their bounds (`--max-connections`,
//! `--max-connections-total`, `--header-timeout`, `--keepalive-timeout`,
//! `--send-timeout`, `--output-buffer-bytes`, `--worker-output-bytes`, `--lingering-*`, `--max-head-bytes`, `--max-headers`,
//! `--max-body-bytes`), and building the workers' [`ConnSettings`] (a
//! `worker` type): those validated, with the HTTP/2 limits and the
//! shutdown deadlines.
//! Does not own enforcing them (`worker`, `http::parse`).

use std::ops::RangeInclusive;
use std::time::Duration;

use super::raw::{field, Checked};
use super::setting::Field;
use super::Error;
use crate::http::Limits;
pub use crate::worker::ConnSettings;

/// The connection settings of the checked table; `force_timeout` as the
/// supervision rules settled it.
pub(super) fn conn(c: &Checked, force_timeout: Duration) -> Result<ConnSettings, Error> {
    let (output_buffer_bytes, worker_output_bytes) = output(c)?;
    body_windows(c)?;
    Ok(ConnSettings {
        limits: head(c),
        header_timeout: c.header_timeout,
        body_timeout: c.body_timeout,
        keepalive_timeout: c.keepalive_timeout,
        send_timeout: c.send_timeout,
        output_buffer_bytes,
        worker_output_bytes,
        max_connections: {
            // Its rule refuses any value: merged into this one.
            debug_assert!(c.max_connections_total.is_none());
            c.max_connections
        },
        tls_handshake_timeout: c.tls_handshake_timeout,
        ktls: c.ktls,
        tls_handshake_buffer_bytes: c.tls_handshake_buffer_bytes,
        lingering_time: c.lingering_time,
        lingering_timeout: c.lingering_timeout,
        lingering_bytes: c.lingering_bytes,
        max_body_bytes: c.max_body_bytes,
        drain_timeout: c.drain_timeout,
        force_timeout,
        http2: c.http2_conn(),
        http3: c.http3_conn(),
    })
}

/// Per-worker connection cap, like nginx's `worker_connections` order of size.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
/// Time to receive a whole request head (nginx `client_header_timeout` 60 s;
/// shorter here because slowloris clients hold memory per connection).
pub const DEFAULT_HEADER_TIMEOUT_S: f64 = 20.0;
/// Longest silence between two reads of a request body a service is reading
/// (nginx `client_body_timeout` is 60 s): past it the request is answered
/// 408 and the connection closes.
pub const DEFAULT_BODY_TIMEOUT_S: f64 = 60.0;
/// Idle time between requests on a kept-alive connection (nginx uses 75 s).
pub const DEFAULT_KEEPALIVE_TIMEOUT_S: f64 = 75.0;
/// A client that takes no response bytes for this long is dropped (nginx
/// `send_timeout` is 60 s).
pub const DEFAULT_SEND_TIMEOUT_S: f64 = 60.0;
/// Response bytes one connection may hold prepared and not yet written:
/// HTTP/2 DATA handed to the framer (every stream's together: the file
/// chunk read for a stream counts), an HTTP/1.1 streamed body's chunks.
/// Four 64 KiB file chunks in flight keep a fast client's socket full (the
/// kernel's send buffer holds the rest), while 100 streams of a client that
/// never reads cost 256 KiB, not 100 × 64 KiB.
pub const DEFAULT_OUTPUT_BUFFER_BYTES: usize = 256 * 1024;
/// What all of a worker's connections may hold prepared and not yet written
/// together. Past it a connection that already holds bytes waits for its
/// own socket to drain before preparing more; one that holds none may still
/// prepare one frame's worth, so a new client is served while slow ones
/// wait. 128 connections at their full `--output-buffer-bytes`.
pub const DEFAULT_WORKER_OUTPUT_BYTES: usize = 32 * 1024 * 1024;
/// Longest lingering close in all (nginx `lingering_time` 30 s): time for a
/// client still sending after an error to stop and read the answer.
pub const DEFAULT_LINGERING_TIME_S: f64 = 30.0;
/// Silence that ends a lingering close early (nginx `lingering_timeout` 5 s).
pub const DEFAULT_LINGERING_TIMEOUT_S: f64 = 5.0;
/// Most bytes discarded by one lingering close: far above what a client has
/// in flight when it sees the answer (a few socket buffers), small enough
/// that a client streaming at line rate cannot keep a worker busy for the
/// whole lingering time.
pub const DEFAULT_LINGERING_BYTES: u64 = 16 * 1024 * 1024;
/// Largest request body (nginx's `client_max_body_size` is 1 MiB too): a
/// declared length past it is refused with 413 before anything runs, and a
/// chunked body growing past it is cut with 413. Bodies nobody reads are
/// discarded, so this is also the most a client can make a worker read for
/// nothing per request. 0 refuses every body.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;
// The head limits are the protocol core's defaults; config only validates
// overrides of them.
pub use crate::http::parse::{
    DEFAULT_MAX_HEADERS, DEFAULT_MAX_HEAD_BYTES, DEFAULT_MAX_REQUEST_LINE_BYTES,
};

/// `--max-head-bytes`: a head must hold a request line and a few fields, and
/// one head may not take a mebibyte of a worker's memory.
pub(crate) const HEAD_BYTES: RangeInclusive<usize> = 1024..=1024 * 1024;
/// `--max-headers`: at least one (`Host`), at most what the parser's
/// fixed header array holds.
pub(crate) const HEADERS: RangeInclusive<usize> = 1..=crate::http::parse::MAX_HEADERS_CEILING;

/// `--output-buffer-bytes`: room for one 16 KiB frame and its file chunk at
/// least, at most 64 MiB per connection.
pub(crate) const OUTPUT_BUFFER_BYTES: RangeInclusive<usize> = 32 * 1024..=64 * 1024 * 1024;
/// `--worker-output-bytes`: 1 MiB to 64 GiB.
pub(crate) const WORKER_OUTPUT_BYTES: RangeInclusive<usize> = 1024 * 1024..=64 * 1024 * 1024 * 1024;

/// `--worker-output-bytes` below `--output-buffer-bytes` would let no
/// connection use what its own budget allows.
pub(super) fn output(c: &Checked) -> Result<(usize, usize), Error> {
    if c.worker_output_bytes < c.output_buffer_bytes {
        return Err(super::raw::field::worker_output_bytes.invalid(format!(
            "{} is below --output-buffer-bytes ({}); a worker's budget must hold at least one \
             connection's: raise it or lower --output-buffer-bytes",
            c.worker_output_bytes, c.output_buffer_bytes
        )));
    }
    Ok((c.output_buffer_bytes, c.worker_output_bytes))
}

/// `--lingering-bytes`: a lingering close must be able to discard something.
pub(crate) fn lingering_bytes(field: Field, n: u64) -> Result<u64, Error> {
    if n == 0 {
        return Err(
            field.invalid("must be at least 1; give the most bytes a lingering close may discard")
        );
    }
    Ok(n)
}

/// `--max-connections-total`: merged into `--max-connections`, which is
/// the server's total since issue 29; a config that still says it is
/// refused with the way to say it now (no silent change of meaning).
pub(crate) fn total_connections(field: Field, n: u64) -> Result<u64, Error> {
    Err(field.invalid(format!(
        "merged into --max-connections, which is now the total for the whole server; \
         give --max-connections {n} (max_connections = {n}) instead"
    )))
}

/// The most unread request-body bytes one worker's HTTP/2 connections may
/// be sent ahead of their services: `--h2-initial-window-bytes` (each
/// connection's window) times `--max-connections`. The defaults come to
/// just under 1 GiB (RFC 9113's 65,535 × 16,384), and a larger window must
/// fit within it with fewer connections.
pub const MAX_WORKER_BODY_WINDOWS: u64 = 1 << 30;

/// `--h2-initial-window-bytes` × `--max-connections`, and with HTTP/3 on
/// `--h3-connection-window-bytes` × `--max-connections`, within
/// [`MAX_WORKER_BODY_WINDOWS`]: a per-connection window is no bound on a
/// worker that holds 16,384 connections.
fn body_windows(c: &Checked) -> Result<(), Error> {
    let connections = c.max_connections.get() as u64;
    window_within(
        field::h2_initial_window_bytes,
        c.h2_initial_window_bytes as u64,
        connections,
    )?;
    if c.h3 == super::http3::Switch::On {
        // QUIC connections are counted apart from TCP ones, so they have
        // their own 1 GiB.
        window_within(
            field::h3_connection_window_bytes,
            c.h3_connection_window_bytes as u64,
            connections,
        )?;
    }
    Ok(())
}

/// `window` × `connections` within [`MAX_WORKER_BODY_WINDOWS`], or an error
/// naming `field` and the fix.
fn window_within(field: Field, window: u64, connections: u64) -> Result<(), Error> {
    if window.saturating_mul(connections) <= MAX_WORKER_BODY_WINDOWS {
        return Ok(());
    }
    Err(field.invalid(format!(
        "{window} bytes on each of --max-connections {connections} lets a worker be sent \
         {} MiB of request bodies its services have not read (at most {} MiB); lower it, or \
         --max-connections to at most {}",
        window.saturating_mul(connections) >> 20,
        MAX_WORKER_BODY_WINDOWS >> 20,
        MAX_WORKER_BODY_WINDOWS / window
    )))
}

/// The protocol core's head limits; a request line never exceeds the head.
pub(super) fn head(c: &Checked) -> Limits {
    Limits {
        max_head_bytes: c.max_head_bytes,
        max_request_line_bytes: DEFAULT_MAX_REQUEST_LINE_BYTES.min(c.max_head_bytes),
        max_headers: c.max_headers,
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{err, raw, set};
    use crate::config::RawConfig;
    use crate::config::Size;

    #[test]
    fn a_small_head_limit_also_bounds_the_request_line() {
        let r = RawConfig {
            max_head_bytes: Some(Size(2048)),
            ..raw()
        };
        let c = r.validate_with(&set(&[0]), &[0]).unwrap();
        assert_eq!(c.conn.limits.max_head_bytes, 2048);
        assert_eq!(c.conn.limits.max_request_line_bytes, 2048);
    }

    #[test]
    fn zero_caps_are_refused_with_the_reason() {
        let r = RawConfig {
            max_connections_total: Some(5000),
            ..raw()
        };
        assert_eq!(
            err(r),
            "--max-connections-total: merged into --max-connections, which is now the total \
             for the whole server; give --max-connections 5000 (max_connections = 5000) instead"
        );
        let r = RawConfig {
            lingering_bytes: Some(Size(0)),
            ..raw()
        };
        assert!(err(r).starts_with("--lingering-bytes: must be at least 1"));
    }

    #[test]
    fn body_windows_are_bounded_per_worker() {
        use crate::config::tests::{err, ok, raw};
        use crate::config::{RawConfig, Size};
        // The defaults fit.
        assert_eq!(ok(raw()).conn.http2.initial_window_bytes, 65_535);
        // 1 MiB windows on 16,384 connections would be 16 GiB a worker.
        let big = RawConfig {
            h2_initial_window_bytes: Some(Size(1 << 20)),
            ..raw()
        };
        let e = err(big.clone());
        assert!(
            e.starts_with("--h2-initial-window-bytes: 1048576 bytes"),
            "{e}"
        );
        assert!(e.contains("16384 MiB") && e.contains("at most 1024"), "{e}");
        // With as many connections as it names, it is taken.
        let fits = RawConfig {
            max_connections: Some(1024),
            ..big
        };
        assert_eq!(ok(fits).conn.http2.initial_window_bytes, 1 << 20);
        // HTTP/3's connection window has its own 1 GiB, while HTTP/3 is on.
        assert_eq!(ok(raw()).conn.http3.connection_window_bytes, 65_536);
        let big = RawConfig {
            h3_connection_window_bytes: Some(Size(1 << 20)),
            ..raw()
        };
        let e = err(big.clone());
        assert!(
            e.starts_with("--h3-connection-window-bytes: 1048576 bytes"),
            "{e}"
        );
        assert!(e.contains("at most 1024"), "{e}");
        let off = RawConfig {
            h3: Some(crate::config::http3::Switch::Off),
            ..big
        };
        assert_eq!(ok(off).conn.http3.connection_window_bytes, 1 << 20);
    }

    #[test]
    fn head_limits_name_their_range() {
        let r = RawConfig {
            max_headers: Some(257),
            ..raw()
        };
        assert_eq!(err(r), "--max-headers: 257 is outside 1..=256");
    }
}
