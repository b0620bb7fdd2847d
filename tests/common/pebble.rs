//! pebble, Let's Encrypt's test ACME CA, with pebble-challtestsrv as its
//! DNS server, both on 127.0.0.1 free ports, for the ACME engine's suite.
//!
//! Owns: finding the binaries (`PEBBLE_BIN_DIR` alone when set; else
//! `PATH`, `target/tools/pebble/usr/bin`, else `scripts/install-pebble.sh`),
//! saying that a test is skipped without them, the
//! TLS certificate of pebble's own HTTPS listeners (a CA and a
//! `localhost`/127.0.0.1 leaf made with rcgen; the client trusts
//! [`Pebble::roots_pem`]), pebble's config, the mock DNS answers
//! ([`Pebble::set_default_ipv4`]), pebble's issuing root
//! ([`Pebble::issuer_roots`]), and killing both processes on drop. Does not
//! own the challenge servers: pebble validates against the ports the suite
//! gives it, where the suite's responder listens.
//!
//! Flow: [`Pebble::start`] → `None` (and a `SKIPPED:` line) if pebble cannot
//! be had → the test returns; else the directory answers and the test runs.
//!
//! Skips are decided at run time, because that is when the binaries are
//! installed, and stable libtest can only ignore a test by an attribute
//! fixed at compile time (h2spec, whose place is fixed, is decided by
//! `build.rs` and shows as `ignored`). So a skipped test still ends `ok`,
//! and its `SKIPPED: <test>: pebble unavailable: <why>` line is written
//! straight to the process's stderr: libtest captures the print macros
//! (`println!`, `eprintln!`) of a passing test and drops their output, but
//! not writes to `std::io::stderr()` itself (checked with Rust 1.95), so the
//! line shows in `cargo test`'s output next to the `ok`.
//! `PEBBLE_BIN_DIR=/an/empty/dir cargo test --test acme` shows it.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

use super::{run_bounded, send_to, try_read_response};

/// What pebble is started with.
#[derive(Clone, Copy, Debug)]
pub struct PebbleOptions {
    /// The port pebble's VA connects to for HTTP-01.
    pub http_port: u16,
    /// The port pebble's VA connects to for TLS-ALPN-01.
    pub tls_port: u16,
    /// The lifetime of the certificates pebble issues.
    pub validity: Duration,
    /// Require an External Account Binding with this key identifier and
    /// base64url HMAC key.
    pub eab: Option<(&'static str, &'static str)>,
}

/// A running pebble and challtestsrv; both are killed on drop.
pub struct Pebble {
    pebble: Child,
    dns: Child,
    dir: tempfile::TempDir,
    listen: SocketAddr,
    management: SocketAddr,
    dns_management: SocketAddr,
    roots: PathBuf,
}

/// How long pebble gets to answer its directory (one starts at a time; a
/// loaded two-core machine has taken over 15 s).
const START: Duration = Duration::from_secs(60);

impl Pebble {
    /// Start both, or `None` (writing `SKIPPED: <test>: pebble
    /// unavailable: …` to the terminal) when the binaries cannot be found or
    /// installed.
    pub fn start(options: PebbleOptions) -> Option<Pebble> {
        let bin = match bin_dir() {
            Ok(bin) => bin,
            Err(why) => {
                super::skipped(&format!("pebble unavailable: {why}"));
                return None;
            }
        };
        // One pebble starts at a time in a test binary: ten suites starting
        // theirs at once on a loaded two-core machine kept one from
        // answering within [`START`]. Held until it answers.
        static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = STARTING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().expect("pebble temp dir");
        let (cert, key, roots) = write_wfe_certificate(dir.path());
        // Four ports, all different: each probe is held until the last is
        // chosen, and the DNS port (challtestsrv serves it over UDP and
        // TCP) must be free in both. Probed one by one, pebble's management
        // port once came out as the DNS port and could not be bound.
        let probe = || std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe listener");
        let held = [probe(), probe(), probe()];
        let [listen, management, dns_management] = held
            .each_ref()
            .map(|l| l.local_addr().expect("probe address"));
        let (dns_udp, dns_tcp, dns_port) = (0..100)
            .find_map(|_| {
                let udp = UdpSocket::bind("127.0.0.1:0").ok()?;
                let port = udp.local_addr().ok()?.port();
                let tcp = std::net::TcpListener::bind(("127.0.0.1", port)).ok()?;
                Some((udp, tcp, port))
            })
            .expect("a port free over UDP and TCP");
        drop((held, dns_udp, dns_tcp));
        let config = serde_json::json!({ "pebble": {
            "listenAddress": listen.to_string(),
            "managementListenAddress": management.to_string(),
            "certificate": cert,
            "privateKey": key,
            "httpPort": options.http_port,
            "tlsPort": options.tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": options.eab.is_some(),
            "externalAccountMACKeys": options.eab.map(|(kid, key)| {
                serde_json::json!({ kid: key })
            }).unwrap_or_else(|| serde_json::json!({})),
            "certificateValidityPeriod": options.validity.as_secs(),
        }});
        let config_path = dir.path().join("pebble-config.json");
        std::fs::write(&config_path, config.to_string()).expect("write pebble config");

        let log =
            |name: &str| std::fs::File::create(dir.path().join(name)).expect("pebble log file");
        let dns = Command::new(bin.join("pebble-challtestsrv"))
            .args(["-dns01", &format!("127.0.0.1:{dns_port}")])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-management", &dns_management.to_string()])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .stdin(Stdio::null())
            .stdout(log("challtestsrv.log"))
            .stderr(log("challtestsrv.err"))
            .spawn()
            .expect("spawn pebble-challtestsrv");
        let pebble = Command::new(bin.join("pebble"))
            .arg("-config")
            .arg(&config_path)
            .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
            // No random sleeps before validations, no valid nonce refused as
            // invalid, no authorization reused: each order proves its names.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdin(Stdio::null())
            .stdout(log("pebble.log"))
            .stderr(log("pebble.err"))
            .spawn()
            .expect("spawn pebble");
        let p = Pebble {
            pebble,
            dns,
            dir,
            listen,
            management,
            dns_management,
            roots,
        };
        p.wait_ready();
        Some(p)
    }

    /// The ACME directory URL.
    pub fn directory_url(&self) -> String {
        format!("https://{}/dir", self.listen)
    }

    /// The PEM root that signs pebble's own HTTPS certificate: what the ACME
    /// client must trust for the directory.
    pub fn roots_pem(&self) -> &Path {
        &self.roots
    }

    /// Make the mock DNS answer `ip` for every A query (127.0.0.2: nothing
    /// listens there, so validations fail with a refused connection).
    pub fn set_default_ipv4(&self, ip: &str) {
        let body = format!(r#"{{"ip":"{ip}"}}"#);
        let req = format!(
            "POST /set-default-ipv4 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let answer = send_to(self.dns_management, req.as_bytes());
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.starts_with("HTTP/1.1 200"),
            "set-default-ipv4 {ip}: {text}"
        );
    }

    /// The root that signs the certificates pebble issues (management
    /// `GET /roots/0`; pebble makes a new one at every start).
    pub fn issuer_roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(self.roots_pem()).expect("WFE root"))
            .expect("add WFE root");
        let config = super::tls::trusting(roots, super::tls::TLS13);
        let mut s = super::tls::connect_as(&config, self.management, "127.0.0.1")
            .expect("TLS to pebble's management interface");
        let resp = super::tls::get(&mut s, "/roots/0", "");
        assert_eq!(resp.status, 200, "GET /roots/0: {resp:?}");
        let mut issuer = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&resp.body) {
            issuer
                .add(cert.expect("issuer root PEM"))
                .expect("add issuer root");
        }
        assert!(
            !issuer.is_empty(),
            "no issuer root in {:?}",
            resp.body_text()
        );
        issuer
    }

    /// pebble's and challtestsrv's output so far, for a failing test.
    pub fn logs(&self) -> String {
        [
            "pebble.log",
            "pebble.err",
            "challtestsrv.log",
            "challtestsrv.err",
        ]
        .iter()
        .map(|n| {
            let text = std::fs::read_to_string(self.dir.path().join(n)).unwrap_or_default();
            format!("--- {n}\n{text}")
        })
        .collect()
    }

    /// Until the directory answers over TLS and challtestsrv accepts.
    fn wait_ready(&self) {
        let deadline = Instant::now() + START;
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(self.roots_pem()).expect("WFE root"))
            .expect("add WFE root");
        let config = super::tls::trusting(roots, super::tls::TLS13);
        loop {
            let up = TcpStream::connect(self.dns_management).is_ok()
                && super::tls::connect_as(&config, self.listen, "127.0.0.1")
                    .ok()
                    .and_then(|mut s| {
                        use std::io::Write;
                        s.write_all(b"GET /dir HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                            .ok()?;
                        try_read_response(&mut s, true).ok()
                    })
                    .is_some_and(|r| r.status == 200);
            if up {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pebble did not answer its directory within {START:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for child in [&mut self.pebble, &mut self.dns] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A CA and a `localhost`/127.0.0.1 leaf for pebble's HTTPS listeners:
/// (leaf PEM path, key PEM path, CA PEM path).
fn write_wfe_certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "servery test pebble WFE root");
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).expect("CA cert");

    let key = rcgen::KeyPair::generate().expect("WFE key");
    let mut leaf = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("WFE params");
    leaf.distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let cert = leaf.signed_by(&key, &ca).expect("WFE cert");

    let paths = (
        dir.join("wfe-cert.pem"),
        dir.join("wfe-key.pem"),
        dir.join("wfe-roots.pem"),
    );
    std::fs::write(&paths.0, cert.pem()).expect("write WFE cert");
    std::fs::write(&paths.1, key.serialize_pem()).expect("write WFE key");
    std::fs::write(&paths.2, ca.pem()).expect("write WFE root");
    paths
}

/// The directory holding `pebble` and `pebble-challtestsrv`, found once per
/// test binary.
fn bin_dir() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(find_or_install).clone()
}

fn find_or_install() -> Result<PathBuf, String> {
    let has_both = |d: &Path| d.join("pebble").is_file() && d.join("pebble-challtestsrv").is_file();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A directory named by the caller is the only one used: no other pebble
    // is picked up or installed instead (an empty one skips the suite).
    if let Some(d) = std::env::var_os("PEBBLE_BIN_DIR").map(PathBuf::from) {
        if has_both(&d) {
            return Ok(d);
        }
        let why = "has no pebble and pebble-challtestsrv";
        return Err(format!("PEBBLE_BIN_DIR={} {why}", d.display()));
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates.push(root.join("target/tools/pebble/usr/bin"));
    if let Some(d) = candidates.into_iter().find(|d| has_both(d)) {
        return Ok(d);
    }
    let script = root.join("scripts/install-pebble.sh");
    let out = run_bounded(Command::new("bash").arg(&script), Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("").trim();
    if out.status.success() && has_both(Path::new(last)) {
        return Ok(PathBuf::from(last));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "{} failed ({}): {}",
        script.display(),
        out.status,
        stderr.lines().last().unwrap_or("no output")
    ))
}
