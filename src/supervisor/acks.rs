//! Acknowledged ACME updates: the supervisor tells the CA a challenge is
//! ready only once every live worker process says it holds the answer.
//!
//! Why: in process isolation each worker keeps its own table, written by
//! its control reader from the supervisor's message. Announcing the
//! challenge right after sending would race the CA's validation request
//! against that reader on a loaded host; a validation that reaches a worker
//! without the answer fails the order. Waiting a fixed time instead only
//! moves the race.
//!
//! Owns [`Acks`]: for each update sent with a waiter, which (generation,
//! slot) still owe an acknowledgement. A worker that ends owes nothing (its
//! replacement gets the whole table in its `Init`); an update nobody
//! acknowledges within [`ACK_TIMEOUT`] is dropped, and its waiter then sees
//! the channel closed. Bound: at most [`MAX_PENDING`] updates wait at once
//! (the oldest is dropped first); the manager waits on each answer before
//! it publishes the next, so one is the usual count.

use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// How long an update waits for every worker process.
pub(crate) const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// Most updates waiting at once.
pub(crate) const MAX_PENDING: usize = 64;

struct Pending {
    seq: u64,
    /// (generation, slot) that have not acknowledged yet.
    owed: Vec<(u64, usize)>,
    done: Sender<()>,
    deadline: Instant,
}

/// Updates waiting for acknowledgements.
#[derive(Default)]
pub(crate) struct Acks {
    next: u64,
    pending: Vec<Pending>,
}

impl Acks {
    /// The number to send the next update with.
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Update `seq` went to `owed`; tell `done` once all of them have it
    /// (at once when none was sent one).
    pub(crate) fn wait(
        &mut self,
        seq: u64,
        owed: Vec<(u64, usize)>,
        done: Sender<()>,
        now: Instant,
    ) {
        if owed.is_empty() {
            let _ = done.send(());
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
        }
        self.pending.push(Pending {
            seq,
            owed,
            done,
            deadline: now + ACK_TIMEOUT,
        });
    }

    /// Worker (`generation`, `slot`) applied update `seq`.
    pub(crate) fn answered(&mut self, generation: u64, slot: usize, seq: u64) {
        if let Some(p) = self.pending.iter_mut().find(|p| p.seq == seq) {
            p.owed.retain(|&w| w != (generation, slot));
        }
        self.settle();
    }

    /// Worker (`generation`, `slot`) ended: it owes nothing.
    pub(crate) fn ended(&mut self, generation: u64, slot: usize) {
        for p in &mut self.pending {
            p.owed.retain(|&w| w != (generation, slot));
        }
        self.settle();
    }

    /// Drop what waited past its deadline (its waiter sees the channel
    /// closed).
    pub(crate) fn expire(&mut self, now: Instant) {
        self.pending.retain(|p| now < p.deadline);
    }

    /// Updates still waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.pending.len()
    }

    fn settle(&mut self) {
        self.pending.retain(|p| {
            if p.owed.is_empty() {
                let _ = p.done.send(());
                false
            } else {
                true
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, TryRecvError};

    #[test]
    fn done_once_every_worker_answered_or_ended() {
        let mut acks = Acks::default();
        let now = Instant::now();
        let (tx, rx) = channel();
        let seq = acks.next_seq();
        acks.wait(seq, vec![(1, 0), (1, 1), (2, 0)], tx, now);
        acks.answered(1, 0, seq);
        // Another update's number, or another worker's, settles nothing.
        acks.answered(1, 1, seq + 1);
        acks.answered(3, 1, seq);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        acks.ended(2, 0);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        acks.answered(1, 1, seq);
        assert_eq!(rx.try_recv(), Ok(()));
        assert_eq!(acks.waiting(), 0);
    }

    #[test]
    fn nobody_to_wait_for_is_done_at_once() {
        let mut acks = Acks::default();
        let (tx, rx) = channel();
        let seq = acks.next_seq();
        acks.wait(seq, Vec::new(), tx, Instant::now());
        assert_eq!(rx.try_recv(), Ok(()));
        assert_eq!(acks.waiting(), 0);
    }

    #[test]
    fn an_unanswered_update_expires_and_closes_its_waiter() {
        let mut acks = Acks::default();
        let now = Instant::now();
        let (tx, rx) = channel();
        let seq = acks.next_seq();
        acks.wait(seq, vec![(1, 0)], tx, now);
        acks.expire(now + ACK_TIMEOUT / 2);
        assert_eq!(acks.waiting(), 1);
        acks.expire(now + ACK_TIMEOUT);
        assert_eq!(acks.waiting(), 0);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    #[test]
    fn no_more_than_max_pending_wait() {
        let mut acks = Acks::default();
        let now = Instant::now();
        let mut waiters = Vec::new();
        for _ in 0..MAX_PENDING + 10 {
            let (tx, rx) = channel();
            let seq = acks.next_seq();
            acks.wait(seq, vec![(1, 0)], tx, now);
            waiters.push(rx);
        }
        assert_eq!(acks.waiting(), MAX_PENDING);
        // The oldest were dropped.
        assert_eq!(waiters[0].try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(
            waiters[MAX_PENDING + 9].try_recv(),
            Err(TryRecvError::Empty)
        );
    }
}
