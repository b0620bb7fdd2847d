//! Datagrams handed between workers: to the worker whose connection ID a
//! datagram names, when another worker read it.
//!
//! That happens in two cases. Within a generation, when the steering
//! program could not be attached and the kernel's hash chose the socket.
//! Across generations, always during a reload: the new generation's worker
//! in slot `i` takes over slot `i`'s UDP sockets (the very sockets, so no
//! datagram is lost) and reads everything that arrives on them, while the
//! old worker, told so (`Control::Handover`), stops reading them and is
//! handed its connections' datagrams here until they close. A worker sends
//! from its sockets whatever it has read them from.
//!
//! Each worker has an inbox (one end of a Unix datagram socket pair, made
//! by the supervisor with its generation) and the other ends of the inboxes
//! of its own generation and of every older generation still alive (its
//! [`Post`]). A handed-over datagram keeps what the endpoint needs of it:
//! the client's address, our address, the ECN bits. An inbox that is full
//! (its worker is not reading) drops the datagram, counted: QUIC takes
//! loss, and no worker waits on another.
//!
//! Wire form (one Unix datagram each): family (4 or 6), the client's IP (16
//! bytes, an IPv4 one mapped), its port (2, big-endian), our port (2: which
//! of the worker's endpoints), whether our IP follows (0 or 4 or 6) and it
//! (16), the ECN codepoint (0: none, else 1 + bits), then the QUIC datagram.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::unix::net::UnixDatagram;

use crate::quic::cid::Owner;

/// Bytes before the QUIC datagram.
const HEADER: usize = 1 + 16 + 2 + 2 + 1 + 16 + 1;
/// The largest QUIC datagram handed over (a UDP payload can be no more).
const MAX_DATAGRAM: usize = 65_535;

/// A datagram as handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Handed<'a> {
    pub(crate) remote: SocketAddr,
    /// Our port it was sent to.
    pub(crate) port: u16,
    pub(crate) local_ip: Option<IpAddr>,
    pub(crate) ecn: Option<u8>,
    pub(crate) data: &'a [u8],
}

fn put_ip(out: &mut Vec<u8>, ip: IpAddr) {
    let v6 = match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    out.extend_from_slice(&v6.octets());
}

fn family(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 4,
        IpAddr::V6(_) => 6,
    }
}

fn get_ip(family: u8, bytes: &[u8]) -> Option<IpAddr> {
    let octets: [u8; 16] = bytes.try_into().ok()?;
    let v6 = Ipv6Addr::from(octets);
    match family {
        4 => v6.to_ipv4_mapped().map(IpAddr::V4),
        6 => Some(IpAddr::V6(v6)),
        _ => None,
    }
}

/// Write `h` in its wire form into `out` (cleared first).
pub(crate) fn encode(out: &mut Vec<u8>, h: &Handed<'_>) {
    out.clear();
    out.push(family(h.remote.ip()));
    put_ip(out, h.remote.ip());
    out.extend_from_slice(&h.remote.port().to_be_bytes());
    out.extend_from_slice(&h.port.to_be_bytes());
    match h.local_ip {
        Some(ip) => {
            out.push(family(ip));
            put_ip(out, ip);
        }
        None => {
            out.push(0);
            out.extend_from_slice(&[0; 16]);
        }
    }
    out.push(h.ecn.map_or(0, |e| 1 + (e & 3)));
    out.extend_from_slice(h.data);
}

/// Read a datagram's wire form; `None` for anything malformed.
pub(crate) fn decode(bytes: &[u8]) -> Option<Handed<'_>> {
    if bytes.len() <= HEADER || bytes.len() > HEADER + MAX_DATAGRAM {
        return None;
    }
    let remote_ip = get_ip(bytes[0], &bytes[1..17])?;
    let remote_port = u16::from_be_bytes([bytes[17], bytes[18]]);
    let port = u16::from_be_bytes([bytes[19], bytes[20]]);
    let local_ip = match bytes[21] {
        0 => None,
        f => Some(get_ip(f, &bytes[22..38])?),
    };
    let ecn = match bytes[38] {
        0 => None,
        e @ 1..=4 => Some(e - 1),
        _ => return None,
    };
    Some(Handed {
        remote: SocketAddr::new(remote_ip, remote_port),
        port,
        local_ip,
        ecn,
        data: &bytes[HEADER..],
    })
}

/// Where a worker can hand datagrams: the inboxes of its generation's
/// workers and of older generations' still alive, by the owner their
/// connection IDs name.
#[derive(Debug, Default)]
pub(crate) struct Post {
    boxes: Vec<(Owner, UnixDatagram)>,
}

impl Post {
    /// Inboxes by owner (the supervisor's labels, in fd order).
    pub(crate) fn new(boxes: Vec<(Owner, UnixDatagram)>) -> io::Result<Post> {
        for (_, b) in &boxes {
            b.set_nonblocking(true)?;
        }
        Ok(Post { boxes })
    }

    /// Hand `wire` (an [`encode`]d datagram) to `owner`'s inbox: `false`
    /// when there is none (its generation is gone) or it is full.
    pub(crate) fn send(&self, owner: Owner, wire: &[u8]) -> bool {
        self.boxes
            .iter()
            .find(|(o, _)| *o == owner)
            .is_some_and(|(_, b)| b.send(wire).is_ok())
    }
}

/// A worker's inbox: what other workers hand it.
pub(crate) struct Inbox {
    socket: UnixDatagram,
    ready: monoio::net::unix::UnixDatagram,
}

impl Inbox {
    pub(crate) fn new(socket: UnixDatagram) -> io::Result<Inbox> {
        socket.set_nonblocking(true)?;
        let ready = monoio::net::unix::UnixDatagram::from_std(socket.try_clone()?)?;
        Ok(Inbox { socket, ready })
    }

    /// The next handed datagram's wire form into `buf`; `WouldBlock` when
    /// there is none.
    pub(crate) fn recv<'b>(&self, buf: &'b mut [u8]) -> io::Result<&'b [u8]> {
        let n = self.socket.recv(buf)?;
        Ok(&buf[..n])
    }

    pub(crate) async fn readable(&self) -> io::Result<()> {
        self.ready.readable(false).await
    }
}

/// The room one handed datagram needs.
pub(crate) const WIRE_BYTES: usize = HEADER + MAX_DATAGRAM;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_comes_back_as_it_was_handed_over() {
        let cases = [
            Handed {
                remote: "127.0.0.1:4433".parse().unwrap(),
                port: 443,
                local_ip: Some("127.0.0.1".parse().unwrap()),
                ecn: Some(2),
                data: b"\x40quic",
            },
            Handed {
                remote: "[::1]:65535".parse().unwrap(),
                port: 8443,
                local_ip: None,
                ecn: None,
                data: &[0xc0; 1200],
            },
            Handed {
                remote: "10.0.0.1:1".parse().unwrap(),
                port: 1,
                local_ip: Some("::1".parse().unwrap()),
                ecn: Some(0),
                data: b"x",
            },
        ];
        let mut wire = Vec::new();
        for h in cases {
            encode(&mut wire, &h);
            assert_eq!(decode(&wire), Some(h));
        }
    }

    #[test]
    fn malformed_wire_forms_are_refused() {
        let mut wire = Vec::new();
        encode(
            &mut wire,
            &Handed {
                remote: "127.0.0.1:1".parse().unwrap(),
                port: 2,
                local_ip: None,
                ecn: None,
                data: b"d",
            },
        );
        assert!(decode(&wire[..HEADER]).is_none(), "no datagram");
        let mut bad = wire.clone();
        bad[0] = 5;
        assert!(decode(&bad).is_none(), "family");
        let mut bad = wire.clone();
        bad[38] = 9;
        assert!(decode(&bad).is_none(), "ecn");
        assert!(decode(&[]).is_none());
    }

    #[test]
    fn the_post_reaches_the_owner_named_and_no_other() {
        let (a_tx, a_rx) = UnixDatagram::pair().unwrap();
        let (b_tx, b_rx) = UnixDatagram::pair().unwrap();
        let a = Owner {
            slot: 0,
            generation: 1,
        };
        let b = Owner {
            slot: 1,
            generation: 1,
        };
        let post = Post::new(vec![(a, a_tx), (b, b_tx)]).unwrap();
        assert!(post.send(b, b"to b"));
        assert!(!post.send(
            Owner {
                slot: 0,
                generation: 2
            },
            b"nobody"
        ));
        b_rx.set_nonblocking(true).unwrap();
        a_rx.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(b_rx.recv(&mut buf).unwrap(), 4);
        assert!(a_rx.recv(&mut buf).is_err());
    }
}
