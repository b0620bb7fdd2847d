//! TLS against the real binary (`--tls-bind`, `--tls-cert`/`--tls-key`,
//! `--tls-self-signed`): rustls and curl clients over TLS 1.3 and 1.2, ALPN
//! and SNI, key types and PEM encodings, one identity across workers
//! (threads and processes), session resumption on whichever worker the
//! kernel picks, plain HTTP and silent clients on the TLS port, a
//! certificate swapped on disk and reloaded with SIGHUP under load, and the
//! start-up refusals (exit 2).
//!
//! Servers come from the shared harness ([`tls_server`]: a TLS listener
//! only, an admin listener), which reads the `https://` listeners and the
//! `tls sha256` fingerprint from the ready line. Certificates come from a
//! test CA made with rcgen ([`Pki`]); the self-signed identity is checked by
//! pinning the fingerprint the ready line prints (`common::tls::Pinned`).
//! Requests are raw HTTP/1.1 over a rustls `StreamOwned`
//! (`common::tls::request`).
//!
//! Process-mode counters reach `/metrics` with the 1 s health beats, so
//! metric checks poll (`TestServer::wait_metrics`) rather than sleep.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SignatureAlgorithm,
};
use rustls::client::Resumption;
use rustls::pki_types::CertificateDer;
use rustls::{
    ClientConfig, HandshakeKind, ProtocolVersion, RootCertStore, SupportedProtocolVersion,
};

use common::tls::{
    self, connect_as, connected, fingerprint, get, peer_fingerprint, pinned, pinned_full, request,
    trusting, trusting_any, Tls, TLS12, TLS13,
};
use common::{free_port, read_until_close, Builder, ReadError, Signal, TestServer, IO_TIMEOUT};

// ---------------------------------------------------------------------------
// Docroot

const HELLO: &[u8] = b"hello over tls\n";
/// Larger than a TLS record (16 KiB), the small-file cache (64 KiB) and one
/// buffered file chunk (256 KiB), so the body crosses every boundary.
const BIG_BYTES: usize = 300 * 1024 + 7;

fn big() -> Vec<u8> {
    (0..BIG_BYTES).map(|i| (i * 7 % 251) as u8).collect()
}

/// A server over a docroot of `hello.txt` and `big.bin`.
fn site() -> Builder {
    TestServer::builder()
        .file("hello.txt", HELLO)
        .file("big.bin", big())
}

/// The suite's server: a TLS listener only (no plain `--bind`; the identity
/// is the caller's), an admin listener and `RUST_LOG=info`, over [`site`].
fn tls_server() -> Builder {
    site().no_bind().admin().env("RUST_LOG", "info")
}

// ---------------------------------------------------------------------------
// Certificates

/// The fingerprint of the first certificate in a PEM file.
fn pem_fingerprint(path: &Path) -> String {
    use rustls::pki_types::pem::PemObject;
    let der = CertificateDer::pem_file_iter(path)
        .expect("open PEM")
        .next()
        .expect("a certificate")
        .expect("parse PEM");
    fingerprint(&der)
}

/// A test CA in a temp dir, issuing leaf certificates for `localhost` and
/// `127.0.0.1`.
struct Pki {
    dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
    next: AtomicUsize,
}

/// A certificate chain (leaf, then CA) and its key, written to files.
struct Leaf {
    cert: PathBuf,
    key: PathBuf,
    chain_pem: String,
    key_pem: String,
    fingerprint: String,
}

impl Leaf {
    fn cert(&self) -> &str {
        self.cert.to_str().expect("UTF-8 path")
    }

    fn key(&self) -> &str {
        self.key.to_str().expect("UTF-8 path")
    }

    /// `--tls-cert CERT --tls-key KEY`.
    fn args(&self) -> [&str; 4] {
        ["--tls-cert", self.cert(), "--tls-key", self.key()]
    }

    /// Replace the files at `cert`/`key` with this leaf's, each by rename,
    /// so a reader sees the old file or the new one, never half of one.
    fn install(&self, cert: &Path, key: &Path) {
        for (path, text) in [(key, &self.key_pem), (cert, &self.chain_pem)] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).expect("write new PEM");
            std::fs::rename(&tmp, path).expect("rename new PEM into place");
        }
    }
}

impl Pki {
    fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "servery test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("CA key");
        let ca = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let dir = tempfile::tempdir().expect("temp PKI dir");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write ca.pem");
        Pki {
            dir,
            ca,
            next: AtomicUsize::new(0),
        }
    }

    /// The CA certificate file (what `curl --cacert` takes).
    fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A client trust store holding the CA only.
    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.der().clone()).expect("add CA root");
        roots
    }

    /// A fresh leaf with a fresh `alg` key, written to new files.
    fn issue(&self, alg: &'static SignatureAlgorithm) -> Leaf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, format!("servery test leaf {n}"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate_for(alg).expect("leaf key");
        let issuer: &Issuer<'_, KeyPair> = &self.ca;
        let cert = params.signed_by(&key, issuer).expect("sign leaf");
        let chain_pem = format!("{}{}", cert.pem(), self.ca.pem());
        let key_pem = key.serialize_pem();
        let cert_path = self.dir.path().join(format!("leaf{n}.pem"));
        let key_path = self.dir.path().join(format!("leaf{n}.key"));
        std::fs::write(&cert_path, &chain_pem).expect("write leaf chain");
        std::fs::write(&key_path, &key_pem).expect("write leaf key");
        Leaf {
            cert: cert_path,
            key: key_path,
            chain_pem,
            key_pem,
            fingerprint: fingerprint(cert.der()),
        }
    }
}

// ---------------------------------------------------------------------------
// Metrics

/// The value of the series `key` (e.g. `servery_tls_resumed_total` for the
/// sum, `servery_tls_resumed_total{worker="0"}` for one worker); 0 if absent.
/// A counter's value, 0 when the series is absent (not counted yet).
fn metric(text: &str, key: &str) -> u64 {
    common::metric(text, key).map_or(0, |v| v as u64)
}

fn per_worker(text: &str, name: &str, worker: usize) -> u64 {
    metric(text, &format!("{name}{{worker=\"{worker}\"}}"))
}

// ---------------------------------------------------------------------------
// Fetches

/// The body of a whole file, a middle range and a suffix range on one
/// kept-alive connection, then a `Connection: close` ended by close_notify.
fn fetch_file_and_ranges(s: &mut Tls) {
    let big = big();
    let r = get(s, "/big.bin", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), BIG_BYTES);
    assert!(r.body == big, "big.bin body differs");

    let r = get(s, "/big.bin", "Range: bytes=100000-100099\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 100000-100099/{BIG_BYTES}").as_str())
    );
    assert_eq!(r.body, big[100_000..100_100]);

    let r = get(s, "/hello.txt", "Range: bytes=-4\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(r.body, HELLO[HELLO.len() - 4..]);

    let r = get(s, "/hello.txt", "Connection: close\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, HELLO);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)
        .expect("a clean close (close_notify) after Connection: close");
    assert!(rest.is_empty(), "bytes after the last response: {rest:?}");
}

// ---------------------------------------------------------------------------
// Versions, ALPN, SNI, identities

fn fetch_with(driver: &str, versions: &[&'static SupportedProtocolVersion], want: ProtocolVersion) {
    let pki = Pki::new();
    let leaf = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let server = tls_server()
        .driver(driver)
        .tls_files(&leaf.cert, &leaf.key)
        .start();
    assert_eq!(
        server.fingerprint(),
        leaf.fingerprint,
        "{}",
        server.ready_line()
    );

    let config = trusting(pki.roots(), versions);
    let mut s = connected(&config, server.https());
    assert_eq!(s.conn.protocol_version(), Some(want));
    assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(peer_fingerprint(&s), leaf.fingerprint);
    let chain = s.conn.peer_certificates().expect("certificates").len();
    assert_eq!(chain, 2, "the whole chain file (leaf, then CA) is sent");
    fetch_file_and_ranges(&mut s);
}

fn tls13_client_fetches_a_file_and_ranges(driver: &str) {
    fetch_with(driver, TLS13, ProtocolVersion::TLSv1_3);
}

fn tls12_client_fetches_a_file_and_ranges(driver: &str) {
    fetch_with(driver, TLS12, ProtocolVersion::TLSv1_2);
}

/// Plain HTTP on the TLS port: no HTTP answer, the connection closed, one
/// count in `servery_tls_plaintext_total` (not in the failed count), and
/// the port still serves TLS afterwards.
fn plain_http_on_the_tls_port_is_closed_and_counted(driver: &str) {
    let server = tls_server().driver(driver).tls_self_signed().start();
    let mut s = common::connect(server.https());
    s.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("write plain request");
    let got = read_until_close(&mut s, IO_TIMEOUT).expect("the server closes the connection");
    assert!(
        !got.starts_with(b"HTTP/"),
        "an HTTP response on the TLS port: {:?}",
        String::from_utf8_lossy(&got)
    );
    assert!(
        got.is_empty() || got[0] == 0x15,
        "neither EOF nor a TLS alert: {got:?}"
    );
    let text = server.wait_metrics(Duration::from_secs(3), |t| {
        metric(t, "servery_tls_plaintext_total") >= 1
    });
    assert_eq!(metric(&text, "servery_tls_plaintext_total"), 1, "{text}");
    assert_eq!(metric(&text, "servery_tls_failed_total"), 0, "{text}");
    assert_eq!(metric(&text, "servery_tls_handshakes_total"), 0, "{text}");

    let mut s = connected(&pinned(server.fingerprint(), TLS13), server.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
}

/// `--tls-handshake-timeout 1`: a client that connects and sends nothing,
/// and one that stops inside its ClientHello, are both closed after about a
/// second and counted as failed; a finished handshake is not bound by it.
fn a_silent_client_on_the_tls_port_is_closed_after_the_handshake_timeout(driver: &str) {
    let server = tls_server()
        .driver(driver)
        .tls_self_signed()
        .args(&["--tls-handshake-timeout", "1"])
        .start();
    let config = pinned(server.fingerprint(), TLS13);
    let mut done = connected(&config, server.https());
    let started = Instant::now();
    let mut silent = common::connect(server.https());
    let mut partial = common::connect(server.https());
    // A handshake record header promising 512 bytes, then 3 of them.
    partial
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01])
        .expect("write partial ClientHello");
    for (what, s) in [("silent", &mut silent), ("partial", &mut partial)] {
        let got = read_until_close(s, Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{what} client still open after 5 s"));
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(900),
            "{what} client closed after {waited:?}, before the 1 s timeout"
        );
        assert!(
            waited < Duration::from_secs(4),
            "{what} client closed only after {waited:?}"
        );
        assert!(!got.starts_with(b"HTTP/"), "{what}: {got:?}");
    }
    let text = server.wait_metrics(Duration::from_secs(3), |t| {
        metric(t, "servery_tls_failed_total") >= 2
    });
    assert_eq!(metric(&text, "servery_tls_failed_total"), 2, "{text}");

    // The finished handshake has outlived the handshake timeout.
    std::thread::sleep(Duration::from_millis(
        1200u64.saturating_sub(started.elapsed().as_millis() as u64),
    ));
    assert_eq!(get(&mut done, "/hello.txt", "").body, HELLO);
}

driver_tests!(
    tls13_client_fetches_a_file_and_ranges,
    tls12_client_fetches_a_file_and_ranges,
    plain_http_on_the_tls_port_is_closed_and_counted,
    a_silent_client_on_the_tls_port_is_closed_after_the_handshake_timeout,
);

/// curl (OpenSSL) trusting the test CA, by IP (the SAN holds 127.0.0.1) and
/// by name (`--resolve`), over TLS 1.3 and capped at 1.2, over HTTP/2 (what
/// ALPN picks) and HTTP/1.1.
#[test]
fn curl_fetches_over_tls13_and_tls12() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("curl not found; skipping curl_fetches_over_tls13_and_tls12");
        return;
    }
    let pki = Pki::new();
    let leaf = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let server = tls_server().tls_files(&leaf.cert, &leaf.key).start();
    let port = server.https().port();
    let out_dir = tempfile::tempdir().expect("temp dir");
    let body = out_dir.path().join("body");
    let cases: [(&[&str], &str, &str, &str, u16); 4] = [
        (&["--tlsv1.3"], "127.0.0.1", "/big.bin", "TLSv1.3", 200),
        (
            &["--tlsv1.2", "--tls-max", "1.2", "--http1.1"],
            "127.0.0.1",
            "/big.bin",
            "TLSv1.2",
            200,
        ),
        (
            &["--tlsv1.3", "-r", "0-4"],
            "localhost",
            "/hello.txt",
            "TLSv1.3",
            206,
        ),
        (
            &["--tlsv1.2", "--tls-max", "1.2", "-r", "0-4", "--http1.1"],
            "localhost",
            "/hello.txt",
            "TLSv1.2",
            206,
        ),
    ];
    for (flags, host, path, version, status) in cases {
        let resolve = format!("localhost:{port}:127.0.0.1");
        let url = format!("https://{host}:{port}{path}");
        let out = common::run_bounded(
            Command::new("curl")
                .args(["-sS", "-v", "--max-time", "5", "--cacert"])
                .arg(pki.ca_file())
                .args(["--resolve", &resolve, "-o"])
                .arg(&body)
                .args(["-w", "%{http_code}"])
                .args(flags)
                .arg(&url),
            Duration::from_secs(10),
        );
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "curl {flags:?} {url}: {log}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            status.to_string(),
            "{log}"
        );
        assert!(
            log.contains(&format!("SSL connection using {version}")),
            "curl {flags:?} {url} did not use {version}:\n{log}"
        );
        // curl offers h2 and http/1.1 (only http/1.1 with --http1.1); the
        // server prefers h2.
        let alpn = if flags.contains(&"--http1.1") {
            "http/1.1"
        } else {
            "h2"
        };
        assert!(
            log.contains(&format!("ALPN: server accepted {alpn}")),
            "curl {flags:?} {url}: not ALPN {alpn}:\n{log}"
        );
        let got = std::fs::read(&body).expect("curl output");
        let want = if path == "/big.bin" {
            big()
        } else {
            HELLO[..5].to_vec()
        };
        assert!(got == want, "curl {flags:?} {url}: body differs");
    }
}

/// ALPN prefers `h2`: a client offering none is served HTTP/1.1, one
/// offering both gets `h2`, one offering only `h2` gets it too. With
/// `--alpn http/1.1` an h2-only client is refused in the handshake
/// (RFC 7301 §3.2 no_application_protocol) and counted as failed.
#[test]
fn alpn_prefers_h2_and_alpn_http11_refuses_an_h2_only_client() {
    let server = tls_server().tls_self_signed().start();
    let mut none = Arc::unwrap_or_clone(pinned(server.fingerprint(), TLS13));
    none.alpn_protocols.clear();
    let mut s = connected(&Arc::new(none), server.https());
    assert_eq!(s.conn.alpn_protocol(), None);
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    for offered in [
        vec![b"http/1.1".to_vec(), b"h2".to_vec()],
        vec![b"h2".to_vec()],
    ] {
        let mut c = Arc::unwrap_or_clone(pinned(server.fingerprint(), TLS13));
        c.alpn_protocols = offered;
        let s = connected(&Arc::new(c), server.https());
        assert_eq!(s.conn.alpn_protocol(), Some(&b"h2"[..]));
    }

    let server = tls_server()
        .tls_self_signed()
        .args(&["--alpn", "http/1.1"])
        .start();
    let mut h2 = Arc::unwrap_or_clone(pinned(server.fingerprint(), TLS13));
    h2.alpn_protocols = vec![b"h2".to_vec()];
    let e = tls::connect(&Arc::new(h2), server.https())
        .expect_err("an h2-only client must not be accepted");
    assert!(
        e.to_string().contains("NoApplicationProtocol"),
        "unexpected error: {e}"
    );
    let text = server.wait_metrics(Duration::from_secs(3), |t| {
        metric(t, "servery_tls_failed_total") >= 1
    });
    assert_eq!(metric(&text, "servery_tls_failed_total"), 1, "{text}");
}

/// `--tls-self-signed`: an ECDSA certificate whose fingerprint is the ready
/// line's, valid (as its own root) for `localhost` and the bound IP and for
/// nothing else; any SNI (or none) gets it.
#[test]
fn self_signed_identity_names_localhost_and_the_bound_ip() {
    let server = tls_server().tls_self_signed().start();
    let s = connected(&pinned_full(server.fingerprint()), server.https());
    let leaf = s.conn.peer_certificates().expect("certificates")[0].clone();
    assert_eq!(fingerprint(&leaf), server.fingerprint());
    drop(s);

    for name in ["anything.example", "127.0.0.1", "localhost"] {
        let mut s = connect_as(&pinned_full(server.fingerprint()), server.https(), name)
            .unwrap_or_else(|e| panic!("SNI {name}: {e}"));
        assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO, "SNI {name}");
    }

    let mut roots = RootCertStore::empty();
    roots.add(leaf).expect("self-signed certificate as a root");
    let config = trusting(roots, TLS12);
    for name in ["localhost", "127.0.0.1"] {
        let mut s = connect_as(&config, server.https(), name)
            .unwrap_or_else(|e| panic!("verifying the self-signed certificate for {name}: {e}"));
        let suite = format!(
            "{:?}",
            s.conn.negotiated_cipher_suite().expect("suite").suite()
        );
        assert!(suite.contains("ECDSA"), "{name}: {suite}");
        assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    }
    let e = connect_as(&config, server.https(), "other.example")
        .expect_err("the certificate must not be valid for other.example");
    assert!(e.to_string().contains("not valid for name"), "{e}");
}

/// `--tls-bind` alone: the only listener is the TLS one.
#[test]
fn tls_bind_alone_opens_no_plain_listener() {
    let server = tls_server().tls_self_signed().start();
    assert!(server.http_addrs().is_empty(), "{}", server.ready_line());
    assert_eq!(server.https_addrs().len(), 1, "{}", server.ready_line());

    let pki = Pki::new();
    let leaf = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let both = tls_server()
        .bind("127.0.0.1:0")
        .tls_files(&leaf.cert, &leaf.key)
        .start();
    assert_eq!(both.http_addrs().len(), 1, "{}", both.ready_line());
    assert_eq!(both.https_addrs().len(), 1, "{}", both.ready_line());
    let mut plain = common::connect(both.http_addrs()[0]);
    plain
        .write_all(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    assert_eq!(common::read_response(&mut plain).body, HELLO);
    let mut s = connected(&trusting(pki.roots(), TLS13), both.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
}

/// Whether `openssl` runs here (it makes the RSA and SEC1 keys).
fn have_openssl() -> bool {
    Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn openssl(args: &[&str]) {
    let out = common::run_bounded(Command::new("openssl").args(args), Duration::from_secs(30));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ECDSA P-256 and P-384 and Ed25519 (PKCS#8, from rcgen); with openssl
/// also RSA as PKCS#8 and PKCS#1 and EC as SEC1 behind an `EC PARAMETERS`
/// block: each is served over TLS 1.3 and 1.2.
#[test]
fn every_key_type_and_pem_encoding_is_served() {
    let pki = Pki::new();
    let mut cases: Vec<(String, PathBuf, PathBuf)> = Vec::new();
    for (name, alg) in [
        ("ecdsa-p256", &rcgen::PKCS_ECDSA_P256_SHA256),
        ("ecdsa-p384", &rcgen::PKCS_ECDSA_P384_SHA384),
        ("ed25519", &rcgen::PKCS_ED25519),
    ] {
        let leaf = pki.issue(alg);
        cases.push((name.to_owned(), leaf.cert.clone(), leaf.key.clone()));
    }
    if have_openssl() {
        let d = pki.dir.path();
        let p = |f: &str| d.join(f).to_str().expect("UTF-8").to_owned();
        let san = "subjectAltName=DNS:localhost,IP:127.0.0.1";
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            san,
            "-keyout",
            &p("rsa8.key"),
            "-out",
            &p("rsa.pem"),
        ]);
        openssl(&[
            "rsa",
            "-traditional",
            "-in",
            &p("rsa8.key"),
            "-out",
            &p("rsa1.key"),
        ]);
        openssl(&[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-out",
            &p("sec1.key"),
        ]);
        openssl(&[
            "req",
            "-x509",
            "-new",
            "-key",
            &p("sec1.key"),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            san,
            "-out",
            &p("sec1.pem"),
        ]);
        let sec1 = std::fs::read_to_string(p("sec1.key")).expect("read SEC1 key");
        assert!(sec1.contains("BEGIN EC PARAMETERS") && sec1.contains("BEGIN EC PRIVATE KEY"));
        let rsa1 = std::fs::read_to_string(p("rsa1.key")).expect("read PKCS#1 key");
        assert!(rsa1.contains("BEGIN RSA PRIVATE KEY"));
        cases.push(("rsa-pkcs8".into(), d.join("rsa.pem"), d.join("rsa8.key")));
        cases.push(("rsa-pkcs1".into(), d.join("rsa.pem"), d.join("rsa1.key")));
        cases.push(("ec-sec1".into(), d.join("sec1.pem"), d.join("sec1.key")));
    } else {
        eprintln!("openssl not found; RSA and SEC1 keys not tried");
    }
    for (name, cert, key) in &cases {
        let fp = pem_fingerprint(cert);
        let server = tls_server().tls_files(cert, key).start();
        assert_eq!(server.fingerprint(), fp, "{name}");
        for versions in [TLS13, TLS12] {
            let mut s = tls::connect(&pinned(&fp, versions), server.https())
                .unwrap_or_else(|e| panic!("{name} {versions:?}: {e}"));
            assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO, "{name}");
        }
    }
}

// ---------------------------------------------------------------------------
// One identity and one ticket key set across workers

/// `--workers 2`: 50 full handshakes all see the one certificate of the
/// ready line, and both workers did some of them.
fn two_workers_present_one_certificate(isolation: &str) {
    let server = tls_server()
        .tls_self_signed()
        .isolation(isolation)
        .args(&["--workers", "2"])
        .start();
    let config = pinned_full(server.fingerprint());
    let mut seen = BTreeSet::new();
    for _ in 0..50 {
        let mut s = connected(&config, server.https());
        assert_eq!(s.conn.handshake_kind(), Some(HandshakeKind::Full));
        seen.insert(peer_fingerprint(&s));
        assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    }
    assert_eq!(seen, BTreeSet::from([server.fingerprint().to_owned()]));
    let text = server.wait_metrics(Duration::from_secs(5), |t| {
        metric(t, "servery_tls_handshakes_total") >= 50
    });
    assert_eq!(metric(&text, "servery_tls_handshakes_total"), 50, "{text}");
    for w in 0..2 {
        assert!(
            per_worker(&text, "servery_tls_handshakes_total", w) > 0,
            "worker {w} did no handshake; reuseport did not spread 50 connections?\n{text}"
        );
    }
}

#[test]
fn two_thread_workers_present_one_certificate() {
    two_workers_present_one_certificate("thread");
}

#[test]
fn two_process_workers_present_one_certificate() {
    two_workers_present_one_certificate("process");
}

/// `--workers 2`: with one session store, every connection after the first
/// resumes, and both workers resumed sessions (so tickets one worker issued
/// opened on the other). Reuseport spreads connections by a hash of the
/// client port: 30 connections leave a worker without any with probability
/// about 2^-28; more are made if that happens.
fn sessions_resume_on_either_worker(
    isolation: &str,
    versions: &[&'static SupportedProtocolVersion],
) {
    let server = tls_server()
        .tls_self_signed()
        .isolation(isolation)
        .args(&["--workers", "2"])
        .start();
    let config = pinned(server.fingerprint(), versions);
    let mut s = connected(&config, server.https());
    assert_eq!(s.conn.handshake_kind(), Some(HandshakeKind::Full));
    // TLS 1.3 tickets arrive after the handshake: reading a response takes
    // them in.
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    drop(s);
    let mut made = 1u64;
    let both = |t: &str| (0..2).all(|w| per_worker(t, "servery_tls_resumed_total", w) > 0);
    let text = loop {
        let batch = if made == 1 { 29 } else { 20 };
        for _ in 0..batch {
            let mut s = connected(&config, server.https());
            assert_eq!(
                s.conn.handshake_kind(),
                Some(HandshakeKind::Resumed),
                "connection {made} did not resume"
            );
            assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
            made += 1;
        }
        let text = server.wait_metrics(Duration::from_secs(4), |t| {
            metric(t, "servery_tls_handshakes_total") >= made && both(t)
        });
        if both(&text) || made >= 200 {
            break text;
        }
    };
    assert!(
        both(&text),
        "a worker resumed nothing in {made} connections:\n{text}"
    );
    assert_eq!(
        metric(&text, "servery_tls_handshakes_total"),
        made,
        "{text}"
    );
    assert_eq!(
        metric(&text, "servery_tls_resumed_total"),
        made - 1,
        "{text}"
    );
    assert_eq!(metric(&text, "servery_tls_failed_total"), 0, "{text}");
}

#[test]
fn tls13_sessions_resume_on_either_worker_process() {
    sessions_resume_on_either_worker("process", TLS13);
}

#[test]
fn tls13_sessions_resume_on_either_worker_thread() {
    sessions_resume_on_either_worker("thread", TLS13);
}

#[test]
fn tls12_sessions_resume_on_either_worker_process() {
    sessions_resume_on_either_worker("process", TLS12);
}

// ---------------------------------------------------------------------------
// Reload

/// What the load threads saw.
#[derive(Default)]
struct Tally {
    ok: AtomicUsize,
    connects: AtomicUsize,
    retried: AtomicUsize,
    failures: Mutex<Vec<String>>,
    fingerprints: Mutex<BTreeSet<String>>,
}

/// A client thread doing keep-alive requests until `stop`: a request is
/// retried on a new connection only if its connection closed before any
/// byte of the response; everything else wrong is a failure.
fn load(
    config: Arc<ClientConfig>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let big = big();
        let fail = |m: String| {
            tally
                .failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(m)
        };
        let mut conn: Option<Tls> = None;
        let mut n = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let (path, extra, want): (&str, &str, &[u8]) = if n % 2 == 0 {
                ("/hello.txt", "", HELLO)
            } else {
                ("/big.bin", "Range: bytes=5000-5999\r\n", &big[5000..6000])
            };
            let mut s = match conn.take() {
                Some(s) => s,
                None => match tls::connect(&config, addr) {
                    Ok(s) => {
                        tally.connects.fetch_add(1, Ordering::Relaxed);
                        tally
                            .fingerprints
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(peer_fingerprint(&s));
                        s
                    }
                    Err(e) => {
                        fail(format!("connect: {e}"));
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                },
            };
            match request(&mut s, path, extra) {
                Ok(r) if r.body == want && (r.status == 200 || r.status == 206) => {
                    tally.ok.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                    if !r.closes() {
                        conn = Some(s);
                    }
                }
                Ok(r) => fail(format!("GET {path}: status {} {:?}", r.status, r.headers)),
                Err(ReadError::Unanswered(_)) => {
                    tally.retried.fetch_add(1, Ordering::Relaxed);
                }
                Err(ReadError::Broken(e)) => fail(format!("GET {path}: {e}")),
            }
        }
    })
}

/// New cert and key files (a different key) written over the old ones, then
/// SIGHUP: new connections get the new certificate while three keep-alive
/// clients lose no request; tickets issued before the reload still resume.
fn a_certificate_swapped_on_disk_is_served_after_sighup(isolation: &str) {
    let pki = Pki::new();
    let old = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let new = pki.issue(&rcgen::PKCS_ED25519);
    let server = tls_server()
        .tls_files(&old.cert, &old.key)
        .isolation(isolation)
        .args(&["--workers", "2", "--drain-timeout", "5"])
        .start();
    assert_eq!(server.fingerprint(), old.fingerprint);
    let config = trusting(pki.roots(), TLS13);
    let mut s = connected(&config, server.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    drop(s);

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    // The load does full handshakes, so each connection shows the
    // certificate actually served (a resumed one repeats the stored one).
    let mut full = Arc::unwrap_or_clone(trusting(pki.roots(), TLS13));
    full.resumption = Resumption::disabled();
    let full = Arc::new(full);
    let threads: Vec<_> = (0..3)
        .map(|_| load(full.clone(), server.https(), stop.clone(), tally.clone()))
        .collect();
    std::thread::sleep(Duration::from_millis(300));

    new.install(&old.cert, &old.key);
    server.signal(Signal::SIGHUP);
    let probe = pinned_full(&new.fingerprint);
    let deadline = Instant::now() + Duration::from_secs(10);
    // A full handshake each time: the certificate is shown.
    while tls::connect(&probe, server.https()).is_err() {
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served 10 s after SIGHUP; stderr:\n{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("load thread");
    }

    let failures = tally.failures.lock().unwrap_or_else(|e| e.into_inner());
    let ok = tally.ok.load(Ordering::Relaxed);
    assert!(
        failures.is_empty(),
        "{} failed requests ({ok} ok) during the swap: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert!(ok > 30, "only {ok} requests completed");
    let fps = tally.fingerprints.lock().unwrap_or_else(|e| e.into_inner());
    eprintln!(
        "{isolation}: {ok} requests on {} connections, {} retried after an unanswered close, {} certificates seen",
        tally.connects.load(Ordering::Relaxed),
        tally.retried.load(Ordering::Relaxed),
        fps.len()
    );
    // Drained keep-alive connections came back to the new generation.
    assert_eq!(
        *fps,
        BTreeSet::from([old.fingerprint.clone(), new.fingerprint.clone()]),
        "certificates seen by the load"
    );

    // A fresh full handshake shows only the new certificate now, and the
    // session from before the reload (same ticket secret) still resumes.
    let mut s = connected(&pinned_full(&new.fingerprint), server.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    let mut s = connected(&config, server.https());
    assert_eq!(s.conn.handshake_kind(), Some(HandshakeKind::Resumed));
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
}

#[test]
fn a_certificate_swapped_on_disk_is_served_after_sighup_thread() {
    a_certificate_swapped_on_disk_is_served_after_sighup("thread");
}

#[test]
fn a_certificate_swapped_on_disk_is_served_after_sighup_process() {
    a_certificate_swapped_on_disk_is_served_after_sighup("process");
}

/// A key that no longer matches the certificate on disk at SIGHUP: the
/// reload is refused and the old certificate is still served; fixed files
/// and another SIGHUP then take effect.
#[test]
fn a_broken_certificate_at_reload_keeps_the_old_one() {
    let pki = Pki::new();
    let old = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let new = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let mut server = tls_server().tls_files(&old.cert, &old.key).start();
    // New certificate, old key: a mismatch.
    std::fs::write(&old.cert, &new.chain_pem).expect("write mismatched cert");
    server.signal(Signal::SIGHUP);
    server.wait_log("reload refused", 1, Duration::from_secs(5));
    assert!(server.alive(), "a bad reload killed the server");
    let mut s = connected(&pinned_full(&old.fingerprint), server.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);

    new.install(&old.cert, &old.key);
    server.signal(Signal::SIGHUP);
    let probe = pinned_full(&new.fingerprint);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tls::connect(&probe, server.https()).is_err() {
        assert!(
            Instant::now() < deadline,
            "the fixed certificate was not served after SIGHUP; stderr:\n{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--tls-self-signed` is made once per server: a reload presents the same
/// certificate, and sessions from before it resume after it (the ticket
/// secret lives as long as the server).
#[test]
fn the_self_signed_identity_and_tickets_survive_a_reload() {
    let server = tls_server()
        .tls_self_signed()
        .args(&["--workers", "2"])
        .start();
    let config = pinned(server.fingerprint(), TLS13);
    let mut s = connected(&config, server.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    drop(s);
    server.signal(Signal::SIGHUP);
    server.wait_log("reload complete", 1, Duration::from_secs(10));
    for _ in 0..10 {
        let mut s = connected(&pinned_full(server.fingerprint()), server.https());
        assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    }
    let mut s = connected(&config, server.https());
    assert_eq!(s.conn.handshake_kind(), Some(HandshakeKind::Resumed));
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
}

/// A server started without TLS whose config file gains `tls_bind` and
/// `tls_self_signed` before a SIGHUP: either the reload brings TLS up, or it
/// is refused and leaves nothing behind. Either way every new plain
/// connection is still answered, and a refused TLS port is not left
/// listening with nobody to accept.
#[test]
fn tls_enabled_by_a_reload_is_served_or_refused_cleanly() {
    let plain = free_port();
    let tls = free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("servery.toml");
    std::fs::write(&config, "# plain only\n").expect("write config");
    let server = site()
        .bind(plain.to_string())
        .args(&["--config".as_ref(), config.as_os_str()])
        .env("RUST_LOG", "info")
        .start();
    std::fs::write(
        &config,
        format!("tls_bind = [\"{tls}\"]\ntls_self_signed = true\n"),
    )
    .expect("rewrite config");
    server.signal(Signal::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    let outcome = loop {
        let log = server.stderr();
        if log.contains("reload complete") {
            break "complete";
        }
        if log.contains("reload failed") || log.contains("reload refused") {
            break "failed";
        }
        assert!(
            Instant::now() < deadline,
            "no reload outcome logged:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };

    let mut unanswered = 0;
    for _ in 0..40 {
        let mut s = common::connect(plain);
        s.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        s.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .expect("write");
        if common::try_read_response(&mut s, true).map_or(true, |r| r.body != HELLO) {
            unanswered += 1;
        }
    }
    assert_eq!(
        unanswered,
        0,
        "reload {outcome}: {unanswered} of 20 plain connections unanswered; stderr:\n{}",
        server.stderr()
    );
    if outcome == "complete" {
        let mut s = connected(&trusting_any(), tls);
        assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    } else {
        let refused = TcpStream::connect_timeout(&tls, IO_TIMEOUT)
            .err()
            .is_some_and(|e| e.kind() == io::ErrorKind::ConnectionRefused);
        assert!(refused, "{tls} listens after a failed reload");
    }
}

// ---------------------------------------------------------------------------
// Refusals

/// Start `servery serve ROOT --bind HELD --no-pin ARGS` where HELD is a
/// port this test listens on: a refusal must come (exit 2, no ready line)
/// before anything binds, else the message would be about the held port.
/// Returns stderr.
fn refused(args: &[&str]) -> String {
    let held = TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let held_addr = held.local_addr().expect("held address").to_string();
    let out = match site().bind(held_addr).args(args).try_start() {
        Ok(s) => panic!("{args:?}: started: {}", s.ready_line()),
        Err(f) => f,
    };
    let (stderr, stdout) = (out.stderr, out.stdout);
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(2),
        "{args:?}: {stderr}"
    );
    assert!(!stdout.contains("ready on"), "{args:?}: {stdout}");
    stderr
}

#[test]
fn a_key_that_does_not_match_the_certificate_exits_2() {
    let pki = Pki::new();
    let a = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let b = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let stderr = refused(&[
        "--tls-bind",
        "127.0.0.1:0",
        "--tls-cert",
        a.cert(),
        "--tls-key",
        b.key(),
    ]);
    let want = format!(
        "servery: --tls-cert: the key in {} does not belong to the certificate in {}",
        b.key(),
        a.cert()
    );
    assert!(stderr.contains(&want), "want {want:?} in:\n{stderr}");
}

#[test]
fn a_missing_or_unreadable_key_file_exits_2_naming_it() {
    let pki = Pki::new();
    let a = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let missing = pki.dir.path().join("missing.key");
    let missing = missing.to_str().expect("UTF-8");
    let stderr = refused(&[
        "--tls-bind",
        "127.0.0.1:0",
        "--tls-cert",
        a.cert(),
        "--tls-key",
        missing,
    ]);
    assert!(
        stderr.contains(missing) && stderr.contains("No such file"),
        "{stderr}"
    );

    // A directory is unreadable as a file, even for root.
    let dir = pki.dir.path().to_str().expect("UTF-8");
    let stderr = refused(&[
        "--tls-bind",
        "127.0.0.1:0",
        "--tls-cert",
        a.cert(),
        "--tls-key",
        dir,
    ]);
    assert!(stderr.contains(&format!("cannot read {dir}")), "{stderr}");

    // Mode 000, where that stops us (not root).
    use std::os::unix::fs::PermissionsExt;
    let locked = pki.dir.path().join("locked.key");
    std::fs::write(&locked, &a.key_pem).expect("write key");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if std::fs::read(&locked).is_err() {
        let locked = locked.to_str().expect("UTF-8");
        let stderr = refused(&[
            "--tls-bind",
            "127.0.0.1:0",
            "--tls-cert",
            a.cert(),
            "--tls-key",
            locked,
        ]);
        assert!(
            stderr.contains(locked) && stderr.contains("ermission denied"),
            "{stderr}"
        );
    } else {
        eprintln!("running as root: mode 000 does not stop reads; checked a directory instead");
    }
}

#[test]
fn files_that_hold_no_certificate_or_no_key_exit_2() {
    let pki = Pki::new();
    let a = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let junk = pki.dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").expect("write junk");
    let junk = junk.to_str().expect("UTF-8");
    let stderr = refused(&[
        "--tls-bind",
        "127.0.0.1:0",
        "--tls-cert",
        junk,
        "--tls-key",
        a.key(),
    ]);
    assert!(
        stderr.contains(&format!("{junk} holds no PEM certificate")),
        "{stderr}"
    );
    // The certificate file given as the key.
    let stderr = refused(&[
        "--tls-bind",
        "127.0.0.1:0",
        "--tls-cert",
        a.cert(),
        "--tls-key",
        a.cert(),
    ]);
    assert!(
        stderr.contains(&format!("{} holds no PEM private key", a.cert())),
        "{stderr}"
    );
}

#[test]
fn tls_bind_without_a_certificate_exits_2() {
    let stderr = refused(&["--tls-bind", "127.0.0.1:0"]);
    assert!(
        stderr.contains("--tls-bind") && stderr.contains("--tls-self-signed"),
        "{stderr}"
    );
}

#[test]
fn a_certificate_without_tls_bind_exits_2() {
    let pki = Pki::new();
    let a = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let stderr = refused(&a.args());
    assert!(
        stderr.contains("--tls-bind") && stderr.contains("no TLS listener"),
        "{stderr}"
    );
    let stderr = refused(&["--tls-self-signed"]);
    assert!(stderr.contains("--tls-bind"), "{stderr}");
}

#[test]
fn half_an_identity_or_two_of_them_exit_2() {
    let pki = Pki::new();
    let a = pki.issue(&rcgen::PKCS_ECDSA_P256_SHA256);
    let stderr = refused(&["--tls-bind", "127.0.0.1:0", "--tls-cert", a.cert()]);
    assert!(stderr.contains("--tls-key"), "{stderr}");
    let stderr = refused(&["--tls-bind", "127.0.0.1:0", "--tls-key", a.key()]);
    assert!(stderr.contains("--tls-cert"), "{stderr}");
    let mut both = vec!["--tls-bind", "127.0.0.1:0", "--tls-self-signed"];
    both.extend(a.args());
    let stderr = refused(&both);
    assert!(stderr.contains("--tls-self-signed"), "{stderr}");
}

/// RFC 8446 §6.1: each party MUST send close_notify before closing its
/// write side (unless it sent an error alert). A kept-alive connection the
/// server closes for idling (`--keepalive-timeout`) is closed the same way.
#[test]
fn an_idle_connection_closed_by_the_server_ends_with_close_notify() {
    let server = tls_server()
        .tls_self_signed()
        .args(&["--keepalive-timeout", "1"])
        .start();
    let mut s = connected(&pinned(server.fingerprint(), TLS13), server.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    let started = Instant::now();
    let mut rest = Vec::new();
    let end = s.read_to_end(&mut rest);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "not closed after the keep-alive timeout"
    );
    assert!(rest.is_empty(), "{rest:?}");
    end.expect("the idle close ends with close_notify, not a bare FIN");
}

/// The same for an idle kept-alive connection closed because its generation
/// drains (SIGHUP).
#[test]
fn an_idle_connection_closed_by_a_drain_ends_with_close_notify() {
    let server = tls_server().tls_self_signed().start();
    let mut s = connected(&pinned(server.fingerprint(), TLS13), server.https());
    assert_eq!(get(&mut s, "/hello.txt", "").body, HELLO);
    server.signal(Signal::SIGHUP);
    let mut rest = Vec::new();
    let end = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{rest:?}");
    end.expect("the drain's close ends with close_notify, not a bare FIN");
}

/// "Any SNI" is accepted, so what a client puts there is its own business:
/// it should not cost a WARN line per handshake (the default log level is
/// `warn`, so any client could fill the log). sslscan sends the IP address
/// it scans as SNI; `openssl s_client -servername 127.0.0.1` does the same.
#[test]
fn an_ip_address_as_sni_is_not_a_warning_per_handshake() {
    if !have_openssl() {
        eprintln!("openssl not found; skipping");
        return;
    }
    let server = tls_server().tls_self_signed().start();
    let addr = server.https().to_string();
    for _ in 0..5 {
        let out = common::run_bounded(
            Command::new("openssl").args([
                "s_client",
                "-connect",
                &addr,
                "-servername",
                "127.0.0.1",
            ]),
            Duration::from_secs(10),
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("BEGIN CERTIFICATE"),
            "s_client did not complete a handshake"
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    let warns: Vec<String> = server
        .stderr()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("SNI"))
        .map(str::to_owned)
        .collect();
    assert!(
        warns.is_empty(),
        "{} WARN lines for 5 handshakes: {:?}",
        warns.len(),
        warns.first()
    );
}
