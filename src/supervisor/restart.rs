//! The restart budget: when a crashed worker is replaced, and when the
//! server gives up.
//!
//! Owns: the deaths of each slot within the restart window and the backoff
//! before a replacement (50 ms doubling, at most 0.8 s). More than
//! `max_restarts` deaths of one slot within `restart_window` is a crash
//! loop: the server stops rather than flap. `Machine::crashed` and
//! `Machine::replace_crashed` (`machine/restarting.rs`) apply it: a crashed slot waits out
//! its backoff, then a replacement is spawned on the same sockets, and the
//! host counts the restart by its [`Cause`] (`servery_worker_restarts_total`
//! with `reason="crash"` or `reason="beat_timeout"`: a restart is counted
//! when its replacement starts, so a death that ends in a crash loop, or a
//! replacement that could not be spawned, counts none). What counts as a
//! crash (a death nobody asked for, in the serving generation) is the
//! machine's call.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::generation::Rules;
pub(crate) use super::types::Cause;
use super::types::Death;
use super::Error;

/// Crash times per slot.
#[derive(Debug, Default)]
pub(crate) struct Restarts {
    deaths: Vec<VecDeque<Instant>>,
}

/// First backoff; it doubles with each death in the window.
const BACKOFF_FIRST: Duration = Duration::from_millis(50);
/// Most doublings: 0.8 s, short enough that a slot killed every second
/// (a flapping node's worst case) is back before its next death.
const BACKOFF_DOUBLINGS: u32 = 4;

/// Backoff before replacing a worker after its `deaths`-th recent death.
fn backoff(deaths: usize) -> Duration {
    let doublings = (deaths.max(1) - 1).min(BACKOFF_DOUBLINGS as usize) as u32;
    BACKOFF_FIRST * (1 << doublings)
}

impl Restarts {
    /// Count a crash of `slot` at `now`: the delay before its replacement,
    /// or the crash loop that stops the server.
    pub(crate) fn crashed(
        &mut self,
        slot: usize,
        death: Death,
        now: Instant,
        rules: &Rules,
    ) -> Result<Duration, Error> {
        while self.deaths.len() <= slot {
            self.deaths.push(VecDeque::new());
        }
        let log = &mut self.deaths[slot];
        log.push_back(now);
        while log
            .front()
            .is_some_and(|t| now.duration_since(*t) > rules.restart_window)
        {
            log.pop_front();
        }
        if log.len() > rules.max_restarts {
            return Err(Error::CrashLoop {
                worker: slot,
                deaths: log.len(),
                window_s: rules.restart_window.as_secs(),
                last: death,
            });
        }
        Ok(backoff(log.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(max: usize, window_s: u64) -> Rules {
        let s = Duration::from_secs(1);
        Rules {
            workers: 1,
            startup_timeout: s,
            drain_timeout: s,
            force_timeout: s,
            max_restarts: max,
            restart_window: Duration::from_secs(window_s),
            beat_interval: s,
            beat_timeout: s,
        }
    }

    #[test]
    fn backoff_doubles_from_50_ms_to_at_most_800_ms() {
        let ms: Vec<u128> = (1..=7).map(|d| backoff(d).as_millis()).collect();
        assert_eq!(ms, [50, 100, 200, 400, 800, 800, 800]);
    }

    #[test]
    fn more_deaths_than_the_budget_within_the_window_is_a_crash_loop() {
        let t0 = Instant::now();
        let r = rules(2, 60);
        let mut budget = Restarts::default();
        let kill = Death::Signal(9);
        assert!(budget.crashed(0, kill, t0, &r).is_ok());
        assert!(budget
            .crashed(0, kill, t0 + Duration::from_secs(1), &r)
            .is_ok());
        match budget.crashed(0, kill, t0 + Duration::from_secs(2), &r) {
            Err(Error::CrashLoop {
                worker: 0,
                deaths: 3,
                window_s: 60,
                ..
            }) => {}
            other => panic!("expected a crash loop, got {other:?}"),
        }
    }

    #[test]
    fn deaths_older_than_the_window_are_forgotten() {
        let t0 = Instant::now();
        let r = rules(1, 10);
        let mut budget = Restarts::default();
        let code = Death::Code(1);
        assert!(budget.crashed(0, code, t0, &r).is_ok());
        assert_eq!(
            budget
                .crashed(0, code, t0 + Duration::from_secs(11), &r)
                .ok(),
            Some(BACKOFF_FIRST)
        );
    }

    #[test]
    fn slots_have_separate_budgets() {
        let t0 = Instant::now();
        let r = rules(1, 60);
        let mut budget = Restarts::default();
        let code = Death::Code(1);
        assert!(budget.crashed(0, code, t0, &r).is_ok());
        assert!(budget.crashed(1, code, t0, &r).is_ok());
        assert!(budget.crashed(0, code, t0, &r).is_err());
    }
}
