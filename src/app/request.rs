//! The request a service is called with.
//!
//! The head is the `http` crate's ([`http::request::Parts`]: `Method`,
//! `Uri`, `Version`, `HeaderMap`), built from the read buffer without
//! copying it (`app::head`). The `HeaderMap` is built on first use: until a
//! service asks for [`Request::headers`], the fields stay offsets into the
//! received bytes, which saves a service that reads none (a fixed answer)
//! most of the cost of its request. The body is pulled by the service
//! ([`RequestBody`]); [`Connection`] says where the request came from.
//! [`Request::into_http`] hands the lot on as an `http::Request` (the
//! connection facts in its extensions), which is what tower services take.

use std::cell::OnceCell;
use std::net::SocketAddr;

use super::head::Fields;
use super::RequestBody;

/// Facts about the connection a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// The client's address (`None` when the socket could not say).
    pub peer: Option<SocketAddr>,
    /// The worker answering it (0-based, as given to the factory).
    pub worker: usize,
    /// The connection's number within its worker, from 0 (the access log's
    /// `$connection`).
    pub id: u64,
    /// Whether the connection is TLS, and what ALPN chose on it.
    pub tls: Option<Tls>,
    /// The server's port the client connected to (the listener's).
    pub local_port: Option<u16>,
}

/// A TLS connection's negotiated facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tls {
    /// The protocol ALPN selected, if the client offered any we speak.
    pub alpn: Option<Alpn>,
    /// The TLS version, as `TLSv1.2` or `TLSv1.3`.
    pub version: Option<&'static str>,
    /// Whether the handshake resumed an earlier session.
    pub resumed: bool,
    /// The site the client's SNI named (its index in `Config::sites`, in
    /// `[[site]]` order); `None` when it sent no SNI. A request whose Host
    /// names another site is answered 421 by the static files.
    pub site: Option<usize>,
}

/// A protocol ALPN can select on servery's listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// `http/1.1`.
    Http11,
    /// `h2`.
    H2,
    /// `h3` (HTTP/3 over QUIC).
    H3,
}

impl Alpn {
    /// The protocol of an ALPN identifier, if we speak it.
    pub fn from_id(id: &[u8]) -> Option<Alpn> {
        match id {
            b"http/1.1" => Some(Alpn::Http11),
            b"h2" => Some(Alpn::H2),
            b"h3" => Some(Alpn::H3),
            _ => None,
        }
    }
}

/// One request: its head, its body, and the connection it came on.
#[derive(Debug)]
pub struct Request {
    /// Method, target, version and extensions; its `headers` stay empty
    /// (they are `headers`, or still `fields`).
    head: http::request::Parts,
    /// The fields as received, until `headers` is built from them.
    fields: Fields,
    headers: OnceCell<http::HeaderMap>,
    body: RequestBody,
    connection: Connection,
}

impl Request {
    /// A request from its parts (the connection builds these; tests and
    /// adapters may too).
    pub fn new(
        mut head: http::request::Parts,
        body: RequestBody,
        connection: Connection,
    ) -> Request {
        let headers = OnceCell::from(std::mem::take(&mut head.headers));
        Request {
            head,
            fields: Fields::default(),
            headers,
            body,
            connection,
        }
    }

    /// A request as received: `head` without its fields, which are `fields`.
    pub(crate) fn received(
        head: http::request::Parts,
        fields: Fields,
        body: RequestBody,
        connection: Connection,
    ) -> Request {
        Request {
            head,
            fields,
            headers: OnceCell::new(),
            body,
            connection,
        }
    }

    pub fn method(&self) -> &http::Method {
        &self.head.method
    }

    pub fn uri(&self) -> &http::Uri {
        &self.head.uri
    }

    pub fn version(&self) -> http::Version {
        self.head.version
    }

    /// The header fields, in order (built from the received bytes on the
    /// first call; values are slices of them, not copies).
    pub fn headers(&self) -> &http::HeaderMap {
        self.headers.get_or_init(|| {
            // `http::parse` validated every field; a value `http` would
            // still refuse (never seen) is dropped rather than failing late.
            self.fields.to_map().unwrap_or_else(|e| {
                tracing::debug!(error = %e, "request fields dropped");
                http::HeaderMap::new()
            })
        })
    }

    pub fn headers_mut(&mut self) -> &mut http::HeaderMap {
        self.headers();
        self.headers
            .get_mut()
            .expect("headers() has just built the map")
    }

    pub fn extensions(&self) -> &http::Extensions {
        &self.head.extensions
    }

    pub fn extensions_mut(&mut self) -> &mut http::Extensions {
        &mut self.head.extensions
    }

    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The body, to read in place.
    pub fn body_mut(&mut self) -> &mut RequestBody {
        &mut self.body
    }

    /// The body, leaving the head.
    pub fn into_body(self) -> RequestBody {
        self.body
    }

    /// Head, body and connection, apart.
    pub fn into_parts(mut self) -> (http::request::Parts, RequestBody, Connection) {
        self.headers();
        let mut head = self.head;
        head.headers = self.headers.take().unwrap_or_default();
        (head, self.body, self.connection)
    }

    /// As an `http::Request`, with the [`Connection`] in its extensions
    /// (axum: `Extension<Connection>`).
    pub fn into_http(self) -> http::Request<RequestBody> {
        let (mut head, body, connection) = self.into_parts();
        head.extensions.insert(connection);
        http::Request::from_parts(head, body)
    }
}
