//! How many workers run, on which CPUs, with which I/O driver: `--workers`,
//! `--cpus`, `--no-pin` and `--driver`.
//!
//! Owns the worker count (a number or `auto`), the CPU plan (one CPU per
//! worker, physical cores before SMT siblings, never outside this process's
//! CPU set) and `--driver`'s default (the choice itself,
//! [`DriverChoice`], is the worker's). Does not own CPU lists and the topology
//! (`cpus`) nor pinning itself (`sys::affinity`).

use std::num::NonZeroUsize;

use serde::{Deserialize, Serialize};

use super::cpus::{self, CpuSet};
use super::raw::{field, Checked};
use super::setting::{Echo, Field};
use super::Error;
pub use crate::worker::DriverChoice;

/// One worker per physical core of the process's CPU set: what the server is
/// for (thread per core), and what a first run should show; `1` is a choice.
pub const DEFAULT_WORKERS: &str = "auto";
/// io_uring where the kernel allows it, so the server starts anywhere.
pub const DEFAULT_DRIVER: DriverChoice = DriverChoice::Auto;
/// Most workers accepted (far above any core count we pin to).
const MAX_WORKERS: u64 = 1024;

/// A worker count as written: a number, or one per physical core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WorkerCount {
    Count(u64),
    Word(String),
}

impl std::str::FromStr for WorkerCount {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.parse::<u64>() {
            Ok(n) => WorkerCount::Count(n),
            Err(_) => WorkerCount::Word(s.to_owned()),
        })
    }
}

impl Echo<Option<WorkerCount>> for NonZeroUsize {
    fn echo(&self) -> Option<WorkerCount> {
        Some(WorkerCount::Count(self.get() as u64))
    }
}

/// A worker count as checked: `auto` is resolved against the CPUs later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workers {
    Auto,
    Count(NonZeroUsize),
}

/// `--workers`: a number in `1..=MAX_WORKERS`, or `auto`.
pub(crate) fn count(field: Field, w: WorkerCount) -> Result<Workers, Error> {
    match w {
        WorkerCount::Word(w) if w == "auto" => Ok(Workers::Auto),
        WorkerCount::Word(w) => {
            Err(field.invalid(format!("{w:?} is not a count; use a number or auto")))
        }
        WorkerCount::Count(n) if n > MAX_WORKERS => {
            Err(field.invalid(format!("{n} is above the limit of {MAX_WORKERS}")))
        }
        WorkerCount::Count(n) => NonZeroUsize::new(n as usize)
            .map(Workers::Count)
            .ok_or_else(|| field.invalid("0 workers would serve nothing; use 1 or more")),
    }
}

/// `--cpus`: a list like `0,2,4-6`.
pub(crate) fn cpu_list(field: Field, list: String) -> Result<Vec<usize>, Error> {
    cpus::parse_list(&list).map_err(|p| field.invalid(p))
}

impl Echo<Option<String>> for Option<Vec<usize>> {
    fn echo(&self) -> Option<String> {
        self.as_ref().map(|c| cpus::join(c.iter()))
    }
}

/// The worker count and the CPU of each worker (`None`: not pinned), within
/// the `allowed` CPUs whose `physical` cores are listed first.
pub(super) fn plan(
    c: &Checked,
    allowed: &CpuSet,
    physical: &[usize],
) -> Result<(NonZeroUsize, Option<Vec<usize>>), Error> {
    if let Some(list) = &c.cpus {
        if let Some(cpu) = list.iter().find(|cpu| !allowed.0.contains(cpu)) {
            return Err(field::cpus.invalid(format!(
                "cpu {cpu} is not in this process's CPU set {allowed}"
            )));
        }
        if c.no_pin {
            return Err(field::cpus.invalid("--cpus and --no-pin contradict; drop one"));
        }
    }
    let workers = match c.workers {
        Workers::Count(n) => n.get(),
        Workers::Auto => c.cpus.as_ref().map_or(physical.len().max(1), Vec::len),
    };
    let workers = NonZeroUsize::new(workers).unwrap_or(NonZeroUsize::MIN);
    if c.no_pin {
        return Ok((workers, None));
    }
    let pool = c.cpus.clone().unwrap_or_else(|| {
        // Physical cores first, then SMT siblings if more workers are asked.
        let mut v = physical.to_vec();
        v.extend(allowed.0.iter().filter(|c| !physical.contains(c)));
        v
    });
    if pool.len() < workers.get() {
        return Err(field::workers.invalid(format!(
            "{workers} pinned workers need {workers} CPUs but only {} ({}); \
             lower --workers, list more --cpus, or pass --no-pin",
            crate::plural::count(pool.len(), "is available", "are available"),
            cpus::join(pool.iter())
        )));
    }
    Ok((workers, Some(pool[..workers.get()].to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, raw, set};
    use crate::config::RawConfig;

    #[test]
    fn cpu_outside_set_names_the_set() {
        let r = RawConfig {
            cpus: Some("0,999".into()),
            ..raw()
        };
        assert_eq!(
            err(r),
            "--cpus: cpu 999 is not in this process's CPU set {0,1}"
        );
    }

    #[test]
    fn auto_workers_is_one_per_physical_core() {
        let r = RawConfig {
            workers: Some(WorkerCount::Word("auto".into())),
            ..raw()
        };
        // cpus 0-3 with 0/2 and 1/3 siblings: physical firsts are 0 and 1.
        let c = r.validate_with(&set(&[0, 1, 2, 3]), &[0, 1]).unwrap();
        assert_eq!(c.workers.get(), 2);
        assert_eq!(c.cpus, Some(vec![0, 1]));
    }

    #[test]
    fn auto_workers_with_a_cpu_list_is_one_per_listed_cpu() {
        let r = RawConfig {
            workers: Some(WorkerCount::Word("auto".into())),
            cpus: Some("1,3,2".into()),
            ..raw()
        };
        let c = r.validate_with(&set(&[0, 1, 2, 3]), &[0, 1]).unwrap();
        assert_eq!(c.workers.get(), 3);
        assert_eq!(c.cpus, Some(vec![1, 3, 2]));
    }

    #[test]
    fn too_many_pinned_workers_is_refused() {
        let r = RawConfig {
            workers: Some(WorkerCount::Count(3)),
            ..raw()
        };
        assert!(err(r)
            .starts_with("--workers: 3 pinned workers need 3 CPUs but only 2 are available (0,1)"));
        let two = RawConfig {
            workers: Some(WorkerCount::Count(2)),
            ..raw()
        };
        let e = two.validate_with(&set(&[0]), &[0]).unwrap_err().to_string();
        assert!(e.contains("need 2 CPUs but only 1 is available (0)"), "{e}");
        let r = RawConfig {
            workers: Some(WorkerCount::Count(3)),
            no_pin: true,
            ..raw()
        };
        assert!(r
            .validate_with(&set(&[0, 1]), &[0, 1])
            .unwrap()
            .cpus
            .is_none());
    }

    #[test]
    fn cpus_and_no_pin_contradict() {
        let r = RawConfig {
            cpus: Some("0".into()),
            no_pin: true,
            ..raw()
        };
        assert_eq!(err(r), "--cpus: --cpus and --no-pin contradict; drop one");
    }

    #[test]
    fn counts_that_serve_nothing_or_too_much_are_refused() {
        for (w, problem) in [
            (
                WorkerCount::Count(0),
                "0 workers would serve nothing; use 1 or more",
            ),
            (WorkerCount::Count(1025), "1025 is above the limit of 1024"),
            (
                WorkerCount::Word("lots".into()),
                "\"lots\" is not a count; use a number or auto",
            ),
        ] {
            let r = RawConfig {
                workers: Some(w),
                no_pin: true,
                ..raw()
            };
            assert_eq!(err(r), format!("--workers: {problem}"));
        }
    }
}
