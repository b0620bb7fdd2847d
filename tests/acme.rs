//! ACME against the real binary and pebble (Let's Encrypt's test CA): a
//! site with `acme = true` gets its certificate by HTTP-01 or TLS-ALPN-01,
//! ordered once by the supervisor and presented by every worker (threads
//! and processes) without a restart; short-lived certificates are renewed;
//! a failed challenge is reported with the CA's reason and the certificate
//! in use is kept; a restart serves the stored certificate and orders
//! nothing.
//!
//! pebble validates on the ports the test gives it, where servery's plain
//! and TLS listeners are bound; its DNS stub answers 127.0.0.1 for every
//! name (127.0.0.2, where nothing listens, to make a challenge fail). Each
//! test skips with a `SKIPPED:` line on the terminal where pebble cannot be
//! installed (`scripts/install-pebble.sh`, `common::pebble`).
//!
//! No step races the server's renewal timer. A 9 s certificate is renewed
//! about every 5 s, so on a loaded machine any number of renewals may land
//! between two steps of a test (a renewal after the one the test saw once
//! made the failure check compare against a certificate no longer in use).
//! Each step therefore waits for an event instead: a certificate other
//! than the one a connection got, a failure counted after the switch of the
//! DNS answer, a log line; and what must stay after a failure is the
//! certificate the server last stored, read from its state directory, not
//! whichever one the test happened to see. Only certificates that live
//! [`LONG`] are checked on every worker straight after they appear.

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use common::pebble::{Pebble, PebbleOptions};
use common::tls::{connect_as, peer_fingerprint, trusting, Tls, TLS13};
use common::{wait_until, TestServer};

const DOMAIN: &str = "a.servery.test";
/// Longer than any test: no renewal unless a test asks for one.
const LONG: Duration = Duration::from_secs(3_600);
/// How long a first certificate may take (account, order, validation).
const ISSUE: Duration = Duration::from_secs(60);
/// How long an issued certificate may take to reach every worker.
const SPREAD: Duration = Duration::from_secs(30);

/// pebble, servery's two listeners, a docroot and a state directory.
struct Rig {
    pebble: Pebble,
    http: SocketAddr,
    tls: SocketAddr,
    dir: tempfile::TempDir,
    /// The two listeners' ports, held until the first start.
    reserved: std::cell::RefCell<Vec<std::net::TcpListener>>,
    /// A client trusting only pebble's issuing root, made on first use.
    issuer: OnceLock<Arc<rustls::ClientConfig>>,
}

impl Rig {
    fn new(validity: Duration) -> Option<Rig> {
        Rig::with(validity, None)
    }

    fn with(validity: Duration, eab: Option<(&'static str, &'static str)>) -> Option<Rig> {
        // Held while pebble picks its own ports, so none of them is ours;
        // let go just before servery binds them.
        let hold = |_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let reserved: Vec<_> = (0..2).map(hold).collect();
        let http = reserved[0].local_addr().unwrap();
        let tls = reserved[1].local_addr().unwrap();
        let pebble = Pebble::start(PebbleOptions {
            http_port: http.port(),
            tls_port: tls.port(),
            validity,
            eab,
        })?;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::write(dir.path().join("root/index.html"), "acme site\n").unwrap();
        Some(Rig {
            pebble,
            http,
            tls,
            dir,
            reserved: std::cell::RefCell::new(reserved),
            issuer: OnceLock::new(),
        })
    }

    fn state(&self) -> std::path::PathBuf {
        self.dir.path().join("state")
    }

    fn start(&self, challenge: &str, isolation: &str) -> TestServer {
        self.start_with(challenge, isolation, "", None)
    }

    /// [`Rig::start`] with `extra` top-level settings and a test-only
    /// fault.
    fn start_with(
        &self,
        challenge: &str,
        isolation: &str,
        extra: &str,
        fault: Option<&str>,
    ) -> TestServer {
        self.reserved.borrow_mut().clear();
        let config = self.dir.path().join("servery.toml");
        let text = format!(
            "bind = [\"{http}\"]\ntls_bind = [\"{tls}\"]\nworkers = 2\n\
             acme_directory = \"{dir}\"\nacme_ca_roots = \"{roots}\"\n\
             acme_state_dir = \"{state}\"\nacme_challenge = \"{challenge}\"\n\
             acme_retry = 1\nacme_contact = [\"mailto:ops@servery.test\"]\n{extra}\
             [[site]]\nhosts = [\"{DOMAIN}\"]\nroot = \"{root}\"\nacme = true\n",
            http = self.http,
            tls = self.tls,
            dir = self.pebble.directory_url(),
            roots = self.pebble.roots_pem().display(),
            state = self.state().display(),
            root = self.dir.path().join("root").display(),
        );
        std::fs::write(&config, text).unwrap();
        // The info lines some tests wait for, whatever the caller's RUST_LOG.
        let mut server = TestServer::builder()
            .no_bind()
            .isolation(isolation)
            .admin()
            .env("RUST_LOG", "info")
            .args(&["--config", config.to_str().unwrap()]);
        if let Some(f) = fault {
            server = server.fault(f);
        }
        server.start()
    }

    /// A full handshake that trusts only pebble's issuing root (never a
    /// resumed one: it would report the certificate of its first session).
    fn verified(&self) -> std::io::Result<Tls> {
        let config = self.issuer.get_or_init(|| {
            let mut c = Arc::unwrap_or_clone(trusting(self.pebble.issuer_roots(), TLS13));
            c.resumption = rustls::client::Resumption::disabled();
            Arc::new(c)
        });
        connect_as(config, self.tls, DOMAIN)
    }

    /// Wait until every worker presents a certificate pebble issued; its
    /// fingerprint. Only for certificates that live [`LONG`]: a short-lived
    /// one may be renewed while the workers are asked.
    fn wait_issued(&self, server: &TestServer, other_than: Option<&str>) -> String {
        let fp = self.wait_served(server, other_than);
        // A fresh handshake reaches either worker; each must present it.
        for _ in 0..8 {
            assert_eq!(peer_fingerprint(&self.verified().unwrap()), fp);
        }
        fp
    }

    /// Wait until a handshake presents a valid certificate pebble issued,
    /// other than `other_than`; its fingerprint.
    fn wait_served(&self, server: &TestServer, other_than: Option<&str>) -> String {
        let mut last = String::new();
        let ok = wait_until(ISSUE, || match self.verified() {
            Ok(t) => {
                last = peer_fingerprint(&t);
                Some(last.as_str()) != other_than
            }
            Err(e) => {
                last = e.to_string();
                false
            }
        });
        assert!(
            ok,
            "no (new) pebble certificate: {last}\nservery:\n{}\npebble:\n{}",
            server.stderr(),
            self.pebble.logs()
        );
        last
    }

    /// The fingerprint of the certificate the server last stored for the
    /// site: the last one issued.
    fn stored(&self) -> String {
        let path = self.state().join("sites").join(DOMAIN).join("cert.pem");
        let pem = std::fs::read(&path).unwrap();
        let leaf = CertificateDer::pem_slice_iter(&pem).next();
        common::tls::fingerprint(&leaf.expect("a PEM certificate").unwrap())
    }
}

fn serves_over(t: &mut Tls) -> String {
    use std::io::Write;
    let req = format!("GET / HTTP/1.1\r\nHost: {DOMAIN}\r\nConnection: close\r\n\r\n");
    t.write_all(req.as_bytes()).unwrap();
    common::http::read_response(t).body_text()
}

/// `GET /` on `t`, keeping it open.
fn keep_alive_get(t: &mut Tls) -> String {
    use std::io::Write;
    let req = format!("GET / HTTP/1.1\r\nHost: {DOMAIN}\r\n\r\n");
    t.write_all(req.as_bytes()).unwrap();
    common::http::read_response(t).body_text()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn issued_total(server: &TestServer) -> f64 {
    common::http::metric(&server.metrics(), "servery_acme_certificates_issued_total").unwrap()
}

fn failed_total(server: &TestServer) -> f64 {
    common::http::metric(&server.metrics(), "servery_acme_orders_failed_total").unwrap()
}

/// The fingerprint of what a handshake (any certificate accepted: it may
/// have expired) gets.
fn presented(rig: &Rig) -> String {
    let t = connect_as(&common::tls::trusting_any(), rig.tls, DOMAIN).unwrap();
    peer_fingerprint(&t)
}

/// Issuance by `challenge`: the site starts on its placeholder, every
/// worker then presents the pebble certificate, the state directory holds
/// the account and the pair with safe modes.
fn issues_by(challenge: &str, isolation: &str) {
    let Some(rig) = Rig::new(LONG) else { return };
    let s = rig.start(challenge, isolation);
    let fp = rig.wait_issued(&s, None);
    assert_eq!(serves_over(&mut rig.verified().unwrap()), "acme site\n");
    let state = rig.state();
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("account.json")), 0o600);
    assert_eq!(mode(&state.join("sites/a.servery.test/key.pem")), 0o600);
    assert!(state.join("sites/a.servery.test/cert.pem").is_file());
    assert_eq!(issued_total(&s), 1.0);
    if isolation == "process" {
        // A worker process started after the issuance (a crash's
        // replacement) gets the certificate in its Init.
        let before = s.wait_workers(2);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(before[0] as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let replaced = wait_until(Duration::from_secs(10), || {
            let now = s.workers();
            now.len() == 2 && !now.contains(&before[0])
        });
        assert!(replaced, "no replacement\n{}", s.stderr());
        for _ in 0..8 {
            assert_eq!(peer_fingerprint(&rig.verified().unwrap()), fp);
        }
    }
    // Plain HTTP still serves the site; the challenge path is gone.
    let r = common::http::parse_responses(&common::http::send_to(
        rig.http,
        format!("GET / HTTP/1.1\r\nHost: {DOMAIN}\r\nConnection: close\r\n\r\n").as_bytes(),
    ));
    assert_eq!(r[0].body_text(), "acme site\n");
    drop(s);

    // A restart serves the stored certificate at once and orders nothing
    // (once the killed workers have let go of the ports): the engine says
    // when it will renew, and until then it orders nothing.
    let free = |a: SocketAddr| std::net::TcpListener::bind(a).is_ok();
    assert!(wait_until(Duration::from_secs(10), || free(rig.http) && free(rig.tls)));
    let s = rig.start(challenge, isolation);
    assert_eq!(peer_fingerprint(&rig.verified().unwrap()), fp);
    s.wait_log("renewal scheduled", 1, ISSUE);
    assert_eq!(issued_total(&s), 0.0, "{}", s.stderr());
    assert!(!s.stderr().contains("ACME: order failed"), "{}", s.stderr());
}

fn http01_issues_a_certificate_every_worker_presents(isolation: &str) {
    issues_by("http-01", isolation);
}

fn tls_alpn01_issues_a_certificate_every_worker_presents(isolation: &str) {
    issues_by("tls-alpn-01", isolation);
}

/// Short-lived certificates are renewed at two-thirds of their life, and a
/// connection outlives a renewal; a challenge that then fails is reported
/// with the CA's reason, counted, and the last certificate issued stays in
/// use on every worker. Every wait is for an event (see the module doc).
fn renews_and_keeps_the_certificate_when_a_renewal_fails(isolation: &str) {
    let Some(rig) = Rig::new(Duration::from_secs(9)) else {
        return;
    };
    let s = rig.start("http-01", isolation);
    rig.wait_served(&s, None);
    // A connection made with one certificate outlives its renewal.
    let mut kept = rig.verified().unwrap();
    let old = peer_fingerprint(&kept);
    assert_eq!(keep_alive_get(&mut kept), "acme site\n");
    rig.wait_served(&s, Some(&old));
    assert_eq!(
        keep_alive_get(&mut kept),
        "acme site\n",
        "the renewal dropped a connection"
    );
    // Names now resolve where nothing listens: every order that starts
    // from here fails. One under way may still succeed; it ends before the
    // failure that follows it is counted.
    let failures = failed_total(&s);
    rig.pebble.set_default_ipv4("127.0.0.2");
    let failed = wait_until(ISSUE, || failed_total(&s) > failures);
    assert!(failed, "no failed order\n{}", s.stderr());
    let refused = |log: &str| log.contains("127.0.0.2") || log.contains("onnection refused");
    let reported = wait_until(ISSUE, || {
        let log = s.stderr();
        log.contains("ACME: order failed") && refused(&log)
    });
    assert!(reported, "the CA's reason is not logged\n{}", s.stderr());
    // The last good certificate is the one on disk, and every worker keeps
    // presenting it once it has it (the last success may still be on its
    // way to worker processes). Read again each time: an order from here
    // can still succeed where pebble reuses an authorization it validated
    // before the switch (one in a hundred even with PEBBLE_AUTHZREUSE=0, as
    // a real CA may), and then its certificate is the last good one.
    let mut last_good = rig.stored();
    assert_ne!(last_good, old, "no renewal was stored");
    let kept_everywhere = wait_until(SPREAD, || {
        last_good = rig.stored();
        (0..8).all(|_| presented(&rig) == last_good)
    });
    assert!(
        kept_everywhere,
        "the renewed certificate was replaced after a failure: {} is not the stored {last_good}\n{}",
        presented(&rig),
        s.stderr()
    );
    // The first certificate and at least the renewal were issued.
    assert!(issued_total(&s) >= 2.0, "{}", s.stderr());
}

/// Worker processes slow to apply what the supervisor sends (1.5 s each,
/// a loaded host's worst): the challenge is announced to pebble only once
/// both hold the answer, so the first order succeeds and none fails.
#[test]
fn a_challenge_is_announced_only_once_every_worker_process_holds_it() {
    let Some(rig) = Rig::new(LONG) else { return };
    let s = rig.start_with("http-01", "process", "", Some("delay-acme=1500"));
    rig.wait_issued(&s, None);
    let failed = common::http::metric(&s.metrics(), "servery_acme_orders_failed_total");
    assert_eq!(failed, Some(0.0), "{}", s.stderr());
    assert!(!s.stderr().contains("ACME: order failed"), "{}", s.stderr());
    assert!(
        !s.stderr().contains("not every worker process confirmed"),
        "{}",
        s.stderr()
    );
}

/// A reload that adds an ACME site orders its certificate; the site that
/// was there keeps its own (stored, nothing ordered again for it).
#[test]
fn a_reload_adding_a_site_orders_only_its_certificate() {
    let Some(rig) = Rig::new(LONG) else { return };
    let s = rig.start("http-01", "thread");
    let fp = rig.wait_issued(&s, None);
    let config = rig.dir.path().join("servery.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[[site]]\nhosts = [\"b.servery.test\"]\nroot = \"{}\"\nacme = true\n",
        rig.dir.path().join("root").display()
    ));
    std::fs::write(&config, text).unwrap();
    s.signal(nix::sys::signal::Signal::SIGHUP);
    let roots = trusting(rig.pebble.issuer_roots(), TLS13);
    let ok = wait_until(ISSUE, || {
        connect_as(&roots, rig.tls, "b.servery.test").is_ok()
    });
    assert!(ok, "no certificate for the new site\n{}", s.stderr());
    assert_eq!(issued_total(&s), 2.0, "{}", s.stderr());
    assert_eq!(peer_fingerprint(&rig.verified().unwrap()), fp);
}

/// A CA that requires an External Account Binding refuses an account
/// without one (the order fails with its reason, logged); with the kid and
/// key it issues.
#[test]
fn an_external_account_binding_is_sent_when_the_ca_requires_one() {
    const KID: &str = "kid-1";
    const KEY: &str = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
    let Some(rig) = Rig::with(LONG, Some((KID, KEY))) else {
        return;
    };
    let s = rig.start("http-01", "thread");
    s.wait_log("ACME: order failed", 1, ISSUE);
    let log = s.stderr();
    assert!(log.to_lowercase().contains("external"), "{log}");
    drop(s);
    let free = |a: SocketAddr| std::net::TcpListener::bind(a).is_ok();
    assert!(wait_until(Duration::from_secs(10), || free(rig.http) && free(rig.tls)));
    let key = rig.dir.path().join("eab.key");
    std::fs::write(&key, format!("{KEY}\n")).unwrap();
    let eab = format!(
        "acme_eab_kid = \"{KID}\"\nacme_eab_hmac_key_file = \"{}\"\n",
        key.display()
    );
    let s = rig.start_with("http-01", "thread", &eab, None);
    rig.wait_issued(&s, None);
    assert_eq!(issued_total(&s), 1.0);
}

/// An unsafe state directory refuses the start, naming the path and the
/// fix; nothing binds.
#[test]
fn an_unsafe_state_directory_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let config = dir.path().join("servery.toml");
    std::fs::write(
        &config,
        format!(
            "bind = [\"127.0.0.1:0\"]\ntls_bind = [\"127.0.0.1:0\"]\n\
             acme_directory = \"https://127.0.0.1:9/dir\"\nacme_state_dir = \"{}\"\n\
             [[site]]\nhosts = [\"{DOMAIN}\"]\nroot = \"{}\"\nacme = true\n",
            state.display(),
            dir.path().display()
        ),
    )
    .unwrap();
    let out = common::run_bounded(
        std::process::Command::new(env!("CARGO_BIN_EXE_servery")).args([
            "serve",
            "--config",
            config.to_str().unwrap(),
        ]),
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("0777: make it writable by its owner only (chmod 700)"),
        "{err}"
    );
}

variant_tests!(
    [threads = "thread", processes = "process"]
    [
        http01_issues_a_certificate_every_worker_presents,
        tls_alpn01_issues_a_certificate_every_worker_presents,
        renews_and_keeps_the_certificate_when_a_renewal_fails,
    ]
);
