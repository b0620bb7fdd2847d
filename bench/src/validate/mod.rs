//! Pre-flight check: one request per URL, over a plain blocking socket, before any timing.
//! A benchmark of a server that answers 404 or serves the wrong file measures nothing.
//!
//! Owns: the per-URL verdict ([`Checked`]) and what can be wrong with it ([`Error`]).
//! Does not own: framing (`http::response`) or what "expected" is (`plan::Expect`).
//!
//! Flow, per URL:
//! 1. Connect with `--timeout`, send the exact request the run will send.
//! 2. Frame one response with the same parser the engine uses, hashing the body.
//! 3. A body cut short of its Content-Length is an error; then compare status,
//!    `--expect-length` and `--expect-sha256`; the first mismatch is the error.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};

use sha2::{Digest, Sha256};

pub use crate::http::response::ParseError;

use crate::http::response::{Eof, Head, Parser, Step};
use crate::plan::{self, hex, Plan};

/// What one URL answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub url: String,
    pub status: u16,
    /// Body bytes received (after de-chunking).
    pub length: u64,
    /// Lower-case hex SHA-256 of the body.
    pub sha256: String,
    pub chunked: bool,
}

/// Why validation failed; each names the URL and what to compare.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Plan(#[from] plan::Error),
    #[error("cannot connect to {addr} for {url}: {source}")]
    Connect {
        url: String,
        addr: SocketAddr,
        source: io::Error,
    },
    #[error("{url}: {source}")]
    Io { url: String, source: io::Error },
    #[error("{url}: server closed the connection before the response was complete")]
    Truncated { url: String },
    #[error("{url}: bad response: {source}")]
    Parse { url: String, source: ParseError },
    #[error("{url}: status {got}, expected {expected} (set --expect-status if {got} is right)")]
    Status {
        url: String,
        expected: u16,
        got: u16,
    },
    #[error("{url}: connection closed after {got} body bytes but Content-Length said {declared}")]
    ContentLength {
        url: String,
        declared: u64,
        got: u64,
    },
    #[error("{url}: body is {got} bytes, expected {expected} (--expect-length)")]
    Length {
        url: String,
        expected: u64,
        got: u64,
    },
    #[error("{url}: body SHA-256 is {got}, expected {expected} (--expect-sha256)")]
    Sha256 {
        url: String,
        expected: String,
        got: String,
    },
}

/// Sends one request per URL of `plan` and checks each answer against `plan.expect`.
pub fn check(plan: &Plan) -> Result<Vec<Checked>, Error> {
    plan.check()?;
    let requests = plan.requests();
    plan.target
        .urls
        .iter()
        .zip(&requests)
        .map(|(url, request)| check_one(plan, url, request))
        .collect()
}

fn check_one(plan: &Plan, url: &str, request: &[u8]) -> Result<Checked, Error> {
    let addr = plan.target.addr;
    let io_err = |source| Error::Io {
        url: url.to_string(),
        source,
    };
    let mut stream =
        TcpStream::connect_timeout(&addr, plan.timeout).map_err(|source| Error::Connect {
            url: url.to_string(),
            addr,
            source,
        })?;
    stream
        .set_read_timeout(Some(plan.timeout))
        .map_err(io_err)?;
    stream
        .set_write_timeout(Some(plan.timeout))
        .map_err(io_err)?;
    stream.write_all(request).map_err(io_err)?;

    let mut parser = Parser::new();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut filled = 0;
    let mut head: Option<Head> = None;
    let mut length = 0u64;
    'response: loop {
        let n = match stream.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        if n == 0 {
            match (parser.on_eof(filled), head.and_then(|h| h.content_length)) {
                (Eof::Complete, _) => {}
                (Eof::Truncated { in_body: true }, Some(declared)) => {
                    return Err(Error::ContentLength {
                        url: url.to_string(),
                        declared,
                        got: length,
                    })
                }
                _ => {
                    return Err(Error::Truncated {
                        url: url.to_string(),
                    })
                }
            }
        }
        let end = filled + n;
        let mut pos = 0;
        loop {
            let progress = parser
                .advance(&buf[pos..end])
                .map_err(|source| Error::Parse {
                    url: url.to_string(),
                    source,
                })?;
            let bytes = &buf[pos..pos + progress.consumed];
            pos += progress.consumed;
            match progress.step {
                Step::NeedMore => break,
                Step::Framing => {}
                Step::Head(h) => head = Some(h),
                Step::Body => {
                    hasher.update(bytes);
                    length += bytes.len() as u64;
                }
                Step::Done { .. } => break 'response,
            }
        }
        buf.copy_within(pos..end, 0);
        filled = end - pos;
    }
    let head = head.ok_or_else(|| Error::Truncated {
        url: url.to_string(),
    })?;
    let checked = Checked {
        url: url.to_string(),
        status: head.status,
        length,
        sha256: hex(&hasher.finalize()),
        chunked: head.chunked,
    };
    let expect = &plan.expect;
    if checked.status != expect.status {
        return Err(Error::Status {
            url: checked.url,
            expected: expect.status,
            got: checked.status,
        });
    }
    if let Some(expected) = expect.length {
        if expected != length {
            return Err(Error::Length {
                url: checked.url,
                expected,
                got: length,
            });
        }
    }
    if let Some(expected) = expect.sha256 {
        let expected = hex(&expected);
        if expected != checked.sha256 {
            return Err(Error::Sha256 {
                url: checked.url,
                expected,
                got: checked.sha256,
            });
        }
    }
    Ok(checked)
}
