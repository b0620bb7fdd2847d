//! How the supervisor runs and stops workers: `--isolation`,
//! `--child-watch`, the startup, drain and force deadlines, crash-loop
//! limits and health beats.
//!
//! Owns [`Isolation`], [`ChildWatchChoice`], those defaults, and the one
//! cross-field rule among them: the force deadline comes after the drain
//! deadline (both count from the start of shutdown). Does not own applying
//! them (`supervisor`).

use std::time::Duration;

use super::raw::field;
use super::setting::{seconds, DAY};
use super::Error;
use crate::choice::choice;

/// Whole-generation startup bound: runtimes build in milliseconds, so ten
/// seconds only trips on a wedged worker.
pub const DEFAULT_STARTUP_TIMEOUT_S: f64 = 10.0;
/// In-flight requests get this long to finish after SIGTERM (nginx's
/// `worker_shutdown_timeout` is unset by default; ours is bounded).
pub const DEFAULT_DRAIN_TIMEOUT_S: f64 = 30.0;
/// From the start of shutdown until workers still alive are abandoned and
/// reported; must exceed the drain timeout. Left out, it stays this far
/// (5 s) past whatever drain timeout is given.
pub const DEFAULT_FORCE_TIMEOUT_S: f64 = 35.0;
/// A crash loop gives up after this many restarts in the window.
pub const DEFAULT_MAX_RESTARTS: u64 = 5;
/// The crash-loop window.
pub const DEFAULT_RESTART_WINDOW_S: f64 = 60.0;
/// A beat a second finds a wedged worker within a few seconds.
pub const DEFAULT_BEAT_INTERVAL_S: f64 = 1.0;
/// A healthy event loop answers a beat in microseconds; a second is slack.
pub const DEFAULT_BEAT_TIMEOUT_S: f64 = 1.0;
/// Threads start fastest and suit development, tests and embedding; process
/// isolation (a fault stays in its worker) is the production opt-in
/// (docs/operations.md).
pub const DEFAULT_ISOLATION: Isolation = Isolation::Thread;
/// pidfds where the kernel has them (5.3+), SIGCHLD otherwise.
pub const DEFAULT_CHILD_WATCH: ChildWatchChoice = ChildWatchChoice::Auto;

choice! {
    /// Workers as threads or processes.
    pub enum Isolation {
        /// Pinned threads of the one `servery` process.
        Thread = "thread",
        /// Processes of their own (`servery worker`), so a fault stays in
        /// its worker.
        Process = "process",
    }
}

choice! {
    /// How worker processes are watched.
    pub enum ChildWatchChoice {
        /// pidfds where the kernel has them, else SIGCHLD.
        Auto = "auto",
        /// pidfds (pidfd_open(2), Linux 5.3) or fail.
        Pidfd = "pidfd",
        /// SIGCHLD.
        Sigchld = "sigchld",
    }
}

/// `--force-timeout`: as given, else the drain timeout as written plus the
/// default margin; either way longer than `drain`.
pub(super) fn force_timeout(
    given: Option<Duration>,
    drain_written: Option<f64>,
    drain: Duration,
) -> Result<Duration, Error> {
    let force = match given {
        Some(force) => force,
        None => {
            let margin = DEFAULT_FORCE_TIMEOUT_S - DEFAULT_DRAIN_TIMEOUT_S;
            let drain = drain_written.unwrap_or(DEFAULT_DRAIN_TIMEOUT_S);
            seconds(DAY)(field::force_timeout, (drain + margin).min(DAY))?
        }
    };
    if force <= drain {
        return Err(field::force_timeout.invalid(format!(
            "{}s must be longer than --drain-timeout {}s (it counts from the same start)",
            force.as_secs_f64(),
            drain.as_secs_f64()
        )));
    }
    Ok(force)
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{err, raw, set};
    use crate::config::RawConfig;
    use crate::config::Seconds;

    #[test]
    fn force_must_exceed_drain() {
        let r = RawConfig {
            drain_timeout: Some(Seconds(5.0)),
            force_timeout: Some(Seconds(5.0)),
            ..raw()
        };
        assert!(err(r).starts_with("--force-timeout"));
        let r = RawConfig {
            drain_timeout: Some(Seconds(1.0)),
            ..raw()
        };
        let c = r.validate_with(&set(&[0]), &[0]).unwrap();
        assert!(c.conn.force_timeout > c.conn.drain_timeout);
    }

    #[test]
    fn force_left_out_follows_the_drain_and_stops_at_a_day() {
        let r = RawConfig {
            drain_timeout: Some(Seconds(0.1)),
            ..raw()
        };
        let c = r.validate_with(&set(&[0]), &[0]).unwrap();
        assert_eq!(c.conn.force_timeout.as_secs_f64(), 5.1);
        let r = RawConfig {
            drain_timeout: Some(Seconds(86_399.0)),
            ..raw()
        };
        let c = r.validate_with(&set(&[0]), &[0]).unwrap();
        assert_eq!(c.conn.force_timeout.as_secs_f64(), 86_400.0);
    }
}
