//! A tiny HTTP/1.1 server for the load generator's tests: std sockets, one thread per
//! connection, on 127.0.0.1 port 0, with scripted misbehaviours. It counts what it saw so
//! tests can compare the client's report with the server's view. A request body is read by
//! its `Content-Length` before the request is answered.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use servery_bench::plan::hex;
use sha2::{Digest, Sha256};

/// How the server answers each request.
#[derive(Clone, Debug)]
pub enum Behavior {
    /// 200 with this body and Content-Length, keep-alive.
    Ok(Vec<u8>),
    /// 200 with this body in two chunks.
    Chunked(Vec<u8>),
    /// This status with a 2-byte body.
    Status(u16),
    /// 200 with `Connection: close`, then close.
    CloseEach(Vec<u8>),
    /// HTTP/1.0 200 without Content-Length: the body ends when the server closes.
    CloseDelimited(Vec<u8>),
    /// Promise 100 bytes, send 10, close.
    CloseMidBody,
    /// Read requests and never answer.
    NeverAnswer,
    /// Sleep this long before each answer (requests on one connection queue up).
    Sleep(Duration, Vec<u8>),
    /// 200 with the request body's SHA-256 as 64 lowercase hex digits, keep-alive.
    Digest,
}

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    /// Requests that carried `Connection: close`.
    pub close_requested: AtomicU64,
    /// Most requests found complete in a single read (evidence of pipelining).
    pub max_batch: AtomicU64,
    /// Request targets in arrival order.
    pub paths: Mutex<Vec<String>>,
    /// Request methods in arrival order.
    pub methods: Mutex<Vec<String>>,
    /// Request body bytes received in all.
    pub body_bytes: AtomicU64,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl TestServer {
    pub fn start(behavior: Behavior) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    seen.connections.fetch_add(1, Ordering::SeqCst);
                    let (seen, behavior) = (seen.clone(), behavior.clone());
                    std::thread::spawn(move || serve(stream, &behavior, &seen));
                }
            })
        };
        TestServer {
            addr,
            seen,
            stop,
            acceptor: Some(acceptor),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.seen.requests.load(Ordering::SeqCst)
    }

    pub fn connections(&self) -> u64 {
        self.seen.connections.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the acceptor sees the flag and exits.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn serve(mut stream: TcpStream, behavior: &Behavior, seen: &Seen) {
    // Connection threads end when the client closes; the timeout bounds a stuck client.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        let mut batch = 0;
        let mut close = false;
        while let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .split("\r\n")
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() < end + 4 + length {
                break; // The body is still on its way.
            }
            let body: Vec<u8> = buf.drain(..end + 4 + length).skip(end + 4).collect();
            seen.body_bytes
                .fetch_add(body.len() as u64, Ordering::SeqCst);
            batch += 1;
            seen.requests.fetch_add(1, Ordering::SeqCst);
            if let Some(path) = head.split(' ').nth(1) {
                seen.paths.lock().expect("paths").push(path.to_string());
            }
            if let Some(method) = head.split(' ').next() {
                seen.methods
                    .lock()
                    .expect("methods")
                    .push(method.to_uppercase());
            }
            if head.contains("\r\nconnection: close") {
                seen.close_requested.fetch_add(1, Ordering::SeqCst);
                close = true;
            }
            match behavior {
                Behavior::Ok(body) => respond(&mut out, 200, body, close),
                Behavior::Status(code) => respond(&mut out, *code, b"no", close),
                Behavior::Chunked(body) => {
                    let (a, b) = body.split_at(body.len() / 2);
                    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                    for part in [a, b] {
                        if !part.is_empty() {
                            out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                            out.extend_from_slice(part);
                            out.extend_from_slice(b"\r\n");
                        }
                    }
                    out.extend_from_slice(b"0\r\n\r\n");
                }
                Behavior::CloseEach(body) => {
                    respond(&mut out, 200, body, true);
                    close = true;
                }
                Behavior::CloseDelimited(body) => {
                    out.extend_from_slice(b"HTTP/1.0 200 OK\r\n\r\n");
                    out.extend_from_slice(body);
                    close = true;
                }
                Behavior::CloseMidBody => {
                    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
                    out.extend_from_slice(&[b'x'; 10]);
                    close = true;
                }
                Behavior::NeverAnswer => {}
                Behavior::Digest => {
                    let digest = hex(&Sha256::digest(&body));
                    respond(&mut out, 200, digest.as_bytes(), close);
                }
                Behavior::Sleep(pause, body) => {
                    std::thread::sleep(*pause);
                    respond(&mut out, 200, body, close);
                    // Answer each request as it is served, so queueing is visible.
                    if stream.write_all(&out).is_err() {
                        return;
                    }
                    out.clear();
                }
            }
            if close {
                break;
            }
        }
        seen.max_batch.fetch_max(batch, Ordering::SeqCst);
        if stream.write_all(&out).is_err() {
            return;
        }
        if close {
            let _ = stream.shutdown(std::net::Shutdown::Write);
            // Drain until the client closes, so our FIN is not turned into a reset.
            while matches!(stream.read(&mut chunk), Ok(n) if n > 0) {}
            return;
        }
    }
}

fn respond(out: &mut Vec<u8>, status: u16, body: &[u8], close: bool) {
    out.extend_from_slice(
        format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n{}\r\n",
            body.len(),
            if close { "Connection: close\r\n" } else { "" }
        )
        .as_bytes(),
    );
    out.extend_from_slice(body);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
