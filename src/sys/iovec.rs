//! Vectored writes straight from shared byte buffers.
//!
//! monoio's `writev` takes any `IoVecBuf`: a value that owns an array of
//! `iovec`s and the memory they point to for as long as the kernel may read
//! it. [`IoSlices`] is that value for a run of [`Bytes`] (prebuilt heads,
//! cached file bodies, error texts): the connection hands the very buffers
//! the cache holds to `writev(2)` / `IORING_OP_WRITEV`, so a cached body is
//! never copied in user space. The trait is `unsafe` (the runtime trusts the
//! pointers), hence this file lives in `sys/`.

use bytes::Bytes;
use monoio::buf::IoVecBuf;

/// Linux's `IOV_MAX` (`UIO_MAXIOV`): the most pieces one `writev` takes.
pub const IOV_MAX: usize = 1024;

/// A run of `Bytes` and the `iovec` array describing it, built once.
pub struct IoSlices {
    parts: Vec<Bytes>,
    iovecs: Vec<libc::iovec>,
    total: usize,
}

impl IoSlices {
    /// Describe `parts` for one vectored write. Empty parts are skipped;
    /// at most [`IOV_MAX`] parts are taken (the caller keeps runs shorter).
    pub fn new(parts: Vec<Bytes>) -> IoSlices {
        let mut iovecs = Vec::with_capacity(parts.len().min(IOV_MAX));
        let mut total = 0;
        for p in parts.iter().filter(|p| !p.is_empty()).take(IOV_MAX) {
            iovecs.push(libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            });
            total += p.len();
        }
        IoSlices {
            parts,
            iovecs,
            total,
        }
    }

    /// Bytes described (the sum of the pieces taken).
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether nothing is described.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The buffers back, once the write is done with them.
    pub fn into_parts(self) -> Vec<Bytes> {
        self.parts
    }
}

// SAFETY: every iovec points into the heap (or static) storage of a `Bytes`
// held in `self.parts`. That storage does not move when `IoSlices` moves (a
// `Bytes` is a pointer to it), is immutable (`Bytes` gives no `&mut`), and
// lives as long as `self`. Neither vector is changed after `new`, so the
// pointer and length returned below stay valid while the runtime owns the
// value, as the trait requires.
unsafe impl IoVecBuf for IoSlices {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iovecs.as_ptr()
    }

    fn read_iovec_len(&self) -> usize {
        self.iovecs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_every_non_empty_part_in_order() {
        let a = Bytes::from_static(b"head\r\n\r\n");
        let b = Bytes::from(vec![7u8; 100]);
        let s = IoSlices::new(vec![a.clone(), Bytes::new(), b.clone()]);
        assert_eq!(s.len(), a.len() + b.len());
        assert_eq!(s.read_iovec_len(), 2);
        // SAFETY: two iovecs were just counted, and `s` outlives the slice.
        let iov = unsafe { std::slice::from_raw_parts(s.read_iovec_ptr(), 2) };
        assert_eq!(iov[0].iov_base as *const u8, a.as_ptr());
        assert_eq!(iov[1].iov_len, 100);
        assert_eq!(s.into_parts().len(), 3);
    }

    #[test]
    fn caps_the_run_at_iov_max() {
        let parts = vec![Bytes::from_static(b"x"); IOV_MAX + 5];
        let s = IoSlices::new(parts);
        assert_eq!(s.read_iovec_len(), IOV_MAX);
        assert_eq!(s.len(), IOV_MAX);
    }
}
