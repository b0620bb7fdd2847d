//! A bare io_uring for the probe server (`servery-load probe`): the operations servery's
//! runtime (monoio 0.2) does not expose, behind an owning, safe interface.
//!
//! Owns: one ring (set up like servery's workers: `SINGLE_ISSUER | DEFER_TASKRUN`), an optional
//! provided-buffer ring (`IORING_REGISTER_PBUF_RING`) for multishot receive, and every buffer
//! an operation in flight points into. Callers hand buffers over by value and get them back in
//! the operation's [`Completion`], so no pointer the kernel holds can dangle: that is the whole
//! safety argument of this file, checked at each `unsafe` block.
//!
//! Flow:
//! 1. [`Ring::new`], then [`Ring::provide`] for a buffer ring when multishot receive is used.
//! 2. Queue operations: [`Ring::accept_multi`], [`Ring::recv_multi`], [`Ring::recv`] (a buffer
//!    of the caller's), [`Ring::writev`] / [`Ring::send_zc`] (static bytes).
//! 3. [`Ring::wait`] submits and waits for at least one completion, then [`Ring::reap`] drains
//!    them; a multishot receive's bytes are read with [`Ring::provided`] and its buffer handed
//!    back with [`Ring::recycle`].

use std::collections::HashMap;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use io_uring::types::{BufRingEntry, Fd};
use io_uring::{cqueue, opcode, squeue, IoUring};

/// `IORING_CQE_F_NOTIF`: the second completion of a `SEND_ZC`, saying its buffer is free.
const CQE_F_NOTIF: u32 = 1 << 3;

/// Take ownership of the descriptor an accept completion returned (its `result`, ≥ 0).
pub(crate) fn adopt(fd: i32) -> OwnedFd {
    // SAFETY: a successful accept's result is a new descriptor of this process that nothing
    // else owns; the caller passes each such result once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// One completion, with whatever buffer its operation borrowed.
#[derive(Debug)]
pub(crate) struct Completion {
    pub(crate) user_data: u64,
    pub(crate) result: i32,
    pub(crate) flags: u32,
    /// The buffer of a [`Ring::recv`], back to its owner.
    pub(crate) buf: Option<Vec<u8>>,
}

impl Completion {
    /// The provided buffer a multishot receive filled, if any.
    pub(crate) fn buffer_id(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags)
    }

    /// Whether a multishot operation stays armed after this completion.
    pub(crate) fn more(&self) -> bool {
        cqueue::more(self.flags)
    }

    /// Whether this is a zero-copy send's buffer-release notification.
    pub(crate) fn is_notification(&self) -> bool {
        self.flags & CQE_F_NOTIF != 0
    }
}

/// The provided-buffer ring: `count` buffers of `size` bytes in one allocation, and the ring
/// of entries describing them (page-aligned, as the kernel requires).
struct Provided {
    entries: *mut BufRingEntry,
    /// The mapping of `entries`, unmapped on drop.
    map_len: usize,
    memory: Vec<u8>,
    size: usize,
    count: u16,
    tail: u16,
    group: u16,
}

impl Drop for Provided {
    fn drop(&mut self) {
        // SAFETY: `entries` is the start of a private anonymous mapping of `map_len` bytes made
        // in `Ring::provide` and unmapped only here. The ring that used it is unregistered (the
        // `IoUring` is dropped first, see `Ring`'s field order) before this runs.
        unsafe {
            libc::munmap(self.entries.cast(), self.map_len);
        }
    }
}

/// An io_uring and the buffers its operations hold.
pub(crate) struct Ring {
    // Field order is drop order: the ring (and the kernel's use of every buffer) goes first.
    ring: IoUring,
    provided: Option<Provided>,
    /// Buffers of receives in flight, by user data.
    recv_bufs: HashMap<u64, Vec<u8>>,
    /// iovec arrays of writes in flight, by user data.
    iovecs: HashMap<u64, Vec<libc::iovec>>,
}

impl Ring {
    /// A ring of `entries` submission slots, with servery's setup flags where the kernel has them.
    pub(crate) fn new(entries: u32) -> io::Result<Ring> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
            .or_else(|_| IoUring::new(entries))?;
        Ok(Ring {
            ring,
            provided: None,
            recv_bufs: HashMap::new(),
            iovecs: HashMap::new(),
        })
    }

    /// Register `count` (a power of two) provided buffers of `size` bytes as group `group`.
    pub(crate) fn provide(&mut self, count: u16, size: usize, group: u16) -> io::Result<()> {
        if !count.is_power_of_two() {
            return Err(io::Error::other(
                "provided-buffer count must be a power of two",
            ));
        }
        let map_len = usize::from(count) * std::mem::size_of::<BufRingEntry>();
        // SAFETY: a fresh private anonymous mapping; no pointer is passed in, the result is
        // checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut provided = Provided {
            entries: base.cast(),
            map_len,
            memory: vec![0u8; usize::from(count) * size],
            size,
            count,
            tail: 0,
            group,
        };
        // SAFETY: `base` is a page-aligned mapping of `count` entries that lives (in
        // `provided`, stored in `self` below) until after the ring is dropped.
        unsafe {
            self.ring
                .submitter()
                .register_buf_ring(base as u64, count, group)?;
        }
        for bid in 0..count {
            provided.push(bid);
        }
        provided.publish();
        self.provided = Some(provided);
        Ok(())
    }

    /// Accept connections on `listener` until the ring ends (one completion per connection).
    pub(crate) fn accept_multi(&mut self, listener: RawFd, user_data: u64) -> io::Result<()> {
        let sqe = opcode::AcceptMulti::new(Fd(listener))
            .build()
            .user_data(user_data);
        self.push(sqe)
    }

    /// Receive into provided buffers until the connection ends or buffers run out.
    pub(crate) fn recv_multi(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        let group = match &self.provided {
            Some(p) => p.group,
            None => return Err(io::Error::other("no provided buffers registered")),
        };
        let sqe = opcode::RecvMulti::new(Fd(fd), group)
            .build()
            .user_data(user_data);
        self.push(sqe)
    }

    /// One receive into `buf` (its spare capacity); the buffer comes back in the completion.
    pub(crate) fn recv(&mut self, fd: RawFd, mut buf: Vec<u8>, user_data: u64) -> io::Result<()> {
        buf.clear();
        let cap = buf.capacity();
        let sqe = opcode::Recv::new(Fd(fd), buf.as_mut_ptr(), cap as u32)
            .build()
            .user_data(user_data);
        // The Vec's heap storage does not move when the Vec moves into the map.
        if self.recv_bufs.insert(user_data, buf).is_some() {
            return Err(io::Error::other("two receives with one user data"));
        }
        self.push(sqe)
    }

    /// Write `parts` (static bytes) with one `writev`.
    pub(crate) fn writev(
        &mut self,
        fd: RawFd,
        parts: &[&'static [u8]],
        user_data: u64,
    ) -> io::Result<()> {
        let iov: Vec<libc::iovec> = parts
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        let sqe = opcode::Writev::new(Fd(fd), iov.as_ptr(), iov.len() as u32)
            .build()
            .user_data(user_data);
        if self.iovecs.insert(user_data, iov).is_some() {
            return Err(io::Error::other("two writes with one user data"));
        }
        self.push(sqe)
    }

    /// Send `data` (static bytes) with `SEND_ZC`: two completions, the result and then the
    /// notification that the kernel no longer reads `data`.
    pub(crate) fn send_zc(
        &mut self,
        fd: RawFd,
        data: &'static [u8],
        user_data: u64,
    ) -> io::Result<()> {
        let sqe = opcode::SendZc::new(Fd(fd), data.as_ptr(), data.len() as u32)
            .build()
            .user_data(user_data);
        self.push(sqe)
    }

    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        // SAFETY: every pointer in `sqe` is into memory this `Ring` keeps until the operation's
        // completion is reaped (receive buffers and iovec arrays in the maps, the provided
        // buffers in `self.provided`) or is `'static` (write and send payloads).
        if unsafe { self.ring.submission().push(&sqe) }.is_err() {
            self.ring.submit()?;
            // SAFETY: as above; the queue was just drained by `submit`.
            unsafe { self.ring.submission().push(&sqe) }
                .map_err(|_| io::Error::other("submission queue full"))?;
        }
        Ok(())
    }

    /// Submit what is queued and wait for at least one completion.
    pub(crate) fn wait(&mut self) -> io::Result<()> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Take every completion, with the buffers their operations held.
    pub(crate) fn reap(&mut self, out: &mut Vec<Completion>) {
        for cqe in self.ring.completion() {
            let user_data = cqe.user_data();
            let flags = cqe.flags();
            let result = cqe.result();
            let mut buf = self.recv_bufs.remove(&user_data);
            if let Some(b) = buf.as_mut() {
                let n = usize::try_from(result).unwrap_or(0).min(b.capacity());
                // SAFETY: the kernel wrote `n` bytes (the completion's result) at the start of
                // the spare capacity this receive was given, and `n` ≤ capacity.
                unsafe { b.set_len(n) };
            }
            // A write's iovecs are free at its (only) completion.
            if flags & CQE_F_NOTIF == 0 {
                self.iovecs.remove(&user_data);
            }
            out.push(Completion {
                user_data,
                result,
                flags,
                buf,
            });
        }
    }

    /// The bytes a multishot receive put in provided buffer `bid`.
    pub(crate) fn provided(&self, bid: u16, len: usize) -> &[u8] {
        match &self.provided {
            Some(p) => {
                let start = usize::from(bid) * p.size;
                &p.memory[start..start + len.min(p.size)]
            }
            None => &[],
        }
    }

    /// Hand provided buffer `bid` back to the kernel.
    pub(crate) fn recycle(&mut self, bid: u16) {
        if let Some(p) = &mut self.provided {
            p.push(bid);
            p.publish();
        }
    }
}

impl Provided {
    /// Describe buffer `bid` in the next free ring slot (not yet visible to the kernel).
    fn push(&mut self, bid: u16) {
        let slot = usize::from(self.tail & (self.count - 1));
        let addr = self.memory.as_ptr() as u64 + u64::from(bid) * self.size as u64;
        // SAFETY: `slot` < `count`, so the entry lies inside the mapping of `count` entries;
        // the kernel only reads entries between its head and our published tail, and this slot
        // is past the published tail.
        let entry = unsafe { &mut *self.entries.add(slot) };
        entry.set_addr(addr);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Make the pushed entries visible to the kernel (a release store of the tail).
    fn publish(&mut self) {
        // SAFETY: the tail field overlays the first entry's reserved field of this mapping
        // (`BufRingEntry::tail`); it is a properly aligned u16 shared with the kernel, so it is
        // written through an atomic with release ordering after the entries it publishes.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const std::sync::atomic::AtomicU16;
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }
}
