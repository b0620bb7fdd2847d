//! QUIC, HTTP/3's transport: what lets several workers share one UDP port
//! and still see every datagram of their own connections.
//!
//! Owns: connection IDs that name the worker owning the connection
//! ([`cid`]: quinn-proto's `ConnectionIdGenerator` for each worker) and the
//! classic BPF program that sends each datagram to its owner's socket in
//! the `SO_REUSEPORT` group ([`steer`]), with the same routing in Rust for
//! a datagram that lands elsewhere (the program could not be attached, a
//! worker slot changed). Does not own the sockets (`net`) nor the raw
//! attach (`sys::bpf`).
//!
//! Flow:
//! 1. Each worker's endpoint issues connection IDs from its
//!    [`cid::WorkerCids`]: byte 0 its slot, byte 1 its generation, the
//!    rest random.
//! 2. The program on the group reads byte 0 of a datagram's destination
//!    connection ID and returns it as the socket index; a client's first
//!    packets (Initial, 0-RTT), whose IDs the client chose, and anything
//!    too short to route go by the kernel's hash of the addresses, which
//!    keeps a client's handshake on one socket.
//! 3. [`steer::route`] says the same of a datagram in user space.
//!
//! Decisions: docs/decisions/0017-quic-stack.md, 0018-quic-steering.md.

pub mod cid;
pub mod steer;
