//! The static files over HTTP/2 answer as over HTTP/1.1: each case asks the
//! real binary the same request on a new HTTP/1.1 connection and on one
//! h2c connection (prior knowledge), and the two answers must be the same
//! [`View`]: status, every field but the hop-by-hop ones and `date`, body
//! bytes, each `content-length` its body's. Every case runs under both
//! drivers (`driver_tests!` at the bottom).
//!
//! Each test serves its own [`Site`]: `<tmp>/root` is the docroot, with a
//! header rule and `--cache-control` from `<tmp>/servery.toml` and the
//! command line, and `<tmp>/secret.txt` lies outside it.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use sha2::{Digest, Sha256};

use crate::common::h2::{assert_same, bounded, exchange, read_answer, Client, Exchange, View};
use crate::common::TestServer;

/// Under the default 64 KiB `--small-file-max`: answered from memory.
const SMALL: &[u8] = b"small\n";
/// Over 64 KiB: sent from the file (sendfile over HTTP/1.1, read a window
/// at a time over HTTP/2).
const BIG_LEN: usize = 200_000;
/// The identity bytes of `a.txt`, and stand-ins for its precompressed
/// siblings (the server never decodes them).
const A_TXT: &[u8] = b"identity bytes of a.txt, the one with precompressed siblings\n";
const A_GZ: &[u8] = b"GZIP-VARIANT-BYTES:0123456789abcdefghijklmnop";
const A_BR: &[u8] = b"BR-VARIANT-BYTES:0123456789";
/// Every fixture's mtime: a fixed past second, so date preconditions are
/// deterministic.
const MTIME_S: u64 = 1_600_000_000;
/// The `Cache-Control` of every file response but those of the rule.
const CACHE_CONTROL: &str = "no-cache";

fn mtime() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(MTIME_S)
}

/// A docroot and the files next to it; deleted after its server.
struct Site {
    tmp: tempfile::TempDir,
    root: PathBuf,
    big: Vec<u8>,
    /// The content of `<tmp>/secret.txt`, which nothing may serve.
    sentinel: String,
}

impl Site {
    fn new() -> Site {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        let sentinel = format!("SENTINEL-{}-OUTSIDE-ROOT", std::process::id());
        let site = Site {
            root,
            big: pseudo_random(BIG_LEN, 7),
            sentinel,
            tmp,
        };
        fs::write(site.tmp.path().join("secret.txt"), &site.sentinel).expect("secret");
        fs::write(
            site.tmp.path().join("servery.toml"),
            "[[headers]]\n\
             match = \"/assets/**\"\n\
             set = { \"Cache-Control\" = \"public, max-age=31536000, immutable\", \"X-Asset\" = \"1\" }\n",
        )
        .expect("config file");
        site.write("small.txt", SMALL);
        site.write("big.bin", &site.big);
        site.write("a.txt", A_TXT);
        site.write("a.txt.gz", A_GZ);
        site.write("a.txt.br", A_BR);
        site.write("dir/index.html", b"<title>dir index</title>\n");
        site.write("assets/app.js", b"let a = 1;\n");
        site
    }

    fn write(&self, rel: &str, body: &[u8]) {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, body).expect("write fixture");
        set_mtime(&p, mtime());
    }

    /// The binary on this site under `driver`, with its header rule and
    /// `--cache-control`.
    fn serve(&self, driver: &str) -> TestServer {
        let config = self.tmp.path().join("servery.toml");
        TestServer::builder()
            .root(&self.root)
            .driver(driver)
            .args(&["--cache-control", CACHE_CONTROL])
            .args(&[OsStr::new("--config"), config.as_os_str()])
            .start()
    }
}

fn set_mtime(p: &Path, t: SystemTime) {
    fs::File::options()
        .write(true)
        .open(p)
        .and_then(|f| f.set_modified(t))
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", p.display()));
}

/// Deterministic incompressible bytes (xorshift64*), different per `seed`.
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A server and one h2c connection to it.
struct Both {
    server: TestServer,
    h2: Client,
}

impl Both {
    fn start(site: &Site, driver: &str) -> Both {
        let server = site.serve(driver);
        let h2 = Client::connect(server.addr());
        Both { server, h2 }
    }

    /// `ex` over HTTP/1.1 and over HTTP/2, asserted the same: the two views.
    fn same(&mut self, ex: &Exchange) -> (View, View) {
        let h1 = View::h1(&ex.h1(self.server.addr()));
        let h2 = View::h2(&self.h2.send(ex));
        assert_same(ex, &h1, &h2);
        (h1, h2)
    }
}

// ------------------------------------------------------------------ bodies

/// A small (in-memory) and a big (from the file) GET, a missing file, a
/// file named with a trailing slash, and the bytes are the file's.
fn files_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    for (path, want) in [("/small.txt", SMALL), ("/big.bin", &site.big[..])] {
        let (_, h2) = both.same(&Exchange::get(path));
        assert_eq!(h2.status, 200, "{path}");
        assert!(h2.body == want, "{path}: not the file's bytes");
        assert_eq!(h2.field("cache-control"), Some(CACHE_CONTROL), "{path}");
    }
    let (_, h2) = both.same(&Exchange::get("/missing.txt"));
    assert_eq!(h2.status, 404);
    // A file is not a directory: with a trailing slash it is 404 (nginx's
    // answer), before and after it is cached; a directory's index is not.
    for path in ["/small.txt/", "/big.bin/", "/assets/app.js/", "/small.txt/"] {
        let (_, h2) = both.same(&Exchange::get(path));
        assert_eq!(h2.status, 404, "{path}");
    }
    let (_, h2) = both.same(&Exchange::get("/dir/"));
    assert_eq!(h2.status, 200, "/dir/");
}

/// HEAD: the GET's fields, `content-length` the file's, and over HTTP/2 no
/// DATA frame at all (END_STREAM on the HEADERS).
fn head_answers_with_no_data(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    for (path, len) in [("/small.txt", SMALL.len()), ("/big.bin", BIG_LEN)] {
        let ex = Exchange::new("HEAD", path);
        let h1 = View::h1(&ex.h1(both.server.addr()));
        let answer = both.h2.send(&ex);
        assert!(answer.ended_on_headers, "HEAD {path}: DATA after the head");
        assert!(answer.body.is_empty(), "HEAD {path}");
        let h2 = View::h2(&answer);
        assert_same(&ex, &h1, &h2);
        assert_eq!(h2.field("content-length"), Some(len.to_string().as_str()));
        let (get, _) = both.same(&Exchange::get(path));
        let mut head_fields = h2.fields.clone();
        head_fields.remove("content-length");
        let mut get_fields = get.fields.clone();
        get_fields.remove("content-length");
        assert_eq!(head_fields, get_fields, "HEAD {path}: not the GET's fields");
    }
}

// ------------------------------------------------------------ conditionals

fn conditionals_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    let (first, _) = both.same(&Exchange::get("/small.txt"));
    let etag = first.field("etag").expect("an ETag").to_owned();
    let at = httpdate::fmt_http_date(mtime());
    let before = httpdate::fmt_http_date(mtime() - Duration::from_secs(3600));
    let cases = [
        (
            Exchange::get("/small.txt").field("if-none-match", &etag),
            304,
        ),
        (
            Exchange::get("/small.txt").field("if-none-match", "\"other\""),
            200,
        ),
        (
            Exchange::get("/small.txt").field("if-modified-since", &at),
            304,
        ),
        (
            Exchange::get("/small.txt").field("if-modified-since", &before),
            200,
        ),
        (
            Exchange::get("/small.txt").field("if-match", "\"other\""),
            412,
        ),
        (Exchange::get("/small.txt").field("if-match", &etag), 200),
        (
            Exchange::get("/small.txt").field("if-unmodified-since", &before),
            412,
        ),
        (Exchange::get("/big.bin").field("if-none-match", "*"), 304),
        (
            Exchange::get("/small.txt")
                .field("range", "bytes=0-1")
                .field("if-range", &etag),
            206,
        ),
        (
            Exchange::get("/small.txt")
                .field("range", "bytes=0-1")
                .field("if-range", "\"other\""),
            200,
        ),
    ];
    for (ex, status) in cases {
        let (_, h2) = both.same(&ex);
        assert_eq!(h2.status, status, "{ex:?}");
        if status == 304 {
            assert!(h2.body.is_empty(), "{ex:?}");
            assert!(h2.field("etag").is_some(), "{ex:?}: a 304 names its tag");
        }
    }
}

// ------------------------------------------------------------------ ranges

fn ranges_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    let total = BIG_LEN;
    let cases = [
        ("bytes=0-99", 206, Some(format!("bytes 0-99/{total}"))),
        (
            "bytes=100000-",
            206,
            Some(format!("bytes 100000-{}/{total}", total - 1)),
        ),
        (
            "bytes=-500",
            206,
            Some(format!("bytes {}-{}/{total}", total - 500, total - 1)),
        ),
        ("bytes=999999999-", 416, Some(format!("bytes */{total}"))),
    ];
    for (range, status, content_range) in cases {
        let (_, h2) = both.same(&Exchange::get("/big.bin").field("range", range));
        assert_eq!(h2.status, status, "{range}");
        assert_eq!(
            h2.field("content-range"),
            content_range.as_deref(),
            "{range}"
        );
        if status == 206 {
            let (first, last) = content_range
                .as_deref()
                .and_then(|v| v.strip_prefix("bytes "))
                .and_then(|v| v.split_once('/'))
                .and_then(|(span, _)| span.split_once('-'))
                .map(|(a, b)| (a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()))
                .expect("a span");
            assert!(
                h2.body == site.big[first..=last],
                "{range}: not the file's bytes"
            );
        }
    }
    // Two ranges: multipart/byteranges, whose boundary each answer makes
    // anew. With it replaced by a placeholder of its length, the bodies are
    // the same bytes.
    let ex = Exchange::get("/big.bin").field("range", "bytes=0-9,100000-100099");
    let mut h1 = View::h1(&ex.h1(both.server.addr()));
    let mut h2 = View::h2(&both.h2.send(&ex));
    let mut placeholder = String::new();
    for view in [&mut h1, &mut h2] {
        assert_eq!(view.status, 206);
        let ct = view.field("content-type").expect("content-type").to_owned();
        let boundary = ct
            .strip_prefix("multipart/byteranges; boundary=")
            .unwrap_or_else(|| panic!("not multipart: {ct}"))
            .to_owned();
        placeholder = "B".repeat(boundary.len());
        view.replace(&boundary, &placeholder);
    }
    assert_same(&ex, &h1, &h2);
    let body = &h2.body;
    let mut want = Vec::new();
    for (first, last) in [(0, 9), (100_000, 100_099)] {
        want.extend_from_slice(
            format!(
                "\r\n--{placeholder}\r\nContent-Type: application/octet-stream\r\n\
                 Content-Range: bytes {first}-{last}/{total}\r\n\r\n"
            )
            .as_bytes(),
        );
        want.extend_from_slice(&site.big[first..=last]);
    }
    want.extend_from_slice(format!("\r\n--{placeholder}--\r\n").as_bytes());
    assert!(
        *body == want,
        "multipart body: {:?}",
        String::from_utf8_lossy(body)
    );
}

// ------------------------------------------------------ precompressed files

fn precompressed_variants_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    for (accept, coding, body) in [
        (None, None, A_TXT),
        (Some("gzip"), Some("gzip"), A_GZ),
        (Some("br"), Some("br"), A_BR),
        (Some("gzip, br"), Some("br"), A_BR),
        (Some("br;q=0, gzip"), Some("gzip"), A_GZ),
        (Some("identity"), None, A_TXT),
    ] {
        let mut ex = Exchange::get("/a.txt");
        if let Some(accept) = accept {
            ex = ex.field("accept-encoding", accept);
        }
        let (_, h2) = both.same(&ex);
        assert_eq!(h2.status, 200, "{accept:?}");
        assert_eq!(h2.field("content-encoding"), coding, "{accept:?}");
        assert_eq!(h2.field("vary"), Some("Accept-Encoding"), "{accept:?}");
        assert!(
            h2.body == body,
            "{accept:?}: {:?}",
            String::from_utf8_lossy(&h2.body)
        );
    }
}

// ------------------------------------------------------------- directories

fn directories_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    let (_, h2) = both.same(&Exchange::get("/dir"));
    assert_eq!(h2.status, 301);
    assert_eq!(h2.field("location"), Some("/dir/"));
    let (_, h2) = both.same(&Exchange::get("/dir?x=1"));
    assert_eq!(h2.field("location"), Some("/dir/?x=1"));
    let (_, h2) = both.same(&Exchange::get("/dir/"));
    assert_eq!(h2.status, 200);
    assert_eq!(h2.body, b"<title>dir index</title>\n");
    let (_, h2) = both.same(&Exchange::get("/assets/"));
    assert_eq!(h2.status, 404, "no index, no autoindex");
}

// ------------------------------------------------------------ header rules

fn header_rules_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    let (_, h2) = both.same(&Exchange::get("/assets/app.js"));
    assert_eq!(h2.status, 200);
    assert_eq!(
        h2.fields.get("cache-control").map(Vec::as_slice),
        Some(&["public, max-age=31536000, immutable".to_owned()][..]),
        "the rule replaces --cache-control"
    );
    assert_eq!(h2.field("x-asset"), Some("1"));
    let (_, h2) = both.same(&Exchange::new("HEAD", "/assets/app.js"));
    assert_eq!(h2.field("x-asset"), Some("1"), "HEAD");
    let (_, h2) = both.same(&Exchange::get("/small.txt"));
    assert_eq!(h2.field("x-asset"), None);
}

// ------------------------------------------------------------- containment

/// Dot segments, raw and encoded, refused the same way over both; nothing
/// outside the root is served.
fn containment_answers_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    for target in [
        "/../secret.txt",
        "/a/../../secret.txt",
        "/../../../../../../etc/passwd",
        "//../secret.txt",
        "/./../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/.%2e/secret.txt",
        "/%2e%2e%2fsecret.txt",
        "/..%2fsecret.txt",
        "/%252e%252e/secret.txt",
        "/%c0%ae%c0%ae/secret.txt",
        "/secret.txt%00",
        "/..%5csecret.txt",
        "/..;/secret.txt",
    ] {
        let (_, h2) = both.same(&Exchange::get(target));
        assert!(matches!(h2.status, 400 | 404), "{target}: {}", h2.status);
        let text = String::from_utf8_lossy(&h2.body);
        assert!(
            !text.contains(&site.sentinel),
            "{target}: leaked the secret"
        );
        assert!(!text.contains("root:x:0:0"), "{target}: served /etc/passwd");
    }
}

/// Host values the HTTP/1.1 grammar refuses with 400 (tests/host.rs) are
/// refused over HTTP/2 too: as a `host` field (no `:authority`), and as the
/// `:authority` itself where the client can send them there.
fn refused_hosts_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    let fields = [
        "user@example.com",
        "a, b",
        "example.com:http",
        "example.com:65536",
        "a b",
        "[::1",
        "example.com/x",
    ];
    let authorities = ["user@example.com", "example.com:http", "example.com:65536"];
    let mut served = Vec::new();
    for host in fields {
        let raw = format!("GET /small.txt HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let h1 = crate::common::send_to(both.server.addr(), raw.as_bytes());
        assert!(
            h1.starts_with(b"HTTP/1.1 400 "),
            "Host: {host} over HTTP/1.1"
        );
        let req = http::Request::get("/small.txt")
            .header("host", host)
            .body(())
            .expect("a request");
        let status = both.h2.run(|send| status_of(send, req));
        if status != 400 {
            served.push(format!("host: {host} -> {status}"));
        }
    }
    for host in authorities {
        let req = http::Request::get(format!("http://{host}/small.txt"))
            .body(())
            .expect("a request");
        let status = both.h2.run(|send| status_of(send, req));
        if status != 400 {
            served.push(format!(":authority {host} -> {status}"));
        }
    }
    assert!(
        served.is_empty(),
        "HTTP/2 took hosts HTTP/1.1 refuses: {served:#?}"
    );
}

/// The status of `req` (no body) on a new stream of `send`.
async fn status_of(send: h2::client::SendRequest<bytes::Bytes>, req: http::Request<()>) -> u16 {
    let mut send = bounded("a stream slot", send.ready()).await.expect("ready");
    let (response, _) = send.send_request(req, true).expect("a stream");
    let response = bounded("a response", response).await.expect("a response");
    read_answer(response).await.expect("an answer").status
}

// ----------------------------------------------------------------- methods

/// Methods the files do not take: 405 with `Allow`; OPTIONS: 204 with it.
fn methods_answer_the_same(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    for method in ["POST", "DELETE", "PUT"] {
        let (_, h2) = both.same(&Exchange::new(method, "/small.txt"));
        assert_eq!(h2.status, 405, "{method}");
        assert!(h2.field("allow").is_some(), "{method}: no Allow");
    }
    let (_, h2) = both.same(&Exchange::new("POST", "/small.txt").body("a=1"));
    assert_eq!(h2.status, 405, "POST with a body");
    let (_, h2) = both.same(&Exchange::new("OPTIONS", "/small.txt"));
    assert_eq!(h2.status, 204);
    assert!(h2.field("allow").is_some(), "OPTIONS: no Allow");
}

// ---------------------------------------------------- flow control, streams

/// An 8 MiB file over one stream with the default 64 KiB windows arrives
/// whole (the client gives its credit back as it reads).
fn eight_mib_file_arrives_intact(driver: &str) {
    let site = Site::new();
    let huge = pseudo_random(8 << 20, 8);
    site.write("huge.bin", &huge);
    let mut both = Both::start(&site, driver);
    let answer = both.h2.send(&Exchange::get("/huge.bin"));
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-length"), Some("8388608"));
    assert_eq!(answer.body.len(), huge.len());
    assert!(
        Sha256::digest(&answer.body) == Sha256::digest(&huge),
        "8 MiB body differs"
    );
}

/// Requests on concurrent streams of one connection get the answers they
/// get one at a time.
fn concurrent_streams_answer_like_one_at_a_time(driver: &str) {
    let site = Site::new();
    let mut both = Both::start(&site, driver);
    let cases = [
        Exchange::get("/small.txt"),
        Exchange::get("/big.bin"),
        Exchange::get("/big.bin").field("range", "bytes=-500"),
        Exchange::get("/a.txt").field("accept-encoding", "br"),
        Exchange::get("/dir"),
        Exchange::new("HEAD", "/big.bin"),
        Exchange::get("/missing.txt"),
        Exchange::new("DELETE", "/small.txt"),
    ];
    let alone: Vec<View> = cases.iter().map(|ex| View::h2(&both.h2.send(ex))).collect();
    let together = both.h2.run(|send| async move {
        join_all(cases.iter().map(|ex| {
            let send = send.clone();
            async move { (ex.clone(), exchange(send, ex).await) }
        }))
        .await
    });
    for ((ex, answer), alone) in together.into_iter().zip(&alone) {
        let answer = answer.unwrap_or_else(|e| panic!("{ex:?}: {e}"));
        assert_same(&ex, alone, &View::h2(&answer));
    }
}

/// Requests and responses are counted by protocol: a GET over HTTP/1.1
/// and two over h2c (a 200 and a 404) add to the series of their own
/// protocol, and the totals to both.
fn requests_and_responses_are_counted_by_protocol(driver: &str) {
    let site = Site::new();
    let server = TestServer::builder()
        .root(&site.root)
        .driver(driver)
        .admin()
        .start();
    let series = [
        r#"servery_requests_total{protocol="http1"}"#,
        r#"servery_requests_total{protocol="http2"}"#,
        r#"servery_responses_total{protocol="http1",class="2xx"}"#,
        r#"servery_responses_total{protocol="http2",class="2xx"}"#,
        r#"servery_responses_total{protocol="http2",class="4xx"}"#,
        "servery_requests_total",
    ];
    let read = || {
        let text = server.metrics();
        series.map(|s| crate::common::metric(&text, s).unwrap_or_else(|| panic!("{s} in\n{text}")))
    };
    let before = read();
    assert_eq!(server.get("/small.txt").status, 200);
    let mut h2 = Client::connect(server.addr());
    assert_eq!(h2.send(&Exchange::get("/small.txt")).status, 200);
    assert_eq!(h2.send(&Exchange::get("/nope")).status, 404);
    let after = read();
    let added: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(added, [1.0, 2.0, 1.0, 1.0, 1.0, 3.0], "{series:?}");
}

driver_tests! {
    requests_and_responses_are_counted_by_protocol,
    files_answer_the_same,
    head_answers_with_no_data,
    conditionals_answer_the_same,
    ranges_answer_the_same,
    precompressed_variants_answer_the_same,
    directories_answer_the_same,
    header_rules_answer_the_same,
    containment_answers_the_same,
    refused_hosts_answer_the_same,
    methods_answer_the_same,
    eight_mib_file_arrives_intact,
    concurrent_streams_answer_like_one_at_a_time,
}
