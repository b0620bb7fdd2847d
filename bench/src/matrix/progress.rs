//! The live progress line on stderr: which point and trial is running and how long the rest
//! should take. On a terminal the line is redrawn in place; otherwise (a log file, CI) each
//! update is its own line.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

pub struct Progress {
    total: usize,
    done: usize,
    started: Instant,
    /// Guess for one trial before any has finished: warm-up, window and a start/stop.
    first_guess: Duration,
    tty: bool,
}

impl Progress {
    pub fn new(total: usize, first_guess: Duration) -> Progress {
        Progress {
            total,
            done: 0,
            started: Instant::now(),
            first_guess,
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// Time left if the remaining trials take as long as the finished ones did on average.
    pub fn eta(&self) -> Duration {
        let left = self.total.saturating_sub(self.done) as u32;
        if self.done == 0 {
            self.first_guess * left
        } else {
            self.started.elapsed() / self.done as u32 * left
        }
    }

    /// Shows that trial `done + 1` of the run, described by `what`, is starting.
    pub fn begin(&self, what: &str) {
        let line = format!(
            "[{}/{}] {what}, ETA {}",
            (self.done + 1).min(self.total),
            self.total,
            clock(self.eta())
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }

    pub fn finish_one(&mut self) {
        self.done += 1;
    }

    /// Ends the line (on a terminal) and says how long the whole run took.
    pub fn close(&self) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(
            err,
            "matrix: {} trials in {}",
            self.done,
            clock(self.started.elapsed())
        );
    }
}

/// `1h02m03s`, `4m05s`, `7s`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_uses_the_guess_then_the_average() {
        let mut p = Progress::new(10, Duration::from_secs(5));
        assert_eq!(p.eta(), Duration::from_secs(50));
        p.finish_one();
        assert!(p.eta() < Duration::from_secs(1));
    }

    #[test]
    fn clock_format() {
        assert_eq!(clock(Duration::from_secs(7)), "7s");
        assert_eq!(clock(Duration::from_secs(245)), "4m05s");
        assert_eq!(clock(Duration::from_secs(3723)), "1h02m03s");
    }
}
