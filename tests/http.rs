//! The serving core's HTTP/1.1 behaviour, end to end: raw bytes over a std
//! `TcpStream` to the real binary, every case under both `--driver uring` and
//! `--driver epoll` (see `driver_tests!` at the bottom).
//!
//! Each test starts its own server on port 0 over a fresh [`Site`]: a temp
//! directory whose `root/` is served and whose `secret.txt`, next to the root,
//! holds a unique sentinel that must never appear in any response.

#[macro_use]
mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use common::{
    half_close, parse_responses, read_response, read_response_head_only, read_until_close,
    stays_silent, Response, TestServer,
};

const HELLO: &str = "Hello, servery!\n";
const PAGE: &str = "<!doctype html><title>page</title>\n";
const INDEX: &str = "<!doctype html><title>dir index</title>\n";
const ROOT_INDEX: &str = "<!doctype html><title>root index</title>\n";
/// Larger than the 64 KiB memory-cache threshold: streamed from the file.
const BIG_LEN: usize = 300 * 1024;

/// A docroot fixture; dropped (deleted) after the server that serves it.
struct Site {
    _tmp: tempfile::TempDir,
    /// The served directory: `<tmp>/root`.
    root: PathBuf,
    /// `<tmp>/secret.txt`: outside the root.
    secret: PathBuf,
    /// The unique content of `secret.txt`.
    sentinel: String,
    /// The content of `root/big.bin`.
    big: Vec<u8>,
}

fn site() -> Site {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    let secret = tmp.path().join("secret.txt");
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let sentinel = format!("SENTINEL-{}-{nanos}-OUTSIDE-ROOT", std::process::id());
    fs::write(&secret, &sentinel).unwrap();

    let w = |rel: &str, body: &[u8]| {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, body).unwrap();
    };
    w("hello.txt", HELLO.as_bytes());
    w("page.html", PAGE.as_bytes());
    w("index.html", ROOT_INDEX.as_bytes());
    w("noext", b"\x00\x01binary\xff");
    w("a b.txt", b"spaced\n");
    w("empty.txt", b"");
    w("edge64k.bin", &pseudo_random(64 * 1024));
    w("edge64k1.bin", &pseudo_random(64 * 1024 + 1));
    w("dir/index.html", INDEX.as_bytes());
    w("dir/inner.txt", b"inner\n");
    w(".git/config", b"[core]\n\trepositoryformatversion = 0\n");
    w(".env", b"SECRET=1\n");
    for i in 0..10 {
        w(&format!("p{i}.txt"), format!("p{i}\n").as_bytes());
    }
    fs::create_dir_all(root.join("empty")).unwrap();
    let big = pseudo_random(BIG_LEN);
    w("big.bin", &big);

    symlink("hello.txt", root.join("link.txt")).unwrap();
    symlink("dir", root.join("dirlink")).unwrap();
    symlink("../secret.txt", root.join("escape.txt")).unwrap();
    symlink(&secret, root.join("abs.txt")).unwrap();
    symlink("..", root.join("outdir")).unwrap();
    Site {
        _tmp: tmp,
        root,
        secret,
        sentinel,
        big,
    }
}

/// Deterministic bytes that do not compress or repeat (xorshift64*).
fn pseudo_random(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// A server on `site` under `driver` (the harness checks the ready line
/// names it), with `args`.
fn serve(driver: &str, site: &Site, args: &[&str]) -> TestServer {
    TestServer::builder()
        .root(&site.root)
        .driver(driver)
        .args(args)
        .start()
}

/// `GET path HTTP/1.1` with a Host, keep-alive by default.
fn get_req(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

/// Write `raw` on `s` and read one response.
fn exchange(s: &mut std::net::TcpStream, raw: &[u8]) -> Response {
    s.write_all(raw).expect("write request");
    read_response(s)
}

/// The server closes `s` within a few seconds and sends nothing more.
fn assert_closes(s: &mut std::net::TcpStream) {
    match read_until_close(s, Duration::from_secs(3)) {
        Ok(rest) => assert!(
            rest.is_empty(),
            "unexpected bytes before close: {:?}",
            String::from_utf8_lossy(&rest)
        ),
        Err(rest) => panic!(
            "connection still open after 3 s (read {:?})",
            String::from_utf8_lossy(&rest)
        ),
    }
}

/// Send `raw` on a new connection; expect exactly one response with
/// `status`, `Connection: close`, then the server closing.
fn assert_refused_and_closed(server: &TestServer, raw: &[u8], status: u16) -> Response {
    let mut s = server.connect();
    let _ = s.write_all(raw);
    let resp = read_response(&mut s);
    assert_eq!(
        resp.status,
        status,
        "request {:?} → {resp:?}",
        String::from_utf8_lossy(raw)
    );
    assert_eq!(resp.header("connection"), Some("close"), "{resp:?}");
    assert_closes(&mut s);
    resp
}

fn assert_date_is_now(resp: &Response) {
    let date = resp.header("date").expect("Date header");
    let when = httpdate::parse_http_date(date).unwrap_or_else(|e| panic!("Date {date:?}: {e}"));
    let skew = match when.duration_since(SystemTime::now()) {
        Ok(ahead) => ahead,
        Err(behind) => behind.duration(),
    };
    assert!(skew < Duration::from_secs(120), "Date {date:?} is not now");
}

fn without_date(resp: &Response) -> Vec<(String, String)> {
    resp.headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
        .cloned()
        .collect()
}

// ---------------------------------------------------------------- files

fn get_file_returns_exact_body_and_headers(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/hello.txt");
    assert_eq!(resp.version, "HTTP/1.1");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.reason, "OK");
    assert_eq!(resp.body, HELLO.as_bytes());
    assert_eq!(resp.content_length(), Some(HELLO.len() as u64));
    assert_eq!(resp.header_all("content-length").len(), 1);
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(resp.header("server"), Some("servery"));
    assert_date_is_now(&resp);
    let modified = resp.header("last-modified").expect("Last-Modified");
    assert!(httpdate::parse_http_date(modified).is_ok(), "{modified:?}");
}

fn content_type_follows_extension(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for (path, ctype) in [
        ("/hello.txt", "text/plain; charset=utf-8"),
        ("/page.html", "text/html; charset=utf-8"),
        ("/noext", "application/octet-stream"),
        ("/big.bin", "application/octet-stream"),
    ] {
        let resp = server.get(path);
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.header("content-type"), Some(ctype), "{path}");
    }
}

fn query_string_does_not_change_the_file(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/hello.txt?v=2&x=%2e%2e/secret");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
}

fn percent_encoded_name_is_decoded(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/a%20b.txt");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"spaced\n");
    assert_eq!(server.get("/%68ello.txt").body, HELLO.as_bytes());
}

fn head_matches_get_without_body_and_keeps_connection(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let get = exchange(&mut s, get_req("/hello.txt").as_bytes());
    s.write_all(b"HEAD /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let head = read_response_head_only(&mut s);
    assert_eq!(head.status, 200);
    assert_eq!(without_date(&head), without_date(&get));
    assert_eq!(head.content_length(), Some(HELLO.len() as u64));
    assert_date_is_now(&head);
    // No body followed the HEAD head: the next response starts right here.
    let next = exchange(&mut s, get_req("/page.html").as_bytes());
    assert_eq!(next.status, 200);
    assert_eq!(next.body, PAGE.as_bytes());
}

fn head_of_big_file_has_length_and_no_body(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    s.write_all(b"HEAD /big.bin HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let head = read_response_head_only(&mut s);
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(BIG_LEN as u64));
    let next = exchange(&mut s, get_req("/hello.txt").as_bytes());
    assert_eq!(next.status, 200);
    assert_eq!(next.body, HELLO.as_bytes());
}

fn head_of_missing_file_is_404_without_body(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    s.write_all(b"HEAD /nope.txt HTTP/1.1\r\nHost: test\r\n\r\n")
        .unwrap();
    let head = read_response_head_only(&mut s);
    assert_eq!(head.status, 404);
    let next = exchange(&mut s, get_req("/hello.txt").as_bytes());
    assert_eq!(next.status, 200);
}

fn missing_file_is_404(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for path in [
        "/nope.txt",
        "/dir/nope",
        "/nope/deeper/x.html",
        "/hello.txt/x",
    ] {
        let resp = server.get(path);
        assert_eq!(resp.status, 404, "{path}");
        assert_eq!(resp.header("server"), Some("servery"));
        assert_date_is_now(&resp);
    }
}

fn unreadable_file_is_403(driver: &str) {
    let site = site();
    let locked = site.root.join("locked.txt");
    fs::write(&locked, b"locked\n").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/locked.txt");
    if fs::File::open(&locked).is_ok() {
        // Running as root (or with CAP_DAC_OVERRIDE): permissions do not
        // bind us, nor the server running as the same user, so there is no
        // 403 to see. It must still be an ordinary answer.
        assert!(matches!(resp.status, 200 | 403), "{resp:?}");
    } else {
        assert_eq!(resp.status, 403, "{resp:?}");
    }
}

fn fifo_in_root_is_404_without_blocking(driver: &str) {
    let site = site();
    let fifo = site.root.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("mkfifo unavailable; skipping");
        return;
    }
    let server = serve(driver, &site, &[]);
    // Opening a FIFO for reading blocks until a writer comes, unless the
    // server opens non-blocking; a blocked worker would never answer.
    let resp = server.get("/pipe");
    assert_eq!(resp.status, 404, "{resp:?}");
    assert_eq!(server.get("/hello.txt").status, 200);
}

fn empty_and_cache_threshold_files_are_byte_exact(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/empty.txt");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.content_length(), Some(0));
    // Exactly at the memory-cache limit (cached) and one byte over (streamed).
    for (path, len) in [
        ("/edge64k.bin", 64 * 1024),
        ("/edge64k1.bin", 64 * 1024 + 1),
    ] {
        let mut s = server.connect();
        for _ in 0..2 {
            let resp = exchange(&mut s, get_req(path).as_bytes());
            assert_eq!(resp.status, 200, "{path}");
            assert!(resp.body == pseudo_random(len), "{path} body differs");
        }
    }
}

fn replaced_file_is_served_fresh(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    assert_eq!(server.get("/hello.txt").body, HELLO.as_bytes());
    // Atomic replace (write + rename), as deploy tools do.
    let tmp = site.root.join("hello.txt.tmp");
    fs::write(&tmp, b"replaced\n").unwrap();
    fs::rename(&tmp, site.root.join("hello.txt")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let resp = server.get("/hello.txt");
        if resp.body == b"replaced\n" {
            assert_eq!(resp.content_length(), Some(9));
            break;
        }
        assert_eq!(resp.body, HELLO.as_bytes(), "neither old nor new");
        assert!(Instant::now() < deadline, "old content 5 s after replace");
        std::thread::sleep(Duration::from_millis(100));
    }
    fs::remove_file(site.root.join("hello.txt")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.get("/hello.txt").status != 404 {
        assert!(Instant::now() < deadline, "deleted file served 5 s later");
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------- directories

fn directory_without_slash_redirects_keeping_query(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/dir");
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/dir/"));
    let resp = server.get("/dir?x=1&y=%20");
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/dir/?x=1&y=%20"));
    let resp = server.get("/empty");
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/empty/"));
}

fn redirect_location_is_never_protocol_relative(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    // `Location: //dir/` would send a browser to the host `dir`.
    for path in ["//dir", "///dir", "//dir?x=1"] {
        let resp = server.get(path);
        assert_eq!(resp.status, 301, "{path}");
        let location = resp.header("location").expect("Location");
        assert!(
            location.starts_with('/') && !location.starts_with("//"),
            "{path} → Location {location:?}"
        );
    }
}

fn directory_with_index_serves_index(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/dir/");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, INDEX.as_bytes());
    assert_eq!(
        resp.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let resp = server.get("/");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, ROOT_INDEX.as_bytes());
}

fn directory_without_index_is_404(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/empty/");
    assert_eq!(resp.status, 404);
}

fn dotfiles_are_404(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for path in [
        "/.git/config",
        "/.git/",
        "/.git",
        "/.env",
        "/%2egit/config",
        "/dir/../.env",
    ] {
        let resp = server.get(path);
        assert_eq!(resp.status, 404, "{path}: {resp:?}");
        assert!(!resp.body_text().contains("repositoryformatversion"));
        assert!(!resp.body_text().contains("SECRET"));
    }
}

// ---------------------------------------------------------- containment

fn traversal_never_leaves_root(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let attacks: [&[u8]; 26] = [
        b"/../secret.txt",
        b"/../../secret.txt",
        b"/%2e%2e/secret.txt",
        b"/%2E%2E/secret.txt",
        b"/.%2e/secret.txt",
        b"/%2e%2e/%2e%2e/etc/passwd",
        b"/../../../../../../etc/passwd",
        b"/a/../../secret.txt",
        b"/dir/../../secret.txt",
        b"//../secret.txt",
        b"/secret.txt%00",
        b"/%00/../secret.txt",
        b"/hello.txt%00.html",
        b"/%c0%ae%c0%ae/secret.txt",
        b"/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
        b"/..\\secret.txt",
        b"/..\\..\\secret.txt",
        b"/..%5csecret.txt",
        b"/..%5c..%5csecret.txt",
        b"/..%2fsecret.txt",
        b"/%2e%2e%2fsecret.txt",
        b"/%252e%252e/secret.txt",
        b"/escape.txt",
        b"/abs.txt",
        b"/outdir/secret.txt",
        b"/outdir/root/hello.txt",
    ];
    for target in attacks {
        let mut raw = b"GET ".to_vec();
        raw.extend_from_slice(target);
        raw.extend_from_slice(b" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        let bytes = server.send(&raw);
        let shown = String::from_utf8_lossy(target);
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(&site.sentinel),
            "{shown}: served the secret: {text}"
        );
        assert!(!text.contains("root:x:0:0"), "{shown}: served /etc/passwd");
        let resps = parse_responses(&bytes);
        assert_eq!(resps.len(), 1, "{shown}: {text}");
        assert!(
            matches!(resps[0].status, 400 | 404),
            "{shown}: {}",
            resps[0].status
        );
    }
    // The sentinel really is there to be leaked.
    assert!(fs::read_to_string(&site.secret)
        .unwrap()
        .contains(&site.sentinel));
}

fn symlink_inside_root_is_served(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let resp = server.get("/link.txt");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
    let resp = server.get("/dirlink/inner.txt");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"inner\n");
}

fn symlinks_leaving_root_are_refused(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for path in ["/escape.txt", "/abs.txt", "/outdir/secret.txt", "/outdir/"] {
        let resp = server.get(path);
        assert!(matches!(resp.status, 403 | 404), "{path}: {resp:?}");
        assert!(!resp.body_text().contains(&site.sentinel), "{path}");
    }
}

// ------------------------------------------------------------- big files

fn big_file_streams_byte_exact_twice_on_one_connection(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    for _ in 0..2 {
        let resp = exchange(&mut s, get_req("/big.bin").as_bytes());
        assert_eq!(resp.status, 200);
        assert_eq!(resp.content_length(), Some(BIG_LEN as u64));
        assert!(resp.body == site.big, "big.bin body differs");
    }
    let resp = exchange(&mut s, get_req("/hello.txt").as_bytes());
    assert_eq!(resp.body, HELLO.as_bytes());
}

// ------------------------------------------------------------ keep-alive

fn keep_alive_serves_several_requests(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    for i in 0..5 {
        let resp = exchange(&mut s, get_req(&format!("/p{i}.txt")).as_bytes());
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, format!("p{i}\n").as_bytes());
        assert_eq!(resp.header("connection"), None, "{resp:?}");
    }
}

fn http10_closes_after_response(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let resp = exchange(&mut s, b"GET /hello.txt HTTP/1.0\r\n\r\n");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
    assert_eq!(resp.header("connection"), Some("close"));
    assert_closes(&mut s);
}

fn http10_keep_alive_stays_open(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let ka = b"GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    let resp = exchange(&mut s, ka);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("connection"), Some("keep-alive"));
    let resp = exchange(&mut s, ka);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
    // A 1.0 request without keep-alive ends it.
    let resp = exchange(&mut s, b"GET /page.html HTTP/1.0\r\n\r\n");
    assert_eq!(resp.body, PAGE.as_bytes());
    assert_closes(&mut s);
}

fn connection_close_is_honoured(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let resp = exchange(
        &mut s,
        b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
    assert_eq!(resp.header("connection"), Some("close"));
    assert_closes(&mut s);
}

// ------------------------------------------------------------ pipelining

fn pipelined_requests_answered_in_order(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let batch: String = (0..10).map(|i| get_req(&format!("/p{i}.txt"))).collect();
    s.write_all(batch.as_bytes()).unwrap();
    for i in 0..10 {
        let resp = read_response(&mut s);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, format!("p{i}\n").as_bytes(), "response {i}");
    }
    assert!(stays_silent(&s, Duration::from_millis(200)));
}

fn many_pipelined_requests_span_reads(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    // ~5 KiB per 100 requests: several read-buffer fills, heads cut anywhere.
    let batch: String = (0..300)
        .map(|i| get_req(&format!("/p{}.txt", i % 10)))
        .collect();
    s.write_all(batch.as_bytes()).unwrap();
    for i in 0..300 {
        let resp = read_response(&mut s);
        assert_eq!(
            resp.body,
            format!("p{}\n", i % 10).as_bytes(),
            "response {i}"
        );
    }
}

fn pipelined_big_file_keeps_order(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let batch = [
        get_req("/p0.txt"),
        get_req("/big.bin"),
        get_req("/p1.txt"),
        get_req("/big.bin"),
        get_req("/p2.txt"),
    ]
    .concat();
    s.write_all(batch.as_bytes()).unwrap();
    assert_eq!(read_response(&mut s).body, b"p0\n");
    assert!(read_response(&mut s).body == site.big);
    assert_eq!(read_response(&mut s).body, b"p1\n");
    assert!(read_response(&mut s).body == site.big);
    assert_eq!(read_response(&mut s).body, b"p2\n");
}

fn pipelined_head_of_big_file_sends_no_body(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let batch = [
        get_req("/p0.txt"),
        "HEAD /big.bin HTTP/1.1\r\nHost: test\r\n\r\n".to_owned(),
        get_req("/p1.txt"),
    ]
    .concat();
    s.write_all(batch.as_bytes()).unwrap();
    assert_eq!(read_response(&mut s).body, b"p0\n");
    let head = read_response_head_only(&mut s);
    assert_eq!(head.content_length(), Some(BIG_LEN as u64));
    assert_eq!(read_response(&mut s).body, b"p1\n");
}

fn client_leaving_mid_stream_does_not_hurt_the_server(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for _ in 0..3 {
        let mut s = server.connect();
        s.write_all(get_req("/big.bin").as_bytes()).unwrap();
        let mut some = [0u8; 1000];
        std::io::Read::read_exact(&mut s, &mut some).unwrap();
        drop(s);
    }
    let resp = server.get("/big.bin");
    assert!(resp.body == site.big);
    assert_eq!(server.get("/hello.txt").body, HELLO.as_bytes());
}

fn pipelined_connection_close_stops_the_batch(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let batch = [
        get_req("/p0.txt"),
        "GET /p1.txt HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".to_owned(),
        get_req("/p2.txt"),
    ]
    .concat();
    let resps = parse_responses(&server.send(batch.as_bytes()));
    let bodies: Vec<_> = resps.iter().map(|r| r.body_text()).collect();
    assert_eq!(bodies, ["p0\n", "p1\n"]);
}

fn pipelined_bad_request_answers_earlier_ones_then_closes(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let batch = [
        get_req("/p0.txt"),
        "GET /p1.txt HTTP/1.1\r\n\r\n".to_owned(), // no Host
        get_req("/p2.txt"),
    ]
    .concat();
    let resps = parse_responses(&server.send(batch.as_bytes()));
    let statuses: Vec<_> = resps.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 400]);
    assert_eq!(resps[1].header("connection"), Some("close"));
}

fn head_split_across_writes_is_parsed(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    for part in [
        "GET /hel",
        "lo.txt HTTP/1.1\r",
        "\nHo",
        "st: test\r\n",
        "\r\n",
    ] {
        s.write_all(part.as_bytes()).unwrap();
        // Separate segments: the server must see a partial head.
        std::thread::sleep(Duration::from_millis(30));
    }
    let resp = read_response(&mut s);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
}

// --------------------------------------------------------------- limits

fn head_larger_than_limit_is_431(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--max-head-bytes", "2048"]);
    // Just under the limit is fine.
    let ok = format!(
        "GET /hello.txt HTTP/1.1\r\nHost: test\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(1500)
    );
    let mut s = server.connect();
    assert_eq!(exchange(&mut s, ok.as_bytes()).status, 200);
    let big = format!(
        "GET /hello.txt HTTP/1.1\r\nHost: test\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(3000)
    );
    assert_refused_and_closed(&server, big.as_bytes(), 431);
    // Never completed: many small fields past the limit.
    let mut endless = b"GET /hello.txt HTTP/1.1\r\nHost: test\r\n".to_vec();
    for i in 0..200 {
        endless.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    assert_refused_and_closed(&server, &endless, 431);
}

fn long_request_line_is_414(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let long = format!("GET /{} HTTP/1.1\r\nHost: test\r\n\r\n", "a".repeat(9000));
    let resp = assert_refused_and_closed(&server, long.as_bytes(), 414);
    assert_eq!(resp.reason, "URI Too Long");
    // A long line with no end in sight is refused without waiting for it.
    let unfinished = format!("GET /{}", "a".repeat(10_000));
    assert_refused_and_closed(&server, unfinished.as_bytes(), 414);
}

fn too_many_headers_is_431(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--max-headers", "10"]);
    let mut req = String::from("GET /hello.txt HTTP/1.1\r\nHost: test\r\n");
    for i in 0..9 {
        req.push_str(&format!("X-{i}: y\r\n"));
    }
    let mut s = server.connect();
    let ok = exchange(&mut s, format!("{req}\r\n").as_bytes());
    assert_eq!(ok.status, 200, "10 fields are allowed");
    req.push_str("X-9: y\r\n\r\n");
    assert_refused_and_closed(&server, req.as_bytes(), 431);
}

fn oversized_declared_body_is_413(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    assert_refused_and_closed(
        &server,
        b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 2000000\r\n\r\n",
        413,
    );
}

// ------------------------------------------------------------- framing

fn content_length_with_transfer_encoding_is_400_and_closes(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for raw in [
        &b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello"[..],
        &b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n"[..],
        &b"POST /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nTransfer-Encoding: identity\r\n\r\nhello"[..],
    ] {
        assert_refused_and_closed(&server, raw, 400);
    }
}

fn invalid_content_length_is_400_and_closes(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for value in [
        "+5",
        "-1",
        "abc",
        "",
        "5 5",
        "0x5",
        "5, 6",
        "99999999999999999999999",
    ] {
        let raw = format!(
            "GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: {value}\r\n\r\nhello"
        );
        assert_refused_and_closed(&server, raw.as_bytes(), 400);
    }
    let repeated =
        b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!";
    assert_refused_and_closed(&server, repeated, 400);
}

/// The head of a request for `path` with a chunked body (which follows).
fn chunked_req(method: &str, path: &str) -> String {
    format!("{method} {path} HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
}

fn chunked_body_on_get_is_discarded_and_answered(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let batch = [
        chunked_req("GET", "/hello.txt"),
        "5\r\nhello\r\n0\r\n\r\n".to_owned(),
        get_req("/p0.txt"),
    ]
    .concat();
    s.write_all(batch.as_bytes()).unwrap();
    let first = read_response(&mut s);
    assert_eq!(first.status, 200);
    assert_eq!(first.body, HELLO.as_bytes());
    assert_eq!(first.header("connection"), None, "{first:?}");
    let next = read_response(&mut s);
    assert_eq!(next.body, b"p0\n");
    assert!(stays_silent(&s, Duration::from_millis(200)));
}

fn transfer_codings_other_than_chunked_are_refused(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let te = |value: &str| {
        format!(
            "POST /hello.txt HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: {value}\r\n\r\n0\r\n\r\n"
        )
    };
    // RFC 9112 §6.3: a final coding other than chunked cannot be framed.
    for value in ["gzip", "chunked, gzip", "identity", "chunked, chunked"] {
        assert_refused_and_closed(&server, te(value).as_bytes(), 400);
    }
    let twice = "GET /hello.txt HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    assert_refused_and_closed(&server, twice.as_bytes(), 400);
    // Framed, but coded with what we do not decode.
    let resp = assert_refused_and_closed(&server, te("gzip, chunked").as_bytes(), 501);
    assert_eq!(resp.body, b"501 Not Implemented\n");
}

fn transfer_encoding_on_http10_is_400(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    assert_refused_and_closed(
        &server,
        b"GET /hello.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400,
    );
}

fn pipelined_requests_with_chunked_bodies_are_answered_in_order(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let smuggled = get_req("/p9.txt");
    let batch = [
        chunked_req("GET", "/p0.txt"),
        "3\r\nabc\r\n0\r\n\r\n".to_owned(),
        // A request inside a body is body.
        chunked_req("POST", "/p1.txt"),
        format!("{:x}\r\n{smuggled}\r\n0\r\n\r\n", smuggled.len()),
        "GET /p2.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 4\r\n\r\nabcd".to_owned(),
        chunked_req("GET", "/p3.txt"),
        "2;ext=\"v\"\r\nxy\r\n000\r\nChecksum: 1\r\n\r\n".to_owned(),
        "GET /p4.txt HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".to_owned(),
    ]
    .concat();
    let resps = parse_responses(&server.send(batch.as_bytes()));
    let statuses: Vec<_> = resps.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 405, 200, 200, 200]);
    let bodies: Vec<_> = resps.iter().map(|r| r.body_text()).collect();
    assert_eq!(
        [&bodies[0], &bodies[2], &bodies[3], &bodies[4]],
        ["p0\n", "p2\n", "p3\n", "p4\n"]
    );
}

fn chunked_request_split_at_every_byte_is_framed(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let req = [
        chunked_req("GET", "/p0.txt"),
        "3;e=1\r\nabc\r\n0\r\nT: v\r\n\r\n".to_owned(),
    ]
    .concat();
    // One keep-alive connection for every split: each request's body must
    // end exactly where the next request starts.
    for cut in 1..req.len() {
        s.write_all(&req.as_bytes()[..cut]).unwrap();
        // Separate segments: the server must see the request cut here.
        std::thread::sleep(Duration::from_millis(5));
        let rest = [&req[cut..], &get_req("/p1.txt")].concat();
        s.write_all(rest.as_bytes()).unwrap();
        let first = read_response(&mut s);
        assert_eq!(first.body, b"p0\n", "cut at {cut}");
        let next = read_response(&mut s);
        assert_eq!(next.body, b"p1\n", "cut at {cut}");
    }
    assert!(stays_silent(&s, Duration::from_millis(200)));
}

fn malformed_chunked_body_is_400_and_closes(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for body in [
        // 17 significant hex digits: past 64 bits.
        "10000000000000000\r\nhello\r\n0\r\n\r\n",
        "00fffffffffffffffff\r\n",
        "zz\r\nhello\r\n0\r\n\r\n",
        "\r\n",
        "-5\r\nhello\r\n0\r\n\r\n",
        // Bare LF, data without its CRLF, a bad extension, a bad trailer.
        "5\nhello\r\n0\r\n\r\n",
        "5\r\nhelloXX0\r\n\r\n",
        "5;a b\r\nhello\r\n0\r\n\r\n",
        "5\r\nhello\r\n0\r\nNo colon\r\n\r\n",
    ] {
        let raw = [
            chunked_req("GET", "/hello.txt"),
            body.to_owned(),
            get_req("/p0.txt"),
        ]
        .concat();
        assert_refused_and_closed(&server, raw.as_bytes(), 400);
    }
}

fn malformed_chunked_body_in_a_later_read_closes_after_the_answer(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    s.write_all(
        [chunked_req("GET", "/hello.txt"), "5\r\nhel".to_owned()]
            .concat()
            .as_bytes(),
    )
    .unwrap();
    // Answered once its head and the buffered part of its body are framed.
    let resp = read_response(&mut s);
    assert_eq!(resp.body, HELLO.as_bytes());
    // Then the body goes wrong: the connection closes, and the request
    // after the bad bytes is never answered.
    let _ = s.write_all(
        [&b"loXX"[..], get_req("/p0.txt").as_bytes()]
            .concat()
            .as_slice(),
    );
    assert_closes(&mut s);
}

fn chunked_trailer_section_is_accepted(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let batch = [
        chunked_req("GET", "/hello.txt"),
        "4\r\nabcd\r\n0\r\nChecksum: xyz\r\nX-Trailer:  1 \r\n\r\n".to_owned(),
        get_req("/p1.txt"),
    ]
    .concat();
    s.write_all(batch.as_bytes()).unwrap();
    assert_eq!(read_response(&mut s).body, HELLO.as_bytes());
    assert_eq!(read_response(&mut s).body, b"p1\n");
    assert!(stays_silent(&s, Duration::from_millis(200)));
}

fn chunked_body_past_the_discard_bound_is_413(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    // A chunk declared past 1 MiB is refused at its size line.
    let raw = [chunked_req("GET", "/hello.txt"), "100001\r\n".to_owned()].concat();
    assert_refused_and_closed(&server, raw.as_bytes(), 413);
    // Two chunks of 512 KiB are exactly the bound: discarded, then the next
    // request is answered.
    let half = vec![b'x'; 512 * 1024];
    let chunk = [&b"80000\r\n"[..], &half, b"\r\n"].concat();
    let mut s = server.connect();
    let batch = [
        chunked_req("GET", "/hello.txt").as_bytes(),
        &chunk,
        &chunk,
        b"0\r\n\r\n",
        get_req("/p0.txt").as_bytes(),
    ]
    .concat();
    s.write_all(&batch).unwrap();
    assert_eq!(read_response(&mut s).body, HELLO.as_bytes());
    assert_eq!(read_response(&mut s).body, b"p0\n");
    // One byte more, declared after the answer went out: the connection
    // closes after the answer, with nothing more.
    let mut s = server.connect();
    let batch = [
        chunked_req("GET", "/hello.txt").as_bytes(),
        &chunk,
        &chunk,
        b"1\r\nx\r\n0\r\n\r\n",
        get_req("/p0.txt").as_bytes(),
    ]
    .concat();
    let _ = s.write_all(&batch);
    assert_eq!(read_response(&mut s).body, HELLO.as_bytes());
    assert_closes(&mut s);
}

fn max_body_bytes_sets_the_body_bound(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--max-body-bytes", "10"]);
    // A declared length past the bound: 413 before anything else.
    let over = "GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 11\r\n\r\nxxxxxxxxxxx";
    assert_refused_and_closed(&server, over.as_bytes(), 413);
    // Exactly the bound: discarded, and the next request is answered.
    let mut s = server.connect();
    let batch = [
        "GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\n0123456789",
        &get_req("/p0.txt"),
    ]
    .concat();
    s.write_all(batch.as_bytes()).unwrap();
    assert_eq!(read_response(&mut s).body, HELLO.as_bytes());
    assert_eq!(read_response(&mut s).body, b"p0\n");
    // A chunked body whose chunks add up past it: 413 at the size line.
    let raw = [
        chunked_req("GET", "/hello.txt"),
        "5\r\nabcde\r\n6\r\n".to_owned(),
    ]
    .concat();
    assert_refused_and_closed(&server, raw.as_bytes(), 413);
    // 0 refuses every body, and no body is still fine.
    let none = serve(driver, &site, &["--max-body-bytes", "0"]);
    let one = "GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 1\r\n\r\nx";
    assert_refused_and_closed(&none, one.as_bytes(), 413);
    assert_eq!(none.get("/hello.txt").status, 200);
}

/// RFC 9110 §10.1.1: a server that will not read the body may answer with
/// the final status instead of 100 Continue. No handler reads bodies, so the
/// client gets its answer at once, never a 100; the body it sends after the
/// answer is framed and discarded, and the connection carries on.
fn expect_100_continue_gets_the_final_answer_and_the_late_body_is_discarded(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    s.write_all(
        b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    )
    .unwrap();
    let answer = read_response(&mut s);
    assert_eq!(answer.status, 200, "a 100 or another status came first");
    assert_eq!(answer.body, HELLO.as_bytes());
    // The body the client had held back, then the next request.
    s.write_all(&[b"hello", get_req("/p0.txt").as_bytes()].concat())
        .unwrap();
    assert_eq!(read_response(&mut s).body, b"p0\n");
}

fn missing_host_on_http11_is_400(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    assert_refused_and_closed(&server, b"GET /hello.txt HTTP/1.1\r\n\r\n", 400);
    // HTTP/1.0 does not need one.
    let resp = parse_responses(&server.send(b"GET /hello.txt HTTP/1.0\r\n\r\n"));
    assert_eq!(resp.len(), 1);
    assert_eq!(resp[0].status, 200);
}

fn repeated_host_is_400(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    assert_refused_and_closed(
        &server,
        b"GET /hello.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        400,
    );
    assert_refused_and_closed(
        &server,
        b"GET /hello.txt HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n",
        400,
    );
    assert_refused_and_closed(
        &server,
        b"GET /hello.txt HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
        400,
    );
}

fn declared_body_is_consumed_not_parsed(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let resp = exchange(
        &mut s,
        b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nGET /",
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
    // Exactly one response: the body was not taken for a request.
    assert!(stays_silent(&s, Duration::from_millis(300)));
    let next = exchange(&mut s, get_req("/page.html").as_bytes());
    assert_eq!(next.status, 200);
    assert_eq!(next.body, PAGE.as_bytes());
}

fn body_split_across_writes_is_consumed(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    let resp = exchange(
        &mut s,
        b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 20\r\n\r\nGET /p0.txt",
    );
    assert_eq!(resp.body, HELLO.as_bytes());
    std::thread::sleep(Duration::from_millis(50));
    // The last 9 body bytes, then a real request in the same write.
    let mut rest = b" HTTP/1.1".to_vec();
    rest.extend_from_slice(get_req("/p1.txt").as_bytes());
    s.write_all(&rest).unwrap();
    let next = read_response(&mut s);
    assert_eq!(next.body, b"p1\n");
    assert!(stays_silent(&s, Duration::from_millis(200)));
}

fn other_methods_are_405_with_allow(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    for raw in [
        &b"POST /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc"[..],
        &b"PUT /hello.txt HTTP/1.1\r\nHost: test\r\nContent-Length: 4\r\n\r\nGET "[..],
        &b"DELETE /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n"[..],
        &b"PATCH /nope HTTP/1.1\r\nHost: test\r\n\r\n"[..],
    ] {
        let resp = exchange(&mut s, raw);
        assert_eq!(resp.status, 405, "{:?}", String::from_utf8_lossy(raw));
        assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"));
    }
    let resp = exchange(&mut s, get_req("/hello.txt").as_bytes());
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, HELLO.as_bytes());
}

fn options_is_204_with_allow(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    for raw in [
        &b"OPTIONS /hello.txt HTTP/1.1\r\nHost: test\r\n\r\n"[..],
        &b"OPTIONS * HTTP/1.1\r\nHost: test\r\n\r\n"[..],
    ] {
        let resp = exchange(&mut s, raw);
        assert_eq!(resp.status, 204);
        assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"));
        assert_eq!(resp.header("content-length"), None);
    }
    let resp = exchange(&mut s, get_req("/hello.txt").as_bytes());
    assert_eq!(resp.body, HELLO.as_bytes());
}

fn malformed_request_line_is_400(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for raw in [
        &b"GARBAGE\r\n\r\n"[..],
        &b"GET / FOO/1.1\r\nHost: test\r\n\r\n"[..],
        &b"G(T / HTTP/1.1\r\nHost: test\r\n\r\n"[..],
        &b"\x01\x02\x03 / HTTP/1.1\r\n\r\n"[..],
        &b"GET /hello.txt HTTP/1.1 extra\r\nHost: test\r\n\r\n"[..],
        &b"GET /a\x00b HTTP/1.1\r\nHost: test\r\n\r\n"[..],
    ] {
        assert_refused_and_closed(&server, raw, 400);
    }
}

fn malformed_header_fields_are_400(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    for raw in [
        // RFC 9112 §5.1: whitespace before the colon MUST be rejected.
        &b"GET /hello.txt HTTP/1.1\r\nHost : test\r\n\r\n"[..],
        // RFC 9112 §5.2: obs-fold.
        &b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nX: a\r\n b\r\n\r\n"[..],
        &b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nNo colon here\r\n\r\n"[..],
        &b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nX: a\x00b\r\n\r\n"[..],
    ] {
        assert_refused_and_closed(&server, raw, 400);
    }
}

fn absolute_form_target_is_accepted(driver: &str) {
    // RFC 9112 §3.2.2: "a server MUST accept the absolute-form in requests".
    let site = site();
    let server = serve(driver, &site, &[]);
    let resps = parse_responses(
        &server
            .send(b"GET http://test/hello.txt HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(resps.len(), 1);
    assert_eq!(resps[0].status, 200, "{:?}", resps[0]);
    assert_eq!(resps[0].body, HELLO.as_bytes());
}

// -------------------------------------------------------------- timeouts

/// Trickle a byte every 300 ms after a partial head; the server must close
/// within `bound`. Returns nothing: panics if it is still open.
fn assert_slow_head_is_cut(s: &mut std::net::TcpStream, bound: Duration) {
    let deadline = Instant::now() + bound;
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut got = Vec::new();
    loop {
        if s.write_all(b"X").is_err() {
            break; // reset: closed
        }
        let mut buf = [0u8; 1024];
        match std::io::Read::read(s, &mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if common::is_timeout(&e) => {}
            Err(_) => break,
        }
        assert!(
            Instant::now() < deadline,
            "slow head still open after {bound:?}"
        );
    }
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains(" 200 "), "served a trickled head: {text}");
}

fn slow_head_is_cut_by_header_timeout(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--header-timeout", "1"]);
    let mut s = server.connect();
    s.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nX-Slow: ")
        .unwrap();
    assert_slow_head_is_cut(&mut s, Duration::from_secs(6));
    // The server is fine afterwards.
    assert_eq!(server.get("/hello.txt").status, 200);
}

fn header_timeout_applies_to_later_requests_on_a_connection(driver: &str) {
    let site = site();
    let server = serve(
        driver,
        &site,
        &["--header-timeout", "1", "--keepalive-timeout", "60"],
    );
    let mut s = server.connect();
    assert_eq!(
        exchange(&mut s, get_req("/hello.txt").as_bytes()).status,
        200
    );
    s.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: test\r\nX-Slow: ")
        .unwrap();
    assert_slow_head_is_cut(&mut s, Duration::from_secs(6));
}

fn silent_connection_is_cut_by_header_timeout(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--header-timeout", "1"]);
    let mut s = server.connect();
    match read_until_close(&mut s, Duration::from_secs(6)) {
        Ok(rest) => assert!(rest.is_empty()),
        Err(_) => panic!("a connection that never sent a byte is still open"),
    }
}

fn idle_connection_is_closed_after_keepalive_timeout(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--keepalive-timeout", "1"]);
    let mut s = server.connect();
    let resp = exchange(&mut s, get_req("/hello.txt").as_bytes());
    assert_eq!(resp.status, 200);
    match read_until_close(&mut s, Duration::from_secs(6)) {
        Ok(rest) => assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest)),
        Err(_) => panic!("idle kept-alive connection still open after 6 s"),
    }
}

// ---------------------------------------------------------- connections

fn max_connections_queues_extra_connections(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--max-connections", "2", "--workers", "1"]);
    let mut first = server.connect();
    let mut second = server.connect();
    assert_eq!(
        exchange(&mut first, get_req("/p0.txt").as_bytes()).status,
        200
    );
    assert_eq!(
        exchange(&mut second, get_req("/p1.txt").as_bytes()).status,
        200
    );
    // The third completes the TCP handshake (kernel backlog) but is not
    // accepted while two are open.
    let mut third = server.connect();
    third.write_all(get_req("/p2.txt").as_bytes()).unwrap();
    assert!(
        stays_silent(&third, Duration::from_millis(700)),
        "third connection served above --max-connections 2"
    );
    drop(first);
    let resp = read_response(&mut third);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"p2\n");
    // The second was never disturbed.
    assert_eq!(
        exchange(&mut second, get_req("/p3.txt").as_bytes()).body,
        b"p3\n"
    );
}

fn max_connections_holds_under_a_burst(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--max-connections", "2", "--workers", "1"]);
    // Ten connections queued at once, each with a request.
    let conns: Vec<_> = (0..10)
        .map(|i| {
            let mut s = server.connect();
            s.write_all(get_req(&format!("/p{i}.txt")).as_bytes())
                .unwrap();
            s
        })
        .collect();
    // Wait (bounded) for the two the cap admits; a loaded machine may be slow.
    let mut served = [false; 10];
    let deadline = Instant::now() + Duration::from_secs(5);
    while served.iter().filter(|&&x| x).count() < 2 && Instant::now() < deadline {
        for (i, s) in conns.iter().enumerate() {
            if !served[i] && !stays_silent(s, Duration::from_millis(20)) {
                served[i] = true;
            }
        }
    }
    // Then give the server time to (wrongly) admit more.
    std::thread::sleep(Duration::from_millis(300));
    for (i, s) in conns.iter().enumerate() {
        if !served[i] && !stays_silent(s, Duration::from_millis(20)) {
            served[i] = true;
        }
    }
    let served = served.iter().filter(|&&x| x).count();
    assert_eq!(served, 2, "connections answered with --max-connections 2");
}

fn connections_above_the_cap_are_served_as_others_close(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--max-connections", "1", "--workers", "1"]);
    let conns: Vec<_> = (0..4)
        .map(|i| {
            let mut s = server.connect();
            s.write_all(get_req(&format!("/p{i}.txt")).as_bytes())
                .unwrap();
            s
        })
        .collect();
    // Whatever the server admits at once, each queued connection is served
    // once the ones before it have gone: nothing starves at the cap.
    for (i, mut s) in conns.into_iter().enumerate() {
        let resp = read_response(&mut s);
        assert_eq!(resp.body, format!("p{i}\n").as_bytes());
    }
}

// ------------------------------------------------------------- telemetry

fn metric(server: &TestServer, series: &str) -> u64 {
    let text = server.metrics();
    common::metric(&text, series).unwrap_or_else(|| panic!("no {series} in:\n{text}")) as u64
}

/// `--file-cache-entries` and `--memory-cache-bytes` are totals for the
/// server: each worker holds its share, which `/metrics` shows.
fn file_cache_budgets_are_shared_among_the_workers(driver: &str) {
    let site = site();
    for (workers, entries, bytes) in [("1", 1000, 8_000_000), ("2", 500, 4_000_000)] {
        let server = serve(
            driver,
            &site,
            &[
                "--admin",
                "127.0.0.1:0",
                "--workers",
                workers,
                "--file-cache-entries",
                "1000",
                "--memory-cache-bytes",
                "8000000",
            ],
        );
        let n: usize = workers.parse().unwrap();
        for w in 0..n {
            let e = format!("servery_file_cache_entries_share{{worker=\"{w}\"}}");
            let b = format!("servery_memory_cache_bytes_share{{worker=\"{w}\"}}");
            assert_eq!(metric(&server, &e), entries, "{workers} workers: {e}");
            assert_eq!(metric(&server, &b), bytes, "{workers} workers: {b}");
        }
        assert_eq!(server.get("/hello.txt").status, 200);
    }
}

fn responses_are_counted_by_class_in_metrics(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--admin", "127.0.0.1:0"]);
    let c2 = r#"servery_responses_total{worker="0",class="2xx"}"#;
    let c3 = r#"servery_responses_total{worker="0",class="3xx"}"#;
    let c4 = r#"servery_responses_total{worker="0",class="4xx"}"#;
    let c5 = r#"servery_responses_total{worker="0",class="5xx"}"#;
    let before = [c2, c3, c4, c5].map(|c| metric(&server, c));
    assert_eq!(server.get("/nope").status, 404);
    assert_eq!(metric(&server, c4), before[2] + 1);
    assert_eq!(server.get("/hello.txt").status, 200);
    assert_eq!(server.get("/dir").status, 301);
    let _ = server.send(b"GET / HTTP/1.1\r\n\r\n"); // 400
    let after = [c2, c3, c4, c5].map(|c| metric(&server, c));
    assert_eq!(
        after,
        [before[0] + 1, before[1] + 1, before[2] + 2, before[3]]
    );
    let requests = metric(&server, r#"servery_requests_total{worker="0"}"#);
    assert!(requests >= 3, "requests_total {requests}");
}

fn admin_reports_health_and_readiness(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &["--admin", "127.0.0.1:0"]);
    let health = server.admin_get("/healthz");
    assert_eq!(health.status, 200);
    assert_eq!(health.body, b"ok\n");
    let ready = server.admin_get("/readyz");
    assert_eq!(ready.status, 200);
    assert_eq!(ready.body, b"ready\n");
    assert_eq!(server.admin_get("/nope").status, 404);
    // Admin and the served site are separate listeners.
    assert_ne!(server.admin(), server.addr());
    assert_eq!(server.get("/healthz").status, 404);
}

/// Exercise the harness's half-close helper: the server answers what it got,
/// then closes on EOF.
fn half_closed_client_gets_its_answers(driver: &str) {
    let site = site();
    let server = serve(driver, &site, &[]);
    let mut s = server.connect();
    s.write_all([get_req("/p0.txt"), get_req("/p1.txt")].concat().as_bytes())
        .unwrap();
    half_close(&s);
    let bytes = read_until_close(&mut s, Duration::from_secs(3)).expect("closed after EOF");
    let bodies: Vec<_> = parse_responses(&bytes)
        .iter()
        .map(|r| r.body_text())
        .collect();
    assert_eq!(bodies, ["p0\n", "p1\n"]);
}

driver_tests! {
    file_cache_budgets_are_shared_among_the_workers,
    get_file_returns_exact_body_and_headers,
    content_type_follows_extension,
    query_string_does_not_change_the_file,
    percent_encoded_name_is_decoded,
    head_matches_get_without_body_and_keeps_connection,
    head_of_big_file_has_length_and_no_body,
    head_of_missing_file_is_404_without_body,
    missing_file_is_404,
    unreadable_file_is_403,
    fifo_in_root_is_404_without_blocking,
    empty_and_cache_threshold_files_are_byte_exact,
    replaced_file_is_served_fresh,
    directory_without_slash_redirects_keeping_query,
    redirect_location_is_never_protocol_relative,
    directory_with_index_serves_index,
    directory_without_index_is_404,
    dotfiles_are_404,
    traversal_never_leaves_root,
    symlink_inside_root_is_served,
    symlinks_leaving_root_are_refused,
    big_file_streams_byte_exact_twice_on_one_connection,
    keep_alive_serves_several_requests,
    http10_closes_after_response,
    http10_keep_alive_stays_open,
    connection_close_is_honoured,
    pipelined_requests_answered_in_order,
    many_pipelined_requests_span_reads,
    pipelined_big_file_keeps_order,
    pipelined_head_of_big_file_sends_no_body,
    client_leaving_mid_stream_does_not_hurt_the_server,
    pipelined_connection_close_stops_the_batch,
    pipelined_bad_request_answers_earlier_ones_then_closes,
    head_split_across_writes_is_parsed,
    head_larger_than_limit_is_431,
    long_request_line_is_414,
    too_many_headers_is_431,
    oversized_declared_body_is_413,
    content_length_with_transfer_encoding_is_400_and_closes,
    invalid_content_length_is_400_and_closes,
    chunked_body_on_get_is_discarded_and_answered,
    transfer_codings_other_than_chunked_are_refused,
    transfer_encoding_on_http10_is_400,
    pipelined_requests_with_chunked_bodies_are_answered_in_order,
    chunked_request_split_at_every_byte_is_framed,
    malformed_chunked_body_is_400_and_closes,
    malformed_chunked_body_in_a_later_read_closes_after_the_answer,
    chunked_trailer_section_is_accepted,
    chunked_body_past_the_discard_bound_is_413,
    max_body_bytes_sets_the_body_bound,
    expect_100_continue_gets_the_final_answer_and_the_late_body_is_discarded,
    missing_host_on_http11_is_400,
    repeated_host_is_400,
    declared_body_is_consumed_not_parsed,
    body_split_across_writes_is_consumed,
    other_methods_are_405_with_allow,
    options_is_204_with_allow,
    malformed_request_line_is_400,
    malformed_header_fields_are_400,
    absolute_form_target_is_accepted,
    slow_head_is_cut_by_header_timeout,
    header_timeout_applies_to_later_requests_on_a_connection,
    silent_connection_is_cut_by_header_timeout,
    idle_connection_is_closed_after_keepalive_timeout,
    max_connections_queues_extra_connections,
    max_connections_holds_under_a_burst,
    connections_above_the_cap_are_served_as_others_close,
    responses_are_counted_by_class_in_metrics,
    admin_reports_health_and_readiness,
    half_closed_client_gets_its_answers,
}
