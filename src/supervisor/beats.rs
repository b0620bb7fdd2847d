//! Health beats: is each serving worker's event loop still turning?
//!
//! Owns: the beat clock ([`Beats`]: sequence number and next send) and one
//! ready slot's beat ([`Beat`]: the outstanding number and consecutive
//! misses), with the rule: every `beat_interval` a serving worker is sent
//! `Beat(n)`; a reply with the outstanding number clears it; a beat
//! unanswered for `beat_timeout` is a miss; two misses in a row and the
//! worker is wedged (a process is killed, and restarted as a crash; a
//! thread cannot be killed and is reported once). `Machine::beat`
//! (`machine/beating.rs`) applies the rule to the current generation's
//! ready slots.

use std::time::{Duration, Instant};

/// Consecutive misses that make a worker wedged.
const MISSES_TO_WEDGED: u32 = 2;

/// The beat clock of the current generation.
#[derive(Debug)]
pub(crate) struct Beats {
    seq: u64,
    next_at: Instant,
}

/// One serving worker's beat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Beat {
    /// The number sent and when, until answered.
    outstanding: Option<(u64, Instant)>,
    missed: u32,
    /// The supervisor killed the worker for missing beats: its death is a
    /// beat timeout, not a crash.
    killed: bool,
}

/// What to do with one worker at a beat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Send `Beat(n)`.
    Send(u64),
    /// Its last beat is still within the timeout: nothing to send.
    Wait,
    /// Two misses in a row: wedged. `first` is true the first time.
    Wedged { first: bool },
}

impl Beats {
    pub(crate) fn new(now: Instant) -> Beats {
        Beats {
            seq: 0,
            next_at: now,
        }
    }

    pub(crate) fn next_at(&self) -> Instant {
        self.next_at
    }

    /// At or past the next beat: advance the clock and return its number.
    pub(crate) fn due(&mut self, now: Instant, interval: Duration) -> Option<u64> {
        if now < self.next_at {
            return None;
        }
        self.next_at = now + interval;
        self.seq += 1;
        Some(self.seq)
    }
}

impl Beat {
    /// A beat `seq` at `now`: count a miss if the outstanding one is past
    /// `timeout`, then decide.
    pub(crate) fn tick(&mut self, seq: u64, now: Instant, timeout: Duration) -> Verdict {
        if let Some((_, sent)) = self.outstanding {
            if now.duration_since(sent) >= timeout {
                self.missed += 1;
            }
        }
        if self.missed >= MISSES_TO_WEDGED {
            return Verdict::Wedged {
                first: self.missed == MISSES_TO_WEDGED,
            };
        }
        if self.outstanding.is_none() || self.missed > 0 {
            self.outstanding = Some((seq, now));
            return Verdict::Send(seq);
        }
        Verdict::Wait
    }

    /// A reply: clears the beat if it answers the outstanding one.
    pub(crate) fn answered(&mut self, seq: u64) {
        if self.outstanding.is_some_and(|(s, _)| s == seq) {
            self.outstanding = None;
            self.missed = 0;
        }
    }

    /// After killing a wedged worker: start counting afresh, and remember
    /// why it is about to die.
    pub(crate) fn killed(&mut self) {
        *self = Beat {
            killed: true,
            ..Beat::default()
        };
    }

    /// Whether the supervisor killed the worker for missing beats.
    pub(crate) fn was_killed(&self) -> bool {
        self.killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn an_answered_beat_is_sent_again_at_the_next_interval() {
        let t0 = Instant::now();
        let mut clock = Beats::new(t0);
        let mut beat = Beat::default();
        let n = clock.due(t0, S).expect("first beat due at once");
        assert_eq!(beat.tick(n, t0, S), Verdict::Send(1));
        assert_eq!(clock.due(t0 + S / 2, S), None);
        beat.answered(1);
        let n = clock.due(t0 + S, S).expect("due after an interval");
        assert_eq!(beat.tick(n, t0 + S, S), Verdict::Send(2));
    }

    #[test]
    fn two_missed_beats_make_a_worker_wedged_once() {
        let t0 = Instant::now();
        let mut beat = Beat::default();
        assert_eq!(beat.tick(1, t0, S), Verdict::Send(1));
        // Unanswered past the timeout: a miss, and a fresh beat.
        assert_eq!(beat.tick(2, t0 + S, S), Verdict::Send(2));
        assert_eq!(beat.tick(3, t0 + 2 * S, S), Verdict::Wedged { first: true });
        assert_eq!(
            beat.tick(4, t0 + 3 * S, S),
            Verdict::Wedged { first: false }
        );
    }

    #[test]
    fn a_late_reply_to_an_old_beat_does_not_clear_the_new_one() {
        let t0 = Instant::now();
        let mut beat = Beat::default();
        beat.tick(1, t0, S);
        beat.tick(2, t0 + S, S);
        beat.answered(1);
        assert_eq!(beat.tick(3, t0 + 2 * S, S), Verdict::Wedged { first: true });
    }

    #[test]
    fn a_beat_within_its_timeout_is_not_resent() {
        let t0 = Instant::now();
        let mut beat = Beat::default();
        beat.tick(1, t0, 3 * S);
        assert_eq!(beat.tick(2, t0 + S, 3 * S), Verdict::Wait);
    }
}
