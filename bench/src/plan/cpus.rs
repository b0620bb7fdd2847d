//! CPU lists in the `taskset -c` / cpuset syntax: `1`, `2-3,8`.

use std::fmt;
use std::str::FromStr;

use super::Error;

/// A non-empty list of CPU ids, in the order given (duplicates kept: `1,1` puts two workers
/// on CPU 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet(Vec<usize>);

impl CpuSet {
    /// The set of `ids`, or `None` when `ids` is empty.
    pub fn from_ids(ids: Vec<usize>) -> Option<CpuSet> {
        (!ids.is_empty()).then_some(CpuSet(ids))
    }

    pub fn ids(&self) -> &[usize] {
        &self.0
    }

    /// The CPU for worker `i`: workers wrap around the list.
    pub fn for_worker(&self, i: usize) -> usize {
        self.0[i % self.0.len()]
    }
}

/// The `taskset -c` form, runs of consecutive ids collapsed: `[0, 1, 2, 5]` is `0-2,5`.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0.as_slice();
        let mut sep = "";
        while let Some((&lo, _)) = rest.split_first() {
            // The run is as long as each id is one more than the one before.
            let len = 1 + rest
                .windows(2)
                .take_while(|pair| pair[1] == pair[0] + 1)
                .count();
            let hi = rest[len - 1];
            if len == 1 {
                write!(f, "{sep}{lo}")?;
            } else {
                write!(f, "{sep}{lo}-{hi}")?;
            }
            sep = ",";
            rest = &rest[len..];
        }
        Ok(())
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
    fn displays_as_taskset_lists() {
        let show = |ids: Vec<usize>| CpuSet::from_ids(ids).expect("non-empty").to_string();
        assert_eq!(show(vec![3]), "3");
        assert_eq!(show(vec![0, 1, 2, 5]), "0-2,5");
        assert_eq!(show(vec![4, 6, 7, 1]), "4,6-7,1");
        assert!(CpuSet::from_ids(Vec::new()).is_none());
        let set: CpuSet = "2-3,8".parse().expect("ok");
        assert_eq!(set.to_string().parse::<CpuSet>().expect("ok"), set);
    }

    #[test]
    fn rejects_bad_lists() {
        for bad in ["", "a", "3-2", "1,", "-1", "0-99999"] {
            assert!(bad.parse::<CpuSet>().is_err(), "{bad:?} accepted");
        }
    }
}
