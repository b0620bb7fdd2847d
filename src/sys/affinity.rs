//! CPU affinity: which CPUs this process may use ([`CpuSet`]), pinning a
//! thread, and giving a thread a whole set back. The set type lives here, with the syscall that yields it;
//! `config` validates CPU lists against it.

use std::collections::BTreeSet;
use std::fmt;
use std::io;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet as NixCpuSet};
use nix::unistd::Pid;

/// A set of logical CPU numbers, printed like `{0,1}` in errors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuSet(pub BTreeSet<usize>);

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", join(self.0.iter()))
    }
}

/// Join CPU numbers with commas: `0,1,2`.
pub fn join<'a>(cpus: impl Iterator<Item = &'a usize>) -> String {
    cpus.map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// The CPUs this process may run on (its affinity mask: taskset, cgroups).
pub fn allowed_cpus() -> io::Result<CpuSet> {
    let mask = sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)?;
    let cpus = (0..NixCpuSet::count())
        .filter(|&c| mask.is_set(c).unwrap_or(false))
        .collect();
    Ok(CpuSet(cpus))
}

/// Let the calling thread run on any CPU of `cpus` (a helper thread started
/// by a pinned worker inherits the worker's one CPU otherwise).
pub fn run_current_thread_on(cpus: &CpuSet) -> io::Result<()> {
    let mut mask = NixCpuSet::new();
    for &cpu in &cpus.0 {
        mask.set(cpu).map_err(io::Error::from)?;
    }
    // pid 0: the calling thread (sched_setaffinity(2)).
    sched_setaffinity(Pid::from_raw(0), &mask).map_err(io::Error::from)
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "sched_setaffinity to cpu {cpu} failed"
        )))
    }
}
