//! The control channel between the supervisor and a worker process.
//!
//! One SOCK_SEQPACKET socketpair per worker: message boundaries are kept by
//! the kernel, so each message is one JSON datagram, and file descriptors
//! ride along as SCM_RIGHTS. The channel carries control only, never
//! application data. EOF on the worker's end means the supervisor is gone.
//!
//! Supervisor → worker: `Init` (once, with the listening sockets and the
//! budget memfd attached), then `Control` messages (COMMIT, ABORT, DRAIN,
//! FORCE, BEAT). Worker → supervisor: every lifecycle transition (PREPARED,
//! READY = `Running`, FAILED = `Aborted` with a reason, ...) and beat replies
//! with a counters snapshot.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::RawConfig;
use crate::control::{Control, Report};
use crate::sys::fdpass;
use crate::telemetry::Snapshot;

/// Largest datagram either side sends (a config with many header rules).
pub const MAX_MESSAGE: usize = 256 * 1024;

/// What a worker process needs to become worker `slot` of `generation`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Init {
    pub slot: usize,
    pub generation: u64,
    pub cpu: Option<usize>,
    /// The generation's raw config; the worker validates it into the same
    /// `Config` the supervisor holds.
    pub config: RawConfig,
    /// How many listening sockets are attached (first in the fd list).
    pub listeners: usize,
    /// How many UDP sockets for HTTP/3 follow them.
    #[serde(default)]
    pub udp: usize,
    /// Whether the worker's QUIC inbox follows them, then the inboxes it
    /// may send to, labelled (slot, generation) in fd order.
    #[serde(default)]
    pub inbox: bool,
    #[serde(default)]
    pub post: Vec<(u8, u8)>,
    /// Whether the budget memfd is attached (last in the fd list).
    pub budget: bool,
    /// Which listeners are TLS (same order as the fds).
    pub tls_flags: Vec<bool>,
    /// The generation's certificates and keys by site, and the shared
    /// ticket secret: every worker presents the same identities and opens
    /// every worker's tickets.
    pub tls: Option<(Vec<Option<crate::tls::Material>>, crate::tls::TicketSecret)>,
    /// What the supervisor's ACME has published so far (challenge answers
    /// still pending and certificates): a replacement started while a
    /// challenge is open answers it too.
    pub acme: Vec<crate::sites::published::Update>,
}

/// Supervisor → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToWorker {
    Init(Box<Init>),
    Control(Control),
    /// An ACME answer or certificate (`sites::published`), numbered so the
    /// worker can acknowledge it.
    Acme {
        seq: u64,
        update: crate::sites::published::Update,
    },
}

/// Worker → supervisor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FromWorker {
    /// A transition or a beat reply.
    Report {
        report: Report,
        /// Present on beat replies (boxed: most of the message's size).
        snapshot: Option<Box<Snapshot>>,
    },
    /// ACME update `seq` is in this process's table.
    Applied(u64),
}

/// Send one message with `fds` attached.
pub fn send<T: Serialize>(sock: BorrowedFd<'_>, msg: &T, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let data = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if data.len() > MAX_MESSAGE {
        return Err(io::Error::other(format!(
            "control message of {} bytes exceeds {MAX_MESSAGE}",
            data.len()
        )));
    }
    fdpass::send(sock, &data, fds)
}

/// Receive one message; `Ok(None)` on EOF (the other side is gone).
pub fn recv<T: DeserializeOwned>(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    loop {
        match fdpass::recv(sock, buf) {
            Ok((0, _)) => return Ok(None),
            Ok((n, fds)) => {
                let msg = serde_json::from_slice(&buf[..n])
                    .map_err(|e| io::Error::other(format!("bad control message: {e}")))?;
                return Ok(Some((msg, fds)));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn messages_and_fds_cross_a_socketpair() {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let file = std::fs::File::open("/").unwrap();
        send(
            a.as_fd(),
            &ToWorker::Control(Control::Beat(7)),
            &[file.as_fd()],
        )
        .unwrap();
        let mut buf = vec![0u8; MAX_MESSAGE];
        let (msg, fds) = recv::<ToWorker>(b.as_fd(), &mut buf).unwrap().unwrap();
        assert!(matches!(msg, ToWorker::Control(Control::Beat(7))));
        assert_eq!(fds.len(), 1);
        drop(a);
        assert!(recv::<ToWorker>(b.as_fd(), &mut buf).unwrap().is_none());
    }
}
