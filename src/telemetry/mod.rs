//! Telemetry: per-worker counters, the admin listener, and log setup.
//!
//! Owns: [`WorkerStats`] (written by one worker, read by the admin thread),
//! the server's readiness [`Phase`] that `/readyz` reports, the admin HTTP
//! endpoint (`admin`), and the tracing subscriber (`init_logging`). Does not
//! own what is counted where: the worker loop increments.
//!
//! Counters are relaxed atomics on a cache line per worker: the writer is one
//! thread, readers only need eventually-consistent values, and padding keeps
//! one worker's increments from bouncing another's line.

pub mod admin;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Counters of one worker.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct WorkerStats {
    pub connections_accepted: AtomicU64,
    pub connections_open: AtomicU64,
    pub requests: AtomicU64,
    /// Responses by status class: index 1..=5 for 1xx..5xx.
    pub responses: [AtomicU64; 6],
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
pub fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
