//! The one room where `unsafe` and raw syscalls live.
//!
//! Owns: one file per syscall family, each exposing a safe wrapper whose
//! invariants are documented at the `unsafe` block. Nothing outside `sys/`
//! may use `unsafe` (the crate denies it; only this module allows it).
//!
//! - `affinity`: the process CPU set (sched_getaffinity) and pinning.
//! - `socket`: shutdown of a registered connection fd, systemd socket
//!   activation (LISTEN_FDS) into owned fds.
//! - `openat2`: kernel-enforced containment under a directory fd.
//! - `sendfile`: zero-copy file → socket with explicit offsets.

pub mod affinity;
pub mod openat2;
pub mod sendfile;
pub mod socket;
