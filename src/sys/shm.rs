//! A counter shared by every worker, thread or process: the global
//! connection budget (`--max-connections-total`).
//!
//! One `AtomicU64` in a page of a memfd mapped MAP_SHARED: threads share the
//! mapping, worker processes map the same memfd (passed over the control
//! channel). Atomics on shared memory are coherent across processes.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// A mapped shared counter.
#[derive(Debug)]
pub struct SharedCounter {
    ptr: *const AtomicU64,
    fd: OwnedFd,
}

// SAFETY: the mapping holds only an AtomicU64, whose operations are
// thread-safe; the pointer stays valid until Drop unmaps it.
unsafe impl Send for SharedCounter {}
// SAFETY: as above: shared access only goes through atomic operations.
unsafe impl Sync for SharedCounter {}

const MAP_LEN: usize = 4096;

impl SharedCounter {
    /// A new counter at zero.
    pub fn create() -> io::Result<SharedCounter> {
        let name = c"servery-budget";
        // SAFETY: `name` is NUL-terminated; flags are constants.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a non-negative memfd_create return is ours to own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate on our own memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), MAP_LEN as libc::off_t) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Self::map(fd)
    }

    /// Map a counter created elsewhere (a worker process's end).
    pub fn map(fd: OwnedFd) -> io::Result<SharedCounter> {
        // SAFETY: mapping MAP_LEN bytes of a memfd of at least that size
        // (checked below via fstat) read/write shared; the result is checked.
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(io::Error::from)?;
        if (st.st_size as usize) < MAP_LEN {
            return Err(io::Error::other("budget memfd too small"));
        }
        // SAFETY: as above.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedCounter {
            ptr: ptr.cast(),
            fd,
        })
    }

    fn atomic(&self) -> &AtomicU64 {
        // SAFETY: `ptr` is a live, page-aligned mapping of MAP_LEN bytes,
        // zero-initialised by ftruncate, used only as an AtomicU64.
        unsafe { &*self.ptr }
    }

    /// Take one unit if fewer than `limit` are taken.
    pub fn try_acquire(&self, limit: u64) -> bool {
        self.atomic()
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v < limit).then_some(v + 1)
            })
            .is_ok()
    }

    /// Give one unit back.
    pub fn release(&self) {
        let _ = self
            .atomic()
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(1))
            });
    }

    pub fn get(&self) -> u64 {
        self.atomic().load(Ordering::Acquire)
    }

    /// The memfd, to pass to a worker process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for SharedCounter {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`; no reference
        // from `atomic()` outlives `self`.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, MAP_LEN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_stops_at_the_limit_across_mappings() {
        let a = SharedCounter::create().unwrap();
        let b = SharedCounter::map(a.fd().try_clone_to_owned().unwrap()).unwrap();
        assert!(a.try_acquire(2));
        assert!(b.try_acquire(2));
        assert!(!a.try_acquire(2));
        b.release();
        assert_eq!(a.get(), 1);
        assert!(a.try_acquire(2));
    }
}
