//! Vectored writes straight from shared byte buffers.
//!
//! monoio's `writev` takes any `IoVecBuf`: a value that owns an array of
//! `iovec`s and the memory they point to for as long as the kernel may read
//! it. [`IoSlices`] is that value for a run of [`Bytes`] (prebuilt heads,
//! cached file bodies, error texts): the connection hands the very buffers
//! the cache holds to `writev(2)` / `IORING_OP_WRITEV`, so a cached body is
//! never copied in user space. It is kept by its connection and reused from
//! write to write (`clear` keeps both arrays' capacity), so the hot path
//! allocates nothing, and it advances itself over a partial write. The trait
//! is `unsafe` (the runtime trusts the pointers), hence this file is in `sys/`.
//!
//! The other way, [`read_at_into`] reads a file range into several buffers
//! with one `preadv(2)` (HTTP/2 reads a chunk as one buffer per DATA frame).

use bytes::Bytes;
use monoio::buf::IoVecBuf;

/// Linux's `IOV_MAX` (`UIO_MAXIOV`): the most pieces one `writev` takes.
pub const IOV_MAX: usize = 1024;

/// A run of `Bytes` and the `iovec` array describing what is left of it.
#[derive(Debug, Default)]
pub struct IoSlices {
    /// Owns the memory every iovec points into.
    parts: Vec<Bytes>,
    /// One per non-empty part; `iovecs[first..]` is still to be written.
    iovecs: Vec<libc::iovec>,
    first: usize,
    remaining: usize,
}

impl IoSlices {
    /// Whether another piece fits in one `writev` ([`IOV_MAX`]).
    pub fn has_room(&self) -> bool {
        self.iovecs.len() < IOV_MAX
    }

    /// Append a piece (empty pieces are kept alive but not described).
    pub fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            debug_assert!(self.has_room());
            self.iovecs.push(libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            });
            self.remaining += b.len();
        }
        self.parts.push(b);
    }

    /// Bytes still to be written.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// Mark `n` more bytes written: drop finished iovecs from the front and
    /// shorten a partly written one.
    pub fn advance(&mut self, mut n: usize) {
        n = n.min(self.remaining);
        self.remaining -= n;
        while n > 0 {
            let iov = &mut self.iovecs[self.first];
            if n < iov.iov_len {
                iov.iov_base = (iov.iov_base as *mut u8).wrapping_add(n) as *mut libc::c_void;
                iov.iov_len -= n;
                return;
            }
            n -= iov.iov_len;
            self.first += 1;
        }
    }

    /// The bytes still to be written, copied into one buffer (for TLS,
    /// which encrypts from a plaintext copy anyway).
    pub fn gather(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.remaining);
        let mut skip = self.parts_written();
        for p in &self.parts {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            out.extend_from_slice(&p[skip..]);
            skip = 0;
        }
        out
    }

    /// Bytes of `parts` already written (all parts minus what remains).
    fn parts_written(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum::<usize>() - self.remaining
    }

    /// Drop the pieces (their buffers go back to whoever shares them) and
    /// keep the arrays for the next run.
    pub fn clear(&mut self) {
        self.parts.clear();
        self.iovecs.clear();
        self.first = 0;
        self.remaining = 0;
    }
}

// SAFETY: every iovec in `iovecs[first..]` points into the heap (or static)
// storage of a `Bytes` held in `self.parts`, at an offset within it (`advance`
// never moves a pointer past its iovec's length). That storage does not move
// when `IoSlices` moves (a `Bytes` is a pointer to it), is immutable (`Bytes`
// gives no `&mut`), and lives as long as `self`. The arrays are only changed
// through `&mut self`, which the runtime's ownership of the value excludes
// while a write is in flight, so the pointer and length returned below stay
// valid as long as the runtime owns the value, as the trait requires.
unsafe impl IoVecBuf for IoSlices {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iovecs[self.first..].as_ptr()
    }

    fn read_iovec_len(&self) -> usize {
        self.iovecs.len() - self.first
    }
}

/// Read `file` at `offset` into `bufs`, in order, with one `preadv(2)`:
/// the bytes read (short only at the end of the file).
pub fn read_at_into(
    file: &std::fs::File,
    offset: u64,
    bufs: &mut [Vec<u8>],
) -> std::io::Result<usize> {
    let mut slices: Vec<std::io::IoSliceMut<'_>> = bufs
        .iter_mut()
        .map(|b| std::io::IoSliceMut::new(b))
        .collect();
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    loop {
        match nix::sys::uio::preadv(file, &mut slices, offset) {
            Ok(n) => return Ok(n),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(s: &IoSlices) -> Vec<u8> {
        let mut out = Vec::new();
        // SAFETY: the pointer and count describe `s`'s live iovecs, and each
        // iovec points into a `Bytes` that `s` keeps alive for this call.
        let iov = unsafe { std::slice::from_raw_parts(s.read_iovec_ptr(), s.read_iovec_len()) };
        for v in iov {
            // SAFETY: as above, `iov_base..iov_base+iov_len` lies in a live `Bytes`.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len)
            });
        }
        out
    }

    #[test]
    fn describes_every_non_empty_part_in_order_without_copying() {
        let a = Bytes::from_static(b"head\r\n\r\n");
        let b = Bytes::from(vec![7u8; 100]);
        let mut s = IoSlices::default();
        s.push(a.clone());
        s.push(Bytes::new());
        s.push(b.clone());
        assert_eq!(s.remaining(), a.len() + b.len());
        assert_eq!(s.read_iovec_len(), 2);
        // SAFETY: two iovecs were just counted, and `s` outlives the slice.
        let iov = unsafe { std::slice::from_raw_parts(s.read_iovec_ptr(), 2) };
        assert_eq!(iov[0].iov_base as *const u8, a.as_ptr());
        assert_eq!(iov[1].iov_base as *const u8, b.as_ptr());
    }

    #[test]
    fn a_partial_write_resumes_mid_piece() {
        let mut s = IoSlices::default();
        s.push(Bytes::from_static(b"abc"));
        s.push(Bytes::from_static(b"defgh"));
        s.advance(4);
        assert_eq!(pending(&s), b"efgh");
        assert_eq!(s.remaining(), 4);
        s.advance(4);
        assert_eq!(s.remaining(), 0);
        assert_eq!(s.read_iovec_len(), 0);
    }

    #[test]
    fn gather_copies_what_is_left() {
        let mut s = IoSlices::default();
        s.push(Bytes::from_static(b"abc"));
        s.push(Bytes::from_static(b"def"));
        s.advance(2);
        assert_eq!(s.gather(), b"cdef");
    }

    #[test]
    fn clear_keeps_capacity_for_the_next_run() {
        let mut s = IoSlices::default();
        for _ in 0..10 {
            s.push(Bytes::from_static(b"x"));
        }
        let cap = s.iovecs.capacity();
        s.clear();
        assert_eq!(s.remaining(), 0);
        assert_eq!(s.iovecs.capacity(), cap);
        s.push(Bytes::from_static(b"y"));
        assert_eq!(pending(&s), b"y");
    }
}
