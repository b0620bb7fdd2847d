//! One HTTP/2 request with curl(1), for what h2load does not check: that a server is up and
//! answering over HTTP/2 (its ready time in the h2 scenarios), and that the bytes it serves
//! are the scenario's (status, HTTP version, length and SHA-256 of one whole answer).
//!
//! TLS is not verified (`-k`): the peers present the run's throwaway certificate and servery
//! one of its own making. Over h2c curl speaks HTTP/2 by prior knowledge, as h2load does.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::h2load::Transport;
use crate::plan::hex;

/// What one request got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// curl's `%{http_version}`: "2" for HTTP/2.
    pub version: String,
    pub body: Vec<u8>,
}

/// Why an answer is not the scenario's.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("HTTP version {got}, not 2")]
    Version { got: String },
    #[error("status {got}, expected {wanted}")]
    Status { got: u16, wanted: u16 },
    #[error("{got} body bytes, expected {wanted}")]
    Length { got: u64, wanted: u64 },
    #[error("body SHA-256 {got}, expected {wanted}")]
    Digest { got: String, wanted: String },
}

/// curl's arguments for `GET url` over `transport`, within `timeout`, body on stdout and
/// `VERSION STATUS` on stderr.
pub fn args(url: &str, transport: Transport, timeout: Duration) -> Vec<String> {
    vec![
        "--silent".into(),
        "--show-error".into(),
        "--insecure".into(),
        match transport {
            Transport::Tls => "--http2".into(),
            Transport::H2c => "--http2-prior-knowledge".into(),
        },
        "--max-time".into(),
        format!("{:.3}", timeout.as_secs_f64()),
        "--output".into(),
        "-".into(),
        "--write-out".into(),
        "%{stderr}%{http_version} %{http_code}".into(),
        url.into(),
    ]
}

/// `GET url` with `curl`.
pub fn get(curl: &Path, url: &str, transport: Transport, timeout: Duration) -> io::Result<Answer> {
    let out = Command::new(curl)
        .args(args(url, transport, timeout))
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "curl {url} failed ({}): {}",
            out.status,
            stderr.trim()
        )));
    }
    parse_trailer(&stderr)
        .map(|(version, status)| Answer {
            status,
            version,
            body: out.stdout,
        })
        .ok_or_else(|| io::Error::other(format!("curl printed no status: {stderr:?}")))
}

/// The `VERSION STATUS` curl writes last on stderr.
fn parse_trailer(stderr: &str) -> Option<(String, u16)> {
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty())?;
    let mut words = last.split_whitespace();
    let version = words.next()?.to_string();
    let status = words.next()?.parse().ok()?;
    Some((version, status))
}

impl Answer {
    /// Whether this is HTTP/2 with `status` and, when given, a body of `length` bytes whose
    /// SHA-256 is `sha256`.
    pub fn expect(
        &self,
        status: u16,
        length: Option<u64>,
        sha256: Option<[u8; 32]>,
    ) -> Result<(), Mismatch> {
        if self.version != "2" {
            return Err(Mismatch::Version {
                got: self.version.clone(),
            });
        }
        if self.status != status {
            return Err(Mismatch::Status {
                got: self.status,
                wanted: status,
            });
        }
        let got = self.body.len() as u64;
        if let Some(wanted) = length.filter(|&w| w != got) {
            return Err(Mismatch::Length { got, wanted });
        }
        if let Some(wanted) = sha256 {
            let got: [u8; 32] = Sha256::digest(&self.body).into();
            if got != wanted {
                return Err(Mismatch::Digest {
                    got: hex(&got),
                    wanted: hex(&wanted),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_for_http2_and_reads_the_trailer() {
        let a = args(
            "https://127.0.0.1:1/1k.bin",
            Transport::Tls,
            Duration::from_secs(2),
        );
        assert!(a.contains(&"--http2".to_string()) && a.contains(&"--insecure".to_string()));
        assert_eq!(a[a.len() - 2], "%{stderr}%{http_version} %{http_code}");
        let a = args(
            "http://127.0.0.1:1/",
            Transport::H2c,
            Duration::from_secs(2),
        );
        assert!(a.contains(&"--http2-prior-knowledge".to_string()));
        assert_eq!(parse_trailer("2 200"), Some(("2".into(), 200)));
        assert_eq!(
            parse_trailer("curl: (56) weird\n1.1 404\n"),
            Some(("1.1".into(), 404))
        );
        assert_eq!(parse_trailer(""), None);
    }

    #[test]
    fn an_answer_must_be_http2_with_the_right_bytes() {
        let body = b"hello".to_vec();
        let digest: [u8; 32] = Sha256::digest(&body).into();
        let answer = |version: &str, status| Answer {
            status,
            version: version.into(),
            body: body.clone(),
        };
        assert_eq!(answer("2", 200).expect(200, Some(5), Some(digest)), Ok(()));
        assert!(matches!(
            answer("1.1", 200).expect(200, Some(5), Some(digest)),
            Err(Mismatch::Version { .. })
        ));
        assert_eq!(
            answer("2", 404).expect(200, None, None),
            Err(Mismatch::Status {
                got: 404,
                wanted: 200
            })
        );
        assert_eq!(
            answer("2", 200).expect(200, Some(6), None),
            Err(Mismatch::Length { got: 5, wanted: 6 })
        );
        assert!(matches!(
            answer("2", 200).expect(200, Some(5), Some([0; 32])),
            Err(Mismatch::Digest { .. })
        ));
    }
}
