//! The ACME engine (`servery::acme::Manager`) against pebble, Let's
//! Encrypt's test CA: issuance over HTTP-01 and TLS-ALPN-01, renewal, a
//! failed validation, and a restart that needs nothing.
//!
//! The responder here plays the server's part: HTTP-01 answers from a std
//! `TcpListener`, TLS-ALPN-01 answers from a rustls server offering only
//! `acme-tls/1`, both on 127.0.0.1 free ports that pebble's VA is told to
//! use; what the engine reports arrives on a channel. Each test skips (a
//! `SKIPPED:` line on the terminal) where pebble cannot be installed.
//!
//! Short-lived certificates renew on the engine's own timer, which a loaded
//! machine can put ahead of the test: a test that must act between two
//! attempts holds the engine in the responder's `issued` until it has
//! (`Server::hold`), instead of counting on being quicker than the timer.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::pebble::{Pebble, PebbleOptions};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use servery::acme::{Answer, Certificate, Challenge, Error, Manager, Order, Responder, Settings};

const DOMAIN: &str = "a.servery.test";
const SITE: &str = "a";
const RETRY_MIN: Duration = Duration::from_secs(1);
/// A lifetime no test outlives: no renewal during the test.
const LONG: Duration = Duration::from_secs(3_600);
/// How long an issuance may take against a local pebble.
const ISSUE: Duration = Duration::from_secs(60);

/// What the engine told the responder.
#[derive(Debug)]
enum Event {
    Published(String),
    Withdrawn(String),
    Issued(String, Box<Certificate>),
    Failed(String, String, Duration),
}

type Answers<T> = Arc<Mutex<HashMap<String, T>>>;

/// The test's server side: the challenge listeners and the event channel.
struct Server {
    http: Answers<String>,
    tls: Answers<Arc<CertifiedKey>>,
    events: Mutex<Sender<Event>>,
    /// When set, the next `issued` holds the engine's thread until the
    /// test sends on (or drops) the other end: the engine's next attempt
    /// then starts after whatever the test did meanwhile.
    hold: Mutex<Option<Receiver<()>>>,
}

impl Responder for Server {
    fn publish(&self, answer: &Answer) {
        match answer {
            Answer::Http01 {
                token,
                key_authorization,
            } => {
                let mut map = self.http.lock().unwrap();
                map.insert(token.clone(), key_authorization.clone());
            }
            Answer::TlsAlpn01 { domain, material } => {
                let key = certified_key(&material.chain_pem, &material.key_pem);
                self.tls.lock().unwrap().insert(domain.clone(), key);
            }
        }
        self.send(Event::Published(answer.label().to_owned()));
    }

    fn withdraw(&self, answer: &Answer) {
        match answer {
            Answer::Http01 { token, .. } => {
                self.http.lock().unwrap().remove(token);
            }
            Answer::TlsAlpn01 { domain, .. } => {
                self.tls.lock().unwrap().remove(domain);
            }
        }
        self.send(Event::Withdrawn(answer.label().to_owned()));
    }

    fn issued(&self, site: &str, cert: &Certificate) {
        self.send(Event::Issued(site.to_owned(), Box::new(cert.clone())));
        let hold = self.hold.lock().unwrap().take();
        if let Some(released) = hold {
            let _ = released.recv();
        }
    }

    fn failed(&self, site: &str, error: &Error, retry_in: Duration) {
        self.send(Event::Failed(site.to_owned(), error.to_string(), retry_in));
    }
}

impl Server {
    fn send(&self, e: Event) {
        let _ = self.events.lock().unwrap().send(e);
    }
}

fn certified_key(chain_pem: &str, key_pem: &str) -> Arc<CertifiedKey> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .map(|c| c.expect("answer cert"))
        .collect();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("answer key");
    // Not `CertifiedKey::from_der`: its key check parses the certificate with
    // webpki, which refuses the critical acmeIdentifier extension.
    let provider = rustls::crypto::ring::default_provider();
    let key = provider
        .key_provider
        .load_private_key(key)
        .expect("answer key");
    Arc::new(CertifiedKey::new(certs, key))
}

/// The TLS-ALPN-01 certificate for the SNI, if one is published.
#[derive(Debug)]
struct BySni(Answers<Arc<CertifiedKey>>);

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let offered: Vec<&[u8]> = hello.alpn()?.collect();
        if offered != [servery::acme::ACME_TLS_ALPN] {
            return None;
        }
        self.0.lock().unwrap().get(hello.server_name()?).cloned()
    }
}

/// The challenge listeners: each on its own thread, stopped on drop.
struct Listeners {
    http_port: u16,
    tls_port: u16,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for port in [self.http_port, self.tls_port] {
            let _ = TcpStream::connect(("127.0.0.1", port));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Serve `server`'s answers on two free ports.
fn listen(server: &Server) -> Listeners {
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let tls = TcpListener::bind("127.0.0.1:0").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (http_port, tls_port) = (
        http.local_addr().unwrap().port(),
        tls.local_addr().unwrap().port(),
    );
    let answers = server.http.clone();
    let stopped = stop.clone();
    let http_thread = std::thread::spawn(move || {
        for conn in http.incoming() {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = vec![0u8; 4096];
            let n = conn.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let path = head.split_whitespace().nth(1).unwrap_or("");
            let token = path.strip_prefix("/.well-known/acme-challenge/");
            let body = token.and_then(|t| answers.lock().unwrap().get(t).cloned());
            let resp = match body {
                Some(b) => format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                    b.len()
                ),
                None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_owned(),
            };
            let _ = conn.write_all(resp.as_bytes());
            let _ = conn.shutdown(Shutdown::Both);
        }
    });
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
    .unwrap()
    .with_no_client_auth()
    .with_cert_resolver(Arc::new(BySni(server.tls.clone())));
    config.alpn_protocols = vec![servery::acme::ACME_TLS_ALPN.to_vec()];
    let config = Arc::new(config);
    let stopped = stop.clone();
    let tls_thread = std::thread::spawn(move || {
        for conn in tls.incoming() {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            let Ok(mut sock) = conn else { continue };
            let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
            let Ok(mut tls) = rustls::ServerConnection::new(config.clone()) else {
                continue;
            };
            // RFC 8737 §3: the handshake is the whole answer.
            while tls.is_handshaking() {
                if tls.complete_io(&mut sock).is_err() {
                    break;
                }
            }
            tls.send_close_notify();
            let _ = tls.complete_io(&mut sock);
        }
    });
    Listeners {
        http_port,
        tls_port,
        stop,
        threads: vec![http_thread, tls_thread],
    }
}

/// One test's world: pebble, the listeners, a state dir, the events.
struct World {
    pebble: Pebble,
    server: Arc<Server>,
    events: Receiver<Event>,
    state: tempfile::TempDir,
    _listeners: Listeners,
}

impl World {
    /// `None` when pebble is unavailable (the test then returns).
    fn start(validity: Duration) -> Option<World> {
        let (tx, events) = channel();
        let server = Arc::new(Server {
            http: Arc::default(),
            tls: Arc::default(),
            events: Mutex::new(tx),
            hold: Mutex::default(),
        });
        let listeners = listen(&server);
        let pebble = Pebble::start(PebbleOptions {
            http_port: listeners.http_port,
            tls_port: listeners.tls_port,
            validity,
            eab: None,
        })?;
        Some(World {
            pebble,
            server,
            events,
            state: tempfile::tempdir().unwrap(),
            _listeners: listeners,
        })
    }

    fn settings(&self, challenge: Challenge) -> Settings {
        Settings {
            directory: self.pebble.directory_url(),
            contact: vec!["mailto:ops@servery.test".into()],
            state_dir: self.state.path().join("acme"),
            ca_roots: Some(self.pebble.roots_pem().to_owned()),
            challenge,
            retry_min: RETRY_MIN,
            retry_max: Duration::from_secs(4),
            eab: None,
        }
    }

    fn manager(&self, challenge: Challenge) -> Manager {
        self.manager_for(challenge, &[DOMAIN])
    }

    fn manager_for(&self, challenge: Challenge, domains: &[&str]) -> Manager {
        let orders = vec![Order {
            site: SITE.into(),
            domains: domains.iter().map(|d| d.to_string()).collect(),
        }];
        let responder: Arc<dyn Responder> = self.server.clone();
        Manager::start(self.settings(challenge), orders, responder).expect("start the engine")
    }

    /// The next `Issued` or `Failed` within `limit`, with the answers
    /// published and withdrawn before it.
    fn next_outcome(&self, limit: Duration) -> (Event, Vec<String>, Vec<String>) {
        let deadline = Instant::now() + limit;
        let (mut published, mut withdrawn) = (Vec::new(), Vec::new());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(Event::Published(l)) => published.push(l),
                Ok(Event::Withdrawn(l)) => withdrawn.push(l),
                Ok(e) => return (e, published, withdrawn),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "no outcome within {limit:?} (published {published:?})\n{}",
                    self.pebble.logs()
                ),
            }
        }
    }

    /// The next outcome, an issuance for [`SITE`] that may have proved
    /// nothing: pebble reuses a valid authorization one order in a hundred
    /// even with `PEBBLE_AUTHZREUSE=0` (its wfe.go makes a new one only when
    /// `rand.Intn(100) > percent`), as a real CA may reuse one too, so a
    /// renewal need not publish a challenge. Every answer published is
    /// withdrawn all the same.
    fn renewed(&self, limit: Duration) -> Certificate {
        match self.next_outcome(limit) {
            (Event::Issued(site, cert), published, withdrawn) => {
                assert_eq!(site, SITE);
                assert_eq!(published, withdrawn, "every answer is withdrawn");
                *cert
            }
            (other, ..) => panic!(
                "expected an issuance, got {other:?}\n{}",
                self.pebble.logs()
            ),
        }
    }

    /// The next outcome, which must be an issuance for [`SITE`] that proved
    /// its names (a first order: the account has no authorization yet).
    fn issued(&self, limit: Duration) -> Certificate {
        match self.next_outcome(limit) {
            (Event::Issued(site, cert), published, withdrawn) => {
                assert_eq!(site, SITE);
                assert!(!published.is_empty(), "issued without a challenge");
                assert_eq!(published, withdrawn, "every answer is withdrawn");
                *cert
            }
            (other, ..) => panic!(
                "expected an issuance, got {other:?}\n{}",
                self.pebble.logs()
            ),
        }
    }
}

/// The leaf names [`DOMAIN`] and chains to pebble's issuing root.
fn assert_chains_to_pebble(pebble: &Pebble, cert: &Certificate) {
    let chain: Vec<_> = CertificateDer::pem_slice_iter(cert.material.chain_pem.as_bytes())
        .map(|c| c.expect("chain PEM"))
        .collect();
    assert!(chain.len() >= 2, "leaf and intermediate: {}", chain.len());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(pebble.issuer_roots()),
        provider,
    )
    .build()
    .unwrap();
    use rustls::client::danger::ServerCertVerifier;
    verifier
        .verify_server_cert(
            &chain[0],
            &chain[1..],
            &ServerName::try_from(DOMAIN).unwrap(),
            &[],
            UnixTime::now(),
        )
        .expect("the chain verifies to pebble's root for the domain");
    assert!(cert
        .material
        .key_pem
        .starts_with("-----BEGIN PRIVATE KEY-----"));
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn on_disk(settings: &Settings) -> String {
    let path = settings.state_dir.join("sites").join(SITE).join("cert.pem");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn http01_issues_a_certificate_that_chains_to_pebbles_root() {
    let Some(w) = World::start(LONG) else { return };
    let started = Instant::now();
    let manager = w.manager(Challenge::Http01);
    let cert = w.issued(ISSUE);
    eprintln!("issued over HTTP-01 in {:?}", started.elapsed());
    assert_chains_to_pebble(&w.pebble, &cert);
    let life = cert.not_after.duration_since(cert.not_before).unwrap();
    assert!(life.abs_diff(LONG) < Duration::from_secs(5), "{life:?}");

    let s = w.settings(Challenge::Http01);
    let site = s.state_dir.join("sites").join(SITE);
    assert_eq!(mode(&s.state_dir), 0o700);
    assert_eq!(mode(&s.state_dir.join("account.json")), 0o600);
    assert_eq!(mode(&site.join("key.pem")), 0o600);
    assert_eq!(on_disk(&s), cert.material.chain_pem);
    let stored = servery::acme::stored(&s.state_dir, SITE).unwrap().unwrap();
    assert_eq!(stored.material.key_pem, cert.material.key_pem);
    assert_eq!(stored.not_after, cert.not_after);
    manager.stop();
}

#[test]
fn tls_alpn01_issues_a_certificate() {
    let Some(w) = World::start(LONG) else { return };
    let started = Instant::now();
    let manager = w.manager(Challenge::TlsAlpn01);
    let cert = w.issued(ISSUE);
    eprintln!("issued over TLS-ALPN-01 in {:?}", started.elapsed());
    assert_chains_to_pebble(&w.pebble, &cert);
    manager.stop();
}

#[test]
fn renews_after_two_thirds_of_a_short_lifetime() {
    let Some(w) = World::start(Duration::from_secs(12)) else {
        return;
    };
    let manager = w.manager(Challenge::Http01);
    let first = w.issued(ISSUE);
    let started = Instant::now();
    let second = w.renewed(Duration::from_secs(20));
    eprintln!("renewed {:?} after the first issuance", started.elapsed());
    assert_ne!(first.material.chain_pem, second.material.chain_pem);
    assert_ne!(
        first.material.key_pem, second.material.key_pem,
        "a fresh key per order"
    );
    assert!(second.not_before >= first.not_before);
    assert_eq!(
        on_disk(&w.settings(Challenge::Http01)),
        second.material.chain_pem
    );
    manager.stop();
}

#[test]
fn a_failed_validation_reports_the_cas_detail_and_keeps_the_old_certificate() {
    let Some(w) = World::start(Duration::from_secs(12)) else {
        return;
    };
    // The engine waits in `issued` until the DNS answer is switched, so
    // its renewal (due about 7 s later, and a loaded machine may take that
    // long to get here) is validated against 127.0.0.2, where nothing
    // listens.
    let (release, held) = channel();
    *w.server.hold.lock().unwrap() = Some(held);
    let manager = w.manager(Challenge::Http01);
    let mut last = w.issued(ISSUE);
    w.pebble.set_default_ipv4("127.0.0.2");
    drop(release);
    // A renewal that reused the first order's authorization (see
    // `renewed`) proved nothing and so could not fail: the next one will.
    let (outcome, published, withdrawn) = loop {
        match w.next_outcome(Duration::from_secs(30)) {
            (Event::Issued(site, cert), published, _) if published.is_empty() => {
                eprintln!("{site}: pebble reused the authorization; waiting for the next order");
                last = *cert;
            }
            outcome => break outcome,
        }
    };
    let Event::Failed(site, error, retry_in) = outcome else {
        panic!("expected a failure, got {outcome:?}");
    };
    eprintln!("failed as expected: {error} (retry in {retry_in:?})");
    assert_eq!(site, SITE);
    assert!(error.contains(DOMAIN), "{error}");
    let lower = error.to_lowercase();
    assert!(
        lower.contains("refused") || lower.contains("connection"),
        "the error says what the CA saw: {error}"
    );
    assert!(retry_in >= RETRY_MIN, "{retry_in:?}");
    assert_eq!(
        published, withdrawn,
        "answers withdrawn after a failure too"
    );
    let s = w.settings(Challenge::Http01);
    assert_eq!(
        on_disk(&s),
        last.material.chain_pem,
        "the old certificate stays"
    );
    manager.stop();
}

#[test]
fn a_restart_with_a_valid_certificate_orders_nothing() {
    let Some(w) = World::start(LONG) else { return };
    let first = w.manager(Challenge::Http01);
    let cert = w.issued(ISSUE);
    first.stop();
    let s = w.settings(Challenge::Http01);
    let account = std::fs::read(s.state_dir.join("account.json")).unwrap();

    // Any order now would fail validation and be reported.
    w.pebble.set_default_ipv4("127.0.0.2");
    let again = w.manager(Challenge::Http01);
    match w.events.recv_timeout(Duration::from_secs(4)) {
        Err(RecvTimeoutError::Timeout) => {}
        other => panic!("a restart before renewal did something: {other:?}"),
    }
    again.stop();
    assert_eq!(
        std::fs::read(s.state_dir.join("account.json")).unwrap(),
        account
    );
    assert_eq!(on_disk(&s), cert.material.chain_pem);
}

#[test]
fn a_restart_with_another_domain_orders_at_once() {
    let Some(w) = World::start(LONG) else { return };
    let first = w.manager(Challenge::Http01);
    let cert = w.issued(ISSUE);
    first.stop();
    let again = w.manager_for(Challenge::Http01, &[DOMAIN, "b.servery.test"]);
    let second = w.issued(ISSUE);
    again.stop();
    assert_ne!(second.material.chain_pem, cert.material.chain_pem);
    let leaf = CertificateDer::from_pem_slice(second.material.chain_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(w.pebble.issuer_roots()),
        provider,
    )
    .build()
    .unwrap();
    let chain: Vec<_> = CertificateDer::pem_slice_iter(second.material.chain_pem.as_bytes())
        .map(|c| c.unwrap())
        .collect();
    use rustls::client::danger::ServerCertVerifier;
    verifier
        .verify_server_cert(
            &leaf,
            &chain[1..],
            &ServerName::try_from("b.servery.test").unwrap(),
            &[],
            UnixTime::now(),
        )
        .expect("the new certificate names the added domain");
}

#[test]
fn stop_returns_promptly_with_an_order_in_flight() {
    let Some(w) = World::start(LONG) else { return };
    // Validation against 127.0.0.2 fails; the engine is mid-order or in its
    // backoff when stopped, and either way returns at once.
    w.pebble.set_default_ipv4("127.0.0.2");
    let manager = w.manager(Challenge::Http01);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    manager.stop();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}
