//! Thread scheduling priority: a background thread that must yield to the
//! workers (the on-the-fly compressor) lowers its own nice value.

use std::io;

/// Raise the calling thread's nice value by `increment` (lower priority).
/// On Linux a thread has a nice value of its own: `setpriority(2)` with
/// `PRIO_PROCESS` and who = 0 changes the calling thread only (NOTES of
/// setpriority(2) and sched(7): "the nice value is a per-thread attribute").
pub fn lower_current_thread(increment: i32) -> io::Result<()> {
    // SAFETY: setpriority takes plain integers and touches no memory of ours;
    // who = 0 names the calling thread, which exists.
    let current = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let target = (current + increment).clamp(-20, 19);
    // SAFETY: as above.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, target) };
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
    fn lowering_a_thread_leaves_the_others_alone() {
        let before = nix_nice();
        let lowered = std::thread::spawn(|| {
            lower_current_thread(3).unwrap();
            nix_nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + 3).min(19));
        assert_eq!(nix_nice(), before);
    }

    fn nix_nice() -> i32 {
        // SAFETY: getpriority reads the calling thread's nice value.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }
}
