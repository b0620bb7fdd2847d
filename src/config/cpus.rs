//! CPU lists and the physical-core topology.
//!
//! Workers are pinned one per physical core by default: SMT siblings share a
//! core's execution units, so a second worker on a sibling adds little and
//! makes per-core numbers lie. The topology comes from
//! `/sys/devices/system/cpu/cpuN/topology` and is intersected with the
//! process's affinity mask (taskset, cgroups), so a restricted process never
//! pins outside what it was given.

use std::collections::BTreeSet;

pub use crate::sys::affinity::{join, CpuSet};

/// The largest CPU number accepted in a list (the kernel's NR_CPUS ceiling).
const MAX_CPU: usize = 8191;

/// Parse a list like `0,2,4-6` into CPU numbers in the order given.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!("empty item in CPU list {s:?}"));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (parse_cpu(a)?, parse_cpu(b)?),
            None => {
                let c = parse_cpu(part)?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(format!("range {part} runs backwards; write {hi}-{lo}"));
        }
        for c in lo..=hi {
            if out.contains(&c) {
                return Err(format!("cpu {c} is listed twice"));
            }
            out.push(c);
        }
    }
    Ok(out)
}

fn parse_cpu(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(c) if c <= MAX_CPU => Ok(c),
        _ => Err(format!("{s:?} is not a CPU number (0..={MAX_CPU})")),
    }
}

/// The first logical CPU of each physical core within `allowed`, in order.
pub fn physical_cores(allowed: &CpuSet) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    let mut firsts = Vec::new();
    for &cpu in &allowed.0 {
        let key = core_key(cpu).unwrap_or((usize::MAX, cpu));
        if seen.insert(key) {
            firsts.push(cpu);
        }
    }
    firsts
}

/// (package, core) of a logical CPU, from sysfs; `None` where not exposed.
fn core_key(cpu: usize) -> Option<(usize, usize)> {
    let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
    let read = |f: &str| -> Option<usize> {
        std::fs::read_to_string(format!("{base}/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("physical_package_id")?, read("core_id")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!(parse_list("0,2,4-6").unwrap(), vec![0, 2, 4, 5, 6]);
        assert_eq!(parse_list(" 3 ").unwrap(), vec![3]);
    }

    #[test]
    fn rejects_bad_lists() {
        assert!(parse_list("").is_err());
        assert!(parse_list("1,,2").is_err());
        assert!(parse_list("5-2").is_err());
        assert!(parse_list("a").is_err());
        assert!(parse_list("1,1").is_err());
        assert!(parse_list("99999").is_err());
    }

    #[test]
    fn physical_cores_are_a_subset_of_allowed() {
        let allowed = CpuSet([0usize, 1].into_iter().collect());
        let p = physical_cores(&allowed);
        assert!(!p.is_empty());
        assert!(p.iter().all(|c| allowed.0.contains(c)));
    }

    #[test]
    fn displays_like_a_set() {
        let s = CpuSet([0usize, 1].into_iter().collect());
        assert_eq!(s.to_string(), "{0,1}");
    }
}
