//! Open loop over HTTP/3: the schedule hands each due request to an idle stream.
//!
//! The HTTP/1.1 worker gives a due request to a connection with room and otherwise leaves it
//! due, its latency still counting from the due time. Here the same rule runs as a dispatcher
//! future: it waits for an idle stream (a permit each idle stream loop adds), then for the next
//! due time ([`Pacer`], so a slow server cannot slow the schedule), and queues the request for
//! the idle streams. Requests due while every stream is busy wait in the pacer, not in memory,
//! and are `unsent` if the window closes first.
//!
//! Flow:
//! 1. A stream loop with nothing to do calls [`Jobs::take`]: one more idle stream.
//! 2. [`Jobs::dispatch`] takes that permit, sleeps until the next due time, claims from the
//!    `--requests` budget, queues the request and wakes one idle stream.
//! 3. When the budget is spent, the dispatcher marks the queue done and wakes every idle
//!    stream, which then ends.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::Instant;

use tokio::sync::{Notify, Semaphore};

use super::{Job, Worker};
use crate::load::pacer::Pacer;

/// The due requests of one thread and the schedule that makes them.
pub(super) struct Jobs {
    /// Due requests not yet taken by a stream.
    queue: RefCell<VecDeque<Job>>,
    /// Wakes an idle stream when a request is queued, and all of them when done.
    queued: Notify,
    /// One permit per stream waiting in [`Jobs::take`].
    idle: Semaphore,
    /// The budget is spent: nothing more will be queued.
    done: Cell<bool>,
    /// The thread's share of the schedule.
    pacer: Cell<Pacer>,
}

impl Jobs {
    pub(super) fn new(pacer: Pacer) -> Jobs {
        Jobs {
            queue: RefCell::new(VecDeque::new()),
            queued: Notify::new(),
            idle: Semaphore::new(0),
            done: Cell::new(false),
            pacer: Cell::new(pacer),
        }
    }

    /// Waits for the next due request; `None` once the budget is spent and the queue empty.
    /// Cancel-safe: a waiter dropped before getting a request takes its idle permit back.
    pub(super) async fn take(&self) -> Option<Job> {
        self.idle.add_permits(1);
        let mut idle = Idle {
            jobs: self,
            served: false,
        };
        loop {
            if let Some(job) = self.queue.borrow_mut().pop_front() {
                idle.served = true;
                return Some(job);
            }
            if self.done.get() {
                return None;
            }
            self.queued.notified().await;
        }
    }

    /// Queues each request when it is due and a stream is idle, until the budget is spent
    /// (the caller drops this future at the window's end).
    pub(super) async fn dispatch(&self, worker: &Worker<'_>) {
        loop {
            match self.idle.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_closed) => return,
            }
            let mut pacer = self.pacer.get();
            let due = pacer.due();
            if worker.over(due) {
                // Due after the window: never sent, and not owed (the window ends first).
                return;
            }
            tokio::time::sleep_until(due.into()).await;
            let counted = due >= worker.window.start;
            if counted && !worker.shared.claim() {
                worker.exhausted.set(true);
                self.done.set(true);
                self.queued.notify_waiters();
                return;
            }
            self.queue.borrow_mut().push_back(Job {
                path: worker.next_path(),
                origin: due,
                counted,
            });
            pacer.advance();
            self.pacer.set(pacer);
            self.queued.notify_one();
        }
    }

    /// Nothing is queued and nothing more will be.
    pub(super) fn finished(&self) -> bool {
        self.done.get() && self.queue.borrow().is_empty()
    }

    /// Timed requests due in `[start, stopped)` that never went out: those the schedule still
    /// owed (unless the budget ended it), and those queued but not taken.
    pub(super) fn unsent(&self, start: Instant, stopped: Instant, exhausted: bool) -> u64 {
        let owed = if exhausted {
            0
        } else {
            self.pacer.get().unsent(start, stopped)
        };
        let queued = self.queue.borrow().iter().filter(|j| j.counted).count() as u64;
        owed + queued
    }
}

/// A stream waiting in [`Jobs::take`]; dropped unserved, it withdraws its idle permit if the
/// dispatcher has not taken it yet (if it has, the request it queues goes to the next taker).
struct Idle<'j> {
    jobs: &'j Jobs,
    served: bool,
}

impl Drop for Idle<'_> {
    fn drop(&mut self) {
        if !self.served {
            if let Ok(permit) = self.jobs.idle.try_acquire() {
                permit.forget();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_withdrawn_waiter_takes_its_permit_back() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let jobs = Jobs::new(Pacer::new(Instant::now(), 1000.0, 0.0));
        runtime.block_on(async {
            let waited = tokio::time::timeout(Duration::from_millis(5), jobs.take()).await;
            assert!(waited.is_err(), "nothing was queued");
        });
        assert_eq!(jobs.idle.available_permits(), 0);
        jobs.queue.borrow_mut().push_back(Job {
            path: 0,
            origin: Instant::now(),
            counted: true,
        });
        let job = runtime.block_on(jobs.take());
        assert!(job.is_some_and(|j| j.counted));
        assert_eq!(jobs.idle.available_permits(), 1, "served: the permit stays");
        jobs.done.set(true);
        assert!(jobs.finished());
        assert_eq!(runtime.block_on(jobs.take()).map(|j| j.path), None);
    }
}
