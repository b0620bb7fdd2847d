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

/// Most buffers [`read_at_into`] fills with one `preadv(2)`.
pub const READ_BUFS: usize = 4;

/// Read `file` at `offset` into the spare capacity of `bufs`, in order, with
/// one `preadv(2)` (at most [`READ_BUFS`] buffers): each buffer's length
/// grows by what was read into it, and nothing is zeroed first (the file's
/// bytes are the only ones written). The bytes read: fewer than the room
/// only at the end of the file.
pub fn read_at_into(
    file: &std::fs::File,
    offset: u64,
    bufs: &mut [Vec<u8>],
) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    if bufs.len() > READ_BUFS {
        return Err(std::io::ErrorKind::InvalidInput.into());
    }
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; READ_BUFS];
    for (v, b) in iov.iter_mut().zip(bufs.iter_mut()) {
        let spare = b.spare_capacity_mut();
        v.iov_base = spare.as_mut_ptr().cast();
        v.iov_len = spare.len();
    }
    let n = loop {
        // SAFETY: each of the first `bufs.len()` iovecs describes the spare
        // capacity of one of `bufs`, allocated and exclusively borrowed for
        // the call; preadv only writes into them, and `fd` is open (`file`
        // is borrowed).
        let n = unsafe {
            libc::preadv(
                file.as_raw_fd(),
                iov.as_ptr(),
                bufs.len() as libc::c_int,
                offset,
            )
        };
        if n >= 0 {
            break n as usize;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut left = n;
    for (v, b) in iov.iter().zip(bufs.iter_mut()) {
        let k = left.min(v.iov_len);
        // SAFETY: preadv(2) fills the iovecs in order, so the first `k`
        // bytes of this buffer's spare capacity were written by the read
        // (`k` is within its capacity: at most its iov_len).
        unsafe { b.set_len(b.len() + k) };
        left -= k;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_range_is_read_into_the_buffers_in_order() {
        use std::io::Write;
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..100u8).collect();
        f.write_all(&data).unwrap();
        let mut bufs = [
            Vec::with_capacity(30),
            Vec::with_capacity(30),
            Vec::with_capacity(30),
        ];
        // From 20: 80 bytes are there, 90 fit.
        assert_eq!(read_at_into(&f, 20, &mut bufs).unwrap(), 80);
        assert_eq!(bufs[0], data[20..50]);
        assert_eq!(bufs[1], data[50..80]);
        assert_eq!(bufs[2], data[80..100]);
        let mut past = [Vec::with_capacity(8)];
        assert_eq!(read_at_into(&f, 200, &mut past).unwrap(), 0);
        assert!(past[0].is_empty());
    }

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
