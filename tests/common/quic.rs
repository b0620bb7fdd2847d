//! An HTTP/3 client in the tests' own process: quinn on a current-thread
//! tokio runtime, h3 over h3-quinn, TLS 1.3 accepting any certificate (the
//! handshake signature is still checked). For what the scripted clients
//! (`common::h3`) cannot do: many connections, clients that stay connected
//! across reloads, and attacks.
//!
//! Owns a [`Client`] (one runtime, one UDP endpoint) and its connections
//! ([`Conn`]), each request bounded by [`TIMEOUT`]. Only 127.0.0.1.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};

/// The longest one request (or handshake) may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A response as read.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One runtime and UDP endpoint for any number of connections.
pub struct Client {
    pub rt: tokio::runtime::Runtime,
    endpoint: quinn::Endpoint,
}

/// A request stream of the client.
pub type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// One QUIC connection with HTTP/3 on it.
pub struct Conn {
    pub quic: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    driver: tokio::task::JoinHandle<h3::error::ConnectionError>,
}

fn tls() -> rustls::ClientConfig {
    let mut config = Arc::unwrap_or_clone(crate::common::tls::trusting_any());
    config.alpn_protocols = vec![b"h3".to_vec()];
    config
}

impl Client {
    pub fn new() -> Client {
        Client::with_transport(None)
    }

    /// A client that grants the server only `stream` bytes of credit a
    /// stream and `connection` in all, and returns it only as it reads.
    #[allow(dead_code)]
    pub fn with_receive_windows(stream: u32, connection: u32) -> Client {
        let mut t = quinn::TransportConfig::default();
        t.stream_receive_window(quinn::VarInt::from_u32(stream));
        t.receive_window(quinn::VarInt::from_u32(connection));
        Client::with_transport(Some(t))
    }

    fn with_transport(transport: Option<quinn::TransportConfig>) -> Client {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let endpoint = rt.block_on(async {
            let mut e = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap())
                .expect("a client UDP socket");
            let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls())
                .expect("TLS 1.3 with AES-128-GCM");
            let mut config = quinn::ClientConfig::new(Arc::new(crypto));
            if let Some(t) = transport {
                config.transport_config(Arc::new(t));
            }
            e.set_default_client_config(config);
            e
        });
        Client { rt, endpoint }
    }

    /// Connect to `addr` (HTTP/3's setup done).
    pub fn connect(&self, addr: SocketAddr) -> Result<Conn, String> {
        self.rt.block_on(self.connect_async(addr))
    }

    pub async fn connect_async(&self, addr: SocketAddr) -> Result<Conn, String> {
        let connecting = self
            .endpoint
            .connect(addr, "localhost")
            .map_err(|e| e.to_string())?;
        let quic = tokio::time::timeout(TIMEOUT, connecting)
            .await
            .map_err(|_| "handshake timed out".to_string())?
            .map_err(|e| format!("handshake: {e}"))?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .map_err(|e| format!("h3 setup: {e}"))?;
        let driver =
            tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        Ok(Conn { quic, send, driver })
    }

    /// Let closed connections send their CONNECTION_CLOSE and drain (the
    /// runtime only runs inside `block_on`).
    pub async fn settle(&self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
    }

    /// Move to a new UDP port (a NAT rebinding, as the server sees it).
    pub fn rebind(&self) {
        let _guard = self.rt.enter();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("a new client port");
        self.endpoint.rebind(socket).expect("rebind");
    }

    /// The client's own port (the 4-tuple the server sees).
    pub fn local_port(&self) -> u16 {
        self.endpoint.local_addr().unwrap().port()
    }
}

impl Default for Client {
    fn default() -> Client {
        Client::new()
    }
}

impl Conn {
    /// Send `req` with `body` and read the answer whole.
    pub async fn request(
        &mut self,
        req: http::Request<()>,
        body: Option<Bytes>,
    ) -> Result<Answer, String> {
        tokio::time::timeout(TIMEOUT, self.exchange(req, body))
            .await
            .map_err(|_| "request timed out".to_string())?
    }

    async fn exchange(
        &mut self,
        req: http::Request<()>,
        body: Option<Bytes>,
    ) -> Result<Answer, String> {
        let mut stream = self
            .send
            .send_request(req)
            .await
            .map_err(|e| format!("send: {e}"))?;
        if let Some(body) = body {
            for piece in body.chunks(64 * 1024) {
                stream
                    .send_data(Bytes::copy_from_slice(piece))
                    .await
                    .map_err(|e| format!("send body: {e}"))?;
            }
        }
        stream.finish().await.map_err(|e| format!("finish: {e}"))?;
        let resp = stream
            .recv_response()
            .await
            .map_err(|e| format!("response: {e}"))?;
        let mut out = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| format!("body: {e}"))? {
            while chunk.has_remaining() {
                let c = chunk.chunk();
                out.extend_from_slice(c);
                let n = c.len();
                chunk.advance(n);
            }
        }
        Ok(Answer {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            body: out,
        })
    }

    /// Send `req` (no body) and finish its sending side; the stream, to
    /// read (or abandon) the answer.
    pub async fn send_only(&mut self, req: http::Request<()>) -> Result<Stream, String> {
        let mut s = self.open(req).await?;
        s.finish().await.map_err(|e| format!("finish: {e}"))?;
        Ok(s)
    }

    async fn open(&mut self, req: http::Request<()>) -> Result<Stream, String> {
        self.send
            .send_request(req)
            .await
            .map_err(|e| format!("send: {e}"))
    }

    /// Send `req` and the first `part` of its body, and leave the stream
    /// open: the stream, to read the answer from.
    #[allow(dead_code)]
    pub async fn send_partial(
        &mut self,
        req: http::Request<()>,
        part: Bytes,
    ) -> Result<Stream, String> {
        let mut s = self.open(req).await?;
        s.send_data(part)
            .await
            .map_err(|e| format!("send body: {e}"))?;
        Ok(s)
    }

    /// GET `path` (with `fields`).
    pub async fn get(&mut self, path: &str, fields: &[(&str, &str)]) -> Result<Answer, String> {
        let mut b = http::Request::get(format!("https://localhost{path}"));
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        self.request(b.body(()).unwrap(), None).await
    }

    /// Close with H3_NO_ERROR.
    pub fn close(&self) {
        self.quic.close(quinn::VarInt::from_u32(0x100), b"");
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// GET `path` on a fresh connection from `client`, synchronously.
pub fn get_once(client: &Client, addr: SocketAddr, path: &str) -> Result<Answer, String> {
    client.rt.block_on(async {
        let mut c = client.connect_async(addr).await?;
        let a = c.get(path, &[]).await;
        // Its CONNECTION_CLOSE leaves with the next use of the client's
        // runtime, or at `settle`.
        c.close();
        a
    })
}
