//! What the matrix needs to watch and stop server processes: the clock-tick unit of
//! `/proc/PID/stat` CPU times (sysconf(3) `_SC_CLK_TCK`) and sending a signal (kill(2)).

use std::io;

/// Clock ticks per second, the unit of `utime`/`stime` in `/proc/PID/stat` (proc(5)).
/// Falls back to 100, the value on every mainstream Linux architecture, if sysconf fails.
pub(crate) fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf(3) takes a plain integer name and has no memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// Signals the matrix sends to servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Orderly shutdown (servery drains, nginx and h2o stop).
    Term,
    /// Last resort for a server that ignored `Term`.
    Kill,
}

/// Sends `signal` to process `pid`. Fails with ESRCH when the process is gone.
pub(crate) fn signal(pid: u32, signal: Signal) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; `pid` is positive,
    // so it names one process, never a process group or "every process".
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_ticks_are_positive() {
        assert!(clock_ticks_per_sec() > 0);
    }

    #[test]
    fn terminates_a_child_and_refuses_pid_zero() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        signal(child.id(), Signal::Term).expect("kill");
        let status = child.wait().expect("wait");
        assert!(!status.success());
        assert!(signal(0, Signal::Term).is_err());
    }
}
