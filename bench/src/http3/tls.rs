//! The client's TLS for QUIC: TLS 1.3 on ring (the provider the workspace builds; no aws-lc-rs),
//! ALPN `h3` (RFC 9114 §3.1), and a verifier that takes any certificate.
//!
//! Why any certificate: the servers under test present self-signed certificates (servery's
//! `--tls-self-signed`, the matrix's openssl one, Caddy's internal CA), just as the h2 scenarios
//! drive them with `h2load` and `curl --insecure`. What is still checked is the handshake
//! signature, with ring's algorithms: the server must hold the key of the certificate it sent,
//! so a run measures real TLS 1.3 work, not a shortcut.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::Error;

/// ALPN protocol id of HTTP/3 (RFC 9114 §3.1).
pub(crate) const ALPN_H3: &[u8] = b"h3";

/// The rustls client configuration every QUIC connection of a run uses.
pub(crate) fn client_config() -> Result<rustls::ClientConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = AnyCertificate {
        algorithms: provider.signature_verification_algorithms,
    };
    // QUIC carries TLS 1.3 only (RFC 9001 §4.2).
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(Error::Tls)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_H3.to_vec()];
    Ok(config)
}

/// Accepts whatever certificate chain and name the server presents, and verifies the
/// handshake signatures made with its key (see the module docs).
#[derive(Debug)]
struct AnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_h3_over_a_configuration_quic_accepts() {
        let config = client_config().expect("config");
        assert_eq!(config.alpn_protocols, [ALPN_H3.to_vec()]);
        // QUIC refuses a configuration without TLS 1.3 and its initial cipher suite.
        assert!(quinn::crypto::rustls::QuicClientConfig::try_from(config).is_ok());
    }
}
