//! Listening sockets: bound before the barrier, listening only at COMMIT.
//!
//! Owns: creating every listening socket of a generation and deciding which
//! worker gets which (a [`ListenerPlan`]). Does not own accepting
//! (`worker`) or the barrier that decides when to listen (`supervisor`).
//!
//! Flow:
//! 1. `ListenerPlan::bind(config)` before any worker starts:
//!    - systemd socket activation (`LISTEN_FDS`): the inherited sockets are
//!      used as shared listeners and `--bind` is ignored;
//!    - `reuseport`: one SO_REUSEPORT socket per worker per address, bound but
//!      not listening (a bound, non-listening socket is not in the kernel's
//!      reuseport group, so nothing can queue on it before COMMIT). A port 0
//!      is resolved by the first socket and reused by the rest;
//!    - `shared`: one bound socket per address; each worker gets a dup.
//! 2. Each worker takes its `Vec<Socket>` and, at COMMIT, listens on them
//!    (`worker::accept`).
//! 3. With HTTP/3 on (`--h3`), each TLS listener's port also gets one UDP
//!    socket per worker, bound in slot order whatever the listener mode, so
//!    socket `i` of the port's `SO_REUSEPORT` group is worker `i`'s; the
//!    steering program (`quic::steer`) is attached to the group, so each
//!    datagram reaches the worker its connection ID names. UDP has no
//!    listen: datagrams that arrive before COMMIT wait in the sockets.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::{Config, ListenerMode};

/// Why the listeners could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot bind {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot create a socket for {addr}: {source}")]
    Socket { addr: SocketAddr, source: io::Error },
    #[error("cannot use the sockets passed by systemd (LISTEN_FDS): {0}")]
    Inherited(io::Error),
}

/// Binds of a plan whose TLS port the kernel chose (port 0), tried until
/// its UDP sockets can take that port too.
const PORT_ZERO_TRIES: u32 = 8;

/// Where the listening sockets came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    ReusePort,
    Shared,
    /// systemd socket activation.
    Systemd,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::ReusePort => "reuseport",
            Source::Shared => "shared",
            Source::Systemd => "systemd",
        }
    }
}

/// The sockets of one generation: `per_worker[i]` is worker i's set.
#[derive(Debug)]
pub struct ListenerPlan {
    pub source: Source,
    /// The addresses actually bound (port 0 resolved), in `--bind` order.
    pub addrs: Vec<SocketAddr>,
    /// Whether the socket at the same index (in `addrs` and in each
    /// worker's set) is a TLS listener.
    pub tls: Vec<bool>,
    pub per_worker: Vec<Vec<Socket>>,
    /// The UDP ports of HTTP/3 (the TLS listeners' addresses), and each
    /// group member's socket on each: `udp[i]` is member i's set (the
    /// `i`-th socket of each port's `SO_REUSEPORT` group, which the
    /// steering program names by slot `i`), in the order of `udp_addrs`.
    /// At least one member per worker; more after a reload that lowered
    /// the worker count, since a socket cannot leave its group without
    /// reordering it ([`ListenerPlan::udp_of_slot`] says who reads
    /// which). Empty when HTTP/3 is off.
    pub udp_addrs: Vec<SocketAddr>,
    pub udp: Vec<Vec<Socket>>,
    /// Whether the steering program is attached to each port's group.
    pub steered: bool,
}

impl ListenerPlan {
    /// Create (and bind) every listening socket for `config.workers` workers.
    ///
    /// A TLS listener asked on port 0 gets its port from its TCP socket,
    /// and HTTP/3's UDP sockets take the same port: another program may
    /// hold that port for UDP although it was free for TCP. Then the whole
    /// plan is bound again (at most 8 times), each try a
    /// fresh port; a port the operator named is never changed.
    pub fn bind(config: &Config) -> Result<ListenerPlan, Error> {
        let chosen = config
            .tls
            .as_ref()
            .is_some_and(|t| t.binds.iter().any(|a| a.port() == 0));
        let mut tries = 1;
        loop {
            match ListenerPlan::bind_once(config) {
                Err(Error::Bind { addr, source })
                    if chosen
                        && tries < PORT_ZERO_TRIES
                        && source.kind() == io::ErrorKind::AddrInUse =>
                {
                    tracing::debug!(%addr, "the port chosen for TCP is taken for UDP: again");
                    tries += 1;
                }
                plan => return plan,
            }
        }
    }

    fn bind_once(config: &Config) -> Result<ListenerPlan, Error> {
        let workers = config.workers.get();
        let inherited = crate::sys::socket::take_listen_fds().map_err(Error::Inherited)?;
        if !inherited.is_empty() {
            let sockets: Vec<Socket> = inherited.into_iter().map(Socket::from).collect();
            let addrs = sockets
                .iter()
                .map(|s| {
                    s.local_addr()
                        .ok()
                        .and_then(|a| a.as_socket())
                        .ok_or_else(|| {
                            Error::Inherited(io::Error::other("inherited socket is not TCP/IP"))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let per_worker = dup_for_workers(&sockets, workers, &addrs)?;
            return Ok(ListenerPlan {
                source: Source::Systemd,
                tls: vec![false; addrs.len()],
                addrs,
                per_worker,
                udp_addrs: Vec::new(),
                udp: Vec::new(),
                steered: false,
            });
        }

        let tls_binds = config.tls.as_ref().map_or(&[][..], |t| &t.binds[..]);
        let all: Vec<(SocketAddr, bool)> = config
            .binds
            .iter()
            .map(|&a| (a, false))
            .chain(tls_binds.iter().map(|&a| (a, true)))
            .collect();
        let tls = all.iter().map(|&(_, t)| t).collect();
        match config.listener {
            ListenerMode::Shared => {
                let mut sockets = Vec::new();
                let mut addrs = Vec::new();
                for &(addr, _) in &all {
                    let s = new_socket(addr, false)?;
                    let bound = bind(&s, addr)?;
                    sockets.push(s);
                    addrs.push(bound);
                }
                let per_worker = dup_for_workers(&sockets, workers, &addrs)?;
                ListenerPlan {
                    source: Source::Shared,
                    tls,
                    addrs,
                    per_worker,
                    udp_addrs: Vec::new(),
                    udp: Vec::new(),
                    steered: false,
                }
                .with_udp(config)
            }
            ListenerMode::ReusePort => {
                let mut per_worker: Vec<Vec<Socket>> = (0..workers).map(|_| Vec::new()).collect();
                let mut addrs = Vec::new();
                for &(addr, _) in &all {
                    let mut resolved = addr;
                    for sockets in per_worker.iter_mut() {
                        let s = new_socket(resolved, true)?;
                        resolved = bind(&s, resolved)?;
                        sockets.push(s);
                    }
                    addrs.push(resolved);
                }
                ListenerPlan {
                    source: Source::ReusePort,
                    tls,
                    addrs,
                    per_worker,
                    udp_addrs: Vec::new(),
                    udp: Vec::new(),
                    steered: false,
                }
                .with_udp(config)
            }
        }
    }

    /// Every listening socket of `config` but HTTP/3's (a reload that
    /// keeps the previous generation's UDP sockets: `with_udp_of`).
    pub fn bind_without_udp(config: &Config) -> Result<ListenerPlan, Error> {
        let mut plan = ListenerPlan::bind(&Config {
            conn: crate::worker::ConnSettings {
                http3: crate::worker::Http3Conn {
                    switch: crate::worker::H3Switch::Off,
                    ..config.conn.http3
                },
                ..config.conn
            },
            ..config.clone()
        })?;
        plan.steered = false;
        Ok(plan)
    }

    /// These listeners with `old`'s UDP sockets, for `config`'s worker
    /// count (the slots that stay keep theirs; new slots join the groups).
    pub fn with_udp_of(
        mut self,
        old: &ListenerPlan,
        config: &Config,
    ) -> Result<ListenerPlan, Error> {
        if old.udp.is_empty() {
            return self.with_udp(config);
        }
        let kept = old.with_workers(config.workers.get())?;
        self.udp_addrs = kept.udp_addrs;
        self.udp = kept.udp;
        self.steered = kept.steered;
        Ok(self)
    }

    /// These listeners with HTTP/3 as `config` says (a reload that turns
    /// it on or off): the UDP sockets kept when it stays on, made when it
    /// comes on, dropped when it goes off.
    pub fn with_h3(mut self, config: &Config) -> Result<ListenerPlan, Error> {
        if !config.conn.http3.on() {
            self.udp_addrs.clear();
            self.udp.clear();
            self.steered = false;
            return Ok(self);
        }
        if self.udp.is_empty() {
            return self.with_udp(config);
        }
        Ok(self)
    }

    /// Add HTTP/3's UDP sockets when it is on: one per worker on each TLS
    /// listener's address, in slot order, steered.
    fn with_udp(mut self, config: &Config) -> Result<ListenerPlan, Error> {
        if !config.conn.http3.on() {
            return Ok(self);
        }
        self.udp_addrs = self
            .addrs
            .iter()
            .zip(&self.tls)
            .filter(|&(_, &tls)| tls)
            .map(|(&a, _)| a)
            .collect();
        if self.udp_addrs.is_empty() {
            return Ok(self);
        }
        let workers = config.workers.get();
        self.udp = (0..workers).map(|_| Vec::new()).collect();
        self.steered = true;
        for &addr in &self.udp_addrs {
            for sockets in self.udp.iter_mut() {
                let s = new_udp_socket(addr)?;
                bind(&s, addr)?;
                sockets.push(s);
            }
            let first = &self.udp[0][self.udp[0].len() - 1];
            if crate::worker::fault::quic_unsteered() {
                tracing::warn!(%addr, "injected: QUIC steering not attached (SERVERY_TEST_FAULT)");
                self.steered = false;
                continue;
            }
            if let Err(e) = crate::quic::steer::attach(std::os::fd::AsFd::as_fd(first)) {
                tracing::warn!(
                    %addr,
                    error = %e,
                    "cannot attach the QUIC steering program; datagrams reaching the wrong \
                     worker are handed to their owner (servery_quic_misrouted_total)"
                );
                self.steered = false;
            }
        }
        Ok(self)
    }
}

impl ListenerPlan {
    /// The same listening sockets for `workers` slots (a reload that changes
    /// the worker count): shared and inherited sockets are dup'ed again;
    /// reuseport slots keep their sockets and new slots bind new ones on the
    /// same ports. No listening socket is closed, so nothing queued is lost
    /// (slots removed keep their sockets until the old generation drains).
    pub fn with_workers(&self, workers: usize) -> Result<ListenerPlan, Error> {
        let per_worker = match self.source {
            Source::Shared | Source::Systemd => {
                let first = self.per_worker.first().map(Vec::as_slice).unwrap_or(&[]);
                dup_for_workers(first, workers, &self.addrs)?
            }
            Source::ReusePort => per_slot(&self.per_worker, &self.addrs, workers, |a| {
                new_socket(a, true)
            })?,
        };
        // Every UDP socket of the groups stays (the groups' order is the
        // slots', and a socket closed would move the ones after it); new
        // slots past the groups' ends join them there.
        let udp = if self.udp_addrs.is_empty() {
            Vec::new()
        } else {
            let members = workers.max(self.udp.len());
            per_slot(&self.udp, &self.udp_addrs, members, new_udp_socket)?
        };
        Ok(ListenerPlan {
            source: self.source,
            addrs: self.addrs.clone(),
            tls: self.tls.clone(),
            per_worker,
            udp_addrs: self.udp_addrs.clone(),
            udp,
            steered: self.steered,
        })
    }
}

impl ListenerPlan {
    /// The UDP sockets worker `slot` of `workers` reads: its own group
    /// member's first, then those of the members no worker has (past
    /// `workers`, left by a reload that lowered the count), shared out by
    /// slot: member `i` goes to worker `i % workers`. A client's first
    /// packet may reach any member (the kernel's hash); every member is
    /// read, and a datagram of another worker's connection is handed over.
    pub fn udp_of_slot(&self, slot: usize, workers: usize) -> Vec<&Socket> {
        (slot..self.udp.len())
            .step_by(workers.max(1))
            .flat_map(|i| self.udp[i].iter())
            .collect()
    }
}

/// Each of `workers` slots' sockets on `addrs`: a slot `old` has keeps its
/// very sockets (duplicated), a new slot gets new ones, made by `make` and
/// bound, which join their `SO_REUSEPORT` groups at the end (slot order).
fn per_slot(
    old: &[Vec<Socket>],
    addrs: &[SocketAddr],
    workers: usize,
    make: impl Fn(SocketAddr) -> Result<Socket, Error>,
) -> Result<Vec<Vec<Socket>>, Error> {
    (0..workers)
        .map(|slot| match old.get(slot) {
            Some(sockets) => sockets
                .iter()
                .zip(addrs)
                .map(|(s, &addr)| {
                    s.try_clone()
                        .map_err(|source| Error::Socket { addr, source })
                })
                .collect(),
            None => addrs
                .iter()
                .map(|&addr| {
                    let s = make(addr)?;
                    bind(&s, addr)?;
                    Ok(s)
                })
                .collect(),
        })
        .collect()
}

fn dup_for_workers(
    sockets: &[Socket],
    workers: usize,
    addrs: &[SocketAddr],
) -> Result<Vec<Vec<Socket>>, Error> {
    (0..workers)
        .map(|_| {
            sockets
                .iter()
                .zip(addrs)
                .map(|(s, &addr)| {
                    s.try_clone()
                        .map_err(|source| Error::Socket { addr, source })
                })
                .collect()
        })
        .collect()
}

fn new_socket(addr: SocketAddr, reuseport: bool) -> Result<Socket, Error> {
    let err = |source| Error::Socket { addr, source };
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.cloexec(),
        Some(Protocol::TCP),
    )
    .map_err(err)?;
    s.set_reuse_address(true).map_err(err)?;
    if reuseport {
        s.set_reuse_port(true).map_err(err)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true).map_err(err)?;
    }
    s.set_nonblocking(true).map_err(err)?;
    Ok(s)
}

fn new_udp_socket(addr: SocketAddr) -> Result<Socket, Error> {
    let err = |source| Error::Socket { addr, source };
    let s = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM.cloexec(),
        Some(Protocol::UDP),
    )
    .map_err(err)?;
    s.set_reuse_port(true).map_err(err)?;
    if addr.is_ipv6() {
        s.set_only_v6(true).map_err(err)?;
    }
    s.set_nonblocking(true).map_err(err)?;
    // Room for a burst of datagrams while the worker is busy (the kernel's
    // default, ~208 KiB, is 170 full datagrams; a GSO send is 64 of them).
    // Asked for, not insisted on: the kernel caps it at net.core.rmem_max
    // and wmem_max, which an operator raises for more.
    let _ = s.set_recv_buffer_size(UDP_BUFFER_BYTES);
    let _ = s.set_send_buffer_size(UDP_BUFFER_BYTES);
    Ok(s)
}

/// What each QUIC socket asks of the kernel for its receive and send
/// buffers (quinn and Caddy ask for 7 MiB, nginx leaves the default).
const UDP_BUFFER_BYTES: usize = 4 << 20;

fn bind(s: &Socket, addr: SocketAddr) -> Result<SocketAddr, Error> {
    s.bind(&addr.into())
        .map_err(|source| Error::Bind { addr, source })?;
    s.local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .ok_or_else(|| Error::Bind {
            addr,
            source: io::Error::other("bound socket has no IP address"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(workers: usize, mode: ListenerMode) -> Config {
        let mut c = crate::config::RawConfig {
            root: Some(std::env::temp_dir()),
            bind: Some(vec!["127.0.0.1:0".into()]),
            no_pin: true,
            workers: Some(crate::config::WorkerCount::Count(workers as u64)),
            ..Default::default()
        }
        .validate_with(&crate::config::CpuSet::default(), &[])
        .unwrap();
        c.listener = mode;
        c
    }

    /// Five group members read by two workers (a reload lowered the count
    /// from five): worker 0 reads members 0, 2 and 4, worker 1 members 1
    /// and 3, each its own first; and a reload back up to five keeps all
    /// five members, in their order.
    #[test]
    fn udp_members_past_the_worker_count_are_shared_out_by_slot() {
        use std::os::fd::AsRawFd;
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let plan = ListenerPlan {
            source: Source::ReusePort,
            addrs: Vec::new(),
            tls: Vec::new(),
            per_worker: Vec::new(),
            udp_addrs: vec![addr],
            udp: (0..5)
                .map(|_| vec![Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap()])
                .collect(),
            steered: false,
        };
        let fd = |i: usize| plan.udp[i][0].as_raw_fd();
        let read = |slot| -> Vec<i32> {
            plan.udp_of_slot(slot, 2)
                .iter()
                .map(|s| s.as_raw_fd())
                .collect()
        };
        assert_eq!(read(0), vec![fd(0), fd(2), fd(4)]);
        assert_eq!(read(1), vec![fd(1), fd(3)]);
        let all: Vec<i32> = (0..5)
            .map(|i| plan.udp_of_slot(i, 5)[0].as_raw_fd())
            .collect();
        assert_eq!(all, (0..5).map(fd).collect::<Vec<_>>());
        assert!(plan.udp_of_slot(0, 5).len() == 1);
    }

    #[test]
    fn reuseport_resolves_port_zero_once() {
        let plan = ListenerPlan::bind(&config(3, ListenerMode::ReusePort)).unwrap();
        assert_eq!(plan.per_worker.len(), 3);
        let port = plan.addrs[0].port();
        assert_ne!(port, 0);
        for w in &plan.per_worker {
            let a = w[0].local_addr().unwrap().as_socket().unwrap();
            assert_eq!(a.port(), port);
        }
    }

    #[test]
    fn bound_sockets_refuse_until_listen() {
        let plan = ListenerPlan::bind(&config(1, ListenerMode::Shared)).unwrap();
        let addr = plan.addrs[0];
        assert!(std::net::TcpStream::connect(addr).is_err());
        let mut per_worker = plan.per_worker;
        // What a worker does at COMMIT (`worker::accept::listen`).
        let l = per_worker.remove(0).remove(0);
        l.listen(16).unwrap();
        assert!(std::net::TcpStream::connect(addr).is_ok());
        drop(l);
    }
}
