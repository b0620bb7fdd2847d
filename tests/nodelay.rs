//! TCP_NODELAY on every accepted socket, read back from the server's own
//! socket: the real binary is started by the shared harness, the accepted
//! socket is found in its fd table (by the inode `/proc/net/tcp` gives the
//! connection), and a duplicate of it is taken with pidfd_getfd(2) (Linux
//! 5.6; the test is the server's parent, which ptrace access allows) to ask
//! the kernel.
#![allow(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use common::TestServer;

/// The inode of the socket whose local port is `local` and remote `remote`,
/// from /proc/net/tcp (addresses are hex `IP:PORT`).
fn socket_inode(local: u16, remote: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let port = |a: &str| u16::from_str_radix(a.rsplit(':').next()?, 16).ok();
        (port(f[1])? == local && port(f[2])? == remote).then(|| f[9].parse().ok())?
    })
}

/// The fd of process `pid` whose target is `socket:[inode]`.
fn fd_of_inode(pid: u32, inode: u64) -> Option<RawFd> {
    let want = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .find_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            (target.to_str()? == want).then(|| e.file_name().to_str()?.parse().ok())?
        })
}

/// A duplicate, in this process, of fd `fd` of process `pid`
/// (pidfd_open(2), then pidfd_getfd(2)).
fn steal_fd(pid: u32, fd: RawFd) -> OwnedFd {
    // SAFETY: pidfd_open takes a pid and flags, and returns a new fd or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `pidfd` was just returned open and nothing else owns it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd takes a pidfd (open for the call), a target fd
    // number and flags, and returns a new fd or -1.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    assert!(dup >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
    // SAFETY: `dup` was just returned open and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(dup as RawFd) }
}

fn nodelay(fd: RawFd) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is an open socket of this process (our duplicate of the
    // server's, or our own client socket); `v` and `len` are valid for
    // writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt failed");
    v != 0
}

fn accepted_sockets_have_nodelay(driver: &str) {
    // Thread isolation (the default): the server's process holds the
    // accepted socket.
    let server = TestServer::builder().driver(driver).start();
    let addr = server.addr();

    // A plain TcpStream: std sets no TCP_NODELAY on it.
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = [0u8; 256];
    assert!(c.read(&mut buf).unwrap() > 0);
    let inode = socket_inode(addr.port(), c.local_addr().unwrap().port()).expect("server socket");
    let fd = fd_of_inode(server.pid(), inode).expect("server fd");
    let fd = steal_fd(server.pid(), fd);
    assert!(
        nodelay(fd.as_raw_fd()),
        "TCP_NODELAY not set on the accepted socket"
    );
    assert!(!nodelay(c.as_raw_fd()));
}

#[test]
fn uring_accepted_sockets_have_nodelay() {
    accepted_sockets_have_nodelay("uring");
}

#[test]
fn epoll_accepted_sockets_have_nodelay() {
    accepted_sockets_have_nodelay("epoll");
}
