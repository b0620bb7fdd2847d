//! `servery-load probe`: a minimal io_uring HTTP/1.1 responder for measuring the ring
//! mechanisms servery's runtime does not expose, each against the single-shot receive servery
//! uses, in one loop that differs in nothing else.
//!
//! Owns: one pinned thread, one ring (`sys::uring`), a table of connections, and one
//! prebuilt response per file of `--root` (read into memory at start; any other path gets the
//! first file). It parses nothing but each head's request path and end (`\r\n\r\n`), so it
//! measures the kernel crossings and buffer ownership of each mode, not HTTP work. Not a
//! server: no methods, no limits beyond its buffer counts.
//!
//! Modes (`--recv`):
//! - `single`: each connection owns an 8 KiB buffer and has one receive in flight with it,
//!   re-armed after each answer (servery's shape: read, write, read).
//! - `multishot`: one multishot receive per connection over a shared provided-buffer ring; a
//!   connection owns no buffer, idle or not, and re-arms only when the kernel ends the shot.
//!
//! Sends (`--send`): `writev` of head and body (servery's shape), or `zc`: one `SEND_ZC` of a
//! contiguous head+body (its notification completion is counted, not waited for).

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

use slab::Slab;

use crate::sys::uring::{adopt, Completion, Ring};

/// How connections receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Recv {
    /// One receive in flight per connection, with its own buffer.
    Single,
    /// One multishot receive per connection over a shared provided-buffer ring.
    Multishot,
}

/// How responses are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Send {
    /// `writev` of the head and the body.
    Writev,
    /// `SEND_ZC` of a contiguous head and body.
    Zc,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub bind: SocketAddr,
    pub recv: Recv,
    pub send: Send,
    /// Directory whose regular files (top level) are served by name.
    pub root: std::path::PathBuf,
    /// CPU to pin the thread to.
    pub cpu: Option<usize>,
}

/// Per-connection buffer in `single` mode (servery's pooled read buffer size).
const SINGLE_BUF_BYTES: usize = 8 * 1024;
/// Provided buffers shared by every connection in `multishot` mode, and their size.
const PROVIDED_COUNT: u16 = 1024;
const PROVIDED_BYTES: usize = 4 * 1024;
const PROVIDED_GROUP: u16 = 7;
/// Submission slots.
const RING_ENTRIES: u32 = 4096;

const ACCEPT: u64 = 0;
const RECV: u64 = 1;
const SEND: u64 = 2;

fn tag(kind: u64, key: usize) -> u64 {
    (kind << 32) | key as u64
}

fn untag(user_data: u64) -> (u64, usize) {
    (user_data >> 32, (user_data & 0xffff_ffff) as usize)
}

struct Conn {
    fd: TcpStream,
    /// Where the current head stands (its path, its end).
    head: HeadScan,
    /// Answers (indexes into the table) of heads complete and not yet sent, oldest first.
    pending: std::collections::VecDeque<u16>,
    /// A send (or writev) is in flight.
    sending: bool,
    /// The pieces of the write in flight, resent from where a short write stopped.
    unsent: Vec<&'static [u8]>,
    /// `single` mode: the buffer, while no receive holds it.
    buf: Option<Vec<u8>>,
    /// The receive ended (EOF or error): close once no send is in flight.
    closing: bool,
}

/// One file's response, in the shapes the send modes need (leaked once: lives for the
/// process).
struct Answer {
    path: String,
    head: &'static [u8],
    body: &'static [u8],
    whole: &'static [u8],
}

impl Answer {
    fn new(path: String, body: Vec<u8>) -> Answer {
        let head = format!(
            "HTTP/1.1 200 OK\r\nServer: probe\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        let mut whole = head.clone();
        whole.extend_from_slice(&body);
        Answer {
            path,
            head: Vec::leak(head),
            body: Vec::leak(body),
            whole: Vec::leak(whole),
        }
    }
}

/// Every regular file at the top of `root`, as `/name`.
fn load(root: &std::path::Path) -> anyhow::Result<Vec<Answer>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            out.push(Answer::new(
                format!("/{name}"),
                std::fs::read(entry.path())?,
            ));
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    anyhow::ensure!(!out.is_empty(), "no files in {}", root.display());
    anyhow::ensure!(out.len() <= usize::from(u16::MAX), "too many files");
    Ok(out)
}

/// Longest request path kept (longer ones get the first file).
const PATH_BYTES: usize = 32;

/// An incremental scan of request heads: the path of the current one, and its end.
#[derive(Debug, Default)]
struct HeadScan {
    /// Spaces seen on the request line (the path is between the first two).
    spaces: u8,
    /// The request line is over.
    line_done: bool,
    path: [u8; PATH_BYTES],
    path_len: u8,
    /// Bytes of `\r\n\r\n` matched at the end of what has arrived.
    matched: u8,
}

impl HeadScan {
    /// Feed `bytes`; `done` gets the path of each head that ends in them.
    fn feed(&mut self, bytes: &[u8], mut done: impl FnMut(&[u8])) {
        const END: &[u8; 4] = b"\r\n\r\n";
        for &b in bytes {
            if !self.line_done {
                match b {
                    b' ' => self.spaces += 1,
                    b'\r' | b'\n' => self.line_done = true,
                    _ if self.spaces == 1 && usize::from(self.path_len) < PATH_BYTES => {
                        self.path[usize::from(self.path_len)] = b;
                        self.path_len += 1;
                    }
                    _ => {}
                }
            }
            if b == END[usize::from(self.matched)] {
                self.matched += 1;
                if self.matched == 4 {
                    done(&self.path[..usize::from(self.path_len)]);
                    *self = HeadScan::default();
                }
            } else {
                self.matched = u8::from(b == b'\r');
            }
        }
    }
}

/// The answer for `path`: its file, else the first.
fn lookup(answers: &[Answer], path: &[u8]) -> u16 {
    answers
        .iter()
        .position(|a| a.path.as_bytes() == path)
        .unwrap_or(0) as u16
}

/// Bind, print `probe: listening on ADDR`, and serve until killed.
pub fn run(opts: &Options) -> anyhow::Result<()> {
    if let Some(cpu) = opts.cpu {
        anyhow::ensure!(crate::sys::affinity::pin(cpu), "cannot pin to cpu {cpu}");
    }
    let answers = load(&opts.root)?;
    let listener = TcpListener::bind(opts.bind)?;
    // The ready line servery prints, so scripts can start either the same way.
    println!("probe: ready on http://{}", listener.local_addr()?);
    let mut ring = Ring::new(RING_ENTRIES)?;
    if opts.recv == Recv::Multishot {
        ring.provide(PROVIDED_COUNT, PROVIDED_BYTES, PROVIDED_GROUP)?;
    }
    ring.accept_multi(listener.as_raw_fd(), tag(ACCEPT, 0))?;
    let mut conns: Slab<Conn> = Slab::new();
    let mut done = Vec::with_capacity(256);
    loop {
        ring.wait()?;
        ring.reap(&mut done);
        for c in done.drain(..) {
            let (kind, key) = untag(c.user_data);
            match kind {
                ACCEPT => on_accept(&mut ring, &mut conns, opts, &c, listener.as_raw_fd())?,
                RECV => on_recv(&mut ring, &mut conns, opts, &answers, key, c)?,
                _ => on_sent(&mut ring, &mut conns, opts, &answers, key, &c)?,
            }
        }
    }
}

fn on_accept(
    ring: &mut Ring,
    conns: &mut Slab<Conn>,
    opts: &Options,
    c: &Completion,
    listener: RawFd,
) -> io::Result<()> {
    if !c.more() {
        ring.accept_multi(listener, tag(ACCEPT, 0))?;
    }
    if c.result < 0 {
        return Ok(());
    }
    let fd = TcpStream::from(adopt(c.result));
    let _ = fd.set_nodelay(true);
    let raw = fd.as_raw_fd();
    let key = conns.insert(Conn {
        fd,
        head: HeadScan::default(),
        pending: std::collections::VecDeque::new(),
        sending: false,
        unsent: Vec::new(),
        buf: None,
        closing: false,
    });
    match opts.recv {
        Recv::Multishot => ring.recv_multi(raw, tag(RECV, key)),
        Recv::Single => ring.recv(raw, Vec::with_capacity(SINGLE_BUF_BYTES), tag(RECV, key)),
    }
}

fn on_recv(
    ring: &mut Ring,
    conns: &mut Slab<Conn>,
    opts: &Options,
    answers: &[Answer],
    key: usize,
    c: Completion,
) -> io::Result<()> {
    let Some(conn) = conns.get_mut(key) else {
        return Ok(());
    };
    if c.result <= 0 {
        if let Some(bid) = c.buffer_id() {
            ring.recycle(bid);
        }
        // Out of provided buffers: the shot ended but the connection lives; re-arm.
        if c.result == -libc::ENOBUFS {
            return ring.recv_multi(conn.fd.as_raw_fd(), tag(RECV, key));
        }
        conn.closing = true;
        if !conn.sending {
            conns.remove(key);
        }
        return Ok(());
    }
    let n = c.result as usize;
    match (opts.recv, c.buffer_id()) {
        (Recv::Multishot, Some(bid)) => {
            let pending = &mut conn.pending;
            conn.head.feed(ring.provided(bid, n), |p| {
                pending.push_back(lookup(answers, p))
            });
            ring.recycle(bid);
            if !c.more() {
                ring.recv_multi(conn.fd.as_raw_fd(), tag(RECV, key))?;
            }
        }
        _ => {
            let buf = c.buf.unwrap_or_default();
            let pending = &mut conn.pending;
            conn.head
                .feed(&buf, |p| pending.push_back(lookup(answers, p)));
            conn.buf = Some(buf);
        }
    }
    if !conn.pending.is_empty() && !conn.sending {
        send(ring, conn, opts, answers, key)?;
    } else if opts.recv == Recv::Single && !conn.sending {
        // A partial head: read on.
        let buf = conn.buf.take().unwrap_or_default();
        ring.recv(conn.fd.as_raw_fd(), buf, tag(RECV, key))?;
    }
    Ok(())
}

fn send(
    ring: &mut Ring,
    conn: &mut Conn,
    opts: &Options,
    answers: &[Answer],
    key: usize,
) -> io::Result<()> {
    conn.unsent.clear();
    match opts.send {
        Send::Writev => {
            // Pending answers in one write (pipelining), head and body each.
            while conn.unsent.len() < 128 {
                let Some(i) = conn.pending.pop_front() else {
                    break;
                };
                let a = &answers[usize::from(i)];
                conn.unsent.push(a.head);
                conn.unsent.push(a.body);
            }
        }
        Send::Zc => {
            let i = conn.pending.pop_front().unwrap_or(0);
            conn.unsent.push(answers[usize::from(i)].whole);
        }
    }
    resend(ring, conn, opts, key)
}

/// Write what is left of the write in flight.
fn resend(ring: &mut Ring, conn: &mut Conn, opts: &Options, key: usize) -> io::Result<()> {
    conn.sending = true;
    let fd = conn.fd.as_raw_fd();
    match (opts.send, conn.unsent.as_slice()) {
        (Send::Zc, [one]) => ring.send_zc(fd, one, tag(SEND, key)),
        _ => ring.writev(fd, &conn.unsent, tag(SEND, key)),
    }
}

/// Drop `n` written bytes from the front of `unsent`.
fn advance(unsent: &mut Vec<&'static [u8]>, mut n: usize) {
    let mut done = 0;
    for part in unsent.iter_mut() {
        if n >= part.len() {
            n -= part.len();
            done += 1;
        } else {
            *part = &part[n..];
            break;
        }
    }
    unsent.drain(..done);
}

fn on_sent(
    ring: &mut Ring,
    conns: &mut Slab<Conn>,
    opts: &Options,
    answers: &[Answer],
    key: usize,
    c: &Completion,
) -> io::Result<()> {
    if c.is_notification() {
        return Ok(());
    }
    let Some(conn) = conns.get_mut(key) else {
        return Ok(());
    };
    conn.sending = false;
    if conn.closing || c.result <= 0 {
        conns.remove(key);
        return Ok(());
    }
    advance(&mut conn.unsent, c.result as usize);
    if !conn.unsent.is_empty() {
        return resend(ring, conn, opts, key);
    }
    if !conn.pending.is_empty() {
        return send(ring, conn, opts, answers, key);
    }
    if opts.recv == Recv::Single {
        let buf = conn
            .buf
            .take()
            .unwrap_or_else(|| Vec::with_capacity(SINGLE_BUF_BYTES));
        ring.recv(conn.fd.as_raw_fd(), buf, tag(RECV, key))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(scan: &mut HeadScan, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        scan.feed(bytes, |p| out.push(String::from_utf8_lossy(p).into_owned()));
        out
    }

    #[test]
    fn heads_and_their_paths_are_found_across_reads() {
        let mut s = HeadScan::default();
        assert!(heads(&mut s, b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r").is_empty());
        assert_eq!(
            heads(&mut s, b"\nGET /b HTTP/1.1\r\n\r\nGET"),
            ["/a.bin", "/b"]
        );
        assert_eq!(heads(&mut s, b" /c\r\n\r\n"), ["/c"]);
    }

    #[test]
    fn a_lone_cr_restarts_the_match() {
        let mut s = HeadScan::default();
        assert_eq!(heads(&mut s, b"GET /x HTTP/1.1\r\r\n\r\n"), ["/x"]);
    }

    #[test]
    fn a_short_write_resumes_mid_piece() {
        let mut unsent: Vec<&'static [u8]> = vec![b"head", b"body"];
        advance(&mut unsent, 6);
        assert_eq!(unsent, [b"dy".as_slice()]);
        advance(&mut unsent, 2);
        assert!(unsent.is_empty());
    }

    #[test]
    fn an_unknown_path_gets_the_first_file() {
        let answers = vec![
            Answer::new("/a".into(), b"1".to_vec()),
            Answer::new("/b".into(), b"2".to_vec()),
        ];
        assert_eq!(lookup(&answers, b"/b"), 1);
        assert_eq!(lookup(&answers, b"/nope"), 0);
    }
}
