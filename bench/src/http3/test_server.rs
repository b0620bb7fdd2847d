//! A tiny HTTP/3 server for tests (quinn, h3, tokio on a thread of its own), with a fresh
//! self-signed certificate, on an ephemeral UDP port of 127.0.0.1.
//!
//! Routes, each an answer the client must class the way HTTP/1.1's engine would:
//! - `/1k`: 200 with a fixed 1 KiB body and its `content-length`.
//! - `/short`: 200 declaring twice the body it sends, then a clean end of stream.
//! - `/reset`: 200 head and half the body, then (50 ms later) the stream reset.
//! - `/count`: 200 with the request body's length in decimal (for POST).
//! - anything else: 404, empty body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::{Buf as _, Bytes};

/// The body `/1k` serves.
pub(crate) const BODY_1K: [u8; 1024] = {
    let mut body = [0u8; 1024];
    let mut i = 0;
    while i < body.len() {
        body[i] = b'a' + (i % 26) as u8;
        i += 1;
    }
    body
};

type RequestStream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// A running server; dropping it stops the server and joins its thread.
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    pub(crate) fn start() -> TestServer {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("test server runtime");
            runtime.block_on(async move {
                let endpoint = quinn::Endpoint::server(config(), ([127, 0, 0, 1], 0).into())
                    .expect("bind the test server");
                ready_tx
                    .send(endpoint.local_addr().expect("local addr"))
                    .expect("report the address");
                tokio::pin!(stopped);
                loop {
                    tokio::select! {
                        incoming = endpoint.accept() => match incoming {
                            Some(incoming) => {
                                tokio::spawn(connection(incoming));
                            }
                            None => break,
                        },
                        _ = &mut stopped => break,
                    }
                }
                endpoint.close(0u32.into(), b"");
                let _ = tokio::time::timeout(
                    std::time::Duration::from_millis(200),
                    endpoint.wait_idle(),
                )
                .await;
            });
        });
        let addr = ready_rx.recv().expect("test server started");
        TestServer {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `https://127.0.0.1:PORT{path}`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn config() -> quinn::ServerConfig {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("self-signed certificate");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .expect("certificate and key");
    tls.alpn_protocols = vec![super::tls::ALPN_H3.to_vec()];
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC TLS");
    quinn::ServerConfig::with_crypto(Arc::new(quic))
}

async fn connection(incoming: quinn::Incoming) {
    let Ok(quic) = incoming.await else {
        return;
    };
    let Ok(mut h3) = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(quic))
        .await
    else {
        return;
    };
    while let Ok(Some(resolver)) = h3.accept().await {
        tokio::spawn(async move {
            if let Ok((request, stream)) = resolver.resolve_request().await {
                let _ = respond(request.uri().path(), stream).await;
            }
        });
    }
}

async fn respond(path: &str, mut stream: RequestStream) -> Result<(), h3::error::StreamError> {
    let head = |status: u16, length: usize| {
        http::Response::builder()
            .status(status)
            .header("content-length", length)
            .body(())
            .expect("response head")
    };
    match path {
        "/1k" => {
            stream.send_response(head(200, BODY_1K.len())).await?;
            stream.send_data(Bytes::from_static(&BODY_1K)).await?;
        }
        "/short" => {
            stream.send_response(head(200, 2 * BODY_1K.len())).await?;
            stream.send_data(Bytes::from_static(&BODY_1K)).await?;
        }
        "/reset" => {
            stream.send_response(head(200, BODY_1K.len())).await?;
            stream
                .send_data(Bytes::from_static(&BODY_1K[..BODY_1K.len() / 2]))
                .await?;
            // A reset may discard data not yet read (RFC 9000 §3.2): give the client time to
            // read the head, so the reset lands inside the body.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
            return Ok(());
        }
        "/count" => {
            let mut received = 0;
            while let Some(data) = stream.recv_data().await? {
                received += data.remaining();
            }
            let text = received.to_string();
            stream.send_response(head(200, text.len())).await?;
            stream.send_data(Bytes::from(text)).await?;
        }
        _ => stream.send_response(head(404, 0)).await?,
    }
    stream.finish().await
}
