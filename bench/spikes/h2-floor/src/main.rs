//! The cost floor of answering 1 KiB over HTTP/2 with TLS on monoio and rustls: a server that
//! does only what no HTTP/2 server can skip (the TLS records both ways, walking the frames,
//! one HEADERS and one DATA frame a request, one read and one write a batch) and nothing it
//! could (no HPACK decoding, no stream table, no flow control, no file lookup: every request
//! gets the same prebuilt 1 KiB answer). Whatever CPU a request costs here is a lower bound
//! for any servery HTTP/2 layer built on rustls's buffered API.
//!
//! Use: `h2-floor PORT CERT.pem KEY.pem [uring|epoll]`.

use std::io::{Read, Write};
use std::sync::Arc;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args[1].parse().expect("port");
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&args[2])
        .expect("cert file")
        .map(|c| c.expect("cert"))
        .collect();
    let key = PrivateKeyDer::from_pem_file(&args[3]).expect("key file");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("identity");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let config = Arc::new(config);
    let serve = async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
        println!("ready");
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let _ = tcp.set_nodelay(true);
            monoio::spawn(connection(tcp, config.clone()));
        }
    };
    if args.get(4).map(String::as_str) == Some("epoll") {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().build().expect("runtime").block_on(serve)
    } else {
        monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().build().expect("runtime").block_on(serve)
    }
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A response head like servery's for a 1 KiB file, every field a literal without indexing
/// (what an encoder that keeps no dynamic table sends).
fn header_block() -> Vec<u8> {
    let mut b = vec![0x88]; // :status 200, static index 8
    let mut field = |index: u8, value: &str| {
        b.push(0x0f);
        b.push(index - 15); // literal without indexing, indexed name (index >= 15)
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
    };
    field(28, "1024"); // content-length
    field(31, "application/octet-stream"); // content-type
    field(44, "Tue, 01 Dec 2026 12:00:00 GMT"); // last-modified
    field(34, "\"6756f3c0-400\""); // etag
    field(18, "bytes"); // accept-ranges
    field(54, "servery"); // server
    field(33, "Tue, 01 Dec 2026 16:00:00 GMT"); // date
    b
}

async fn connection(tcp: TcpStream, config: Arc<rustls::ServerConfig>) {
    let Some((mut tcp, mut tls)) = handshake(tcp, config).await else { return };
    let block = header_block();
    let body = vec![b'x'; 1024];
    let mut plain_in: Vec<u8> = Vec::with_capacity(32 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut wire_out: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut wire_in: Vec<u8> = Vec::with_capacity(16 * 1024 + 256);
    let mut chunk = [0u8; 16 * 1024];
    let mut preface = false;
    // Our SETTINGS: MAX_CONCURRENT_STREAMS 128.
    frame_head(&mut out, 6, 4, 0, 0);
    out.extend_from_slice(&[0, 3, 0, 0, 0, 128]);
    loop {
        // Plaintext rustls already holds.
        loop {
            match tls.reader().read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => plain_in.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return,
            }
        }
        let mut at = 0;
        if !preface {
            if plain_in.len() >= PREFACE.len() {
                if &plain_in[..PREFACE.len()] != PREFACE {
                    return;
                }
                at = PREFACE.len();
                preface = true;
            }
        }
        while preface && plain_in.len() - at >= 9 {
            let h = &plain_in[at..at + 9];
            let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
            if plain_in.len() - at - 9 < len {
                break;
            }
            let (kind, flags) = (h[3], h[4]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            match kind {
                1 if flags & 0x4 != 0 => {
                    frame_head(&mut out, block.len(), 1, 0x4, stream);
                    out.extend_from_slice(&block);
                    frame_head(&mut out, body.len(), 0, 0x1, stream);
                    out.extend_from_slice(&body);
                }
                4 if flags & 0x1 == 0 => frame_head(&mut out, 0, 4, 0x1, 0),
                6 if flags & 0x1 == 0 => {
                    frame_head(&mut out, 8, 6, 0x1, 0);
                    out.extend_from_slice(&plain_in[at + 9..at + 17]);
                }
                7 => return,
                _ => {}
            }
            at += 9 + len;
        }
        plain_in.drain(..at);
        if !out.is_empty() {
            if tls.writer().write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        while tls.wants_write() {
            if tls.write_tls(&mut wire_out).is_err() {
                return;
            }
        }
        if !wire_out.is_empty() {
            let (r, b) = tcp.write_all(wire_out).await;
            wire_out = b;
            wire_out.clear();
            if r.is_err() {
                return;
            }
        }
        wire_in.clear();
        let (r, b) = tcp.read(wire_in).await;
        wire_in = b;
        match r {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut input = &wire_in[..];
        while !input.is_empty() {
            if tls.read_tls(&mut input).is_err() || tls.process_new_packets().is_err() {
                return;
            }
        }
    }
}

async fn handshake(
    mut tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> Option<(TcpStream, rustls::ServerConnection)> {
    let mut tls = rustls::ServerConnection::new(config).ok()?;
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024 + 256);
    loop {
        while tls.wants_write() {
            let mut out = Vec::new();
            tls.write_tls(&mut out).ok()?;
            let (r, _) = tcp.write_all(out).await;
            r.ok()?;
        }
        if !tls.is_handshaking() {
            return Some((tcp, tls));
        }
        buf.clear();
        let (r, b) = tcp.read(buf).await;
        buf = b;
        if r.ok()? == 0 {
            return None;
        }
        let mut input = &buf[..];
        while !input.is_empty() {
            tls.read_tls(&mut input).ok()?;
            tls.process_new_packets().ok()?;
        }
    }
}
