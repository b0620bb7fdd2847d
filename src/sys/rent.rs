//! Safe views of monoio's owned I/O buffers, for transports that produce
//! the bytes themselves (TLS decrypts into the caller's buffer and encrypts
//! from it) rather than handing the buffer to the kernel.
//!
//! monoio's buffer traits describe memory by raw pointer (`IoBuf`,
//! `IoBufMut`, `IoVecBuf`); a kernel read writes from `write_ptr` up to
//! `bytes_total` and then calls `set_init`. These wrappers do the same in
//! user space: [`filled`] borrows what a buffer holds, [`append`] copies
//! into its unwritten room and marks the bytes initialised, [`gather`]
//! copies an iovec array's bytes out.

use monoio::buf::{IoBuf, IoBufMut, IoVecBuf};

/// The initialised bytes of `buf`.
pub fn filled<T: IoBuf>(buf: &T) -> &[u8] {
    let len = buf.bytes_init();
    if len == 0 {
        return &[];
    }
    // SAFETY: `IoBuf` promises `read_ptr()` points at `bytes_init()`
    // initialised bytes that stay valid while `buf` is borrowed.
    unsafe { std::slice::from_raw_parts(buf.read_ptr(), len) }
}

/// Copy as much of `src` as fits into `buf` after the `done` bytes this
/// read already put there (from `write_ptr`, up to `bytes_total`), and mark
/// them initialised. Returns how many bytes were copied.
pub fn append<T: IoBufMut>(buf: &mut T, done: usize, src: &[u8]) -> usize {
    let total = buf.bytes_total();
    let n = src.len().min(total.saturating_sub(done));
    if n == 0 {
        return 0;
    }
    // SAFETY: `IoBufMut` promises `write_ptr()` is valid for writes of
    // `bytes_total()` bytes; `done + n <= bytes_total()`, and `src` is a
    // separate borrow, so the ranges do not overlap. The first `done` bytes
    // were written by earlier calls, so `done + n` bytes are initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), buf.write_ptr().add(done), n);
        buf.set_init(done + n);
    }
    n
}

/// Append every byte `bufs` describes to `into`.
pub fn gather<T: IoVecBuf>(bufs: &T, into: &mut Vec<u8>) {
    let count = bufs.read_iovec_len();
    if count == 0 {
        return;
    }
    // SAFETY: `IoVecBuf` promises `read_iovec_ptr()` points at
    // `read_iovec_len()` iovecs, each describing initialised memory that
    // stays valid while `bufs` is borrowed.
    let iovecs = unsafe { std::slice::from_raw_parts(bufs.read_iovec_ptr(), count) };
    for v in iovecs {
        if v.iov_len > 0 {
            // SAFETY: as above, for this iovec's memory.
            let part = unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
            into.extend_from_slice(part);
        }
    }
}

/// A growable byte buffer whose spare capacity a read may fill: `Vec<u8>`
/// and `BytesMut`.
pub trait Spare {
    fn spare(&mut self) -> &mut [std::mem::MaybeUninit<u8>];
    /// # Safety
    /// The first `new_len - len` bytes of the spare capacity are initialised.
    unsafe fn grow_len(&mut self, new_len: usize);
    fn len_now(&self) -> usize;
}

impl Spare for Vec<u8> {
    fn spare(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        self.spare_capacity_mut()
    }
    unsafe fn grow_len(&mut self, new_len: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.set_len(new_len) }
    }
    fn len_now(&self) -> usize {
        self.len()
    }
}

impl Spare for bytes::BytesMut {
    fn spare(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        self.spare_capacity_mut()
    }
    unsafe fn grow_len(&mut self, new_len: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.set_len(new_len) }
    }
    fn len_now(&self) -> usize {
        self.len()
    }
}

/// Let a poll-style read (`read`) fill the spare capacity of `buf` (a
/// `Vec<u8>` or a `BytesMut`), and keep what it filled.
pub fn fill_spare<B: Spare, R>(
    buf: &mut B,
    read: impl FnOnce(&mut monoio::io::poll_io::ReadBuf<'_>) -> R,
) -> R {
    let len = buf.len_now();
    let spare = buf.spare();
    let start = spare.as_ptr() as *const u8;
    let mut rb = monoio::io::poll_io::ReadBuf::uninit(spare);
    let r = read(&mut rb);
    let filled = rb.filled();
    // Only bytes written into this very spare room count (a reader could
    // swap the `ReadBuf` for another).
    if filled.as_ptr() == start {
        let n = filled.len();
        // SAFETY: `ReadBuf` guarantees its first `filled().len()` bytes are
        // initialised, and they are `buf`'s spare capacity (checked above),
        // so `len + n <= capacity` and those bytes are now initialised.
        unsafe { buf.grow_len(len + n) };
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_fills_the_room_and_marks_it() {
        let mut buf: Vec<u8> = Vec::with_capacity(8);
        buf.extend_from_slice(b"xy");
        let mut slice = buf.slice_mut(2..6);
        assert_eq!(append(&mut slice, 0, b"ab"), 2);
        assert_eq!(append(&mut slice, 2, b"cdef"), 2);
        let buf = slice.into_inner();
        // The vector's length becomes the end of what was written.
        assert_eq!(buf, b"xyabcd");
    }

    #[test]
    fn filled_and_gather_read_what_is_there() {
        let v = b"hello".to_vec();
        assert_eq!(filled(&v), b"hello");
        let mut slices = crate::sys::iovec::IoSlices::default();
        slices.push(bytes::Bytes::from_static(b"ab"));
        slices.push(bytes::Bytes::from_static(b""));
        slices.push(bytes::Bytes::from_static(b"cd"));
        let mut out = Vec::new();
        gather(&slices, &mut out);
        assert_eq!(out, b"abcd");
    }

    #[test]
    fn fill_spare_keeps_what_the_reader_put() {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(b"ab");
        let r = fill_spare(&mut v, |rb| {
            rb.put_slice(b"cde");
            7
        });
        assert_eq!(r, 7);
        assert_eq!(v, b"abcde");
    }
}
