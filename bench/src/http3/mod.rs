//! The HTTP/3 client side of `servery-load --h3`: QUIC connections (quinn on tokio, rustls on
//! ring), HTTP/3 requests on their streams (h3, h3-quinn), and what one exchange came to.
//!
//! Why a module of its own: HTTP/1.1 (`crate::http`) is bytes the engine frames itself over
//! epoll; HTTP/3 is QUIC, whose packets, loss recovery, streams and QPACK only a QUIC stack does
//! right, and quinn's stack runs on an async runtime. This module is that stack's narrow face:
//! the engine (`load::h3`) and the pre-run check ([`check`]) see sessions, requests and answers,
//! never quinn or h3 types beyond them.
//!
//! Owns: `https://` URLs for `--h3` ([`plan()`]), the TLS and QUIC client configuration
//! (`tls`: any certificate accepted), one UDP endpoint per connection, the handshake and HTTP/3
//! setup (`Client::connect`), each path's request built once (`Request`), and one
//! request–response exchange with its body read and measured (`exchange`).
//! Does not own: timing, counting, retries or error classes (`load::h3` maps each
//! `Failure` to an `ErrorClass`), nor what a correct answer is (`plan::Expect`).
//!
//! Flow of one exchange:
//! 1. `Client::connect` makes a QUIC connection from its own endpoint (own UDP port, so a
//!    server spreading connections over reuseport sockets by 4-tuple sees separate clients),
//!    then the HTTP/3 control streams; the session's driver must be polled while it is used.
//! 2. `exchange` opens a request stream, sends the prebuilt head (and body), finishes it,
//!    skips interim 1xx heads, reads the final head, then reads the body to its end, handing
//!    each chunk to the caller and checking the total against `content-length`.
//! 3. A failure says how far it got (`Failure`); a request that never reached a live
//!    connection (`Failure::NotSent`) may be sent again on the next one.
//!
//! Bytes: an exchange measures body bytes only. HTTP/3 heads are QPACK-compressed inside
//! frames the h3 crate consumes, so the head and framing bytes HTTP/1.1 counts are not seen.

mod check;
mod tls;

#[cfg(test)]
pub(crate) mod test_server;

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use bytes::{Buf as _, Bytes};

pub use check::check;

use crate::plan::{self, Plan, Target};

/// The `User-Agent` HTTP/3 requests announce, as the HTTP/1.1 ones do.
const USER_AGENT: &str = concat!("servery-load/", env!("CARGO_PKG_VERSION"));

/// Default port of `https://` URLs without one (RFC 9110 §4.2.2); HTTP/3 uses it over UDP.
const HTTPS_PORT: u16 = 443;

/// HTTP/3's "no error" code (RFC 9114 §8.1), sent when the client closes a connection.
const H3_NO_ERROR: u32 = 0x100;

/// Longest a finished run or check waits for its endpoints to send their CONNECTION_CLOSE
/// and drain (RFC 9000 §10.2: three probe timeouts, milliseconds on a LAN), so that servers
/// learn the connections ended instead of holding them until their idle timeout.
pub(crate) const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Fields that are specific to a TCP connection and malformed in HTTP/3 (RFC 9114 §4.2).
const CONNECTION_FIELDS: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// The h3 driver of one connection: its control and QPACK streams, GOAWAY, closing.
type Driver = h3::client::Connection<h3_quinn::Connection, Bytes>;
/// Opens request streams on one connection; clones share the connection.
pub(crate) type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// Why an HTTP/3 run or check could not start, or what the check found wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("TLS configuration for QUIC failed: {0}")]
    Tls(rustls::Error),
    #[error("the TLS configuration has no cipher suite QUIC can start with: {0}")]
    CipherSuite(#[from] quinn::crypto::rustls::NoInitialCipherSuite),
    #[error("-H {name} is a connection-specific field, which HTTP/3 forbids (RFC 9114 §4.2): leave it out with --h3")]
    ConnectionField { name: String },
    #[error("cannot build the HTTP/3 request for {path:?}: {source}")]
    Request { path: String, source: ::http::Error },
    #[error("cannot start the client's runtime: {0}")]
    Runtime(io::Error),
    #[error(transparent)]
    Check(#[from] crate::validate::Error),
}

/// A plan for `--h3` against `https://host[:port][/path]` URLs (port 443 by default): the
/// target and defaults of [`Plan::new`], with the URLs reported as given.
pub fn plan<S: AsRef<str>>(urls: &[S]) -> Result<Plan, plan::Error> {
    let http = urls
        .iter()
        .map(|url| http_form(url.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut plan = Plan::new(&http)?;
    plan.target.urls = urls.iter().map(|u| u.as_ref().to_string()).collect();
    Ok(plan)
}

/// `https://host[:port]/path` as the `http://host:port/path` that [`Target::parse`] reads, the
/// port made explicit so that it is 443 rather than HTTP's 80.
fn http_form(url: &str) -> Result<String, plan::Error> {
    let bad = |reason| plan::Error::Url {
        url: url.to_string(),
        reason,
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("missing https:// scheme"))?;
    if !scheme.eq_ignore_ascii_case("https") {
        return Err(bad(
            "--h3 runs over QUIC, which is always encrypted: use https://",
        ));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    // A port follows the last ':' outside an IPv6 literal's brackets.
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    Ok(if has_port || authority.is_empty() {
        format!("http://{authority}{path}")
    } else {
        format!("http://{authority}:{HTTPS_PORT}{path}")
    })
}

/// Where connections go: the address, and the name the TLS handshake presents (SNI; none for
/// an IP literal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) name: String,
}

impl Server {
    pub(crate) fn new(target: &Target) -> Server {
        let authority = target.authority.as_str();
        let host = match authority.rfind(']') {
            Some(close) => authority[..close].trim_start_matches('['),
            None => authority
                .rsplit_once(':')
                .map_or(authority, |(host, _port)| host),
        };
        Server {
            addr: target.addr,
            name: host.to_string(),
        }
    }
}

/// The QUIC client configuration, built once per run and shared by every thread.
pub(crate) struct Client {
    config: quinn::ClientConfig,
}

/// One HTTP/3 connection: the QUIC handle, the h3 driver (poll it while the session is used)
/// and the request opener.
pub(crate) struct Session {
    pub(crate) quic: quinn::Connection,
    pub(crate) driver: Driver,
    pub(crate) sender: Sender,
}

impl Client {
    pub(crate) fn new() -> Result<Client, Error> {
        let tls = quinn::crypto::rustls::QuicClientConfig::try_from(tls::client_config()?)?;
        Ok(Client {
            config: quinn::ClientConfig::new(Arc::new(tls)),
        })
    }

    /// A UDP endpoint (socket and its driver task) for connections to `server`, bound to an
    /// ephemeral port of the same address family. Call inside a tokio runtime.
    pub(crate) fn endpoint(&self, server: &Server) -> io::Result<quinn::Endpoint> {
        let any: SocketAddr = if server.addr.is_ipv6() {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let mut endpoint = quinn::Endpoint::client(any)?;
        endpoint.set_default_client_config(self.config.clone());
        Ok(endpoint)
    }

    /// Handshakes with `server` from `endpoint` and sets up HTTP/3 on the connection.
    pub(crate) async fn connect(
        &self,
        endpoint: &quinn::Endpoint,
        server: &Server,
    ) -> io::Result<Session> {
        let quic = endpoint
            .connect(server.addr, &server.name)
            .map_err(io::Error::other)?
            .await?;
        let (driver, sender) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .map_err(io::Error::other)?;
        Ok(Session {
            quic,
            driver,
            sender,
        })
    }
}

/// Ends `quic` with HTTP/3's no-error code; requests still open on it fail.
pub(crate) fn close(quic: &quinn::Connection) {
    quic.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
}

/// One path's request, built once: the head (cloned per exchange) and any body.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    head: ::http::Request<()>,
    body: Option<Bytes>,
    /// A HEAD request: the answer has no body whatever its `content-length` says.
    head_only: bool,
}

impl Request {
    /// The request of each of `plan`'s paths, in order.
    pub(crate) fn all(plan: &Plan) -> Result<Vec<Request>, Error> {
        plan.target
            .paths
            .iter()
            .map(|path| Request::new(plan, path))
            .collect()
    }

    /// The request `plan` sends to `path`: its method, `-H` fields (a `Host` field becomes
    /// the `:authority`, since HTTP/3 carries the authority there; RFC 9114 §4.3.1), a
    /// `User-Agent` unless given, and its body with `content-length`.
    pub(crate) fn new(plan: &Plan, path: &str) -> Result<Request, Error> {
        let mut authority = plan.target.authority.as_str();
        let mut builder = ::http::Request::builder().method(plan.method.as_str());
        let mut has_agent = false;
        for (name, value) in &plan.headers {
            let lower = name.to_ascii_lowercase();
            if CONNECTION_FIELDS.contains(&lower.as_str()) {
                return Err(Error::ConnectionField { name: name.clone() });
            }
            if lower == "host" {
                authority = value;
            } else {
                has_agent |= lower == "user-agent";
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        if !has_agent {
            builder = builder.header(::http::header::USER_AGENT, USER_AGENT);
        }
        let body = plan.body.as_ref().map(|b| Bytes::from(b.clone()));
        if let Some(body) = &body {
            builder = builder.header(::http::header::CONTENT_LENGTH, body.len());
        }
        let head = builder
            .uri(format!("https://{authority}{path}"))
            .body(())
            .map_err(|source| Error::Request {
                path: path.to_string(),
                source,
            })?;
        Ok(Request {
            head_only: head.method() == ::http::Method::HEAD,
            head,
            body,
        })
    }
}

/// A complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Body bytes received.
    pub(crate) length: u64,
}

/// How far a failed exchange got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The connection was closed or going away (GOAWAY) before the request could be sent:
    /// the server never saw it, so it may go out again on a new connection.
    NotSent,
    /// Sending the request or receiving the response head failed (stream reset, connection
    /// lost, malformed head).
    Head,
    /// The body was cut short: a stream or connection error after the head.
    Body,
    /// The body ended cleanly but not at its `content-length`.
    Length { declared: u64, got: u64 },
}

/// Sends `request` on a new stream of `sender`'s connection and reads the answer to its end,
/// handing each body chunk to `on_body` (as it arrived; not copied).
pub(crate) async fn exchange<F: FnMut(&[u8])>(
    sender: &mut Sender,
    request: &Request,
    mut on_body: F,
) -> Result<Answer, Failure> {
    let mut stream = sender
        .send_request(request.head.clone())
        .await
        .map_err(|e| match e {
            // The connection failed or closed, or the server sent GOAWAY (RFC 9114 §5.2).
            h3::error::StreamError::ConnectionError { .. }
            | h3::error::StreamError::RemoteClosing { .. } => Failure::NotSent,
            _ => Failure::Head,
        })?;
    if let Some(body) = &request.body {
        stream
            .send_data(body.clone())
            .await
            .map_err(|_| Failure::Head)?;
    }
    stream.finish().await.map_err(|_| Failure::Head)?;
    let head = loop {
        let head = stream.recv_response().await.map_err(|_| Failure::Head)?;
        // RFC 9110 §15.2: interim answers precede the final one on the same stream.
        if !head.status().is_informational() {
            break head;
        }
    };
    let status = head.status().as_u16();
    let declared = head
        .headers()
        .get(::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut length = 0u64;
    while let Some(mut data) = stream.recv_data().await.map_err(|_| Failure::Body)? {
        while data.has_remaining() {
            let chunk = data.chunk();
            let n = chunk.len();
            on_body(chunk);
            length += n as u64;
            data.advance(n);
        }
    }
    // RFC 9110 §8.6: HEAD answers and 204/304 carry no body whatever the field says.
    let bodiless = request.head_only || status == 204 || status == 304;
    match declared {
        Some(declared) if !bodiless && declared != length => Err(Failure::Length {
            declared,
            got: length,
        }),
        _ => Ok(Answer { status, length }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_urls_become_targets_on_port_443() {
        let plan =
            super::plan(&["https://127.0.0.1/a?b", "https://127.0.0.1:443/c"]).expect("plan");
        assert_eq!(plan.target.addr, "127.0.0.1:443".parse().expect("addr"));
        assert_eq!(plan.target.paths, ["/a?b", "/c"]);
        assert_eq!(
            plan.target.urls,
            ["https://127.0.0.1/a?b", "https://127.0.0.1:443/c"]
        );
        let plan = super::plan(&["https://[::1]:8443"]).expect("plan");
        assert_eq!(plan.target.addr, "[::1]:8443".parse().expect("addr"));
        assert_eq!(plan.target.paths, ["/"]);
        assert_eq!(
            Server::new(&plan.target),
            Server {
                addr: plan.target.addr,
                name: "::1".to_string()
            }
        );
    }

    #[test]
    fn rejects_cleartext_and_schemeless_urls() {
        for url in ["http://127.0.0.1:8443/", "127.0.0.1:8443/", "https:///x"] {
            assert!(
                matches!(plan(&[url]), Err(plan::Error::Url { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn the_server_name_is_the_host_without_its_port() {
        let plan = super::plan(&["https://localhost:8443/"]).expect("plan");
        assert_eq!(Server::new(&plan.target).name, "localhost");
    }

    #[test]
    fn requests_carry_authority_agent_and_body_length() {
        let mut plan = super::plan(&["https://127.0.0.1:8443/x"]).expect("plan");
        plan.headers = vec![("Accept".to_string(), "*/*".to_string())];
        let request = Request::new(&plan, "/x").expect("request");
        assert_eq!(request.head.uri(), "https://127.0.0.1:8443/x");
        assert_eq!(request.head.headers()["accept"], "*/*");
        assert!(request.head.headers()["user-agent"]
            .to_str()
            .expect("ascii")
            .starts_with("servery-load/"));
        plan.headers = vec![("Host".to_string(), "example.test".to_string())];
        plan.method = "POST".to_string();
        plan.body = Some(vec![1, 2, 3]);
        let request = Request::new(&plan, "/x").expect("request");
        assert_eq!(request.head.uri(), "https://example.test/x");
        assert!(request.head.headers().get("host").is_none());
        assert_eq!(request.head.headers()["content-length"], "3");
        assert_eq!(request.body.as_deref(), Some(&[1u8, 2, 3][..]));
        plan.headers = vec![("Connection".to_string(), "close".to_string())];
        assert!(matches!(
            Request::new(&plan, "/x"),
            Err(Error::ConnectionField { .. })
        ));
    }
}
