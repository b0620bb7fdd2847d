//! The load engine: worker threads, each an event loop over its own connections.
//!
//! Owns: splitting a [`Plan`] over threads, pinning, the shared clock and request budget,
//! running the workers and merging their tallies into a [`Report`].
//! Does not own: validation (`validate`), parsing responses (`http`), rendering (`report`).
//!
//! Flow:
//! 1. [`run`] checks the plan, serializes each path's request once, and spawns one worker per
//!    thread with its share of the connections.
//! 2. Each worker pins itself, builds its epoll set and buffers, then waits at the `gate`
//!    until all are ready; the gate hands every worker the same time zero, so warm-up and the
//!    timed window line up across threads.
//! 3. Workers run closed or open loop until the window ends or the `--requests` budget is
//!    spent and answered (see `worker`).
//! 4. Tallies are merged and turned into a [`Report`].
//!
//! [`h3`] is the same run over HTTP/3 (`--h3`): its threads go through the same `drive` (gate,
//! budget, merge, report), each running QUIC connections on a tokio runtime instead of `worker`.

mod gate;
pub mod h3;
mod pacer;
mod slot;
mod tally;
mod worker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use tally::ErrorClass;
pub(crate) use tally::{histogram, Tally};

use crate::plan::{self, Plan};
use crate::report::Report;
use gate::Gate;

/// A run that could not take place (as opposed to one that ran and saw errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plan(#[from] plan::Error),
    #[error("cannot pin worker {worker} to CPU {cpu}: is it online and in this process's cpuset?")]
    Pin { worker: usize, cpu: usize },
    #[error("worker {worker} setup failed: {source}")]
    Setup {
        worker: usize,
        source: std::io::Error,
    },
    #[error("cannot start worker thread: {0}")]
    Spawn(std::io::Error),
    #[error("a worker thread panicked")]
    Panicked,
    #[error("the run was aborted before it started")]
    Aborted,
    #[error(transparent)]
    H3(#[from] crate::http3::Error),
}

/// State all workers of one run share.
pub(crate) struct Shared<'p> {
    pub(crate) plan: &'p Plan,
    /// Serialized request per path.
    pub(crate) requests: Vec<Vec<u8>>,
    /// Timed requests still allowed when `--requests` is set.
    tickets: Option<AtomicU64>,
    /// Where workers wait for each other and learn time zero.
    pub(crate) gate: Gate,
}

impl Shared<'_> {
    /// Takes one timed request from the budget; `false` once it is spent.
    pub(crate) fn claim(&self) -> bool {
        match &self.tickets {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }
}

/// Runs `plan` (without validating the server first: see `validate::check`) and reports
/// what happened in the timed window.
pub fn run(plan: &Plan) -> Result<Report, Error> {
    run_with(plan, || {})
}

/// [`run`], calling `at_window` on the calling thread when the timed window opens (time zero
/// plus the warm-up), while the workers run. A driver samples server-side counters there, so
/// that they cover the same window as the report; the window closes when this returns.
/// `at_window` is not called when the run aborts before it starts.
pub fn run_with<F: FnOnce()>(plan: &Plan, at_window: F) -> Result<Report, Error> {
    drive(plan, at_window, worker::work)
}

/// Runs `work(shared, index, connections)` on one thread per `plan.threads`, each with its share
/// of the connections, opens the gate, calls `at_window` as [`run_with`] says, and merges what
/// the threads hand back into the report. Each `work` arrives at `shared.gate` once set up.
fn drive<F, W>(plan: &Plan, at_window: F, work: W) -> Result<Report, Error>
where
    F: FnOnce(),
    W: Fn(&Shared<'_>, usize, usize) -> Result<Worked, Error> + Sync,
{
    plan.check()?;
    let threads = plan.threads.get();
    let shared = Shared {
        plan,
        requests: plan.requests(),
        tickets: plan.requests.map(|n| AtomicU64::new(n.get())),
        gate: Gate::default(),
    };
    let (started, results) = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for index in 0..threads {
            let connections = share(plan.connections.get(), threads, index);
            let (shared, work) = (&shared, &work);
            let spawned = std::thread::Builder::new()
                .name(format!("load-{index}"))
                .spawn_scoped(scope, move || work(shared, index, connections));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    spawn_error = Some(Error::Spawn(e));
                    break;
                }
            }
        }
        let started = shared.gate.open(handles.len(), spawn_error.is_none());
        if let Some(zero) = started {
            let window = zero + plan.warmup;
            std::thread::sleep(window.saturating_duration_since(Instant::now()));
            at_window();
        }
        let started = started.is_some();
        let mut results: Vec<Result<Worked, Error>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(Error::Panicked)))
            .collect();
        results.extend(spawn_error.map(Err));
        (started, results)
    });
    let mut total = Tally::new();
    let mut zero = None;
    for result in results {
        let worked = result?;
        total.merge(&worked.tally);
        zero = zero.or(worked.zero);
    }
    if !started {
        return Err(Error::Aborted);
    }
    let start = zero.unwrap_or_else(Instant::now) + plan.warmup;
    let window = total
        .stopped
        .map(|stopped| stopped.saturating_duration_since(start))
        .unwrap_or(Duration::ZERO);
    Ok(Report::new(plan, &total, window))
}

/// What a worker hands back: its tally and the time zero it ran against.
pub(crate) struct Worked {
    pub(crate) tally: Tally,
    pub(crate) zero: Option<Instant>,
}

/// Connections for worker `index` of `threads`: an even split, the first ones taking the rest.
/// Pin the calling thread, load thread `index`, to its CPU of `plan.cpus` (if any).
fn pin(plan: &Plan, index: usize) -> Result<(), Error> {
    if let Some(cpus) = &plan.cpus {
        let cpu = cpus.for_worker(index);
        if !crate::sys::affinity::pin(cpu) {
            return Err(Error::Pin { worker: index, cpu });
        }
    }
    Ok(())
}

fn share(connections: usize, threads: usize, index: usize) -> usize {
    connections / threads + usize::from(index < connections % threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_split_evenly() {
        let split: Vec<usize> = (0..3).map(|i| share(10, 3, i)).collect();
        assert_eq!(split, [4, 3, 3]);
        assert_eq!(split.iter().sum::<usize>(), 10);
    }
}
