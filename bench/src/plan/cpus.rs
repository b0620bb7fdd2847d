//! CPU lists in the `taskset -c` / cpuset syntax: `1`, `2-3,8`.

use std::str::FromStr;

use super::Error;

/// A non-empty list of CPU ids, in the order given (duplicates kept: `1,1` puts two workers
/// on CPU 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet(Vec<usize>);

impl CpuSet {
    pub fn ids(&self) -> &[usize] {
        &self.0
    }

    /// The CPU for worker `i`: workers wrap around the list.
    pub fn for_worker(&self, i: usize) -> usize {
        self.0[i % self.0.len()]
    }
}

impl FromStr for CpuSet {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Error> {
        let bad = || Error::Cpus {
            spec: spec.to_string(),
        };
        let mut ids = Vec::new();
        for part in spec.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo, hi),
                None => (part, part),
            };
            let lo: usize = lo.trim().parse().map_err(|_| bad())?;
            let hi: usize = hi.trim().parse().map_err(|_| bad())?;
            // A cap keeps a typo like `0-99999999` from allocating a huge list.
            if lo > hi || hi - lo > 4096 {
                return Err(bad());
            }
            ids.extend(lo..=hi);
        }
        if ids.is_empty() {
            return Err(bad());
        }
        Ok(CpuSet(ids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_ranges_and_lists() {
        assert_eq!("1".parse::<CpuSet>().expect("ok").ids(), [1]);
        assert_eq!("2-3,8".parse::<CpuSet>().expect("ok").ids(), [2, 3, 8]);
        let set: CpuSet = "4-5".parse().expect("ok");
        assert_eq!(set.for_worker(0), 4);
        assert_eq!(set.for_worker(3), 5);
    }

    #[test]
    fn rejects_bad_lists() {
        for bad in ["", "a", "3-2", "1,", "-1", "0-99999"] {
            assert!(bad.parse::<CpuSet>().is_err(), "{bad:?} accepted");
        }
    }
}
