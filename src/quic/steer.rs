//! Which socket of a UDP port's `SO_REUSEPORT` group receives a datagram:
//! the one of the worker that owns its connection.
//!
//! Socket `i` of the group (the `i`-th to join it) is worker slot `i`'s. The
//! program ([`program`]) reads the slot from the destination connection ID
//! ([`cid`](super::cid): its first byte) and returns it as the index; the
//! kernel falls back to its hash of the addresses when the index is out of
//! range, which is how the program says "any socket, but always the same
//! one for this client": for a client's Initial and 0-RTT packets (the IDs
//! in them are the client's), a long-header packet whose ID is not ours in
//! length, and a datagram too short to hold an ID. [`route`] is the same
//! decision in Rust, for a worker that finds a datagram it does not own.
//!
//! Where the program reads (RFC 9000 §17): a short header is one flags byte
//! then the destination ID, so the slot is byte 1; a long header is flags,
//! a 4-byte version, the ID's length, then the ID, so the slot is byte 6
//! and the length byte 5. The kernel runs the program on the UDP payload.

use std::io;
use std::os::fd::BorrowedFd;

use super::cid::{Owner, CID_LEN, GENERATION_AT, SLOT_AT};
use crate::sys::bpf::{self, jump, op, stmt, Insn};

/// The first byte's long-header bit.
const LONG_HEADER: u8 = 0x80;
/// The long-header type bits, and the two types whose destination ID the
/// client chose.
const LONG_TYPE: u8 = 0x30;
const INITIAL: u8 = 0x00;
const ZERO_RTT: u8 = 0x10;
/// Where a long header's destination ID length and ID start.
const LONG_CID_LEN_AT: u32 = 5;
const LONG_CID_AT: u32 = 6;
/// Where a short header's destination ID starts.
const SHORT_CID_AT: u32 = 1;
/// Shorter datagrams are not routed by ID (a long header's slot is byte 6).
const ROUTABLE_LEN: u32 = LONG_CID_AT + 1;
/// An index no group has: "use the hash".
const HASH: u32 = u32::MAX;

/// The steering program (see the module doc for what it reads).
pub fn program() -> [Insn; 14] {
    use op::*;
    // Indices in comments; a jump's offset counts from the next instruction.
    [
        /* 0 */ stmt(LD | W | LEN, 0),
        /* 1 */ jump(JMP | JGE | K, ROUTABLE_LEN, 0, 11), // short → 13
        /* 2 */ stmt(LD | B | ABS, 0),
        /* 3 */ jump(JMP | JSET | K, LONG_HEADER as u32, 0, 7), // short header → 11
        /* 4 */ stmt(ALU | AND | K, LONG_TYPE as u32),
        /* 5 */ jump(JMP | JEQ | K, INITIAL as u32, 7, 0), // → 13
        /* 6 */ jump(JMP | JEQ | K, ZERO_RTT as u32, 6, 0), // → 13
        /* 7 */ stmt(LD | B | ABS, LONG_CID_LEN_AT),
        /* 8 */ jump(JMP | JEQ | K, CID_LEN as u32, 0, 4), // not ours → 13
        /* 9 */ stmt(LD | B | ABS, LONG_CID_AT + SLOT_AT as u32),
        /* 10 */ stmt(RET | A, 0),
        /* 11 */ stmt(LD | B | ABS, SHORT_CID_AT + SLOT_AT as u32),
        /* 12 */ stmt(RET | A, 0),
        /* 13 */ stmt(RET | K, HASH),
    ]
}

/// Attach [`program`] to the group of UDP socket `fd`.
pub fn attach(fd: BorrowedFd<'_>) -> io::Result<()> {
    bpf::attach_reuseport(fd, &program())
}

/// Where a datagram goes, decided as the program decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The worker its destination ID names.
    Owner(Owner),
    /// Any worker, by the kernel's hash: a client's first packets, or
    /// nothing routable.
    Hash,
}

/// The route of `datagram` (its first QUIC packet decides).
pub fn route(datagram: &[u8]) -> Route {
    if datagram.len() < ROUTABLE_LEN as usize {
        return Route::Hash;
    }
    let at = if datagram[0] & LONG_HEADER == 0 {
        SHORT_CID_AT as usize
    } else {
        let typ = datagram[0] & LONG_TYPE;
        if typ == INITIAL
            || typ == ZERO_RTT
            || datagram[LONG_CID_LEN_AT as usize] as usize != CID_LEN
        {
            return Route::Hash;
        }
        LONG_CID_AT as usize
    };
    // Both bytes are within ROUTABLE_LEN.
    Route::Owner(Owner {
        slot: datagram[at + SLOT_AT],
        generation: datagram[at + GENERATION_AT],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, UdpSocket};
    use std::os::fd::AsFd;
    use std::time::Duration;

    fn short(slot: u8) -> Vec<u8> {
        let mut d = vec![0x40, slot, 9];
        d.extend([0xAB; 30]);
        d
    }

    fn long(typ: u8, cid_len: u8, slot: u8) -> Vec<u8> {
        let mut d = vec![0xC0 | typ, 0, 0, 0, 1, cid_len, slot, 3];
        d.extend([0xCD; 40]);
        d
    }

    #[test]
    fn routes_read_the_slot_where_the_program_does() {
        let o = |slot| {
            Route::Owner(Owner {
                slot,
                generation: 9,
            })
        };
        assert_eq!(route(&short(3)), o(3));
        assert_eq!(
            route(&long(0x20, CID_LEN as u8, 5)),
            Route::Owner(Owner {
                slot: 5,
                generation: 3
            })
        );
        assert_eq!(route(&long(INITIAL, CID_LEN as u8, 5)), Route::Hash);
        assert_eq!(route(&long(ZERO_RTT, CID_LEN as u8, 5)), Route::Hash);
        assert_eq!(route(&long(0x20, 8, 5)), Route::Hash, "not our ID's length");
        assert_eq!(route(&[0x40, 1, 2]), Route::Hash, "too short to route");
    }

    /// `n` UDP sockets in one reuseport group on 127.0.0.1, in join order.
    fn group(n: usize) -> Vec<UdpSocket> {
        use socket2::{Domain, Protocol, Socket, Type};
        let mut addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        (0..n)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
                s.set_reuse_port(true).unwrap();
                s.bind(&addr.into()).unwrap();
                addr = s.local_addr().unwrap().as_socket().unwrap();
                let s: UdpSocket = s.into();
                s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                s
            })
            .collect()
    }

    /// Which socket of `group` got `datagram`, sent from a fresh port.
    fn landed(group: &[UdpSocket], datagram: &[u8]) -> usize {
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .send_to(datagram, group[0].local_addr().unwrap())
            .unwrap();
        let mut buf = [0u8; 128];
        for _ in 0..100 {
            for (i, s) in group.iter().enumerate() {
                if let Ok((n, _)) = s.recv_from(&mut buf) {
                    assert_eq!(&buf[..n], datagram);
                    return i;
                }
            }
        }
        panic!("the datagram reached no socket");
    }

    #[test]
    fn the_kernel_sends_each_datagram_to_the_socket_its_id_names() {
        let sockets = group(3);
        attach(sockets[1].as_fd()).expect("attach the program");
        for _ in 0..20 {
            for slot in 0..3u8 {
                assert_eq!(
                    landed(&sockets, &short(slot)),
                    slot as usize,
                    "short header"
                );
                let handshake = long(0x20, CID_LEN as u8, slot);
                assert_eq!(
                    landed(&sockets, &handshake),
                    slot as usize,
                    "handshake packet"
                );
            }
        }
    }

    #[test]
    fn first_packets_and_unroutable_ones_go_by_the_hash_not_all_to_one_socket() {
        let sockets = group(3);
        attach(sockets[0].as_fd()).expect("attach the program");
        for (what, datagram) in [
            ("Initial", long(INITIAL, CID_LEN as u8, 0)),
            ("0-RTT", long(ZERO_RTT, CID_LEN as u8, 0)),
            ("a slot past the group", short(7)),
            ("a 3-byte datagram", vec![0x40, 0, 0]),
        ] {
            let mut seen = [0usize; 3];
            for _ in 0..60 {
                seen[landed(&sockets, &datagram)] += 1;
            }
            // By the hash of 60 source ports: the chance that one socket
            // gets them all is 3 × (1/3)^60.
            assert!(
                seen.iter().filter(|&&n| n > 0).count() > 1,
                "{what}: {seen:?}"
            );
        }
    }
}
