//! One blocking request with `Connection: close`, for what the load engine does not report:
//! when a freshly started server first answers (its ready time; an app scenario's probe may be
//! a `POST` with a body) and the `ETag` to send back in `If-None-Match`. Response bodies are
//! read and dropped; only the head is parsed.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::http::request::{serialize, Shape};

/// Most response bytes a probe reads before giving up on a head: probes ask for small files.
const MAX_PROBE_BYTES: usize = 4 * 1024 * 1024;

/// What a probe saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The `ETag` field, verbatim (quotes and any `W/` kept), if the server sent one.
    pub etag: Option<String>,
}

/// A request to probe with: the method, the target and the body (sent with its
/// `Content-Length`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: &'static str,
    pub path: &'static str,
    pub body: Option<Vec<u8>>,
}

impl Request {
    /// `GET path`, no body.
    pub fn get(path: &'static str) -> Request {
        Request {
            method: "GET",
            path,
            body: None,
        }
    }
}

/// Connects to `addr`, sends `GET path` with `headers`, reads until the server closes, and
/// parses the head. Every step is bounded by `timeout`.
pub fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> io::Result<Answer> {
    let shape = Shape {
        method: "GET",
        path,
        headers,
        body: None,
        close: true,
    };
    exchange(addr, &serialize(&shape, &addr.to_string()), timeout)
}

/// Sends `request` (no extra headers) as [`get`] sends a `GET`.
pub fn send(addr: SocketAddr, request: &Request, timeout: Duration) -> io::Result<Answer> {
    let shape = Shape {
        method: request.method,
        path: request.path,
        headers: &[],
        body: request.body.as_deref(),
        close: true,
    };
    exchange(addr, &serialize(&shape, &addr.to_string()), timeout)
}

/// Writes the serialized `request`, reads until the server closes, parses the head.
fn exchange(addr: SocketAddr, request: &[u8], timeout: Duration) -> io::Result<Answer> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(request)?;
    let mut buf = Vec::new();
    stream.take(MAX_PROBE_BYTES as u64).read_to_end(&mut buf)?;
    parse_head(&buf).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no response head"))
}

/// The status and `ETag` of the response head at the start of `bytes`.
pub fn parse_head(bytes: &[u8]) -> Option<Answer> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut fields);
    match response.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return None,
    }
    let etag = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("etag"))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(|v| v.trim().to_string());
    Some(Answer {
        status: response.code?,
        etag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_status_and_etag() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\netag: W/\"5f-400\"\r\n\r\nhi";
        assert_eq!(
            parse_head(head),
            Some(Answer {
                status: 200,
                etag: Some("W/\"5f-400\"".to_string())
            })
        );
        let bare = b"HTTP/1.1 304 Not Modified\r\n\r\n";
        assert_eq!(
            parse_head(bare).map(|a| (a.status, a.etag)),
            Some((304, None))
        );
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nDate"), None);
    }

    #[test]
    fn talks_to_a_real_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut buf = [0u8; 1024];
            let n = conn.read(&mut buf).expect("read");
            let request = String::from_utf8_lossy(&buf[..n]).to_string();
            conn.write_all(b"HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 0\r\n\r\n")
                .expect("write");
            request
        });
        let headers = [("If-None-Match".to_string(), "\"y\"".to_string())];
        let answer = get(addr, "/a", &headers, Duration::from_secs(5)).expect("get");
        assert_eq!(answer.etag.as_deref(), Some("\"x\""));
        let request = server.join().expect("server");
        assert!(request.starts_with("GET /a HTTP/1.1\r\n"));
        assert!(request.contains("If-None-Match: \"y\"\r\n"));
        assert!(request.contains("Connection: close\r\n"));
    }

    #[test]
    fn posts_a_probe_body_with_its_length() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut seen = Vec::new();
            let mut buf = [0u8; 8192];
            // The head and the 5000-byte body, however the reads split them.
            while !seen.ends_with(&[9u8; 16]) {
                let n = conn.read(&mut buf).expect("read");
                assert!(n > 0, "client closed early");
                seen.extend_from_slice(&buf[..n]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .expect("write");
            seen
        });
        let request = Request {
            method: "POST",
            path: "/digest",
            body: Some(vec![9u8; 5000]),
        };
        let answer = send(addr, &request, Duration::from_secs(5)).expect("send");
        assert_eq!(answer.status, 200);
        let seen = server.join().expect("server");
        let text = String::from_utf8_lossy(&seen[..seen.len() - 5000]).to_string();
        assert!(text.starts_with("POST /digest HTTP/1.1\r\n"), "{text}");
        assert!(text.contains("Content-Length: 5000\r\n"), "{text}");
    }
}
