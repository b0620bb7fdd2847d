//! Classic BPF programs on sockets: the one that picks which socket of a
//! `SO_REUSEPORT` group receives a datagram (`SO_ATTACH_REUSEPORT_CBPF`).
//!
//! Why classic BPF: attaching it needs no privilege beyond owning the
//! socket (eBPF's `SO_ATTACH_REUSEPORT_EBPF` needs `CAP_BPF` or root), and
//! what it must do (read a byte of the packet, return it as the socket's
//! index) is within classic BPF. Building the program is plain data
//! ([`Insn`]); only the attach is a raw `setsockopt`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// One classic BPF instruction (`struct sock_filter`).
pub type Insn = libc::sock_filter;

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic/socket.h: 51 on x86 and arm).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// Instruction classes, sizes, modes and operations of classic BPF
/// (linux/bpf_common.h), as `u16` codes.
pub mod op {
    pub const LD: u16 = 0x00;
    pub const ALU: u16 = 0x04;
    pub const JMP: u16 = 0x05;
    pub const RET: u16 = 0x06;
    pub const W: u16 = 0x00;
    pub const B: u16 = 0x10;
    pub const ABS: u16 = 0x20;
    pub const LEN: u16 = 0x80;
    pub const AND: u16 = 0x50;
    pub const JA: u16 = 0x00;
    pub const JEQ: u16 = 0x10;
    pub const JGE: u16 = 0x30;
    pub const JSET: u16 = 0x40;
    pub const K: u16 = 0x00;
    /// The accumulator, as a return value.
    pub const A: u16 = 0x10;
}

/// An instruction without jumps.
pub const fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A conditional jump: `jt` instructions ahead if true, `jf` if false.
pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// Attach `program` to the reuseport group `fd` belongs to: from then on
/// the group's socket that receives a packet is the one at the index the
/// program returns (in the order the sockets joined), or the kernel's hash
/// when that index is out of range.
pub fn attach_reuseport(fd: BorrowedFd<'_>, program: &[Insn]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: u16::try_from(program.len())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        filter: program.as_ptr() as *mut Insn,
    };
    // SAFETY: `prog` points at `program`, which outlives the call (the
    // kernel copies it); the option's length is `prog`'s size; the fd is
    // borrowed, so open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
