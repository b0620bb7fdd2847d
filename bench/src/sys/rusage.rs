//! CPU time consumed by the calling thread, from getrusage(2) with `RUSAGE_THREAD`
//! (Linux ≥ 2.6.26). The engine sums it over workers to report the client's own CPU cost
//! for exactly the timed window, excluding validation and the main thread's idle waiting.

use std::io;
use std::mem::MaybeUninit;
use std::time::Duration;

/// User plus system CPU time the calling thread has used so far.
pub(crate) fn thread_cpu() -> io::Result<Duration> {
    let mut usage = MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `usage` points to writable memory of the size getrusage(2) fills in; the call
    // has no other memory effects.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getrusage returned 0, so the kernel initialised the whole struct.
    let usage = unsafe { usage.assume_init() };
    Ok(timeval(usage.ru_utime) + timeval(usage.ru_stime))
}

fn timeval(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u32::try_from(tv.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(u64::from(micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_grows_with_work() {
        let before = thread_cpu().expect("getrusage");
        let mut x = 0u64;
        let spin_until = std::time::Instant::now() + Duration::from_millis(30);
        while std::time::Instant::now() < spin_until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = thread_cpu().expect("getrusage");
        assert!(after > before, "{after:?} <= {before:?}");
    }
}
