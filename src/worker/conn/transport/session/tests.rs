//! The session driven against rustls's own client, in memory: the
//! handshake, our TLS 1.3 records both ways, key updates, close_notify,
//! refused records, each suite, and TLS 1.2 staying with rustls.

use super::*;
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config() -> Arc<rustls::ServerConfig> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let mut c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], der)
        .unwrap();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    c.enable_secret_extraction = true;
    Arc::new(c)
}

#[derive(Debug)]
struct AnyCert;
impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn client() -> rustls::ClientConnection {
    client_with(provider(), rustls::DEFAULT_VERSIONS)
}

fn client_with(
    provider: Arc<rustls::crypto::CryptoProvider>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> rustls::ClientConnection {
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert))
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    rustls::ClientConnection::new(Arc::new(c), "localhost".try_into().unwrap()).unwrap()
}

/// Move bytes both ways until neither side has anything to say; what
/// the server decrypted is appended to `got`.
fn pump(client: &mut rustls::ClientConnection, server: &mut Session, got: &mut Vec<u8>) {
    for _ in 0..32 {
        let mut moved = false;
        let mut wire = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut wire).unwrap();
        }
        if !wire.is_empty() {
            moved = true;
            server.rx().unwrap();
            server.rx.extend_from_slice(&wire);
        }
        let r = server.read(|p| {
            got.extend_from_slice(p);
            p.len()
        });
        r.unwrap();
        let out = server.out().to_vec();
        if !out.is_empty() {
            moved = true;
            server.sent(out.len());
            client.read_tls(&mut &out[..]).unwrap();
            client.process_new_packets().unwrap();
        }
        if !moved {
            return;
        }
    }
    panic!("the handshake did not settle");
}

#[test]
fn a_session_decrypts_what_a_client_sends_and_encrypts_its_answer() {
    let mut c = client();
    let mut s = Session::new(server_config()).unwrap();
    let mut got = Vec::new();
    c.writer().write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    pump(&mut c, &mut s, &mut got);
    assert!(!s.is_handshaking());
    assert_eq!(s.sni(), Some("localhost"));
    assert_eq!(s.alpn(), Some(&b"http/1.1"[..]));
    assert_eq!(got, b"GET / HTTP/1.1\r\n\r\n");
    assert!(
        s.own_records(),
        "TLS 1.3 records are ours after the handshake"
    );
    assert_eq!(s.encrypt(b"HTTP/1.1 200 OK\r\n\r\n").unwrap(), 19);
    let out = s.out().to_vec();
    s.sent(out.len());
    c.read_tls(&mut &out[..]).unwrap();
    c.process_new_packets().unwrap();
    let mut answer = [0u8; 19];
    std::io::Read::read_exact(&mut c.reader(), &mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200 OK\r\n\r\n");
    assert!(s.drained());
}

use std::io::Write as _;

/// A session past its handshake with `c`, the request read.
fn established(c: &mut rustls::ClientConnection) -> Session {
    let mut s = Session::new(server_config()).unwrap();
    c.writer().write_all(b"hi").unwrap();
    let mut got = Vec::new();
    pump(c, &mut s, &mut got);
    assert_eq!(got, b"hi");
    s
}

/// What the client reads of `s`'s queued ciphertext.
fn to_client(s: &mut Session, c: &mut rustls::ClientConnection) -> Vec<u8> {
    let out = s.out().to_vec();
    s.sent(out.len());
    let mut at = &out[..];
    let mut plain = Vec::new();
    while !at.is_empty() {
        c.read_tls(&mut at).unwrap();
        c.process_new_packets().unwrap();
        // Taken as it comes: rustls's client buffers only so much.
        let _ = std::io::Read::read_to_end(&mut c.reader(), &mut plain);
    }
    plain
}

/// Client ciphertext into the session; what the session read.
fn to_server(c: &mut rustls::ClientConnection, s: &mut Session) -> Result<Got, Error> {
    let mut wire = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut wire).unwrap();
    }
    s.rx().unwrap();
    s.rx.extend_from_slice(&wire);
    let mut got = Vec::new();
    let r = s.read(|p| {
        got.extend_from_slice(p);
        p.len()
    });
    if let Ok(Got::Bytes(n)) = r {
        assert_eq!(n, got.len());
    }
    r
}

#[test]
fn a_client_key_update_is_followed_both_ways() {
    let mut c = client();
    let mut s = established(&mut c);
    assert!(s.own_records());
    // rustls's client asks for ours too (update_requested).
    c.refresh_traffic_keys().unwrap();
    c.writer().write_all(b"after update").unwrap();
    assert_eq!(to_server(&mut c, &mut s).unwrap(), Got::Bytes(12));
    s.encrypt(b"answer").unwrap();
    assert_eq!(to_client(&mut s, &mut c), b"answer");
}

#[test]
fn our_keys_are_updated_before_their_limit() {
    let mut c = client();
    let mut s = established(&mut c);
    let Engine::Own(own) = &mut s.engine else {
        panic!("TLS 1.3 records are ours");
    };
    own.records.limit_after(2);
    let body: Vec<u8> = (0..100_000).map(|i| i as u8).collect();
    let mut sent = 0;
    let mut read = Vec::new();
    while sent < body.len() {
        sent += s.encrypt(&body[sent..]).unwrap();
        read.extend(to_client(&mut s, &mut c));
    }
    assert_eq!(
        read, body,
        "every record opened, across several key updates"
    );
}

#[test]
fn close_notify_ends_the_stream_and_ours_is_sent_once() {
    let mut c = client();
    let mut s = established(&mut c);
    c.send_close_notify();
    assert_eq!(to_server(&mut c, &mut s).unwrap(), Got::Closed);
    s.close_notify().unwrap();
    s.close_notify().unwrap();
    let out = s.out().to_vec();
    s.sent(out.len());
    c.read_tls(&mut &out[..]).unwrap();
    c.process_new_packets().unwrap();
    let mut rest = Vec::new();
    // The client saw our close_notify: a clean end of stream.
    assert_eq!(
        std::io::Read::read_to_end(&mut c.reader(), &mut rest).unwrap(),
        0
    );
}

#[test]
fn a_record_that_does_not_open_is_refused_with_an_alert() {
    let mut c = client();
    let mut s = established(&mut c);
    c.writer().write_all(b"tampered").unwrap();
    let mut wire = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut wire).unwrap();
    }
    let last = wire.len() - 1;
    wire[last] ^= 1;
    s.rx().unwrap();
    s.rx.extend_from_slice(&wire);
    let r = s.read(|p| p.len());
    assert!(
        matches!(
            r,
            Err(Error::Record(Refused::Alert(
                _,
                records::alert::BAD_RECORD_MAC
            )))
        ),
        "{r:?}"
    );
    let out = s.out().to_vec();
    assert!(!out.is_empty(), "an alert is queued");
    c.read_tls(&mut &out[..]).unwrap();
    let e = c.process_new_packets().unwrap_err();
    assert!(
        matches!(
            e,
            rustls::Error::AlertReceived(rustls::AlertDescription::BadRecordMac)
        ),
        "{e:?}"
    );
    // The session is over: nothing more is read or sent.
    assert!(matches!(s.read(|p| p.len()), Err(Error::Failed)));
    assert!(matches!(s.encrypt(b"x"), Err(Error::Failed)));
}

#[test]
fn chacha20_and_aes_128_sessions_are_ours_too() {
    for suite in [
        rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
    ] {
        let mut p = rustls::crypto::ring::default_provider();
        p.cipher_suites = vec![suite];
        let mut c = client_with(Arc::new(p), &[&rustls::version::TLS13]);
        let mut s = established(&mut c);
        assert!(s.own_records(), "{suite:?}");
        s.encrypt(b"pong").unwrap();
        assert_eq!(to_client(&mut s, &mut c), b"pong", "{suite:?}");
    }
}

#[test]
fn tls12_sessions_stay_with_rustls() {
    let mut c = client_with(provider(), &[&rustls::version::TLS12]);
    let mut s = established(&mut c);
    assert!(!s.own_records());
    assert_eq!(s.version(), Some(rustls::ProtocolVersion::TLSv1_2));
    s.encrypt(b"pong").unwrap();
    assert_eq!(to_client(&mut s, &mut c), b"pong");
}
