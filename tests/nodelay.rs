//! TCP_NODELAY on every accepted socket, read back from the server's own
//! socket. The server runs in this process (library API), so the test can
//! find the accepted socket among its own fds and ask the kernel.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::RawFd;
use std::time::Duration;

use servery::app::MakeError;
use servery::config::RawConfig;
use servery::http::{Body, Head, Response, Status};

struct Ok200;

impl servery::app::Handler for Ok200 {
    fn handle(&self, _: &Head<'_>) -> Response {
        Response::new(Status::OK, Body::Bytes(bytes::Bytes::from_static(b"ok")))
    }
}

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

/// Our own fd whose target is `socket:[inode]`.
fn fd_of_inode(inode: u64) -> Option<RawFd> {
    let want = format!("socket:[{inode}]");
    std::fs::read_dir("/proc/self/fd").ok()?.find_map(|e| {
        let e = e.ok()?;
        let target = std::fs::read_link(e.path()).ok()?;
        (target.to_str()? == want).then(|| e.file_name().to_str()?.parse().ok())?
    })
}

fn nodelay(fd: RawFd) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is an open socket of this process (the server holds the
    // connection open while we ask); `v` and `len` are valid for writes of
    // the sizes given.
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
    let config = RawConfig {
        root: Some(std::env::temp_dir()),
        bind: Some(vec!["127.0.0.1:0".into()]),
        no_pin: true,
        driver: Some(driver.parse().unwrap()),
        ..RawConfig::default()
    }
    .validate()
    .unwrap();
    let server = servery::Server::new(config, |_| Ok::<_, MakeError>(Ok200));
    let handle = server.handle();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || server.run(|r| tx.send(r.addrs[0]).unwrap()));
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();

    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut buf = [0u8; 256];
    assert!(c.read(&mut buf).unwrap() > 0);
    let inode = socket_inode(addr.port(), c.local_addr().unwrap().port()).expect("server socket");
    let fd = fd_of_inode(inode).expect("server fd");
    assert!(nodelay(fd), "TCP_NODELAY not set on the accepted socket");
    assert!(!nodelay({
        use std::os::fd::AsRawFd;
        c.as_raw_fd()
    }));

    drop(c);
    handle.stop();
    thread.join().unwrap().unwrap();
}

#[test]
fn uring_accepted_sockets_have_nodelay() {
    accepted_sockets_have_nodelay("uring");
}

#[test]
fn epoll_accepted_sockets_have_nodelay() {
    accepted_sockets_have_nodelay("epoll");
}
