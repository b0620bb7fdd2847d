//! The admin listener: `/healthz`, `/readyz`, `/metrics`.
//!
//! It runs on its own plain thread with blocking std I/O, off the workers'
//! cores' event loops: it is polled by orchestrators a few times a second and
//! must answer even when every worker is saturated or draining. One request
//! per connection; answers are small. Refusals (404, 405) are answered by
//! `http::on_error`, like the workers'.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;

use super::{Phase, PhaseCell, Protocol, TlsFailure, WorkerStats};
use crate::http::response::write_head;
use crate::http::{on_error, Body, Persistence, Refusal, Response, Status};

/// A running admin endpoint; dropping it stops the thread.
#[derive(Debug)]
pub struct Admin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Admin {
    /// Bind `addr` and serve on a new thread.
    pub fn start(
        addr: SocketAddr,
        phase: Arc<PhaseCell>,
        stats: super::StatsTable,
    ) -> io::Result<Admin> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("servery-admin".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::Acquire) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        let table: Vec<Arc<WorkerStats>> =
                            stats.read().map(|t| t.clone()).unwrap_or_default();
                        let _ = answer(conn, &phase, &table);
                    }
                }
            })?;
        Ok(Admin {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept so the thread sees `stop`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(mut conn: TcpStream, phase: &PhaseCell, stats: &[Arc<WorkerStats>]) -> io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = [0u8; 2048];
    let mut len = 0;
    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
        let n = conn.read(&mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let line = buf[..len].split(|&b| b == b'\n').next().unwrap_or(b"");
    let mut parts = line.split(|&b| b == b' ');
    let method = parts.next().unwrap_or(b"");
    let path = parts.next().unwrap_or(b"");
    let text = |status: Status, ctype: &'static str, body: String| {
        Response::new(status, Body::Bytes(Bytes::from(body))).header("Content-Type", ctype)
    };
    let resp = if method != b"GET" && method != b"HEAD" {
        on_error(&Refusal::MethodNotAllowed)
    } else {
        match path {
            b"/healthz" => text(Status::OK, "text/plain", "ok\n".to_owned()),
            b"/readyz" => match phase.get() {
                Phase::Ready => text(Status::OK, "text/plain", "ready\n".to_owned()),
                Phase::Starting => text(
                    Status::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "starting\n".to_owned(),
                ),
                Phase::Draining => text(
                    Status::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "draining\n".to_owned(),
                ),
            },
            b"/metrics" => text(
                Status::OK,
                "text/plain; version=0.0.4",
                render_metrics(stats),
            ),
            _ => on_error(&Refusal::NotFound),
        }
    };
    let mut out = Vec::with_capacity(256);
    write_head(&mut out, &resp, &date_now(), Persistence::Close, b"");
    if let (Body::Bytes(body), false) = (&resp.body, method == b"HEAD") {
        out.extend_from_slice(body);
    }
    conn.write_all(&out)
}

/// The `Date` field value now (the admin thread has no per-worker cache).
fn date_now() -> Vec<u8> {
    httpdate::fmt_http_date(std::time::SystemTime::now()).into_bytes()
}

/// Prometheus text exposition (format 0.0.4) of every worker's counters,
/// per worker and summed.
pub fn render_metrics(stats: &[Arc<WorkerStats>]) -> String {
    use std::fmt::Write as _;
    type Series = (
        &'static str,
        &'static str,
        &'static str,
        fn(&WorkerStats) -> u64,
    );
    let series: [Series; 31] = [
        (
            "servery_connections_accepted_total",
            "counter",
            "Connections accepted.",
            |s| WorkerStats::get(&s.connections_accepted),
        ),
        (
            "servery_connections_open",
            "gauge",
            "Connections open now.",
            |s| WorkerStats::get(&s.connections_open),
        ),
        (
            "servery_file_cache_entries_share",
            "gauge",
            "The worker's share of --file-cache-entries (a total for the server).",
            |s| WorkerStats::get(&s.file_cache_entries_share),
        ),
        (
            "servery_memory_cache_bytes_share",
            "gauge",
            "The worker's share of --memory-cache-bytes (a total for the server).",
            |s| WorkerStats::get(&s.memory_cache_bytes_share),
        ),
        (
            "servery_tls_handshakes_total",
            "counter",
            "TLS handshakes completed.",
            |s| WorkerStats::get(&s.tls_handshakes),
        ),
        (
            "servery_tls_resumed_total",
            "counter",
            "TLS handshakes that resumed a session.",
            |s| WorkerStats::get(&s.tls_resumed),
        ),
        (
            "servery_tls_plaintext_total",
            "counter",
            "Plain HTTP sent to a TLS listener.",
            |s| WorkerStats::get(&s.tls_plaintext),
        ),
        (
            "servery_tls_failed_total",
            "counter",
            "Failed or timed-out TLS handshakes.",
            |s| WorkerStats::get(&s.tls_failed),
        ),
        (
            "servery_tls_parked",
            "gauge",
            "TLS connections parked now (idle, holding no buffer and no timer).",
            |s| WorkerStats::get(&s.tls_parked),
        ),
        (
            "servery_tls_ktls_total",
            "counter",
            "TLS connections whose records the kernel seals (kTLS).",
            |s| WorkerStats::get(&s.tls_ktls),
        ),
        (
            "servery_h3_connections_total",
            "counter",
            "QUIC connections accepted (HTTP/3).",
            |s| WorkerStats::get(&s.h3_connections),
        ),
        (
            "servery_h3_open",
            "gauge",
            "QUIC connections open now.",
            |s| WorkerStats::get(&s.h3_open),
        ),
        (
            "servery_h3_refused_total",
            "counter",
            "QUIC connections refused: the worker at --max-connections, draining, or the handshake's first packet refused.",
            |s| WorkerStats::get(&s.h3_refused),
        ),
        (
            "servery_h3_handshake_timeouts_total",
            "counter",
            "QUIC handshakes not done within --tls-handshake-timeout (closed).",
            |s| WorkerStats::get(&s.h3_handshake_timeouts),
        ),
        (
            "servery_h3_streams_total",
            "counter",
            "HTTP/3 request streams accepted.",
            |s| WorkerStats::get(&s.h3_streams),
        ),
        (
            "servery_quic_misrouted_total",
            "counter",
            "Datagrams read by a worker whose connection IDs name another worker of its generation (no steering program), handed to it.",
            |s| WorkerStats::get(&s.quic_misrouted),
        ),
        (
            "servery_quic_handed_total",
            "counter",
            "Datagrams of an older generation's connections handed to it (a reload).",
            |s| WorkerStats::get(&s.quic_handed),
        ),
        (
            "servery_quic_lost_total",
            "counter",
            "Datagrams handed to no worker: their owner is gone or its inbox was full.",
            |s| WorkerStats::get(&s.quic_lost),
        ),
        (
            "servery_h3_retries_total",
            "counter",
            "QUIC clients sent a Retry before their handshake (past --h3-retry-threshold).",
            |s| WorkerStats::get(&s.h3_retries),
        ),
        (
            "servery_h3_resets_total",
            "counter",
            "HTTP/3 requests the client reset or stopped reading before their answer ended.",
            |s| WorkerStats::get(&s.h3_resets),
        ),
        (
            "servery_handler_panics_total",
            "counter",
            "Handler calls that panicked (answered 500, connection closed).",
            |s| WorkerStats::get(&s.handler_panics),
        ),
        (
            "servery_h2_connections_total",
            "counter",
            "HTTP/2 connections (by ALPN or the h2c preface).",
            |s| WorkerStats::get(&s.h2_connections),
        ),
        (
            "servery_h2_streams_total",
            "counter",
            "HTTP/2 streams accepted.",
            |s| WorkerStats::get(&s.h2_streams),
        ),
        (
            "servery_h2_resets_total",
            "counter",
            "HTTP/2 streams the client reset before their response ended.",
            |s| WorkerStats::get(&s.h2_resets),
        ),
        (
            "servery_h2_calmed_total",
            "counter",
            "HTTP/2 connections closed with ENHANCE_YOUR_CALM (too many resets).",
            |s| WorkerStats::get(&s.h2_calmed),
        ),
        (
            "servery_output_bytes",
            "gauge",
            "Prepared output held and not yet written, and QUIC send windows lent (the --worker-output-bytes budget).",
            |s| WorkerStats::get(&s.output_bytes),
        ),
        (
            "servery_output_waits_total",
            "counter",
            "Times a connection waited for the worker's output budget.",
            |s| WorkerStats::get(&s.output_waits),
        ),
        (
            "servery_access_log_lines_total",
            "counter",
            "Access-log lines written.",
            |s| WorkerStats::get(&s.access_log_lines),
        ),
        (
            "servery_access_log_dropped_total",
            "counter",
            "Access-log lines dropped (the writer behind past --access-log-backlog, or a failed write).",
            |s| WorkerStats::get(&s.access_log_dropped),
        ),
        (
            "servery_worker_rss_bytes",
            "gauge",
            "Resident memory of the worker's process (last beat).",
            |s| WorkerStats::get(&s.rss_bytes),
        ),
        (
            "servery_worker_cpu_seconds_total",
            "counter",
            "CPU time of the worker (last beat), microseconds / 1e6.",
            |s| WorkerStats::get(&s.cpu_micros),
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, get) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        let mut sum = 0u64;
        for (i, s) in stats.iter().enumerate() {
            let v = get(s);
            sum += v;
            if name == "servery_worker_cpu_seconds_total" {
                let _ = writeln!(out, "{name}{{worker=\"{i}\"}} {:.6}", v as f64 / 1e6);
            } else {
                let _ = writeln!(out, "{name}{{worker=\"{i}\"}} {v}");
            }
        }
        if name == "servery_worker_cpu_seconds_total" {
            let _ = writeln!(out, "{name} {:.6}", sum as f64 / 1e6);
        } else {
            let _ = writeln!(out, "{name} {sum}");
        }
    }
    render_by_protocol(&mut out, stats);
    render_tls_failures(&mut out, stats);
    render_compress(&mut out, stats);
    render_peer(&mut out, stats);
    render_acme(&mut out);
    render_restarts(&mut out);
    out
}

/// Requests and responses per worker and protocol (`protocol="http1"`,
/// `"http2"`), responses by status class too, then the server's totals:
/// every request, and responses by class.
fn render_by_protocol(out: &mut String, stats: &[Arc<WorkerStats>]) {
    use std::fmt::Write as _;
    let name = "servery_requests_total";
    let _ = writeln!(
        out,
        "# HELP {name} Requests parsed, by protocol.\n# TYPE {name} counter"
    );
    let mut sum = 0;
    for (i, s) in stats.iter().enumerate() {
        for p in Protocol::ALL {
            let v = WorkerStats::get(&s.requests[p as usize]);
            sum += v;
            let _ = writeln!(
                out,
                "{name}{{worker=\"{i}\",protocol=\"{}\"}} {v}",
                p.label()
            );
        }
    }
    let _ = writeln!(out, "{name} {sum}");
    let name = "servery_responses_total";
    let _ = writeln!(
        out,
        "# HELP {name} Responses by protocol and status class.\n# TYPE {name} counter"
    );
    for class in 1..=5 {
        let mut sum = 0;
        for (i, s) in stats.iter().enumerate() {
            for p in Protocol::ALL {
                let v = WorkerStats::get(&s.responses[p as usize][class]);
                sum += v;
                let _ = writeln!(
                    out,
                    "{name}{{worker=\"{i}\",protocol=\"{}\",class=\"{class}xx\"}} {v}",
                    p.label()
                );
            }
        }
        let _ = writeln!(out, "{name}{{class=\"{class}xx\"}} {sum}");
    }
}

/// Failed TLS handshakes per worker and reason (`reason="timeout"`,
/// `"closed"`, `"refused"`), then the server's total per reason.
fn render_tls_failures(out: &mut String, stats: &[Arc<WorkerStats>]) {
    use std::fmt::Write as _;
    let name = "servery_tls_failures_total";
    let _ = writeln!(
        out,
        "# HELP {name} Failed TLS handshakes, by reason.\n# TYPE {name} counter"
    );
    for reason in TlsFailure::ALL {
        let mut sum = 0;
        for (i, s) in stats.iter().enumerate() {
            let v = WorkerStats::get(&s.tls_failures[reason as usize]);
            sum += v;
            let _ = writeln!(
                out,
                "{name}{{worker=\"{i}\",reason=\"{}\"}} {v}",
                reason.label()
            );
        }
        let _ = writeln!(out, "{name}{{reason=\"{}\"}} {sum}", reason.label());
    }
}

/// Peer misbehaviour as a server total: this process's count (its worker
/// threads', or in process isolation the supervisor's own ACME client's)
/// plus what worker processes reported of theirs. A worker thread's
/// [`WorkerStats::peer_misbehaviour`] stays 0, so nothing is counted twice.
fn render_peer(out: &mut String, stats: &[Arc<WorkerStats>]) {
    use std::fmt::Write as _;
    let total = super::peer::count()
        + stats
            .iter()
            .map(|s| WorkerStats::get(&s.peer_misbehaviour))
            .sum::<u64>();
    let name = "servery_peer_misbehaviour_total";
    let _ = writeln!(
        out,
        "# HELP {name} Protocol misbehaviour by peers that the HTTP/2 library reported \
         (each a warning; at most {lines} a process are printed per {secs} s).\n\
         # TYPE {name} counter\n{name} {total}",
        lines = super::peer::LINES_PER_WINDOW,
        secs = super::peer::WINDOW.as_secs(),
    );
}

/// The supervisor's restarts by reason ([`super::RestartStats`]); both
/// series are always there.
fn render_restarts(out: &mut String) {
    use std::fmt::Write as _;
    use std::sync::atomic::Ordering;
    let restarts = super::RestartStats::global();
    let name = "servery_worker_restarts_total";
    let _ = writeln!(
        out,
        "# HELP {name} Replacement workers started for serving workers that died unasked, \
         by reason: crash (exited or killed by a signal on its own), beat_timeout \
         (killed by the supervisor after two missed beats).\n# TYPE {name} counter"
    );
    for (reason, n) in [
        ("crash", &restarts.crash),
        ("beat_timeout", &restarts.beat_timeout),
    ] {
        let _ = writeln!(
            out,
            "{name}{{reason=\"{reason}\"}} {}",
            n.load(Ordering::Relaxed)
        );
    }
}

/// The supervisor's ACME counters ([`super::AcmeStats`]).
fn render_acme(out: &mut String) {
    use std::fmt::Write as _;
    use std::sync::atomic::Ordering;
    let acme = super::AcmeStats::global();
    let series = [
        (
            "servery_acme_certificates_issued_total",
            "Certificates ACME issued and every worker now presents.",
            acme.issued.load(Ordering::Relaxed),
        ),
        (
            "servery_acme_orders_failed_total",
            "ACME orders that failed (the certificate in use stays).",
            acme.failed.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, v) in series {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
        );
    }
}

/// The compression cache's series, as server totals: this process's own
/// cache (the one worker threads share) plus what worker processes
/// reported of theirs. Only one of the two is ever non-zero.
fn render_compress(out: &mut String, stats: &[Arc<WorkerStats>]) {
    use std::fmt::Write as _;
    let mut total = super::CompressStats::global().snapshot();
    for s in stats {
        total.add(&s.compress.snapshot());
    }
    let series: [(&str, &str, &str, u64); 10] = [
        (
            "servery_compress_cache_bytes",
            "gauge",
            "Bytes of compressed variants (and their bookkeeping) held now.",
            total.cache_bytes,
        ),
        (
            "servery_compress_cache_entries",
            "gauge",
            "Compressed variants held now.",
            total.cache_entries,
        ),
        (
            "servery_compress_hits_total",
            "counter",
            "Responses sent from a cached compressed variant.",
            total.hits,
        ),
        (
            "servery_compress_misses_total",
            "counter",
            "Requests whose compressed variant was not cached.",
            total.misses,
        ),
        (
            "servery_compress_inline_total",
            "counter",
            "Variants a worker compressed for the request that asked.",
            total.inline,
        ),
        (
            "servery_compress_background_total",
            "counter",
            "Variants the background compressor made.",
            total.background,
        ),
        (
            "servery_compress_evictions_total",
            "counter",
            "Variants dropped to stay within --compress-cache-bytes.",
            total.evictions,
        ),
        (
            "servery_compress_skipped_total",
            "counter",
            "Compressions refused (compressor at its bound) or not kept.",
            total.skipped,
        ),
        (
            "servery_compress_streams_total",
            "counter",
            "Answers compressed as they were sent, before their variant was stored.",
            total.streams,
        ),
        (
            "servery_compress_streams_busy_total",
            "counter",
            "Answers sent identity: the worker's --compress-streams were all in use.",
            total.streams_busy,
        ),
    ];
    for (name, kind, help, v) in series {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_have_one_series_per_worker() {
        let stats = vec![
            Arc::new(WorkerStats::default()),
            Arc::new(WorkerStats::default()),
        ];
        WorkerStats::add(&stats[1].requests[Protocol::Http1 as usize], 7);
        stats[1].request(Protocol::Http2);
        stats[0].response(Protocol::Http2, 404);
        let text = render_metrics(&stats);
        for line in [
            "servery_requests_total{worker=\"0\",protocol=\"http1\"} 0\n",
            "servery_requests_total{worker=\"1\",protocol=\"http1\"} 7\n",
            "servery_requests_total{worker=\"1\",protocol=\"http2\"} 1\n",
            "servery_requests_total 8\n",
            "servery_responses_total{worker=\"1\",protocol=\"http1\",class=\"2xx\"} 0\n",
            "servery_responses_total{worker=\"0\",protocol=\"http2\",class=\"4xx\"} 1\n",
            "servery_responses_total{class=\"4xx\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    #[test]
    fn peer_misbehaviour_adds_worker_processes_to_this_process() {
        let stats = vec![
            Arc::new(WorkerStats::default()),
            Arc::new(WorkerStats::default()),
        ];
        WorkerStats::add(&stats[0].peer_misbehaviour, 3);
        WorkerStats::add(&stats[1].peer_misbehaviour, 4);
        // This process's own count may grow meanwhile (another test).
        let before = crate::telemetry::peer::count();
        let text = render_metrics(&stats);
        let after = crate::telemetry::peer::count();
        let total: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("servery_peer_misbehaviour_total "))
            .and_then(|v| v.parse().ok())
            .expect("a total");
        assert!((before + 7..=after + 7).contains(&total), "{text}");
        assert!(text.contains("# TYPE servery_peer_misbehaviour_total counter\n"));
    }

    #[test]
    fn restarts_have_both_reasons_with_help_and_type() {
        let text = render_metrics(&[]);
        let name = "servery_worker_restarts_total";
        assert!(text.contains(&format!("# HELP {name} ")));
        assert!(text.contains(&format!("# TYPE {name} counter\n")));
        for reason in ["crash", "beat_timeout"] {
            let series = format!("\n{name}{{reason=\"{reason}\"}} ");
            assert!(text.contains(&series), "{reason}: {text}");
        }
    }
}
