//! CPU affinity: which CPUs this process may use, and pinning a thread.

use std::io;

use nix::sched::{sched_getaffinity, CpuSet as NixCpuSet};
use nix::unistd::Pid;

use crate::config::CpuSet;

/// The CPUs this process may run on (its affinity mask: taskset, cgroups).
pub fn allowed_cpus() -> io::Result<CpuSet> {
    let mask = sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)?;
    let cpus = (0..NixCpuSet::count())
        .filter(|&c| mask.is_set(c).unwrap_or(false))
        .collect();
    Ok(CpuSet(cpus))
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
