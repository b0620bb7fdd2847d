//! The one room where `unsafe` and raw syscalls live.
//!
//! Owns: one file per syscall family, each exposing a safe wrapper whose
//! invariants are documented at the `unsafe` block. Nothing outside `sys/`
//! may use `unsafe` (the crate denies it; only this module allows it).
//!
//! - `affinity`: the process CPU set (sched_getaffinity) and pinning.
//! - `bpf`: classic BPF on sockets: the reuseport group's socket picker.
//! - `priority`: a background thread's lower nice value (setpriority).
//! - `socket`: shutdown of a registered connection fd, systemd socket
//!   activation (LISTEN_FDS) into owned fds.
//! - `openat2`: kernel-enforced containment under a directory fd.
//! - `sendfile`: zero-copy file → socket with explicit offsets.
//! - `ktls`: kernel TLS: the `tls` ULP, transmit keys, records of other
//!   types (alerts, KeyUpdate) by control message.
//! - `pidfd`: race-free child handles, signals, group kills.
//! - `fdpass`: SCM_RIGHTS over the control channel.
//! - `spawn`: a worker process's new session and control fd 3.
//! - `shm`: the shared connection-budget counter (memfd + mmap).
//! - `iovec`: vectored writes straight from `Bytes` (cached bodies, heads).
//! - `rent`: safe views of monoio's owned buffers, for transports that
//!   fill and drain them in user space (TLS).
//! - `heap`: malloc's free bytes, and giving free pages back (malloc_trim).

pub mod affinity;
pub mod bpf;
pub mod fdpass;
pub mod heap;
pub mod iovec;
pub mod ktls;
pub mod openat2;
pub mod pidfd;
pub mod priority;
pub mod rent;
pub mod sendfile;
pub mod shm;
pub mod socket;
pub mod spawn;
