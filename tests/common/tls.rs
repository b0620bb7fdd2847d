//! The TLS client side shared by the suites that speak TLS: a certificate
//! verifier that accepts a pinned certificate (or, unpinned, the server's
//! self-signed one) and still checks the handshake signatures ([`Pinned`]),
//! the crypto provider, certificate fingerprints in the form the ready line
//! prints, client configs ([`trusting`], [`pinned`], [`pinned_full`],
//! [`trusting_any`]), handshakes ([`connect`], [`connected`]) and requests
//! over the resulting stream ([`request`], [`get`]).
//!
//! Does not own the server's side (a TLS server is a
//! [`TestServer`](super::TestServer) built with `tls_self_signed` or
//! `tls_files`) nor certificates to serve (a suite makes its own).

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionMemoryCache, Resumption};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
    StreamOwned, SupportedProtocolVersion,
};
use sha2::{Digest, Sha256};

use super::http::{read_response_from, ReadError, Response};
use super::IO_TIMEOUT;

pub const TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
pub const TLS12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];

/// A client's TLS connection.
pub type Tls = StreamOwned<ClientConnection, TcpStream>;

/// The crypto provider the server uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// SHA-256 of a DER certificate as colon-separated upper-case hex.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Accepts exactly the certificate whose SHA-256 is pinned (any name), or
/// any certificate when none is, and checks handshake signatures with it as
/// usual.
#[derive(Debug)]
pub struct Pinned {
    pub fingerprint: Option<String>,
    pub provider: Arc<CryptoProvider>,
}

impl Pinned {
    /// Any certificate (the server's self-signed one), signatures checked.
    pub fn any() -> Pinned {
        Pinned {
            fingerprint: None,
            provider: provider(),
        }
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.fingerprint {
            Some(pin) if fingerprint(end_entity) != *pin => Err(rustls::Error::General(format!(
                "certificate {} is not the pinned {pin}",
                fingerprint(end_entity),
            ))),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// ALPN `http/1.1`, and a session store of its own shared by every
/// connection made with the config.
fn finish(mut config: ClientConfig) -> Arc<ClientConfig> {
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = Resumption::store(Arc::new(ClientSessionMemoryCache::new(64)));
    Arc::new(config)
}

/// A client config on [`provider`] speaking `versions`, its verifier still
/// to choose.
fn speaking(
    versions: &[&'static SupportedProtocolVersion],
) -> rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier> {
    ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .expect("protocol versions")
}

/// A client trusting `roots` (web PKI name checks), speaking `versions`.
pub fn trusting(
    roots: RootCertStore,
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    finish(
        speaking(versions)
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// A client accepting only the certificate with `fp`, speaking `versions`.
pub fn pinned(fp: &str, versions: &[&'static SupportedProtocolVersion]) -> Arc<ClientConfig> {
    verifying(Some(fp), versions)
}

/// A TLS 1.3 client accepting any certificate (still checking the
/// handshake signature against it).
pub fn trusting_any() -> Arc<ClientConfig> {
    verifying(None, TLS13)
}

fn verifying(
    fp: Option<&str>,
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    finish(
        speaking(versions)
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                fingerprint: fp.map(str::to_owned),
                provider: provider(),
            }))
            .with_no_client_auth(),
    )
}

/// A pinned TLS 1.3 client that never resumes: every handshake shows the
/// certificate.
pub fn pinned_full(fp: &str) -> Arc<ClientConfig> {
    let mut config = Arc::unwrap_or_clone(pinned(fp, TLS13));
    config.resumption = Resumption::disabled();
    Arc::new(config)
}

/// Connect (with [`IO_TIMEOUT`] reads and writes) and complete the
/// handshake, sending `name` as SNI (an IP address sends none).
pub fn connect_as(config: &Arc<ClientConfig>, addr: SocketAddr, name: &str) -> io::Result<Tls> {
    let tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(name.to_owned()).map_err(io::Error::other)?;
    let conn = ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// [`connect_as`] with SNI `localhost`.
pub fn connect(config: &Arc<ClientConfig>, addr: SocketAddr) -> io::Result<Tls> {
    connect_as(config, addr, "localhost")
}

/// [`connect`], panicking if the handshake fails.
pub fn connected(config: &Arc<ClientConfig>, addr: SocketAddr) -> Tls {
    connect(config, addr).unwrap_or_else(|e| panic!("TLS handshake with {addr}: {e}"))
}

/// The fingerprint of the certificate the server presented.
pub fn peer_fingerprint(s: &Tls) -> String {
    let certs = s.conn.peer_certificates().expect("server certificates");
    fingerprint(&certs[0])
}

/// `GET path` with `extra` header lines (each ending in CRLF) on `s`, and
/// its response; a failed write is [`ReadError::Unanswered`].
pub fn request(s: &mut Tls, path: &str, extra: &str) -> Result<Response, ReadError> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n");
    s.write_all(req.as_bytes())
        .and_then(|()| s.flush())
        .map_err(ReadError::Unanswered)?;
    read_response_from(s, true)
}

/// [`request`], panicking if it fails.
pub fn get(s: &mut Tls, path: &str, extra: &str) -> Response {
    request(s, path, extra).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}
