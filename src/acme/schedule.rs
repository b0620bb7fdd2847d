//! When to act: the renewal time of a certificate and the delay after
//! failures. Pure arithmetic, plus the jitter's few random bytes.

use std::time::{Duration, SystemTime};

/// How much a retry delay may grow by jitter, in percent: retries of many
/// servers that failed together (a CA outage) spread out instead of arriving
/// at once.
const JITTER_PERCENT: u32 = 10;

/// When to renew a certificate valid from `not_before` to `not_after`: after
/// two-thirds of its lifetime (Let's Encrypt's advice for 90-day
/// certificates: renew with 30 days left). A certificate whose dates are
/// inverted is due at `not_before`.
pub fn renew_at(not_before: SystemTime, not_after: SystemTime) -> SystemTime {
    match not_after.duration_since(not_before) {
        Ok(life) => not_before + life * 2 / 3,
        Err(_) => not_before,
    }
}

/// The delay before the next try after `failures` failures in a row:
/// `min`, doubled per further failure, capped at `max`, then lengthened by a
/// random jitter of at most 10 % (still capped at `max`). Never below `min`
/// (unless `max` is smaller), never above `max`; `failures` 0 counts as 1.
pub fn backoff(failures: u32, min: Duration, max: Duration) -> Duration {
    let max = max.max(min);
    let doublings = failures.saturating_sub(1).min(32);
    let base = min
        .checked_mul(1u32 << doublings.min(31))
        .unwrap_or(max)
        .min(max);
    let jitter = base * jitter_percent() / 100;
    (base + jitter).min(max)
}

/// A random number in `0..=JITTER_PERCENT`; 0 if the system has no
/// randomness to give (no jitter is still a correct delay).
fn jitter_percent() -> u32 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 4];
    match ring::rand::SystemRandom::new().fill(&mut b) {
        Ok(()) => u32::from_le_bytes(b) % (JITTER_PERCENT + 1),
        Err(_) => 0,
    }
}

/// How long from `now` until `at` (zero if it has passed).
pub(super) fn until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn renews_after_two_thirds_of_the_lifetime() {
        let nb = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let day = Duration::from_secs(86_400);
        assert_eq!(renew_at(nb, nb + 90 * day), nb + 60 * day);
        assert_eq!(renew_at(nb, nb + 12 * S), nb + 8 * S);
        assert_eq!(renew_at(nb, nb), nb);
        assert_eq!(renew_at(nb + S, nb), nb + S);
    }

    #[test]
    fn backoff_doubles_from_min() {
        let (min, max) = (60 * S, 86_400 * S);
        for (failures, base) in [(0, 60), (1, 60), (2, 120), (3, 240), (5, 960)] {
            let d = backoff(failures, min, max);
            let base = base * S;
            assert!(d >= base && d <= base + base / 10, "{failures}: {d:?}");
        }
    }

    #[test]
    fn backoff_is_capped_at_max_and_never_below_min() {
        let (min, max) = (60 * S, 3_600 * S);
        for failures in [7, 8, 30, 31, 32, 33, 1_000, u32::MAX] {
            let d = backoff(failures, min, max);
            assert!(d <= max && d >= max * 9 / 10, "{failures}: {d:?}");
        }
        for failures in 0..40 {
            let d = backoff(failures, min, max);
            assert!(d >= min && d <= max, "{failures}: {d:?}");
        }
        // A max below min: min wins, exactly.
        assert_eq!(backoff(5, 10 * S, S), 10 * S);
    }

    #[test]
    fn backoff_jitter_is_bounded_and_varies() {
        let seen: std::collections::HashSet<_> =
            (0..200).map(|_| backoff(1, 100 * S, 1_000 * S)).collect();
        assert!(seen.iter().all(|d| *d >= 100 * S && *d <= 110 * S));
        assert!(seen.len() > 1, "no jitter at all: {seen:?}");
    }

    #[test]
    fn until_is_zero_in_the_past() {
        let t = SystemTime::UNIX_EPOCH + 10 * S;
        assert_eq!(until(t, t + S), Duration::ZERO);
        assert_eq!(until(t + 3 * S, t), 3 * S);
    }
}
