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
    client_reads(c, &out)
}

/// What the client reads of `wire`.
fn client_reads(c: &mut rustls::ClientConnection, wire: &[u8]) -> Vec<u8> {
    let mut at = wire;
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

/// A record from `c` with its last byte changed, received by `s`.
fn receive_tampered(c: &mut rustls::ClientConnection, s: &mut Session) {
    c.writer().write_all(b"tampered").unwrap();
    let mut wire = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut wire).unwrap();
    }
    let last = wire.len() - 1;
    wire[last] ^= 1;
    s.rx().unwrap();
    s.rx.extend_from_slice(&wire);
}

#[test]
fn a_record_that_does_not_open_is_refused_with_an_alert() {
    let mut c = client();
    let mut s = established(&mut c);
    receive_tampered(&mut c, &mut s);
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

/// What the kernel does with the keys it is given (kTLS), read back from
/// the bytes `setsockopt` would pass: seal records from that sequence
/// number on, as RFC 8446 §5.2 has them.
struct Kernel {
    key: ring::aead::LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl Kernel {
    fn took(info: &CryptoInfo) -> Kernel {
        use ring::aead::{AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
        let b = info.as_bytes();
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), 0x0304, "TLS 1.3");
        let (alg, iv, key, seq) = match u16::from_ne_bytes([b[2], b[3]]) {
            51 => (
                &AES_128_GCM,
                [&b[28..32], &b[4..12]].concat(),
                &b[12..28],
                &b[32..40],
            ),
            52 => (
                &AES_256_GCM,
                [&b[44..48], &b[4..12]].concat(),
                &b[12..44],
                &b[48..56],
            ),
            54 => (
                &CHACHA20_POLY1305,
                b[4..16].to_vec(),
                &b[16..48],
                &b[48..56],
            ),
            other => panic!("cipher {other}"),
        };
        Kernel {
            key: ring::aead::LessSafeKey::new(ring::aead::UnboundKey::new(alg, key).unwrap()),
            iv: iv.try_into().unwrap(),
            seq: u64::from_be_bytes(seq.try_into().unwrap()),
        }
    }

    fn seal(&mut self, typ: u8, content: &[u8]) -> Vec<u8> {
        let len = content.len() + 1 + 16;
        let header = [23, 3, 3, (len >> 8) as u8, len as u8];
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        let mut body = [content, &[typ]].concat();
        self.key
            .seal_in_place_append_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(header),
                &mut body,
            )
            .unwrap();
        [&header[..], &body].concat()
    }
}

fn client_of(suite: rustls::SupportedCipherSuite) -> rustls::ClientConnection {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites = vec![suite];
    client_with(Arc::new(p), &[&rustls::version::TLS13])
}

const SUITES: [rustls::SupportedCipherSuite; 3] = [
    rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
    rustls::crypto::ring::cipher_suite::TLS13_AES_256_GCM_SHA384,
    rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
];

#[test]
fn the_kernel_seals_with_our_send_keys_from_our_next_record_on() {
    for suite in SUITES {
        let mut c = client_of(suite);
        let mut s = established(&mut c);
        s.encrypt(b"sealed by us").unwrap();
        assert_eq!(to_client(&mut s, &mut c), b"sealed by us");
        let info = s.kernel_tx().expect("TLS 1.3 keys can be handed over");
        s.kernel_sends();
        assert!(s.kernel_seals());
        assert!(s.kernel_tx().is_none(), "handed over once");
        let mut kernel = Kernel::took(&info);
        let wire = kernel.seal(records::APPLICATION_DATA, b"sealed by the kernel");
        assert_eq!(
            client_reads(&mut c, &wire),
            b"sealed by the kernel",
            "{suite:?}"
        );
        // Receiving stays ours.
        c.writer().write_all(b"next request").unwrap();
        assert_eq!(to_server(&mut c, &mut s).unwrap(), Got::Bytes(12));
    }
}

#[test]
fn keys_are_not_handed_over_with_ciphertext_queued_nor_for_tls12() {
    let mut c = client();
    let mut s = established(&mut c);
    s.encrypt(b"unsent").unwrap();
    assert!(s.kernel_tx().is_none(), "queued records first");
    to_client(&mut s, &mut c);
    assert!(s.kernel_tx().is_some());
    let mut c = client_with(provider(), &[&rustls::version::TLS12]);
    let s = established(&mut c);
    assert!(s.kernel_tx().is_none(), "TLS 1.2 stays with rustls");
}

#[test]
fn a_key_update_asked_for_goes_by_the_kernel_then_the_new_keys_do() {
    for suite in SUITES {
        let mut c = client_of(suite);
        let mut s = established(&mut c);
        let mut kernel = Kernel::took(&s.kernel_tx().unwrap());
        s.kernel_sends();
        c.refresh_traffic_keys().unwrap();
        c.writer().write_all(b"after update").unwrap();
        assert_eq!(to_server(&mut c, &mut s).unwrap(), Got::Bytes(12));
        assert!(s.out().is_empty(), "nothing sealed by us");
        let due = s.take_due();
        assert!(due.key_update && due.alert.is_none(), "{due:?}");
        assert!(s.take_due().is_empty(), "taken once");
        let next = s.next_kernel_tx().unwrap();
        let mut wire = kernel.seal(records::HANDSHAKE, &records::KEY_UPDATE_NOT_REQUESTED);
        let mut renewed = Kernel::took(&next);
        assert_eq!(renewed.seq, 0, "new keys start at record 0");
        wire.extend(renewed.seal(records::APPLICATION_DATA, b"under new keys"));
        assert_eq!(client_reads(&mut c, &wire), b"under new keys", "{suite:?}");
    }
}

#[test]
fn with_the_kernel_sealing_alerts_and_our_key_update_are_left_due() {
    let mut c = client();
    let mut s = established(&mut c);
    s.kernel_tx().unwrap();
    s.kernel_sends();
    let Engine::Own(own) = &mut s.engine else {
        panic!("TLS 1.3 records are ours");
    };
    own.records.limit_after(10);
    s.kernel_sent(9);
    assert!(s.take_due().is_empty());
    s.kernel_sent(1);
    assert!(s.take_due().key_update, "at the confidentiality limit");
    s.close_notify().unwrap();
    s.close_notify().unwrap();
    assert!(s.out().is_empty());
    assert_eq!(s.take_due().alert, Some(records::alert::CLOSE_NOTIFY));
    // A record that does not open: its alert is due, and the session over.
    receive_tampered(&mut c, &mut s);
    assert!(s.read(|p| p.len()).is_err());
    assert_eq!(s.take_due().alert, Some(records::alert::BAD_RECORD_MAC));
    assert!(matches!(s.encrypt(b"x"), Err(Error::Failed)));
}
