//! Sites: `[[site]]` virtual hosts against the real binary. Host routing
//! (exact, wildcard precedence, port and case, the default site and 421),
//! per-site roots and file settings, SNI certificate selection and the 421
//! on a Host that names another site than the SNI, in both isolation
//! modes, and sites changed by SIGHUP.

#[macro_use]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::http::Response;
use common::tls::{connect_as, fingerprint, trusting_any, Tls};
use common::{wait_until, TestServer};
use nix::sys::signal::Signal;

/// Three docroots and a config file, in one temp directory.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        for (site, files) in [
            (
                "a",
                &[("index.html", "site a\n"), ("home.html", "a home\n")][..],
            ),
            (
                "b",
                &[("index.html", "site b\n"), (".hidden", "b secret\n")][..],
            ),
            (
                "c",
                &[("index.html", "site c\n"), (".hidden", "c secret\n")][..],
            ),
        ] {
            std::fs::create_dir(dir.path().join(site)).unwrap();
            for (name, text) in files {
                std::fs::write(dir.path().join(site).join(name), text).unwrap();
            }
        }
        Layout { dir }
    }

    fn root(&self, site: &str) -> PathBuf {
        self.dir.path().join(site)
    }

    /// Write the config file (`{a}`, `{b}`, `{c}` stand for the roots).
    fn config(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("servery.toml");
        let text = text
            .replace("{a}", self.root("a").to_str().unwrap())
            .replace("{b}", self.root("b").to_str().unwrap())
            .replace("{c}", self.root("c").to_str().unwrap());
        std::fs::write(&path, text).unwrap();
        path
    }

    fn start(&self, config: &Path, isolation: &str, tls: bool) -> TestServer {
        let mut b = TestServer::builder()
            .root(self.root("c"))
            .isolation(isolation)
            .args(&["--config", config.to_str().unwrap()]);
        if tls {
            b = b.tls_bind("127.0.0.1:0");
        }
        b.start()
    }
}

/// `GET path` with `Host: host` over plain HTTP/1.1.
fn get_host(server: &TestServer, host: &str, path: &str) -> Response {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    common::http::parse_responses(&server.send(raw.as_bytes()))
        .pop()
        .unwrap_or_else(|| panic!("no answer for {host}{path}"))
}

const THREE_SITES: &str = r#"
cache_control = "max-age=10"

[[site]]
hosts = ["a.test", "www.a.test"]
root = "{a}"
index = ["home.html"]
cache_control = "max-age=1"

[[site]]
name = "bee"
hosts = ["*.b.test"]
root = "{b}"
dotfiles = "allow"
[[site.headers]]
match = "/**"
set = { X-Site = "b" }

[[site]]
hosts = ["c.test"]
root = "{c}"
default = true
"#;

fn hosts_pick_their_sites_roots_and_settings(isolation: &str) {
    let l = Layout::new();
    let s = l.start(&l.config(THREE_SITES), isolation, false);
    let a = get_host(&s, "a.test", "/");
    assert_eq!((a.status, a.body_text().as_str()), (200, "a home\n"));
    assert_eq!(a.header("cache-control"), Some("max-age=1"));
    assert_eq!(
        get_host(&s, "WWW.A.Test:8080", "/index.html").body_text(),
        "site a\n"
    );
    assert_eq!(
        get_host(&s, "a.test.", "/index.html").body_text(),
        "site a\n"
    );
    let b = get_host(&s, "img.b.test", "/");
    assert_eq!(b.body_text(), "site b\n");
    assert_eq!(b.header("x-site"), Some("b"));
    assert_eq!(b.header("cache-control"), Some("max-age=10"), "inherited");
    assert_eq!(
        get_host(&s, "x.y.b.test", "/.hidden").body_text(),
        "b secret\n"
    );
    // The default site, for unknown names and the bare wildcard suffix.
    for host in ["unknown.test", "b.test", "127.0.0.1"] {
        let c = get_host(&s, host, "/");
        assert_eq!(c.body_text(), "site c\n", "{host}");
        assert_eq!(
            get_host(&s, host, "/.hidden").status,
            404,
            "dotfiles denied on c"
        );
    }
    // HTTP/1.0 without a Host: the default site.
    let raw = common::http::parse_responses(&s.send(b"GET / HTTP/1.0\r\n\r\n"));
    assert_eq!(raw[0].body_text(), "site c\n");
}

fn wildcards_yield_to_exact_names_and_longer_wildcards(isolation: &str) {
    let l = Layout::new();
    let config = l.config(
        r#"
[[site]]
hosts = ["*.example.test"]
root = "{a}"
[[site]]
hosts = ["*.img.example.test"]
root = "{b}"
[[site]]
hosts = ["www.example.test"]
root = "{c}"
"#,
    );
    let s = l.start(&config, isolation, false);
    let body = |host: &str| get_host(&s, host, "/").body_text();
    assert_eq!(body("www.example.test"), "site c\n", "exact beats wildcard");
    assert_eq!(body("api.example.test"), "site a\n");
    assert_eq!(body("x.img.example.test"), "site b\n", "longest wildcard");
    assert_eq!(
        body("img.example.test"),
        "site a\n",
        "a wildcard needs a label"
    );
    assert_eq!(
        body("nothing.test"),
        "site a\n",
        "the first site is the default"
    );
}

fn unknown_hosts_get_421_when_asked(isolation: &str) {
    let l = Layout::new();
    let config = l.config(
        r#"
unknown_host = "421"
[[site]]
hosts = ["a.test"]
root = "{a}"
"#,
    );
    let s = l.start(&config, isolation, false);
    assert_eq!(get_host(&s, "a.test", "/index.html").status, 200);
    let r = get_host(&s, "other.test", "/index.html");
    assert_eq!(r.status, 421);
    assert_eq!(r.body_text(), "421 Misdirected Request\n");
    let r = common::http::parse_responses(&s.send(b"GET / HTTP/1.0\r\n\r\n"));
    assert_eq!(r[0].status, 421, "no Host, no default site");
}

/// A self-signed certificate for `names`, written as `stem.pem` and
/// `stem.key`; its fingerprint.
fn certificate(dir: &Path, stem: &str, names: &[&str]) -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let params =
        rcgen::CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join(format!("{stem}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
    fingerprint(cert.der())
}

fn handshake(s: &TestServer, sni: &str) -> std::io::Result<Tls> {
    connect_as(&trusting_any(), s.https(), sni)
}

fn presented(t: &Tls) -> String {
    common::tls::peer_fingerprint(t)
}

/// `GET /` with `Host: host` on a TLS connection.
fn tls_get(t: &mut Tls, host: &str) -> Response {
    let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
    t.write_all(req.as_bytes()).unwrap();
    common::http::read_response(t)
}

const TLS_SITES: &str = r#"
[[site]]
hosts = ["a.test"]
root = "{a}"
tls_cert = "{dir}/a.pem"
tls_key = "{dir}/a.key"

[[site]]
hosts = ["*.b.test"]
root = "{b}"
tls_cert = "{dir}/b.pem"
tls_key = "{dir}/b.key"
default = true
"#;

/// [`TLS_SITES`] (adjusted by `edit`) with its two certificates, started:
/// the layout (kept alive), the server, and a's and b's fingerprints.
fn tls_sites(
    isolation: &str,
    edit: impl Fn(&str) -> String,
) -> (Layout, TestServer, String, String) {
    let l = Layout::new();
    let dir = l.dir.path();
    let fp_a = certificate(dir, "a", &["a.test"]);
    let fp_b = certificate(dir, "b", &["*.b.test"]);
    let text = edit(&TLS_SITES.replace("{dir}", dir.to_str().unwrap()));
    let s = l.start(&l.config(&text), isolation, true);
    (l, s, fp_a, fp_b)
}

fn sni_picks_the_certificate_and_a_host_of_another_site_is_421(isolation: &str) {
    let (_l, s, fp_a, fp_b) = tls_sites(isolation, str::to_owned);

    let mut a = handshake(&s, "a.test").unwrap();
    assert_eq!(presented(&a), fp_a);
    let r = tls_get(&mut a, "a.test");
    assert_eq!((r.status, r.body_text().as_str()), (200, "site a\n"));
    // The connection was made for a.test: b's Host is refused on it.
    let r = tls_get(&mut a, "www.b.test");
    assert_eq!(r.status, 421);

    let mut b = handshake(&s, "www.b.test").unwrap();
    assert_eq!(presented(&b), fp_b);
    assert_eq!(tls_get(&mut b, "www.b.test").body_text(), "site b\n");
    assert_eq!(tls_get(&mut b, "a.test").status, 421);

    // An unknown SNI is the default site's, and so is its Host.
    let mut u = handshake(&s, "unknown.test").unwrap();
    assert_eq!(presented(&u), fp_b);
    assert_eq!(tls_get(&mut u, "unknown.test").body_text(), "site b\n");
    // No SNI at all (an address): the default site's certificate; the Host
    // then picks the site.
    let mut n = handshake(&s, "127.0.0.1").unwrap();
    assert_eq!(presented(&n), fp_b);
    assert_eq!(tls_get(&mut n, "a.test").body_text(), "site a\n");
}

/// HTTP/2 coalescing: a client reusing a connection made for one site for
/// another site's `:authority` is told 421, and retries on its own
/// connection.
fn an_h2_connection_for_one_site_refuses_another_sites_authority(isolation: &str) {
    let (_l, s, fp_a, fp_b) = tls_sites(isolation, str::to_owned);
    let tls = common::h2::tls_config(&fp_a, &[b"h2"]);
    let mut a = common::h2::Client::tls_as(s.https(), tls, "a.test").expect("h2 by ALPN");
    let own = a.send(&common::h2::Exchange::get("/").authority("a.test"));
    assert_eq!((own.status, own.body_text().as_str()), (200, "site a\n"));
    let other = a.send(&common::h2::Exchange::get("/").authority("www.b.test:443"));
    assert_eq!(other.status, 421);
    let tls = common::h2::tls_config(&fp_b, &[b"h2"]);
    let mut b = common::h2::Client::tls_as(s.https(), tls, "www.b.test").expect("h2 by ALPN");
    let own = b.send(&common::h2::Exchange::get("/").authority("www.b.test:443"));
    assert_eq!(own.body_text(), "site b\n");
}

fn an_unknown_sni_fails_the_handshake_with_421_for_unknown_hosts(isolation: &str) {
    let (_l, s, fp_a, _) = tls_sites(isolation, |text| {
        format!(
            "unknown_host = \"421\"\n{}",
            text.replace("default = true\n", "")
        )
    });
    assert_eq!(presented(&handshake(&s, "a.test").unwrap()), fp_a);
    assert!(
        handshake(&s, "unknown.test").is_err(),
        "an unknown SNI is refused"
    );
    // Without SNI: the first site with a certificate.
    assert_eq!(presented(&handshake(&s, "127.0.0.1").unwrap()), fp_a);
}

fn sites_reload_with_sighup(isolation: &str) {
    let l = Layout::new();
    let one = "[[site]]\nhosts = [\"a.test\"]\nroot = \"{a}\"\n";
    let config = l.config(one);
    let s = l.start(&config, isolation, false);
    assert_eq!(
        get_host(&s, "b.test", "/index.html").body_text(),
        "site a\n"
    );
    l.config(&format!(
        "{one}[[site]]\nhosts = [\"b.test\"]\nroot = \"{{b}}\"\ncache_control = \"no-store\"\n"
    ));
    s.signal(Signal::SIGHUP);
    // Both generations accept for a moment (docs/operations.md, "Reload"):
    // one answer from the new one does not mean the next is, so wait until
    // both of site b's answers come from it.
    let mut seen = (String::new(), None);
    let ok = wait_until(Duration::from_secs(10), || {
        let body = get_host(&s, "b.test", "/index.html").body_text();
        let cache = get_host(&s, "b.test", "/")
            .header("cache-control")
            .map(str::to_owned);
        seen = (body, cache);
        seen.0 == "site b\n" && seen.1.as_deref() == Some("no-store")
    });
    assert!(ok, "still {seen:?} after SIGHUP\n{}", s.stderr());
    assert_eq!(get_host(&s, "a.test", "/").body_text(), "site a\n");
}

variant_tests!(
    [threads = "thread", processes = "process"]
    [
        hosts_pick_their_sites_roots_and_settings,
        wildcards_yield_to_exact_names_and_longer_wildcards,
        unknown_hosts_get_421_when_asked,
        sni_picks_the_certificate_and_a_host_of_another_site_is_421,
        an_h2_connection_for_one_site_refuses_another_sites_authority,
        an_unknown_sni_fails_the_handshake_with_421_for_unknown_hosts,
        sites_reload_with_sighup,
    ]
);

/// The access log's `$site` names the site that answered; a 421 has none.
#[test]
fn the_access_log_names_the_site_that_answered() {
    let l = Layout::new();
    let log = l.dir.path().join("access.log");
    let config = l.config(&format!(
        "unknown_host = \"421\"\naccess_log = \"{}\"\naccess_log_format = \"$host $site $status\"\n\
         access_log_flush = 0.05\n\
         [[site]]\nhosts = [\"a.test\"]\nroot = \"{{a}}\"\n\
         [[site]]\nname = \"bee\"\nhosts = [\"*.b.test\"]\nroot = \"{{b}}\"\n",
        log.display()
    ));
    let s = l.start(&config, "thread", false);
    for host in ["a.test", "x.b.test", "c.test"] {
        get_host(&s, host, "/");
    }
    let mut text = String::new();
    let ok = wait_until(Duration::from_secs(5), || {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().count() == 3
    });
    assert!(ok, "{text}");
    assert_eq!(text, "a.test a.test 200\nx.b.test bee 200\nc.test - 421\n");
}

/// `check-config` shows the sites as validated, and a refused site names
/// itself, its field and the fix (exit 2).
#[test]
fn check_config_shows_sites_and_names_a_refused_one() {
    let l = Layout::new();
    let bin = env!("CARGO_BIN_EXE_servery");
    let config = l.config(THREE_SITES);
    let out = std::process::Command::new(bin)
        .args(["check-config", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: toml::Table = text.parse().unwrap();
    let sites = parsed["site"].as_array().unwrap();
    assert_eq!(sites.len(), 3);
    assert_eq!(sites[1]["name"].as_str(), Some("bee"));
    assert_eq!(sites[2]["default"].as_bool(), Some(true));
    assert_eq!(sites[0]["index"][0].as_str(), Some("home.html"));

    let bad = l.config(
        "[[site]]\nhosts = [\"a.test\"]\nroot = \"{a}\"\n[[site]]\nname = \"x\"\nhosts = [\"A.test\"]\n",
    );
    let out = std::process::Command::new(bin)
        .args(["check-config", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("site.hosts: site \"x\": a.test is also a host of site \"a.test\""),
        "{err}"
    );
}
