//! The C heap's bookkeeping (glibc's malloc): how much it holds free, and
//! giving free pages back to the kernel.
//!
//! Why: glibc keeps freed memory in its arenas for reuse and returns only
//! what lies at the top of an arena (`M_TRIM_THRESHOLD`), so after a burst
//! that allocated in many places (ten thousand HTTP/2 streams) the RSS stays
//! at the high-water mark although the memory is free. `malloc_trim(3)`
//! walks every arena and releases each free page (`MADV_DONTNEED`), whatever
//! its position. docs/decisions/0011.
//!
//! On a C library without them (musl), [`stats`] says nothing is free and
//! [`trim`] does nothing.

/// The heap's state (`mallinfo2(3)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes allocated and in use (`uordblks`).
    pub in_use: usize,
    /// Bytes in free chunks, released to the kernel or not (`fordblks`).
    pub free: usize,
}

/// The heap's state now: every arena is visited, so it costs in proportion
/// to the free chunks; call it on a timer, not per request.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn stats() -> Stats {
    // SAFETY: mallinfo2 takes no arguments, only reads malloc's state under
    // its arena locks and returns a plain struct by value (glibc ≥ 2.33;
    // the crate targets Debian 12's 2.36 and newer).
    let info = unsafe { libc::mallinfo2() };
    Stats {
        in_use: info.uordblks,
        free: info.fordblks,
    }
}

/// See the gnu version.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn stats() -> Stats {
    Stats::default()
}

/// Give every free page of every arena back to the kernel; whether any was.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim() -> bool {
    // SAFETY: malloc_trim(0) takes a padding size and touches only malloc's
    // own free lists under its arena locks; it is safe to call from any
    // thread at any time.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// See the gnu version.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_memory_shows_as_free_and_trim_runs() {
        let before = stats();
        // Many small blocks, so they come from the arena, not mmap.
        let blocks: Vec<Vec<u8>> = (0..4096).map(|i| vec![i as u8; 4000]).collect();
        let held = stats();
        assert!(
            held.in_use >= before.in_use + 4096 * 4000 / 2,
            "{before:?} {held:?}"
        );
        drop(blocks);
        let freed = stats();
        assert!(freed.in_use < held.in_use, "{held:?} {freed:?}");
        let _ = trim();
    }
}
