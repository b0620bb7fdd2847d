//! Counts in what servery prints: "1 worker", "2 workers".
//!
//! Owns [`count`]. A line an operator reads (the ready line, an error) says
//! "1 worker", not "1 workers"; both forms are given, so an irregular plural
//! ("1 process", "2 processes") needs no rule.

use std::fmt;

/// `n` and the noun that agrees with it; see [`count`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Count {
    n: usize,
    one: &'static str,
    many: &'static str,
}

/// `n` followed by `one` when `n` is 1 and by `many` otherwise (0 included:
/// "0 workers").
pub(crate) fn count(n: usize, one: &'static str, many: &'static str) -> Count {
    Count { n, one, many }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.n == 1 { self.one } else { self.many };
        write!(f, "{} {noun}", self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1, "worker", "workers").to_string(), "1 worker");
        assert_eq!(count(2, "worker", "workers").to_string(), "2 workers");
        assert_eq!(count(0, "worker", "workers").to_string(), "0 workers");
        assert_eq!(count(3, "time", "times").to_string(), "3 times");
    }
}
