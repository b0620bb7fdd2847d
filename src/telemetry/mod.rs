//! Telemetry: per-worker counters, the admin listener, and log setup.
//!
//! Owns: [`WorkerStats`] (written by one worker, read by the admin thread),
//! [`CompressStats`] (written by a process's compression cache, which all
//! its workers share), the supervisor's [`AcmeStats`] and [`RestartStats`],
//! the server's readiness [`Phase`] that `/readyz` reports, the admin HTTP
//! endpoint (`admin`), and the tracing subscriber (`init_logging`), whose
//! peer-misbehaviour count and output budget live in `peer`. Does not own
//! what is counted where: the worker loop increments.
//!
//! Counters are relaxed atomics on a cache line per worker: the writer is one
//! thread, readers only need eventually-consistent values, and padding keeps
//! one worker's increments from bouncing another's line.

pub mod admin;
pub mod peer;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use tracing_subscriber::filter::Targets;

/// Every worker slot's counters, as the admin endpoint reads them; grows if
/// a reload adds workers.
pub type StatsTable = std::sync::Arc<std::sync::RwLock<Vec<std::sync::Arc<WorkerStats>>>>;

/// The protocol a request came over, as the request and response counters
/// label it (`protocol="http1"`): HTTP/1.0 and HTTP/1.1 together, and HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1 = 0,
    Http2 = 1,
    Http3 = 2,
}

impl Protocol {
    /// Every protocol, in the order of the counters' arrays.
    pub const ALL: [Protocol; PROTOCOLS] = [Protocol::Http1, Protocol::Http2, Protocol::Http3];

    /// The `protocol` label's value.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::Http2 => "http2",
            Protocol::Http3 => "http3",
        }
    }
}

/// How many protocols the counters tell apart.
pub const PROTOCOLS: usize = 3;

/// Why a TLS handshake failed (`servery_tls_failures_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFailure {
    /// Not finished within `--tls-handshake-timeout`.
    Timeout = 0,
    /// The client closed or reset the connection mid-handshake.
    Closed = 1,
    /// The handshake was refused: bad records or messages, no common
    /// version or suite, an alert from the client (an alert went back).
    Refused = 2,
}

impl TlsFailure {
    pub const ALL: [TlsFailure; 3] = [TlsFailure::Timeout, TlsFailure::Closed, TlsFailure::Refused];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            TlsFailure::Timeout => "timeout",
            TlsFailure::Closed => "closed",
            TlsFailure::Refused => "refused",
        }
    }
}

/// Counters of one worker.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerStats {
    pub connections_accepted: AtomicU64,
    pub connections_open: AtomicU64,
    /// Requests parsed, by [`Protocol`].
    pub requests: [AtomicU64; PROTOCOLS],
    /// Responses by [`Protocol`] and status class: index 1..=5 for 1xx..5xx.
    pub responses: [[AtomicU64; 6]; PROTOCOLS],
    /// TLS handshakes completed, and how many of them resumed a session.
    pub tls_handshakes: AtomicU64,
    pub tls_resumed: AtomicU64,
    /// Plain HTTP sent to a TLS listener (closed, not logged as errors).
    pub tls_plaintext: AtomicU64,
    /// Other failed or timed-out TLS handshakes.
    pub tls_failed: AtomicU64,
    /// The same by [`TlsFailure`].
    pub tls_failures: [AtomicU64; 3],
    /// TLS connections parked now: idle, holding no buffer and no timer.
    pub tls_parked: AtomicU64,
    /// TLS connections whose records the kernel seals (kTLS).
    pub tls_ktls: AtomicU64,
    /// QUIC connections accepted (HTTP/3).
    pub h3_connections: AtomicU64,
    /// QUIC connections open now.
    pub h3_open: AtomicU64,
    /// QUIC connections refused: the worker at `--max-connections`, draining, or the handshake's first packet refused.
    pub h3_refused: AtomicU64,
    /// QUIC handshakes not done within `--tls-handshake-timeout` (closed).
    pub h3_handshake_timeouts: AtomicU64,
    /// HTTP/3 request streams accepted.
    pub h3_streams: AtomicU64,
    /// Datagrams read by a worker whose connection IDs name another worker of its generation (the steering program is not attached), handed to it.
    pub quic_misrouted: AtomicU64,
    /// Datagrams of an older generation's connections handed to it (a reload).
    pub quic_handed: AtomicU64,
    /// Datagrams handed to no worker: their owner is gone or its inbox was full.
    pub quic_lost: AtomicU64,
    /// QUIC clients sent a Retry before their handshake (past `--h3-retry-threshold`).
    pub h3_retries: AtomicU64,
    /// HTTP/3 requests the client reset or stopped reading before their answer ended.
    pub h3_resets: AtomicU64,
    /// Handler calls that panicked (each answered 500, its connection closed).
    pub handler_panics: AtomicU64,
    /// HTTP/2 connections (by ALPN or the h2c preface).
    pub h2_connections: AtomicU64,
    /// HTTP/2 streams accepted.
    pub h2_streams: AtomicU64,
    /// HTTP/2 streams the client reset before their response ended.
    pub h2_resets: AtomicU64,
    /// HTTP/2 connections closed with ENHANCE_YOUR_CALM (too many resets).
    pub h2_calmed: AtomicU64,
    /// Bytes of prepared output the worker holds now and has not written
    /// (`worker::budget`): HTTP/2 DATA handed to the framer, HTTP/1.1
    /// streamed body chunks, HTTP/3 body pieces and the send windows QUIC
    /// connections are lent.
    pub output_bytes: AtomicU64,
    /// Times a connection waited for the worker's output budget.
    pub output_waits: AtomicU64,
    /// Access-log lines written by the log's writer.
    pub access_log_lines: AtomicU64,
    /// Access-log lines dropped: the writer was behind past the backlog, a
    /// write failed, or the writer was stuck at exit.
    pub access_log_dropped: AtomicU64,
    /// Peer-misbehaviour events of the worker's process ([`peer::count`]),
    /// as its beats report them (`--isolation process` only: threads share
    /// the process's count, which the admin endpoint reads directly).
    pub peer_misbehaviour: AtomicU64,
    /// The worker's share of the server's file caches (`--file-cache-entries`,
    /// `--memory-cache-bytes` divided among the workers), set by the
    /// supervisor as it starts the worker.
    pub file_cache_entries_share: AtomicU64,
    pub memory_cache_bytes_share: AtomicU64,
    /// Last reported RSS of the worker's process (from beats).
    pub rss_bytes: AtomicU64,
    /// Last reported CPU time of the worker (from beats), microseconds.
    pub cpu_micros: AtomicU64,
    /// The compression cache of the worker's process, as its beats report
    /// it (`--isolation process` only: threads share the process's
    /// [`CompressStats::global`], which the admin endpoint reads directly).
    pub compress: CompressStats,
}

/// Counters of one process's on-the-fly compression cache
/// (`static_files::compress`): one per process, shared by its workers, so
/// the admin endpoint shows them as server totals, not per worker.
#[derive(Debug, Default)]
pub struct CompressStats {
    /// Bytes the cache holds now (variants and their bookkeeping).
    pub cache_bytes: AtomicU64,
    /// Variants (and "no gain" marks) the cache holds now.
    pub cache_entries: AtomicU64,
    /// Responses sent from a cached variant.
    pub hits: AtomicU64,
    /// Requests that wanted a variant not in the cache.
    pub misses: AtomicU64,
    /// Variants a worker made for the request that asked.
    pub inline: AtomicU64,
    /// Variants the background compressor made.
    pub background: AtomicU64,
    /// Variants dropped to make room.
    pub evictions: AtomicU64,
    /// Compressions not done or not kept: the compressor was at its bound,
    /// the variant was larger than the budget, or the file changed while read.
    pub skipped: AtomicU64,
    /// Answers compressed as they were sent (before the variant was stored).
    pub streams: AtomicU64,
    /// Answers sent identity because the worker's `--compress-streams`
    /// were all in use.
    pub streams_busy: AtomicU64,
}

/// [`CompressStats`] as plain numbers, carried in a worker process's beats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompressSnapshot {
    pub cache_bytes: u64,
    pub cache_entries: u64,
    pub hits: u64,
    pub misses: u64,
    pub inline: u64,
    pub background: u64,
    pub evictions: u64,
    pub skipped: u64,
    #[serde(default)]
    pub streams: u64,
    #[serde(default)]
    pub streams_busy: u64,
}

/// The supervisor's ACME counters (`supervisor::acme` writes them, the
/// admin endpoint reads them): certificates issued and orders failed in
/// this server's life.
#[derive(Debug, Default)]
pub struct AcmeStats {
    pub issued: AtomicU64,
    pub failed: AtomicU64,
}

impl AcmeStats {
    /// This process's (the supervisor's; workers order nothing).
    pub fn global() -> &'static AcmeStats {
        static GLOBAL: AcmeStats = AcmeStats {
            issued: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        };
        &GLOBAL
    }
}

/// The supervisor's count of worker restarts (`supervisor::restart`
/// writes it, the admin endpoint reads it): replacements started for
/// serving workers that died unasked, by why they died.
#[derive(Debug, Default)]
pub struct RestartStats {
    /// The worker exited, or was killed by a signal the supervisor did not
    /// send.
    pub crash: AtomicU64,
    /// The supervisor killed the worker after it missed two beats.
    pub beat_timeout: AtomicU64,
}

impl RestartStats {
    /// This process's (the supervisor's; workers restart nothing).
    pub fn global() -> &'static RestartStats {
        static GLOBAL: RestartStats = RestartStats {
            crash: AtomicU64::new(0),
            beat_timeout: AtomicU64::new(0),
        };
        &GLOBAL
    }
}

impl CompressStats {
    pub const fn new() -> CompressStats {
        CompressStats {
            cache_bytes: AtomicU64::new(0),
            cache_entries: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inline: AtomicU64::new(0),
            background: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            streams: AtomicU64::new(0),
            streams_busy: AtomicU64::new(0),
        }
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// This process's: what its compression cache writes.
    pub fn global() -> &'static CompressStats {
        static GLOBAL: CompressStats = CompressStats::new();
        &GLOBAL
    }

    pub fn snapshot(&self) -> CompressSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CompressSnapshot {
            cache_bytes: get(&self.cache_bytes),
            cache_entries: get(&self.cache_entries),
            hits: get(&self.hits),
            misses: get(&self.misses),
            inline: get(&self.inline),
            background: get(&self.background),
            evictions: get(&self.evictions),
            skipped: get(&self.skipped),
            streams: get(&self.streams),
            streams_busy: get(&self.streams_busy),
        }
    }

    fn store(&self, s: &CompressSnapshot) {
        let set = |c: &AtomicU64, v: u64| c.store(v, Ordering::Relaxed);
        set(&self.cache_bytes, s.cache_bytes);
        set(&self.cache_entries, s.cache_entries);
        set(&self.hits, s.hits);
        set(&self.misses, s.misses);
        set(&self.inline, s.inline);
        set(&self.background, s.background);
        set(&self.evictions, s.evictions);
        set(&self.skipped, s.skipped);
        set(&self.streams, s.streams);
        set(&self.streams_busy, s.streams_busy);
    }
}

impl CompressSnapshot {
    /// Counters plus `other`'s (the gauges too).
    pub fn add(&mut self, o: &CompressSnapshot) {
        self.cache_bytes += o.cache_bytes;
        self.cache_entries += o.cache_entries;
        self.hits += o.hits;
        self.misses += o.misses;
        self.inline += o.inline;
        self.background += o.background;
        self.evictions += o.evictions;
        self.skipped += o.skipped;
        self.streams += o.streams;
        self.streams_busy += o.streams_busy;
    }
}

impl WorkerStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// A request parsed (or refused) over `protocol`.
    pub fn request(&self, protocol: Protocol) {
        WorkerStats::add(&self.requests[protocol as usize], 1);
    }

    /// A response with `status` begun over `protocol`.
    pub fn response(&self, protocol: Protocol, status: u16) {
        let class = usize::from(status / 100).min(5);
        WorkerStats::add(&self.responses[protocol as usize][class], 1);
    }
}

/// A point-in-time copy of a worker's counters, carried in beat replies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    pub connections_accepted: u64,
    pub connections_open: u64,
    /// Requests, every protocol's.
    pub requests: u64,
    /// Of them, over HTTP/2 (absent in beats from a binary that did not
    /// tell protocols apart: all HTTP/1 then).
    #[serde(default)]
    pub h2_requests: u64,
    /// Responses by status class, every protocol's.
    pub responses: [u64; 6],
    /// Of them, over HTTP/2.
    #[serde(default)]
    pub h2_responses: [u64; 6],
    /// Requests and responses over HTTP/3 (absent in older beats).
    #[serde(default)]
    pub h3_requests: u64,
    #[serde(default)]
    pub h3_responses: [u64; 6],
    pub tls_handshakes: u64,
    pub tls_resumed: u64,
    pub tls_plaintext: u64,
    pub tls_failed: u64,
    /// Failed handshakes by [`TlsFailure`] (absent in older beats).
    #[serde(default)]
    pub tls_failures: [u64; 3],
    #[serde(default)]
    pub tls_parked: u64,
    #[serde(default)]
    pub tls_ktls: u64,
    #[serde(default)]
    pub h3_connections: u64,
    #[serde(default)]
    pub h3_open: u64,
    #[serde(default)]
    pub h3_refused: u64,
    #[serde(default)]
    pub h3_handshake_timeouts: u64,
    #[serde(default)]
    pub h3_streams: u64,
    #[serde(default)]
    pub quic_misrouted: u64,
    #[serde(default)]
    pub quic_handed: u64,
    #[serde(default)]
    pub quic_lost: u64,
    #[serde(default)]
    pub h3_retries: u64,
    #[serde(default)]
    pub h3_resets: u64,
    pub handler_panics: u64,
    pub h2_connections: u64,
    pub h2_streams: u64,
    pub h2_resets: u64,
    pub h2_calmed: u64,
    #[serde(default)]
    pub output_bytes: u64,
    #[serde(default)]
    pub output_waits: u64,
    pub access_log_lines: u64,
    pub access_log_dropped: u64,
    /// Peer-misbehaviour events of the worker's process (absent in beats
    /// from a binary without the count).
    #[serde(default)]
    pub peer_misbehaviour: u64,
    /// Resident set of the worker's process, bytes.
    pub rss_bytes: u64,
    /// CPU time of the worker's thread, microseconds.
    pub cpu_micros: u64,
    /// The compression cache of the worker's process (absent in beats from
    /// a binary without it).
    #[serde(default)]
    pub compress: CompressSnapshot,
}

impl Snapshot {
    /// Read `stats`, the calling thread's CPU time and the process's RSS.
    pub fn take(stats: &WorkerStats) -> Snapshot {
        let mut responses = [0u64; 6];
        for by_class in &stats.responses {
            for (i, r) in by_class.iter().enumerate() {
                responses[i] += WorkerStats::get(r);
            }
        }
        let h2 = Protocol::Http2 as usize;
        let h2_responses = stats.responses[h2].each_ref().map(WorkerStats::get);
        let h3 = Protocol::Http3 as usize;
        let h3_responses = stats.responses[h3].each_ref().map(WorkerStats::get);
        Snapshot {
            connections_accepted: WorkerStats::get(&stats.connections_accepted),
            connections_open: WorkerStats::get(&stats.connections_open),
            requests: stats.requests.iter().map(WorkerStats::get).sum(),
            h2_requests: WorkerStats::get(&stats.requests[h2]),
            responses,
            h2_responses,
            h3_requests: WorkerStats::get(&stats.requests[h3]),
            h3_responses,
            tls_handshakes: WorkerStats::get(&stats.tls_handshakes),
            tls_resumed: WorkerStats::get(&stats.tls_resumed),
            tls_plaintext: WorkerStats::get(&stats.tls_plaintext),
            tls_failed: WorkerStats::get(&stats.tls_failed),
            tls_failures: stats.tls_failures.each_ref().map(WorkerStats::get),
            tls_parked: WorkerStats::get(&stats.tls_parked),
            tls_ktls: WorkerStats::get(&stats.tls_ktls),
            h3_connections: WorkerStats::get(&stats.h3_connections),
            h3_open: WorkerStats::get(&stats.h3_open),
            h3_refused: WorkerStats::get(&stats.h3_refused),
            h3_handshake_timeouts: WorkerStats::get(&stats.h3_handshake_timeouts),
            h3_streams: WorkerStats::get(&stats.h3_streams),
            quic_misrouted: WorkerStats::get(&stats.quic_misrouted),
            quic_handed: WorkerStats::get(&stats.quic_handed),
            quic_lost: WorkerStats::get(&stats.quic_lost),
            h3_retries: WorkerStats::get(&stats.h3_retries),
            h3_resets: WorkerStats::get(&stats.h3_resets),
            handler_panics: WorkerStats::get(&stats.handler_panics),
            h2_connections: WorkerStats::get(&stats.h2_connections),
            h2_streams: WorkerStats::get(&stats.h2_streams),
            h2_resets: WorkerStats::get(&stats.h2_resets),
            h2_calmed: WorkerStats::get(&stats.h2_calmed),
            output_bytes: WorkerStats::get(&stats.output_bytes),
            output_waits: WorkerStats::get(&stats.output_waits),
            access_log_lines: WorkerStats::get(&stats.access_log_lines),
            access_log_dropped: WorkerStats::get(&stats.access_log_dropped),
            peer_misbehaviour: peer::count(),
            rss_bytes: process_rss_bytes(),
            cpu_micros: thread_cpu_micros(),
            compress: CompressStats::global().snapshot(),
        }
    }

    /// Counters plus `other`'s (gauges too: callers sum live workers).
    pub fn add(&mut self, other: &Snapshot) {
        self.connections_accepted += other.connections_accepted;
        self.connections_open += other.connections_open;
        self.requests += other.requests;
        self.h2_requests += other.h2_requests;
        self.h3_requests += other.h3_requests;
        for i in 0..6 {
            self.responses[i] += other.responses[i];
            self.h2_responses[i] += other.h2_responses[i];
            self.h3_responses[i] += other.h3_responses[i];
        }
        self.tls_handshakes += other.tls_handshakes;
        self.tls_resumed += other.tls_resumed;
        self.tls_plaintext += other.tls_plaintext;
        self.tls_failed += other.tls_failed;
        for (mine, theirs) in self.tls_failures.iter_mut().zip(other.tls_failures) {
            *mine += theirs;
        }
        self.tls_parked += other.tls_parked;
        self.tls_ktls += other.tls_ktls;
        self.h3_connections += other.h3_connections;
        self.h3_open += other.h3_open;
        self.h3_refused += other.h3_refused;
        self.h3_handshake_timeouts += other.h3_handshake_timeouts;
        self.h3_streams += other.h3_streams;
        self.quic_misrouted += other.quic_misrouted;
        self.quic_handed += other.quic_handed;
        self.quic_lost += other.quic_lost;
        self.h3_retries += other.h3_retries;
        self.h3_resets += other.h3_resets;
        self.handler_panics += other.handler_panics;
        self.h2_connections += other.h2_connections;
        self.h2_streams += other.h2_streams;
        self.h2_resets += other.h2_resets;
        self.h2_calmed += other.h2_calmed;
        self.output_bytes += other.output_bytes;
        self.output_waits += other.output_waits;
        self.access_log_lines += other.access_log_lines;
        self.access_log_dropped += other.access_log_dropped;
        self.peer_misbehaviour += other.peer_misbehaviour;
        self.rss_bytes += other.rss_bytes;
        self.cpu_micros += other.cpu_micros;
        self.compress.add(&other.compress);
    }

    /// Store into the atomics the admin endpoint reads.
    pub fn store(&self, stats: &WorkerStats) {
        use std::sync::atomic::Ordering::Relaxed;
        stats
            .connections_accepted
            .store(self.connections_accepted, Relaxed);
        stats.connections_open.store(self.connections_open, Relaxed);
        let (h1, h2, h3) = (
            Protocol::Http1 as usize,
            Protocol::Http2 as usize,
            Protocol::Http3 as usize,
        );
        let h2_requests = self.h2_requests.min(self.requests);
        let h3_requests = self.h3_requests.min(self.requests - h2_requests);
        stats.requests[h1].store(self.requests - h2_requests - h3_requests, Relaxed);
        stats.requests[h2].store(h2_requests, Relaxed);
        stats.requests[h3].store(h3_requests, Relaxed);
        for i in 0..6 {
            let h2_responses = self.h2_responses[i].min(self.responses[i]);
            let h3_responses = self.h3_responses[i].min(self.responses[i] - h2_responses);
            stats.responses[h1][i].store(self.responses[i] - h2_responses - h3_responses, Relaxed);
            stats.responses[h2][i].store(h2_responses, Relaxed);
            stats.responses[h3][i].store(h3_responses, Relaxed);
        }
        stats.tls_handshakes.store(self.tls_handshakes, Relaxed);
        stats.tls_resumed.store(self.tls_resumed, Relaxed);
        stats.tls_plaintext.store(self.tls_plaintext, Relaxed);
        stats.tls_failed.store(self.tls_failed, Relaxed);
        for (stat, v) in stats.tls_failures.iter().zip(self.tls_failures) {
            stat.store(v, Relaxed);
        }
        stats.tls_parked.store(self.tls_parked, Relaxed);
        stats.tls_ktls.store(self.tls_ktls, Relaxed);
        stats.h3_connections.store(self.h3_connections, Relaxed);
        stats.h3_open.store(self.h3_open, Relaxed);
        stats.h3_refused.store(self.h3_refused, Relaxed);
        stats
            .h3_handshake_timeouts
            .store(self.h3_handshake_timeouts, Relaxed);
        stats.h3_streams.store(self.h3_streams, Relaxed);
        stats.quic_misrouted.store(self.quic_misrouted, Relaxed);
        stats.quic_handed.store(self.quic_handed, Relaxed);
        stats.quic_lost.store(self.quic_lost, Relaxed);
        stats.h3_retries.store(self.h3_retries, Relaxed);
        stats.h3_resets.store(self.h3_resets, Relaxed);
        stats.handler_panics.store(self.handler_panics, Relaxed);
        stats.h2_connections.store(self.h2_connections, Relaxed);
        stats.h2_streams.store(self.h2_streams, Relaxed);
        stats.h2_resets.store(self.h2_resets, Relaxed);
        stats.h2_calmed.store(self.h2_calmed, Relaxed);
        stats.output_bytes.store(self.output_bytes, Relaxed);
        stats.output_waits.store(self.output_waits, Relaxed);
        stats.access_log_lines.store(self.access_log_lines, Relaxed);
        stats
            .access_log_dropped
            .store(self.access_log_dropped, Relaxed);
        stats
            .peer_misbehaviour
            .store(self.peer_misbehaviour, Relaxed);
        stats.rss_bytes.store(self.rss_bytes, Relaxed);
        stats.cpu_micros.store(self.cpu_micros, Relaxed);
        stats.compress.store(&self.compress);
    }
}

/// RSS of this process from /proc/self/statm (pages × page size).
fn process_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// CPU time of the calling thread (utime + stime) from /proc/thread-self/stat.
fn thread_cpu_micros() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // Fields after the `(comm)`: state is field 3; utime 14 and stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // CLK_TCK is 100 on every Linux ABI we run on.
    (ticks(11) + ticks(12)) * 10_000
}

/// The server's phase as `/readyz` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Generation still passing its barrier: not ready.
    Starting = 0,
    /// Full ready quorum reached: ready.
    Ready = 1,
    /// Shutting down: not ready.
    Draining = 2,
}

/// Shared cell holding the current [`Phase`].
#[derive(Debug, Default)]
pub struct PhaseCell(AtomicU8);

impl PhaseCell {
    pub fn set(&self, p: Phase) {
        self.0.store(p as u8, Ordering::Release);
    }

    pub fn get(&self) -> Phase {
        match self.0.load(Ordering::Acquire) {
            1 => Phase::Ready,
            2 => Phase::Draining,
            _ => Phase::Starting,
        }
    }
}

/// Install the tracing subscriber on stderr; `RUST_LOG` overrides `default`.
/// Peer misbehaviour reported by the protocol crates is counted and
/// printed within a budget (`peer`). Worker processes re-execute the binary
/// and so get the same subscriber, with a count and a budget of their own.
/// (rustls is built without its `logging` feature: it would log a WARN line
/// per client for oddities such as an IP address sent as SNI.)
///
/// `RUST_LOG` takes a level and `target=level` directives (`info`,
/// `warn,servery::worker=debug`): `tracing_subscriber`'s `Targets`, which
/// needs no regex engine (`EnvFilter`'s span and field matching cost the
/// first build two regex crates). One that does not parse is reported and
/// the default is used.
pub fn init_logging(default: &str) {
    use tracing_subscriber::util::SubscriberInitExt;
    let fallback = || default.parse::<Targets>().unwrap_or_default();
    let written = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let (filter, refused) = match written.as_deref().map(str::parse::<Targets>) {
        Some(Ok(filter)) => (filter, None),
        Some(Err(e)) => (fallback(), Some(e)),
        None => (fallback(), None),
    };
    let colour = colour(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let _ = subscriber(filter, std::io::stderr, colour).try_init();
    if let (Some(e), Some(written)) = (refused, written) {
        tracing::warn!(
            "RUST_LOG={written:?} is not a filter ({e}); write a level or target=level \
             directives, e.g. info or warn,servery::worker=debug; using {default}"
        );
    }
}

/// Whether log lines carry colour codes: only on a terminal, and not when
/// `NO_COLOR` is set to anything (no-color.org). A file, a pipe or the
/// journal gets plain text.
fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The subscriber `init_logging` installs, writing to `writer`: `filter`
/// and the [`peer::Budget`] decide what is printed; [`peer::Count`] counts
/// peer misbehaviour whatever `filter` says.
pub(crate) fn subscriber<W>(
    filter: Targets,
    writer: W,
    colour: bool,
) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    let output = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(colour)
        .with_target(false)
        .with_filter(filter.and(peer::Budget));
    tracing_subscriber::registry()
        .with(output)
        .with(peer::Count.with_filter(peer::counting()))
}

#[cfg(test)]
mod colour_tests {
    use super::colour;

    #[test]
    fn colour_only_on_a_terminal_and_never_with_no_color() {
        assert!(colour(true, None));
        assert!(!colour(false, None), "a file or a pipe gets plain text");
        assert!(!colour(true, Some(std::ffi::OsStr::new("1"))));
        // An empty NO_COLOR is as if unset (no-color.org).
        assert!(colour(true, Some(std::ffi::OsStr::new(""))));
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;

    /// A worker process's counters cross to the supervisor in a beat's
    /// snapshot: each protocol's requests and responses arrive as they were
    /// counted, and a beat from a binary without the HTTP/2 share (the
    /// field absent) reads as all HTTP/1.
    #[test]
    fn a_snapshot_carries_each_protocols_counts() {
        let worker = WorkerStats::default();
        for _ in 0..3 {
            worker.request(Protocol::Http1);
            worker.response(Protocol::Http1, 200);
        }
        worker.request(Protocol::Http2);
        worker.response(Protocol::Http2, 404);
        let snapshot = Snapshot::take(&worker);
        assert_eq!((snapshot.requests, snapshot.h2_requests), (4, 1));
        let json = serde_json::to_string(&snapshot).unwrap();
        let back: Snapshot = serde_json::from_str(&json).unwrap();
        let seen = WorkerStats::default();
        back.store(&seen);
        let get = |p: Protocol| WorkerStats::get(&seen.requests[p as usize]);
        assert_eq!((get(Protocol::Http1), get(Protocol::Http2)), (3, 1));
        let class = |p: Protocol, c: usize| WorkerStats::get(&seen.responses[p as usize][c]);
        assert_eq!(class(Protocol::Http1, 2), 3);
        assert_eq!(class(Protocol::Http2, 4), 1);
        assert_eq!(class(Protocol::Http2, 2), 0);

        let mut old: serde_json::Value = serde_json::from_str(&json).unwrap();
        let map = old.as_object_mut().unwrap();
        map.remove("h2_requests");
        map.remove("h2_responses");
        let old: Snapshot = serde_json::from_value(old).unwrap();
        let seen = WorkerStats::default();
        old.store(&seen);
        let get = |p: Protocol| WorkerStats::get(&seen.requests[p as usize]);
        assert_eq!((get(Protocol::Http1), get(Protocol::Http2)), (4, 0));
    }
}
