//! The request a service is called with.
//!
//! The head is the `http` crate's ([`http::request::Parts`]: `Method`,
//! `Uri`, `Version`, `HeaderMap`), built from the read buffer without
//! copying it (`app::head::to_parts`); the body is pulled by the service
//! ([`RequestBody`]); [`Connection`] says where the request came from.
//! [`Request::into_http`] hands the lot on as an `http::Request` (the
//! connection facts in its extensions), which is what tower services take.

use std::net::SocketAddr;

use super::RequestBody;

/// Facts about the connection a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// The client's address (`None` when the socket could not say).
    pub peer: Option<SocketAddr>,
    /// The worker answering it (0-based, as given to the factory).
    pub worker: usize,
    /// Whether the connection is TLS, and what ALPN chose on it.
    pub tls: Option<Tls>,
}

/// A TLS connection's negotiated facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tls {
    /// The protocol ALPN selected, if the client offered any we speak.
    pub alpn: Option<Alpn>,
}

/// A protocol ALPN can select on servery's listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// `http/1.1`.
    Http11,
    /// `h2`.
    H2,
}

impl Alpn {
    /// The protocol of an ALPN identifier, if we speak it.
    pub fn from_id(id: &[u8]) -> Option<Alpn> {
        match id {
            b"http/1.1" => Some(Alpn::Http11),
            b"h2" => Some(Alpn::H2),
            _ => None,
        }
    }
}

/// One request: its head, its body, and the connection it came on.
#[derive(Debug)]
pub struct Request {
    head: http::request::Parts,
    body: RequestBody,
    connection: Connection,
}

impl Request {
    /// A request from its parts (the connection builds these; tests and
    /// adapters may too).
    pub fn new(head: http::request::Parts, body: RequestBody, connection: Connection) -> Request {
        Request {
            head,
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

    pub fn headers(&self) -> &http::HeaderMap {
        &self.head.headers
    }

    /// The head, for what the accessors do not cover (extensions).
    pub fn head(&self) -> &http::request::Parts {
        &self.head
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
    pub fn into_parts(self) -> (http::request::Parts, RequestBody, Connection) {
        (self.head, self.body, self.connection)
    }

    /// As an `http::Request`, with the [`Connection`] in its extensions
    /// (axum: `Extension<Connection>`).
    pub fn into_http(self) -> http::Request<RequestBody> {
        let (mut head, body, connection) = self.into_parts();
        head.extensions.insert(connection);
        http::Request::from_parts(head, body)
    }
}
