//! The check of a content-coded answer (`gzip-64k-js`): the load engine and `validate` compare
//! the bytes a server sent, but each server compresses differently, so here the answer is
//! decoded and compared with the file.
//!
//! Flow (up to `TRIES` times, `PAUSE` apart, while the answer is not yet encoded: a
//! server may send identity until its background compressor has made the variant):
//! 1. One blocking GET with the scenario's headers and `Connection: close`, read to the end
//!    (bounded by `MAX_BYTES` and the timeout).
//! 2. Parse the head (httparse): the status, `Content-Encoding` must be the scenario's coding,
//!    and the body is de-chunked when `Transfer-Encoding: chunked` (nginx streams its gzip).
//! 3. Decode (gzip: flate2) and compare the length and SHA-256 with the file's.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::scenario::{Encoded, Request};
use crate::http::request::{serialize, Shape};
use crate::plan::hex;

/// Most bytes read for one answer.
const MAX_BYTES: u64 = 16 << 20;
/// Requests made before an identity answer is a failure.
const TRIES: usize = 50;
/// The wait between them.
const PAUSE: Duration = Duration::from_millis(20);

/// What the answer was, once it passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// Bytes of the encoded body.
    pub sent: u64,
    pub chunked: bool,
}

/// The flow for `request` (whose `encoded` is `expect`) against `addr`.
pub fn check(
    addr: SocketAddr,
    request: &Request,
    expect: &Encoded,
    timeout: Duration,
) -> Result<Checked, String> {
    let mut last = String::new();
    for _ in 0..TRIES {
        match once(addr, request, expect, timeout) {
            Ok(checked) => return Ok(checked),
            Err(Attempt::Identity(e)) => last = e,
            Err(Attempt::Failed(e)) => return Err(e),
        }
        std::thread::sleep(PAUSE);
    }
    Err(last)
}

/// Why one attempt did not pass.
enum Attempt {
    /// Answered without the coding: may be asked again.
    Identity(String),
    Failed(String),
}

/// Steps 1 to 3, once.
fn once(
    addr: SocketAddr,
    request: &Request,
    expect: &Encoded,
    timeout: Duration,
) -> Result<Checked, Attempt> {
    let shape = Shape {
        method: request.method,
        path: request.path,
        headers: &request.headers,
        body: None,
        close: true,
    };
    let wire = serialize(&shape, &addr.to_string());
    let io = |e: std::io::Error| Attempt::Failed(format!("{}: {e}", request.path));
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.write_all(&wire).map_err(io)?;
    let mut answer = Vec::new();
    stream
        .take(MAX_BYTES)
        .read_to_end(&mut answer)
        .map_err(io)?;
    let (status, coding, chunked, body_at) = head(&answer).map_err(Attempt::Failed)?;
    if status != request.status {
        return Err(Attempt::Failed(format!(
            "status {status}, expected {}",
            request.status
        )));
    }
    if coding.as_deref() != Some(expect.coding) {
        let problem = format!("Content-Encoding {coding:?}, expected {:?}", expect.coding);
        return Err(match coding {
            None => Attempt::Identity(problem),
            Some(_) => Attempt::Failed(problem),
        });
    }
    let body = if chunked {
        dechunk(&answer[body_at..]).map_err(Attempt::Failed)?
    } else {
        answer[body_at..].to_vec()
    };
    let decoded = decode(expect.coding, &body).map_err(Attempt::Failed)?;
    let digest: [u8; 32] = Sha256::digest(&decoded).into();
    if decoded.len() as u64 != expect.length || digest != expect.sha256 {
        return Err(Attempt::Failed(format!(
            "decodes to {} bytes, sha256 {}; expected {} bytes, sha256 {}",
            decoded.len(),
            hex(&digest),
            expect.length,
            hex(&expect.sha256)
        )));
    }
    Ok(Checked {
        sent: body.len() as u64,
        chunked,
    })
}

/// Status, `Content-Encoding`, chunked, and where the body starts.
fn head(answer: &[u8]) -> Result<(u16, Option<String>, bool, usize), String> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut fields);
    let at = match response.parse(answer) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the head was cut short".into()),
        Err(e) => return Err(format!("bad head: {e}")),
    };
    let value = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    let chunked = value("transfer-encoding").is_some_and(|v| v.ends_with("chunked"));
    Ok((
        response.code.unwrap_or(0),
        value("content-encoding"),
        chunked,
        at,
    ))
}

/// A chunked body's data (RFC 9112 §7.1), trailers ignored.
fn dechunk(mut wire: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = wire
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size line was cut short")?;
        let size_text = String::from_utf8_lossy(&wire[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        wire = &wire[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if wire.len() < size + 2 {
            return Err("a chunk was cut short".into());
        }
        out.extend_from_slice(&wire[..size]);
        wire = &wire[size + 2..];
    }
}

fn decode(coding: &str, body: &[u8]) -> Result<Vec<u8>, String> {
    match coding {
        "gzip" => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .map_err(|e| format!("not gzip: {e}"))?;
            Ok(out)
        }
        other => Err(format!("no decoder for {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_joined() {
        let wire = b"4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(dechunk(wire).unwrap(), b"abcdefg");
        assert!(dechunk(b"5\r\nab").is_err());
        assert!(dechunk(b"zz\r\n").is_err());
    }

    #[test]
    fn the_head_gives_the_coding_and_the_framing() {
        let wire =
            b"HTTP/1.1 200 OK\r\nContent-Encoding: GZIP\r\nTransfer-Encoding: chunked\r\n\r\nrest";
        let (status, coding, chunked, at) = head(wire).unwrap();
        assert_eq!(
            (status, coding.as_deref(), chunked),
            (200, Some("gzip"), true)
        );
        assert_eq!(&wire[at..], b"rest");
    }

    #[test]
    fn gzip_decodes_and_garbage_does_not() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
        gz.write_all(b"hello hello hello").unwrap();
        let bytes = gz.finish().unwrap();
        assert_eq!(decode("gzip", &bytes).unwrap(), b"hello hello hello");
        assert!(decode("gzip", b"plain").is_err());
        assert!(decode("br", &bytes).is_err());
    }
}
