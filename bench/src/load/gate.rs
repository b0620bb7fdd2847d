//! The start line: workers report that their setup is done, the run's thread decides whether
//! to go, and everyone gets the same time zero.
//!
//! A plain `Barrier` cannot be cancelled, so a failed spawn or setup would leave the other
//! workers waiting forever; the gate lets the run's thread release them with "abort".

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

#[derive(Default)]
struct State {
    /// Workers that finished setup (successfully or not).
    arrived: usize,
    /// Some worker's setup failed.
    failed: bool,
    /// `Some(Some(t))`: go, time zero is `t`. `Some(None)`: abort. `None`: not decided yet.
    verdict: Option<Option<Instant>>,
}

#[derive(Default)]
pub(crate) struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker that panicked while holding the lock left no invariant half-updated
        // (every update is a single field store), so the data is still good.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by a worker once set up; blocks until the verdict. Returns time zero, or `None`
    /// when the run is aborted.
    pub(crate) fn arrive(&self, setup_ok: bool) -> Option<Instant> {
        let mut state = self.lock();
        state.arrived += 1;
        state.failed |= !setup_ok;
        self.changed.notify_all();
        loop {
            if let Some(verdict) = state.verdict {
                return verdict;
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Called (through [`Arrival`]) for a worker that panicked during setup: counts it as
    /// arrived and failed without waiting, so `open` cannot hang on it.
    fn abandon(&self) {
        let mut state = self.lock();
        state.arrived += 1;
        state.failed = true;
        self.changed.notify_all();
    }

    /// Called by the run's thread after spawning `spawned` workers: waits for all of them to
    /// arrive, then starts the clock if `go` and no setup failed, else aborts. Returns
    /// time zero when the run started, `None` when it was aborted.
    pub(crate) fn open(&self, spawned: usize, go: bool) -> Option<Instant> {
        let mut state = self.lock();
        while state.arrived < spawned {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let start = go && !state.failed;
        let zero = start.then(Instant::now);
        state.verdict = Some(zero);
        self.changed.notify_all();
        zero
    }
}

/// A worker's promise to arrive at the gate: dropped unfulfilled (a panic during setup), it
/// abandons the gate instead.
pub(crate) struct Arrival<'g> {
    gate: &'g Gate,
    arrived: bool,
}

impl<'g> Arrival<'g> {
    pub(crate) fn new(gate: &'g Gate) -> Self {
        Self {
            gate,
            arrived: false,
        }
    }

    /// See [`Gate::arrive`].
    pub(crate) fn arrive(mut self, setup_ok: bool) -> Option<Instant> {
        self.arrived = true;
        self.gate.arrive(setup_ok)
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if !self.arrived {
            self.gate.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_workers_get_the_same_time_zero() {
        let gate = Gate::default();
        let zeros: Vec<Option<Instant>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3).map(|_| s.spawn(|| gate.arrive(true))).collect();
            assert!(gate.open(3, true).is_some());
            handles
                .into_iter()
                .map(|h| h.join().expect("worker"))
                .collect()
        });
        assert!(zeros[0].is_some());
        assert!(zeros.iter().all(|z| *z == zeros[0]));
    }

    #[test]
    fn a_panicking_setup_aborts_instead_of_hanging() {
        let gate = Gate::default();
        std::thread::scope(|s| {
            let ok = s.spawn(|| Arrival::new(&gate).arrive(true));
            let panicked = s.spawn(|| {
                let _arrival = Arrival::new(&gate);
                panic!("setup failed");
            });
            assert!(gate.open(2, true).is_none());
            assert_eq!(ok.join().expect("worker"), None);
            assert!(panicked.join().is_err());
        });
    }

    #[test]
    fn one_failed_setup_aborts_everyone() {
        let gate = Gate::default();
        std::thread::scope(|s| {
            let ok = s.spawn(|| gate.arrive(true));
            let bad = s.spawn(|| gate.arrive(false));
            assert!(gate.open(2, true).is_none());
            assert_eq!(ok.join().expect("worker"), None);
            assert_eq!(bad.join().expect("worker"), None);
        });
    }
}
