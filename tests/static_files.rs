//! The static file pipeline (`src/static_files`) end to end: validators,
//! conditional requests, byte ranges, precompressed variants, directories,
//! the symlink and dotfile policies, header rules, the open-file cache under
//! files that change while served, zero-copy sends and containment.
//!
//! Raw bytes over std `TcpStream`s to the real binary; every case runs under
//! both `--driver uring` and `--driver epoll` (`driver_tests!` at the bottom).
//! Each test serves its own fresh [`Site`]: `<tmp>/root` is the docroot;
//! `<tmp>/secret.txt` (a unique sentinel) and `<tmp>/outside/target.txt` lie
//! next to it, outside, to be leaked by nothing but `--symlinks follow`.
//! Bodies of more than a few KiB are compared by SHA-256.

#[macro_use]
mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use common::{read_response, read_response_head_only, read_until_close, Response, TestServer};

/// The identity bytes of `a.txt`, which has `.br`, `.zst` and `.gz` siblings.
const A_TXT: &[u8] = b"identity bytes of a.txt, the one with precompressed siblings\n";
/// Stand-ins for the compressed siblings: the server never decodes them, so
/// distinct bytes of distinct lengths show which file was sent.
const A_BR: &[u8] = b"BR-VARIANT-BYTES:0123456789";
const A_ZST: &[u8] = b"ZSTD-VARIANT-BYTES:0123456789abcdef";
const A_GZ: &[u8] = b"GZIP-VARIANT-BYTES:0123456789abcdefghijklmnop";
/// A file without variants.
const PLAIN: &[u8] = b"plain text, no variants\n";
/// Below the default 64 KiB `--small-file-max`: served from memory.
const MEM_LEN: usize = 10_000;
/// Above it: served from the file with sendfile.
const DISK_LEN: usize = 200_000;
/// Every fixture file's mtime: a fixed past second, so date preconditions
/// are deterministic.
const MTIME_S: u64 = 1_600_000_000;
/// The `--file-cache-ttl` of the tests that change files under the server.
const TTL_S: f64 = 0.5;
/// How much later than the TTL a change may show (a loaded CI machine).
const TTL_MARGIN: Duration = Duration::from_millis(1500);

fn mtime() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(MTIME_S)
}

/// A docroot fixture; dropped (deleted) after the server that serves it.
struct Site {
    tmp: tempfile::TempDir,
    /// `<tmp>/root`: the served directory.
    root: PathBuf,
    /// The unique content of `<tmp>/secret.txt`.
    sentinel: String,
    /// `root/mem.bin` (memory-cached) and `root/disk.bin` (sendfile).
    mem: Vec<u8>,
    disk: Vec<u8>,
}

impl Site {
    fn write(&self, rel: &str, body: &[u8]) -> PathBuf {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, body).expect("write fixture");
        set_mtime(&p, mtime());
        p
    }

    /// `<tmp>/NAME`: a path next to the root, outside it.
    fn outside(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
}

fn set_mtime(p: &Path, t: SystemTime) {
    fs::File::options()
        .write(true)
        .open(p)
        .and_then(|f| f.set_modified(t))
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", p.display()));
}

fn site() -> Site {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    fs::create_dir(&root).expect("mkdir root");
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let sentinel = format!("SENTINEL-{}-{nanos}-OUTSIDE-ROOT", std::process::id());
    let site = Site {
        root,
        sentinel,
        mem: pseudo_random(MEM_LEN, 1),
        disk: pseudo_random(DISK_LEN, 2),
        tmp,
    };
    fs::write(site.outside("secret.txt"), &site.sentinel).expect("secret");
    fs::create_dir(site.outside("outside")).expect("mkdir outside");
    fs::write(site.outside("outside/target.txt"), b"OUTSIDE-TARGET\n").expect("target");

    site.write("a.txt", A_TXT);
    site.write("a.txt.br", A_BR);
    site.write("a.txt.zst", A_ZST);
    site.write("a.txt.gz", A_GZ);
    site.write("plain.txt", PLAIN);
    site.write("mem.bin", &site.mem);
    site.write("disk.bin", &site.disk);
    site.write("dir/index.html", b"<title>dir index</title>\n");
    site.write("dir2/home.htm", b"<title>home</title>\n");
    site.write("list/<b>.txt", b"bold\n");
    site.write("list/.hidden", b"hidden\n");
    site.write("list/sub/x.txt", b"x\n");
    site.write(".well-known/x", b"well-known\n");
    site.write("assets/app.js", b"let a = 1;\n");
    site.write("assets/css/deep.css", b"a{}\n");
    site.write("other/app.js", b"let b = 2;\n");
    site.write("assetsx.js", b"let c = 3;\n");
    symlink("plain.txt", site.root.join("link.txt")).expect("in-root link");
    symlink(
        site.outside("outside/target.txt"),
        site.root.join("out.txt"),
    )
    .expect("outside link");
    site
}

/// Deterministic incompressible bytes (xorshift64*), different per `seed`.
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// xorshift64*: reproducible ranges without a `rand` dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-enough in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn sha(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A server on `root` under `driver` (the harness checks the ready line
/// names it), with `args`.
fn serve(driver: &str, root: &Path, args: &[&str]) -> TestServer {
    TestServer::builder()
        .root(root)
        .driver(driver)
        .args(args)
        .start()
}

/// One request with `Connection: close` and the given extra fields.
fn request(method: &str, path: &str, fields: &[(&str, &str)], close: bool) -> Vec<u8> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in fields {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    if close {
        raw.push_str("Connection: close\r\n");
    }
    raw.push_str("\r\n");
    raw.into_bytes()
}

/// `method path` on a new connection with `Connection: close`: one response
/// (head only for HEAD), then the server must close with nothing more sent,
/// so a 304 or a HEAD answer that carried body bytes fails here.
fn fetch(server: &TestServer, method: &str, path: &str, fields: &[(&str, &str)]) -> Response {
    let mut s = server.connect();
    s.write_all(&request(method, path, fields, true))
        .expect("write request");
    let resp = if method == "HEAD" {
        read_response_head_only(&mut s)
    } else {
        read_response(&mut s)
    };
    match read_until_close(&mut s, Duration::from_secs(3)) {
        Ok(rest) => assert!(
            rest.is_empty(),
            "{method} {path} {fields:?}: {} bytes after the message: {:?}",
            rest.len(),
            String::from_utf8_lossy(&rest[..rest.len().min(200)])
        ),
        Err(rest) => panic!(
            "{method} {path}: not closed 3 s after a Connection: close answer ({} more bytes)",
            rest.len()
        ),
    }
    resp
}

fn get(server: &TestServer, path: &str, fields: &[(&str, &str)]) -> Response {
    fetch(server, "GET", path, fields)
}

/// A `Content-Range: bytes FIRST-LAST/TOTAL` value, parsed.
fn content_range(resp: &Response) -> (u64, u64, u64) {
    let v = resp
        .header("content-range")
        .unwrap_or_else(|| panic!("no Content-Range: {resp:?}"));
    parse_content_range(v)
}

fn parse_content_range(v: &str) -> (u64, u64, u64) {
    let parsed = || -> Option<(u64, u64, u64)> {
        let (span, total) = v.strip_prefix("bytes ")?.split_once('/')?;
        let (first, last) = span.split_once('-')?;
        Some((first.parse().ok()?, last.parse().ok()?, total.parse().ok()?))
    };
    parsed().unwrap_or_else(|| panic!("bad Content-Range {v:?}"))
}

/// The fields of a response but `Date`, for comparing two answers.
fn without_date(resp: &Response) -> Vec<(String, String)> {
    resp.headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
        .cloned()
        .collect()
}

/// One part of a `multipart/byteranges` body.
#[derive(Debug)]
struct Part {
    content_type: Option<String>,
    range: (u64, u64, u64),
    body: Vec<u8>,
}

/// Split a `multipart/byteranges` body (RFC 9110 §14.6, RFC 2046 §5.1.1)
/// with the boundary from its Content-Type. Each part's length comes from
/// its own Content-Range, and must be followed by the next delimiter.
fn multipart_parts(resp: &Response) -> Vec<Part> {
    let ct = resp.header("content-type").expect("Content-Type");
    let (kind, params) = ct.split_once(';').expect("boundary parameter");
    assert_eq!(kind.trim(), "multipart/byteranges", "{ct}");
    let boundary = params
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .expect("boundary=")
        .trim_matches('"');
    assert!(!boundary.is_empty() && boundary.len() <= 70, "{boundary:?}");
    let delimiter = format!("--{boundary}");
    let body = &resp.body;
    let find = |from: usize, needle: &[u8]| {
        body[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|i| from + i)
    };
    let first = find(0, delimiter.as_bytes()).expect("first delimiter");
    assert!(
        body[..first].iter().all(|b| b.is_ascii_whitespace()),
        "preamble {:?}",
        String::from_utf8_lossy(&body[..first])
    );
    let mut at = first + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body[at..].starts_with(b"--") {
            let epilogue = &body[at + 2..];
            assert!(
                epilogue.is_empty() || epilogue == b"\r\n",
                "epilogue {epilogue:?}"
            );
            return parts;
        }
        assert!(body[at..].starts_with(b"\r\n"), "no CRLF after delimiter");
        at += 2;
        let end = find(at, b"\r\n\r\n").expect("end of part headers");
        let head = std::str::from_utf8(&body[at..end]).expect("UTF-8 part headers");
        let mut content_type = None;
        let mut range = None;
        for line in head.split("\r\n") {
            let (name, value) = line.split_once(':').expect("part header field");
            match name.to_ascii_lowercase().as_str() {
                "content-type" => content_type = Some(value.trim().to_owned()),
                "content-range" => range = Some(parse_content_range(value.trim())),
                other => panic!("unexpected part field {other}"),
            }
        }
        let range = range.expect("part Content-Range");
        let start = end + 4;
        let stop = start + (range.1 - range.0 + 1) as usize;
        assert!(stop <= body.len(), "part runs past the body");
        parts.push(Part {
            content_type,
            range,
            body: body[start..stop].to_vec(),
        });
        assert!(
            body[stop..].starts_with(format!("\r\n{delimiter}").as_bytes()),
            "part not followed by a delimiter"
        );
        at = stop + 2 + delimiter.len();
    }
}

// ------------------------------------------------------------ validators

fn etag_is_strong_and_changes_with_the_file(driver: &str) {
    let site = site();
    // TTL 0: every request re-checks the disk.
    let server = serve(driver, &site.root, &["--file-cache-ttl", "0"]);
    for path in ["/plain.txt", "/disk.bin"] {
        let first = get(&server, path, &[]);
        let etag = first.header("etag").expect("ETag").to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
            "{path}: not a strong entity-tag: {etag}"
        );
        assert_eq!(
            get(&server, path, &[]).header("etag"),
            Some(etag.as_str()),
            "{path}: ETag not stable"
        );
        // Rewrite in place with another length and a newer mtime.
        let p = site.root.join(&path[1..]);
        fs::write(&p, b"changed contents\n").expect("rewrite");
        let after = get(&server, path, &[]);
        assert_eq!(after.body, b"changed contents\n", "{path}");
        let new = after.header("etag").expect("ETag");
        assert_ne!(new, etag, "{path}: ETag did not change with the file");
        assert!(new.starts_with('"'), "{path}: {new}");
    }
}

/// Two copies of one file (same size and modification time, other inodes),
/// as on two replicas of an origin: the same ETag, so a CDN revalidating
/// against either gets its 304.
fn copies_of_a_file_share_its_etag(driver: &str) {
    let site = site();
    let a = site.root.join("plain.txt");
    let b = site.root.join("copy.txt");
    fs::copy(&a, &b).expect("copy");
    let mtime = fs::metadata(&a).and_then(|m| m.modified()).expect("mtime");
    fs::File::options()
        .write(true)
        .open(&b)
        .and_then(|f| f.set_modified(mtime))
        .expect("set mtime");
    let server = serve(driver, &site.root, &[]);
    let tag = get(&server, "/plain.txt", &[])
        .header("etag")
        .expect("ETag")
        .to_owned();
    assert_eq!(
        get(&server, "/copy.txt", &[]).header("etag"),
        Some(tag.as_str())
    );
    let again = get(&server, "/copy.txt", &[("If-None-Match", tag.as_str())]);
    assert_eq!(again.status, 304);
}

fn each_encoding_has_its_own_etag(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let mut tags = Vec::new();
    for (ae, coding) in [
        (None, None),
        (Some("br"), Some("br")),
        (Some("zstd"), Some("zstd")),
        (Some("gzip"), Some("gzip")),
    ] {
        let fields: Vec<(&str, &str)> = ae.map(|v| ("Accept-Encoding", v)).into_iter().collect();
        let resp = get(&server, "/a.txt", &fields);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("content-encoding"), coding, "{ae:?}");
        let etag = resp.header("etag").expect("ETag").to_owned();
        assert!(!etag.starts_with("W/"), "{ae:?}: weak ETag {etag}");
        assert!(!tags.contains(&etag), "{ae:?}: ETag {etag} shared");
        tags.push(etag);
    }
    // The br tag does not validate the identity representation.
    let resp = get(&server, "/a.txt", &[("If-None-Match", &tags[1])]);
    assert_eq!(resp.status, 200, "br ETag matched identity: {resp:?}");
    assert_eq!(resp.body, A_TXT);
    // ...but validates the br representation.
    let resp = get(
        &server,
        "/a.txt",
        &[("If-None-Match", &tags[1]), ("Accept-Encoding", "br")],
    );
    assert_not_modified(&resp, &tags[1], "br tag, br accepted");
    assert_eq!(resp.header("content-encoding"), Some("br"));
}

fn last_modified_is_the_file_mtime(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let want = httpdate::fmt_http_date(mtime());
    for path in ["/plain.txt", "/disk.bin", "/a.txt"] {
        let resp = get(&server, path, &[]);
        assert_eq!(resp.header("last-modified"), Some(want.as_str()), "{path}");
    }
}

fn accept_ranges_is_bytes(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for path in ["/plain.txt", "/mem.bin", "/disk.bin"] {
        let resp = get(&server, path, &[]);
        assert_eq!(resp.header("accept-ranges"), Some("bytes"), "{path}");
        let resp = fetch(&server, "HEAD", path, &[]);
        assert_eq!(resp.header("accept-ranges"), Some("bytes"), "HEAD {path}");
    }
}

// ------------------------------------------------------------ conditional

/// The ETag of `path` (identity representation).
fn etag_of(server: &TestServer, path: &str) -> String {
    get(server, path, &[])
        .header("etag")
        .expect("ETag")
        .to_owned()
}

/// A 304 that names its validator and carries nothing (`fetch` checks that
/// no body byte follows the head).
fn assert_not_modified(resp: &Response, etag: &str, what: &str) {
    assert_eq!(resp.status, 304, "{what}: {resp:?}");
    assert_eq!(resp.header("etag"), Some(etag), "{what}");
    assert!(resp.body.is_empty(), "{what}");
}

fn if_none_match_exact_is_304_with_etag_and_no_body(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for path in ["/plain.txt", "/disk.bin"] {
        let etag = etag_of(&server, path);
        let resp = get(&server, path, &[("If-None-Match", &etag)]);
        assert_not_modified(&resp, &etag, path);
        let resp = fetch(&server, "HEAD", path, &[("If-None-Match", &etag)]);
        assert_not_modified(&resp, &etag, path);
    }
}

fn if_none_match_list_is_304(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let etag = etag_of(&server, "/plain.txt");
    let list = format!("\"nope\", {etag} ,\"other\"");
    let resp = get(&server, "/plain.txt", &[("If-None-Match", &list)]);
    assert_not_modified(&resp, &etag, &list);
    let resp = get(
        &server,
        "/plain.txt",
        &[("If-None-Match", "\"nope\", \"x\"")],
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, PLAIN);
    // RFC 9110 §13.2.2: with If-None-Match present, If-Modified-Since is
    // not evaluated.
    let date = httpdate::fmt_http_date(mtime());
    let resp = get(
        &server,
        "/plain.txt",
        &[("If-None-Match", "\"nope\""), ("If-Modified-Since", &date)],
    );
    assert_eq!(resp.status, 200, "If-Modified-Since overrode If-None-Match");
}

fn if_none_match_star_is_304(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let etag = etag_of(&server, "/plain.txt");
    let resp = get(&server, "/plain.txt", &[("If-None-Match", "*")]);
    assert_not_modified(&resp, &etag, "*");
}

fn if_none_match_weak_tag_is_304(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let etag = etag_of(&server, "/plain.txt");
    // RFC 9110 §13.1.2: If-None-Match uses the weak comparison.
    let weak = format!("W/{etag}");
    let resp = get(&server, "/plain.txt", &[("If-None-Match", &weak)]);
    assert_not_modified(&resp, &etag, &weak);
}

fn if_modified_since_not_modified_is_304(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let etag = etag_of(&server, "/plain.txt");
    let at = httpdate::fmt_http_date(mtime());
    let later = httpdate::fmt_http_date(mtime() + Duration::from_secs(3600));
    for date in [&at, &later] {
        let resp = get(&server, "/plain.txt", &[("If-Modified-Since", date)]);
        assert_not_modified(&resp, &etag, date);
    }
}

fn if_modified_since_older_date_is_200(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let older = httpdate::fmt_http_date(mtime() - Duration::from_secs(1));
    let resp = get(&server, "/plain.txt", &[("If-Modified-Since", &older)]);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, PLAIN);
}

fn if_match_mismatch_is_412(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let etag = etag_of(&server, "/plain.txt");
    let resp = get(&server, "/plain.txt", &[("If-Match", "\"not-the-tag\"")]);
    assert_eq!(resp.status, 412, "{resp:?}");
    // A weak tag never passes If-Match's strong comparison (§13.1.1).
    let weak = format!("W/{etag}");
    let resp = get(&server, "/plain.txt", &[("If-Match", &weak)]);
    assert_eq!(resp.status, 412, "{weak}: {resp:?}");
    for ok in [etag.as_str(), "*"] {
        let resp = get(&server, "/plain.txt", &[("If-Match", ok)]);
        assert_eq!(resp.status, 200, "If-Match: {ok}");
    }
}

fn if_unmodified_since_before_mtime_is_412(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let older = httpdate::fmt_http_date(mtime() - Duration::from_secs(60));
    let resp = get(&server, "/plain.txt", &[("If-Unmodified-Since", &older)]);
    assert_eq!(resp.status, 412, "{resp:?}");
    let at = httpdate::fmt_http_date(mtime());
    let resp = get(&server, "/plain.txt", &[("If-Unmodified-Since", &at)]);
    assert_eq!(resp.status, 200);
}

fn if_range_matching_etag_gives_206(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in [("/mem.bin", &site.mem), ("/disk.bin", &site.disk)] {
        let etag = etag_of(&server, path);
        let resp = get(
            &server,
            path,
            &[("If-Range", &etag), ("Range", "bytes=100-199")],
        );
        assert_eq!(resp.status, 206, "{path}");
        assert_eq!(resp.body, &bytes[100..200], "{path}");
        // The Last-Modified date works as an If-Range validator too.
        let date = httpdate::fmt_http_date(mtime());
        let resp = get(
            &server,
            path,
            &[("If-Range", &date), ("Range", "bytes=100-199")],
        );
        assert_eq!(resp.status, 206, "{path} by date");
    }
}

fn if_range_other_etag_gives_full_200(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in [("/mem.bin", &site.mem), ("/disk.bin", &site.disk)] {
        let etag = etag_of(&server, path);
        // A weak tag fails If-Range's strong comparison (§13.1.5), and a
        // date matches only the exact Last-Modified.
        let weak = format!("W/{etag}");
        let other_date = httpdate::fmt_http_date(mtime() + Duration::from_secs(1));
        for validator in ["\"stale\"", weak.as_str(), other_date.as_str()] {
            let resp = get(
                &server,
                path,
                &[("If-Range", validator), ("Range", "bytes=100-199")],
            );
            assert_eq!(resp.status, 200, "{path} If-Range: {validator}");
            assert_eq!(resp.header("content-range"), None, "{path}");
            assert!(sha(&resp.body) == sha(bytes), "{path}: not the whole file");
        }
    }
}

// ------------------------------------------------------------------ ranges

/// The two send paths: memory (≤ small-file-max) and sendfile.
fn range_files(site: &Site) -> [(&'static str, &Vec<u8>); 2] {
    [("/mem.bin", &site.mem), ("/disk.bin", &site.disk)]
}

fn single_range_is_206_with_exact_bytes(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in range_files(&site) {
        let len = bytes.len() as u64;
        let resp = get(&server, path, &[("Range", "bytes=0-499")]);
        assert_eq!(resp.status, 206, "{path}");
        assert_eq!(
            resp.header("content-range"),
            Some(format!("bytes 0-499/{len}").as_str())
        );
        assert_eq!(resp.content_length(), Some(500));
        assert_eq!(resp.body, &bytes[..500], "{path}");
        assert_eq!(
            resp.header("content-type"),
            Some("application/octet-stream")
        );
        // A middle range, and a last-pos past the end clamps to it.
        let resp = get(&server, path, &[("Range", "bytes=1234-5677")]);
        assert_eq!(content_range(&resp), (1234, 5677, len));
        assert_eq!(resp.body, &bytes[1234..5678], "{path}");
        let tail = format!("bytes={}-{}", len - 10, len + 1000);
        let resp = get(&server, path, &[("Range", &tail)]);
        assert_eq!(content_range(&resp), (len - 10, len - 1, len));
        assert_eq!(resp.body, &bytes[bytes.len() - 10..], "{path}");
    }
}

fn open_range_runs_to_the_end(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in range_files(&site) {
        let len = bytes.len() as u64;
        let resp = get(&server, path, &[("Range", "bytes=500-")]);
        assert_eq!(resp.status, 206, "{path}");
        assert_eq!(content_range(&resp), (500, len - 1, len));
        assert_eq!(resp.content_length(), Some(len - 500));
        assert!(sha(&resp.body) == sha(&bytes[500..]), "{path}");
    }
}

fn suffix_range_is_the_last_bytes(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in range_files(&site) {
        let len = bytes.len() as u64;
        let resp = get(&server, path, &[("Range", "bytes=-500")]);
        assert_eq!(resp.status, 206, "{path}");
        assert_eq!(content_range(&resp), (len - 500, len - 1, len));
        assert_eq!(resp.body, &bytes[bytes.len() - 500..], "{path}");
        // A suffix longer than the file is the whole file (§14.1.1).
        let resp = get(&server, path, &[("Range", "bytes=-99999999")]);
        assert_eq!(resp.status, 206, "{path}");
        assert_eq!(content_range(&resp), (0, len - 1, len));
    }
}

fn multi_range_is_multipart_byteranges(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in range_files(&site) {
        let len = bytes.len() as u64;
        let resp = get(
            &server,
            path,
            &[("Range", "bytes=0-99, 5000-5099,200-299,-50")],
        );
        assert_eq!(resp.status, 206, "{path}");
        assert_eq!(resp.header("content-range"), None, "{path}");
        assert_eq!(resp.content_length(), Some(resp.body.len() as u64));
        let parts = multipart_parts(&resp);
        let want = [(0, 99), (5000, 5099), (200, 299), (len - 50, len - 1)];
        assert_eq!(parts.len(), want.len(), "{path}: {parts:?}");
        for (part, (first, last)) in parts.iter().zip(want) {
            assert_eq!(part.range, (first, last, len), "{path}");
            assert_eq!(
                part.content_type.as_deref(),
                Some("application/octet-stream"),
                "{path}"
            );
            assert_eq!(
                part.body,
                &bytes[first as usize..=last as usize],
                "{path} {first}-{last}"
            );
        }
    }
}

fn unsatisfiable_range_is_416_with_length(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in range_files(&site) {
        let len = bytes.len();
        for spec in [
            format!("bytes={len}-"),
            format!("bytes={}-{}", len + 5, len + 10),
            "bytes=-0".to_owned(),
        ] {
            let resp = get(&server, path, &[("Range", &spec)]);
            assert_eq!(resp.status, 416, "{path} {spec}: {resp:?}");
            assert_eq!(
                resp.header("content-range"),
                Some(format!("bytes */{len}").as_str()),
                "{path} {spec}"
            );
        }
    }
}

fn invalid_range_syntax_is_ignored(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, bytes) in range_files(&site) {
        for spec in [
            "bytes=abc",
            "bytes=5-1",
            "bytes=",
            "bytes=1-2-3",
            "items=0-10",
            "bytes 0-10",
            "bytes=0x10-20",
            "bytes=--5",
        ] {
            let resp = get(&server, path, &[("Range", spec)]);
            assert_eq!(resp.status, 200, "{path} {spec:?}");
            assert_eq!(resp.header("content-range"), None, "{path} {spec:?}");
            assert!(sha(&resp.body) == sha(bytes), "{path} {spec:?}");
        }
    }
}

fn too_many_or_overlapping_ranges_are_ignored(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let seventeen = (0..17)
        .map(|i| format!("{}-{}", i * 10, i * 10 + 4))
        .collect::<Vec<_>>()
        .join(",");
    let sixteen = (0..16)
        .map(|i| format!("{}-{}", i * 10, i * 10 + 4))
        .collect::<Vec<_>>()
        .join(",");
    for (path, bytes) in range_files(&site) {
        for spec in [
            format!("bytes={seventeen}"),
            "bytes=0-100,50-150".to_owned(),
            "bytes=0-10,10-20".to_owned(),
            "bytes=-100,0-".to_owned(),
        ] {
            let resp = get(&server, path, &[("Range", &spec)]);
            assert_eq!(resp.status, 200, "{path} {spec}");
            assert!(sha(&resp.body) == sha(bytes), "{path} {spec}");
        }
        // Sixteen disjoint ranges are still served.
        let resp = get(&server, path, &[("Range", &format!("bytes={sixteen}"))]);
        assert_eq!(resp.status, 206, "{path}: 16 ranges");
        assert_eq!(multipart_parts(&resp).len(), 16);
    }
}

fn head_with_range_has_get_headers_and_no_body(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for (path, _) in range_files(&site) {
        for spec in ["bytes=0-99", "bytes=-10"] {
            let get = fetch(&server, "GET", path, &[("Range", spec)]);
            let head = fetch(&server, "HEAD", path, &[("Range", spec)]);
            assert_eq!(head.status, get.status, "HEAD {path} {spec}: {head:?}");
            assert_eq!(
                without_date(&head),
                without_date(&get),
                "HEAD {path} {spec}"
            );
        }
    }
}

// ----------------------------------------------------------- precompressed

fn accept_encoding_br_serves_br_variant(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let resp = get(&server, "/a.txt", &[("Accept-Encoding", "br")]);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-encoding"), Some("br"));
    assert_eq!(resp.body, A_BR);
    assert_eq!(resp.content_length(), Some(A_BR.len() as u64));
    // The type is the identity file's, not the sibling's.
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // Equal weights: brotli is preferred.
    let resp = get(
        &server,
        "/a.txt",
        &[("Accept-Encoding", "gzip, deflate, br, zstd")],
    );
    assert_eq!(resp.header("content-encoding"), Some("br"));
    assert_eq!(resp.body, A_BR);
    let resp = get(&server, "/a.txt", &[("Accept-Encoding", "zstd")]);
    assert_eq!(resp.body, A_ZST);
}

fn q_values_pick_gzip_over_refused_br(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let resp = get(
        &server,
        "/a.txt",
        &[("Accept-Encoding", "gzip;q=0.5, br;q=0")],
    );
    assert_eq!(resp.header("content-encoding"), Some("gzip"), "{resp:?}");
    assert_eq!(resp.body, A_GZ);
}

fn star_q0_or_no_header_is_identity(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    for fields in [vec![("Accept-Encoding", "*;q=0")], vec![]] {
        let resp = get(&server, "/a.txt", &fields);
        assert_eq!(resp.status, 200, "{fields:?}");
        assert_eq!(resp.header("content-encoding"), None, "{fields:?}");
        assert_eq!(resp.body, A_TXT, "{fields:?}");
    }
    // Only unknown codings acceptable: identity as well.
    let resp = get(
        &server,
        "/a.txt",
        &[("Accept-Encoding", "deflate, compress")],
    );
    assert_eq!(resp.body, A_TXT);
}

fn vary_on_every_response_of_a_file_with_variants(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let identity_tag = etag_of(&server, "/a.txt");
    // (method, fields, expected status)
    let cases: Vec<(&str, Fields, u16)> = vec![
        ("GET", vec![], 200),
        ("GET", vec![("Accept-Encoding", "br")], 200),
        ("GET", vec![("Accept-Encoding", "*;q=0")], 200),
        ("HEAD", vec![], 200),
        ("HEAD", vec![("Accept-Encoding", "gzip")], 200),
        ("GET", vec![("If-None-Match", &identity_tag)], 304),
        ("GET", vec![("Range", "bytes=0-3")], 206),
        (
            "GET",
            vec![("Range", "bytes=0-3"), ("Accept-Encoding", "gzip")],
            206,
        ),
        ("GET", vec![("Range", "bytes=9999-")], 416),
    ];
    for (method, fields, status) in cases {
        let resp = fetch(&server, method, "/a.txt", &fields);
        assert_eq!(resp.status, status, "{method} {fields:?}: {resp:?}");
        assert_eq!(
            resp.header_all("vary"),
            ["Accept-Encoding"],
            "{method} {fields:?}: {resp:?}"
        );
    }
}

fn no_vary_without_variants(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let etag = etag_of(&server, "/plain.txt");
    for fields in [
        vec![],
        vec![("Accept-Encoding", "br, gzip")],
        vec![("If-None-Match", etag.as_str())],
        vec![("Range", "bytes=0-3")],
    ] {
        let resp = get(&server, "/plain.txt", &fields);
        assert!(resp.header("vary").is_none(), "{fields:?}: {resp:?}");
        assert!(resp.header("content-encoding").is_none(), "{fields:?}");
    }
}

fn range_on_encoded_variant_addresses_encoded_bytes(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let resp = get(
        &server,
        "/a.txt",
        &[("Accept-Encoding", "br"), ("Range", "bytes=3-9")],
    );
    assert_eq!(resp.status, 206, "{resp:?}");
    assert_eq!(resp.header("content-encoding"), Some("br"));
    assert_eq!(content_range(&resp), (3, 9, A_BR.len() as u64));
    assert_eq!(resp.body, &A_BR[3..10]);
    // Past the encoded length (but inside the identity length): 416.
    let past = format!("bytes={}-", A_BR.len());
    assert!(A_BR.len() < A_TXT.len());
    let resp = get(
        &server,
        "/a.txt",
        &[("Accept-Encoding", "br"), ("Range", &past)],
    );
    assert_eq!(resp.status, 416, "{resp:?}");
    assert_eq!(
        resp.header("content-range"),
        Some(format!("bytes */{}", A_BR.len()).as_str())
    );
}

// ------------------------------------------------------------- directories

fn directory_without_slash_redirects_keeping_query(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let resp = get(&server, "/dir", &[]);
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/dir/"));
    let resp = get(&server, "/dir?x=1&y=%20z", &[]);
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/dir/?x=1&y=%20z"));
    let resp = get(&server, "/list/sub?q", &[]);
    assert_eq!(resp.header("location"), Some("/list/sub/?q"));
}

fn directory_with_slash_serves_index_html(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let resp = get(&server, "/dir/", &[]);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"<title>dir index</title>\n");
    assert_eq!(
        resp.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(resp.header("etag").is_some());
    // No index and no --autoindex: nothing to show.
    assert_eq!(get(&server, "/list/", &[]).status, 404);
}

fn index_flag_names_the_index_file(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &["--index", "home.htm"]);
    let resp = get(&server, "/dir2/", &[]);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"<title>home</title>\n");
    // index.html is no longer an index name.
    assert_eq!(get(&server, "/dir/", &[]).status, 404);
    // Repeated: tried in order.
    let server = serve(
        driver,
        &site.root,
        &["--index", "home.htm", "--index", "index.html"],
    );
    assert_eq!(
        get(&server, "/dir/", &[]).body,
        b"<title>dir index</title>\n"
    );
    assert_eq!(get(&server, "/dir2/", &[]).body, b"<title>home</title>\n");
}

fn autoindex_lists_escaped_names_without_dotfiles(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &["--autoindex"]);
    let resp = get(&server, "/list/", &[]);
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(
        resp.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let html = resp.body_text();
    assert!(html.contains("&lt;b&gt;.txt"), "{html}");
    assert!(!html.contains("<b>"), "unescaped name: {html}");
    assert!(html.contains("href=\"%3Cb%3E.txt\""), "{html}");
    assert!(html.contains("sub/"), "{html}");
    assert!(!html.contains(".hidden"), "dotfile listed: {html}");
    // A directory with an index still serves the index.
    assert_eq!(
        get(&server, "/dir/", &[]).body,
        b"<title>dir index</title>\n"
    );
}

/// The HTML listing sorts by name (default), size or date through its
/// column links' query, either way; the JSON one (`--autoindex-format
/// json`) has nginx's fields and parses.
fn listings_sort_and_speak_json(driver: &str) {
    let site = site();
    let t0 = mtime();
    for (name, len, age) in [("a.txt", 300, 30), ("b.txt", 100, 10), ("c.txt", 200, 20)] {
        site.write(&format!("sorted/{name}"), &vec![b'x'; len]);
        set_mtime(
            &site.root.join("sorted").join(name),
            t0 - Duration::from_secs(age),
        );
    }
    site.write("sorted/d/x.txt", b"x\n");
    let order = |html: &str| -> Vec<char> {
        ["a.txt", "b.txt", "c.txt"]
            .iter()
            .map(|n| {
                (
                    html.find(&format!(">{n}<")).expect(n),
                    n.chars().next().unwrap(),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_values()
            .collect()
    };
    let server = serve(driver, &site.root, &["--autoindex"]);
    for (query, want) in [
        ("", ['a', 'b', 'c']),
        ("?sort=name&order=desc", ['c', 'b', 'a']),
        ("?sort=size", ['b', 'c', 'a']),
        ("?sort=size&order=desc", ['a', 'c', 'b']),
        ("?sort=mtime", ['a', 'c', 'b']),
        ("?sort=mtime&order=desc", ['b', 'c', 'a']),
        ("?sort=<script>", ['a', 'b', 'c']),
    ] {
        let resp = get(&server, &format!("/sorted/{query}"), &[]);
        assert_eq!(resp.status, 200, "{query}");
        let html = resp.body_text();
        assert_eq!(order(&html), want, "{query}: {html}");
        assert!(!html.contains("<script>"), "{query}");
        assert!(html.contains(">300<") && html.contains(">d/<"), "{html}");
    }
    let html = get(&server, "/sorted/?sort=size", &[]).body_text();
    assert!(
        html.contains("href=\"?sort=size&amp;order=desc\""),
        "{html}"
    );

    let server = serve(
        driver,
        &site.root,
        &["--autoindex", "--autoindex-format", "json"],
    );
    let resp = get(&server, "/sorted/?sort=size", &[]);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let list: Vec<serde_json::Value> = serde_json::from_slice(&resp.body).expect("JSON");
    let names: Vec<&str> = list.iter().map(|e| e["name"].as_str().unwrap()).collect();
    // Sizes ascending, the directory (no size) first.
    assert_eq!(names, ["d", "b.txt", "c.txt", "a.txt"]);
    assert_eq!(list[0]["type"], "directory");
    assert!(list[0].get("size").is_none());
    assert_eq!(list[3]["type"], "file");
    assert_eq!(list[3]["size"], 300);
    let mtime = list[3]["mtime"].as_str().expect("mtime");
    assert_eq!(mtime, httpdate::fmt_http_date(t0 - Duration::from_secs(30)));
    // Escaped as JSON, never as markup.
    let resp = get(&server, "/list/", &[]);
    let list: Vec<serde_json::Value> = serde_json::from_slice(&resp.body).expect("JSON");
    assert!(list.iter().any(|e| e["name"] == "<b>.txt"), "{list:?}");
}

/// A directory of more than 10,000 entries lists the first 10,000 it
/// gives, says so, and costs a bounded read.
fn a_long_listing_is_cut(driver: &str) {
    let site = site();
    let many = site.root.join("many");
    fs::create_dir(&many).expect("mkdir");
    for i in 0..10_005 {
        fs::write(many.join(format!("f{i:05}")), b"").expect("file");
    }
    let server = serve(
        driver,
        &site.root,
        &["--autoindex", "--autoindex-format", "json"],
    );
    let resp = get(&server, "/many/", &[]);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("x-listing-truncated"), Some("10000"));
    let list: Vec<serde_json::Value> = serde_json::from_slice(&resp.body).expect("JSON");
    assert_eq!(list.len(), 10_000);
    let server = serve(driver, &site.root, &["--autoindex"]);
    let html = get(&server, "/many/", &[]).body_text();
    assert!(html.contains("Only the first 10000 entries"), "cut note");
}

// ---------------------------------------------------------------- policies

fn dotfiles_denied_by_default_allowed_by_flag(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    assert_eq!(get(&server, "/.well-known/x", &[]).status, 404);
    let server = serve(driver, &site.root, &["--dotfiles", "allow"]);
    let resp = get(&server, "/.well-known/x", &[]);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"well-known\n");
}

fn symlinks_never_refuses_in_root_link(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    assert_eq!(get(&server, "/link.txt", &[]).body, PLAIN, "inside: served");
    let server = serve(driver, &site.root, &["--symlinks", "never"]);
    let resp = get(&server, "/link.txt", &[]);
    assert!(matches!(resp.status, 403 | 404), "{resp:?}");
    assert_eq!(get(&server, "/plain.txt", &[]).body, PLAIN);
}

fn symlinks_follow_serves_outside_target_inside_refuses(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let resp = get(&server, "/out.txt", &[]);
    assert!(matches!(resp.status, 403 | 404), "inside: {resp:?}");
    assert!(!resp.body_text().contains("OUTSIDE-TARGET"));
    let server = serve(driver, &site.root, &["--symlinks", "inside"]);
    assert!(matches!(get(&server, "/out.txt", &[]).status, 403 | 404));
    let server = serve(driver, &site.root, &["--symlinks", "follow"]);
    let resp = get(&server, "/out.txt", &[]);
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.body, b"OUTSIDE-TARGET\n");
    // The request path itself still cannot climb out.
    let resp = get(&server, "/../outside/target.txt", &[]);
    assert!(matches!(resp.status, 400 | 404), "{resp:?}");
}

fn cache_control_flag_is_sent(driver: &str) {
    let site = site();
    let server = serve(
        driver,
        &site.root,
        &["--cache-control", "public, max-age=600"],
    );
    for path in ["/plain.txt", "/disk.bin", "/a.txt"] {
        let resp = get(&server, path, &[]);
        assert_eq!(
            resp.header_all("cache-control"),
            ["public, max-age=600"],
            "{path}"
        );
        let etag = resp.header("etag").expect("ETag").to_owned();
        let resp = get(&server, path, &[("If-None-Match", &etag)]);
        assert_eq!(resp.status, 304);
        assert_eq!(
            resp.header("cache-control"),
            Some("public, max-age=600"),
            "304 {path}"
        );
    }
    // Without the flag: none.
    let server = serve(driver, &site.root, &[]);
    assert_eq!(
        get(&server, "/plain.txt", &[]).header("cache-control"),
        None
    );
}

fn header_rule_applies_to_matching_paths_only(driver: &str) {
    let site = site();
    let config = site.outside("servery.toml");
    fs::write(
        &config,
        "[[headers]]\n\
         match = \"/assets/**\"\n\
         set = { \"Cache-Control\" = \"public, max-age=31536000, immutable\", \"X-Asset\" = \"1\" }\n",
    )
    .expect("config file");
    let config = config.to_str().expect("UTF-8 path");
    let server = serve(
        driver,
        &site.root,
        &["--config", config, "--cache-control", "no-cache"],
    );
    for path in ["/assets/app.js", "/assets/css/deep.css"] {
        let resp = get(&server, path, &[]);
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(
            resp.header_all("cache-control"),
            ["public, max-age=31536000, immutable"],
            "{path}: the rule replaces --cache-control"
        );
        assert_eq!(resp.header("x-asset"), Some("1"), "{path}");
    }
    for path in ["/other/app.js", "/assetsx.js", "/plain.txt"] {
        let resp = get(&server, path, &[]);
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.header_all("cache-control"), ["no-cache"], "{path}");
        assert_eq!(resp.header("x-asset"), None, "{path}");
    }
}

// ------------------------------------------------- concurrency and caching

fn concurrent_random_ranges_of_a_50mib_file_are_exact(driver: &str) {
    const LEN: usize = 50 * 1024 * 1024;
    const CLIENTS: usize = 100;
    const MAX_SPAN: u64 = 1024 * 1024;
    let site = site();
    let big = Arc::new(pseudo_random(LEN, 50));
    site.write("big50.bin", &big);
    // One worker: every request shares its one cached fd of the file.
    let server = serve(driver, &site.root, &["--workers", "1"]);
    let addr = server.addr();
    let start = Arc::new(Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let big = big.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0xC0FFEE ^ ((i as u64 + 1) * 0x1_0000_0001));
                let len = LEN as u64;
                // Every fourth client asks two ranges, pipelined, on one
                // connection: same fd, back to back.
                let count = if i % 4 == 0 { 2 } else { 1 };
                let mut specs = Vec::new();
                let mut raw = Vec::new();
                for n in 0..count {
                    let (spec, first, last) = match (i + n) % 10 {
                        1 => {
                            let k = 1 + rng.below(MAX_SPAN);
                            (format!("-{k}"), len - k, len - 1)
                        }
                        2 => {
                            let first = len - 1 - rng.below(MAX_SPAN);
                            (format!("{first}-"), first, len - 1)
                        }
                        _ => {
                            let first = rng.below(len);
                            let last = (first + rng.below(MAX_SPAN)).min(len - 1);
                            (format!("{first}-{last}"), first, last)
                        }
                    };
                    raw.extend(request(
                        "GET",
                        "/big50.bin",
                        &[("Range", &format!("bytes={spec}"))],
                        false,
                    ));
                    specs.push((spec, first, last));
                }
                start.wait();
                let mut s = common::connect(addr);
                s.write_all(&raw).expect("write ranges");
                for (spec, first, last) in specs {
                    let resp = read_response(&mut s);
                    assert_eq!(resp.status, 206, "client {i} {spec}");
                    assert_eq!(
                        content_range(&resp),
                        (first, last, len),
                        "client {i} {spec}"
                    );
                    let want = &big[first as usize..=last as usize];
                    assert!(
                        sha(&resp.body) == sha(want),
                        "client {i} {spec}: wrong bytes ({} received)",
                        resp.body.len()
                    );
                }
            })
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        c.join()
            .unwrap_or_else(|_| panic!("range client {i} failed (see its panic above)"));
    }
    assert_eq!(get(&server, "/plain.txt", &[]).status, 200);
}

/// Extra request fields, name and value.
type Fields<'a> = Vec<(&'a str, &'a str)>;

/// A file replaced under the server: its name and both versions.
struct Swap {
    name: &'static str,
    old: Vec<u8>,
    new: Vec<u8>,
}

/// What a body is, against an old and a new version of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    Old,
    New,
}

fn atomic_replace_is_seen_within_ttl_and_never_torn(driver: &str) {
    let site = site();
    let ttl = TTL_S.to_string();
    // Memory-served and sendfile-served, each replaced by another length.
    let files = Arc::new(vec![
        Swap {
            name: "small.txt",
            old: vec![b'o'; 1000],
            new: vec![b'n'; 2000],
        },
        Swap {
            name: "large.bin",
            old: pseudo_random(300_000, 7),
            new: pseudo_random(250_000, 8),
        },
    ]);
    for f in files.iter() {
        site.write(f.name, &f.old);
    }
    let server = serve(driver, &site.root, &["--file-cache-ttl", &ttl]);
    let addr = server.addr();
    let replaced = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let client = {
        let files = files.clone();
        let replaced = replaced.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(15);
            let mut s = common::connect(addr);
            // When each file was first seen new.
            let mut first_new: Vec<Option<Instant>> = vec![None; files.len()];
            let mut requests = 0;
            loop {
                for (i, Swap { name, old, new }) in files.iter().enumerate() {
                    s.write_all(&request("GET", &format!("/{name}"), &[], false))
                        .expect("write");
                    let resp = read_response(&mut s);
                    requests += 1;
                    assert_eq!(resp.status, 200, "{name}");
                    assert_eq!(resp.content_length(), Some(resp.body.len() as u64));
                    let version = if resp.body == *old {
                        Version::Old
                    } else if resp.body == *new {
                        Version::New
                    } else {
                        panic!(
                            "{name}: torn body of {} bytes (old {}, new {})",
                            resp.body.len(),
                            old.len(),
                            new.len()
                        );
                    };
                    match (version, first_new[i]) {
                        (Version::New, None) => first_new[i] = Some(Instant::now()),
                        (Version::Old, Some(_)) => panic!("{name}: old again after new"),
                        _ => {}
                    }
                }
                let done = first_new
                    .iter()
                    .all(|t| t.is_some_and(|t| t.elapsed() > Duration::from_millis(200)));
                if done {
                    let at = replaced.lock().expect("lock").expect("replaced before new");
                    return (first_new, at, requests);
                }
                assert!(Instant::now() < deadline, "new content never served");
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    for Swap { name, new, .. } in files.iter() {
        let tmp = site.root.join(format!(".{name}.tmp"));
        fs::write(&tmp, new).expect("write temp");
        fs::rename(&tmp, site.root.join(name)).expect("rename");
    }
    *replaced.lock().expect("lock") = Some(Instant::now());
    let (first_new, at, requests) = client.join().expect("client loop failed");
    assert!(
        requests > 20,
        "only {requests} requests overlapped the swap"
    );
    let bound = Duration::from_secs_f64(TTL_S) + TTL_MARGIN;
    for (Swap { name, .. }, t) in files.iter().zip(first_new) {
        let lag = t.expect("seen new").saturating_duration_since(at);
        assert!(
            lag <= bound,
            "{name}: new content after {lag:?} (> {bound:?})"
        );
    }
}

/// Check one connection's bytes against a file that was only ever truncated
/// in place (so each byte served is the original's at its offset, or a zero):
/// each body holds at most its Content-Length, and a short body ends the
/// stream: nothing (a later response's bytes, stale data) follows it.
fn check_truncation_stream(bytes: &[u8], original: &[u8], what: &str) {
    let mut rest = bytes;
    while !rest.is_empty() {
        let end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| {
                panic!("{what}: truncated head {:?}", String::from_utf8_lossy(rest))
            })
            + 4;
        let head = std::str::from_utf8(&rest[..end]).expect("UTF-8 head");
        rest = &rest[end..];
        let status: u16 = head[9..12].parse().expect("status");
        let field = |name: &str| {
            head.split("\r\n").find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        let cl: usize = field("content-length")
            .expect("Content-Length")
            .parse()
            .expect("numeric Content-Length");
        let got = cl.min(rest.len());
        let body = &rest[..got];
        match status {
            200 | 206 => {
                let offset = match field("content-range") {
                    Some(v) => parse_content_range(&v).0 as usize,
                    None => 0,
                };
                assert!(offset + got <= original.len(), "{what}: body past the file");
                // Zero-copy caveat: sendfile queues page-cache pages, not a
                // copy, and truncating a (large) folio still queued zeroes
                // its tail in place; so a byte on the wire is the file's or
                // a zero, never anything else.
                let want = &original[offset..offset + got];
                if let Some(at) = body.iter().zip(want).position(|(&a, &b)| a != b && a != 0) {
                    panic!(
                        "{what}: {status} (Content-Length {cl}) body of {got} bytes at offset \
                         {offset}: byte {} is neither the file's nor a truncation zero",
                        offset + at
                    );
                }
            }
            416 => {}
            other => panic!("{what}: unexpected status {other}: {head}"),
        }
        rest = &rest[got..];
        if got < cl {
            // Cut short: the server must have closed right there.
            assert!(rest.is_empty(), "{what}: bytes after a short body");
            return;
        }
    }
}

fn truncated_file_never_overruns_content_length(driver: &str) {
    let site = site();
    let big = pseudo_random(1024 * 1024, 9);
    let path = site.write("trunc.bin", &big);
    let ttl = "0.2";
    let server = serve(driver, &site.root, &["--file-cache-ttl", ttl]);
    assert!(sha(&get(&server, "/trunc.bin", &[]).body) == sha(&big));
    let addr = server.addr();
    let truncator = std::thread::spawn(move || {
        let f = fs::File::options()
            .write(true)
            .open(&path)
            .expect("open for truncate");
        for len in [900_000, 700_000, 550_000, 300_000, 100_000, 10, 0] {
            std::thread::sleep(Duration::from_millis(80));
            f.set_len(len).expect("truncate in place");
        }
    });
    let stop = Instant::now() + Duration::from_millis(900);
    let mut exchanges = 0;
    while Instant::now() < stop {
        let mut s = common::connect(addr);
        let mut raw = request("GET", "/trunc.bin", &[], false);
        raw.extend(request(
            "GET",
            "/trunc.bin",
            &[("Range", "bytes=500000-699999")],
            true,
        ));
        s.write_all(&raw).expect("write");
        let bytes = match read_until_close(&mut s, Duration::from_secs(4)) {
            Ok(b) => b,
            Err(b) => panic!(
                "connection neither finished nor closed after {} bytes",
                b.len()
            ),
        };
        check_truncation_stream(&bytes, &big, "trunc.bin");
        exchanges += 1;
    }
    truncator.join().expect("truncator");
    assert!(exchanges >= 3, "only {exchanges} exchanges");
    // The server is up and, after the TTL, serves the empty file.
    let deadline = Instant::now() + Duration::from_secs_f64(0.2) + TTL_MARGIN;
    loop {
        let resp = get(&server, "/trunc.bin", &[]);
        assert_eq!(resp.status, 200);
        if resp.content_length() == Some(0) {
            break;
        }
        assert!(Instant::now() < deadline, "still {resp:?} after the TTL");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn big_file_is_sent_byte_exact(driver: &str) {
    let site = site();
    let big = pseudo_random(5 * 1024 * 1024 + 17, 5);
    site.write("five.bin", &big);
    let server = serve(driver, &site.root, &["--small-file-max", "65536"]);
    let mut s = server.connect();
    for _ in 0..2 {
        s.write_all(&request("GET", "/five.bin", &[], false))
            .expect("write");
        let resp = read_response(&mut s);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.content_length(), Some(big.len() as u64));
        assert!(sha(&resp.body) == sha(&big), "five.bin differs");
    }
    // A range deep in the file, on the same connection.
    s.write_all(&request(
        "GET",
        "/five.bin",
        &[("Range", "bytes=4000000-5000000")],
        false,
    ))
    .expect("write");
    let resp = read_response(&mut s);
    assert_eq!(resp.status, 206);
    assert!(sha(&resp.body) == sha(&big[4_000_000..=5_000_000]));
}

fn slow_reader_does_not_block_the_worker(driver: &str) {
    const LEN: usize = 20 * 1024 * 1024;
    let site = site();
    let big = pseudo_random(LEN, 20);
    site.write("twenty.bin", &big);
    let server = serve(driver, &site.root, &["--workers", "1"]);
    let mut slow = server.connect();
    slow.write_all(&request("GET", "/twenty.bin", &[], true))
        .expect("write");
    let head = read_response_head_only(&mut slow);
    assert_eq!(head.content_length(), Some(LEN as u64));
    let mut body = Vec::with_capacity(LEN);
    let mut chunk = vec![0u8; 16 * 1024];
    for probe in 0..5 {
        // Read a little, slowly: the server's send buffer stays full.
        for _ in 0..4 {
            let n = slow.read(&mut chunk).expect("slow read");
            assert!(n > 0, "slow reader cut off");
            body.extend_from_slice(&chunk[..n]);
            std::thread::sleep(Duration::from_millis(25));
        }
        let t = Instant::now();
        let resp = get(&server, "/plain.txt", &[]);
        let took = t.elapsed();
        assert_eq!(resp.body, PLAIN, "probe {probe}");
        assert!(
            took < Duration::from_secs(1),
            "probe {probe}: small file took {took:?} behind a slow reader"
        );
    }
    assert!(
        body.len() < LEN / 2,
        "the slow reader was not mid-download ({} of {LEN} bytes)",
        body.len()
    );
    match read_until_close(&mut slow, Duration::from_secs(20)) {
        Ok(rest) => body.extend_from_slice(&rest),
        Err(rest) => panic!("slow download stalled at {} bytes", body.len() + rest.len()),
    }
    assert_eq!(body.len(), LEN);
    assert!(sha(&body) == sha(&big), "twenty.bin differs");
}

fn tiny_caches_still_serve_exact_bytes(driver: &str) {
    let site = site();
    // One entry (cleared on every new path) and a memory budget smaller
    // than mem.bin, so it is sent from its fd instead.
    let server = serve(
        driver,
        &site.root,
        &["--file-cache-entries", "1", "--memory-cache-bytes", "5000"],
    );
    for round in 0..3 {
        assert_eq!(get(&server, "/plain.txt", &[]).body, PLAIN, "{round}");
        let resp = get(&server, "/mem.bin", &[]);
        assert!(sha(&resp.body) == sha(&site.mem), "{round}: mem.bin");
        let resp = get(&server, "/mem.bin", &[("Range", "bytes=10-19")]);
        assert_eq!(resp.body, &site.mem[10..20], "{round}");
        let resp = get(&server, "/a.txt", &[("Accept-Encoding", "br")]);
        assert_eq!(resp.body, A_BR, "{round}");
        assert!(sha(&get(&server, "/disk.bin", &[]).body) == sha(&site.disk));
    }
}

// ------------------------------------------------------------- containment

fn traversal_attempts_never_leak_outside_root(driver: &str) {
    let site = site();
    let server = serve(driver, &site.root, &[]);
    let attacks: &[&[u8]] = &[
        b"/a/../../etc/passwd",
        b"/a/../../secret.txt",
        b"/../secret.txt",
        b"/../../../../../../etc/passwd",
        b"//../secret.txt",
        b"/./../secret.txt",
        b"/%2e%2e/secret.txt",
        b"/%2E%2E/secret.txt",
        b"/.%2e/secret.txt",
        b"/%2e./secret.txt",
        b"/a/%2e%2e/%2e%2e/secret.txt",
        b"/%2e%2e/%2e%2e/etc/passwd",
        b"/%2e%2e%2fsecret.txt",
        b"/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        b"/..%2fsecret.txt",
        b"/%252e%252e/secret.txt",
        b"/%252e%252e/%252e%252e/etc/passwd",
        b"/%252e%252e%252fsecret.txt",
        b"/%c0%ae%c0%ae/secret.txt",
        b"/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
        b"/..%c0%afsecret.txt",
        b"/%e0%80%ae%e0%80%ae/secret.txt",
        b"/secret.txt%00",
        b"/%00/../secret.txt",
        b"/plain.txt%00.html",
        b"/..%00/secret.txt",
        b"/..\\secret.txt",
        b"/..\\..\\etc\\passwd",
        b"/\\..\\secret.txt",
        b"/..%5csecret.txt",
        b"/..%5c..%5cetc%5cpasswd",
        b"/%2e%2e%5csecret.txt",
        b"/..%255csecret.txt",
        b"/..;/secret.txt",
        b"/out.txt/../../secret.txt",
        b"http://test/../secret.txt",
        b"http://test/%2e%2e/etc/passwd",
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
            "{shown}: leaked the secret: {text}"
        );
        assert!(!text.contains("root:x:0:0"), "{shown}: served /etc/passwd");
        assert!(
            text.starts_with("HTTP/1.1 400 ") || text.starts_with("HTTP/1.1 404 "),
            "{shown}: {text}"
        );
    }
    // The sentinel really is there to be leaked, and the server is up.
    let secret = fs::read_to_string(site.outside("secret.txt")).expect("secret");
    assert_eq!(secret, site.sentinel);
    assert_eq!(get(&server, "/plain.txt", &[]).body, PLAIN);
}

driver_tests! {
    etag_is_strong_and_changes_with_the_file,
    copies_of_a_file_share_its_etag,
    each_encoding_has_its_own_etag,
    last_modified_is_the_file_mtime,
    accept_ranges_is_bytes,
    if_none_match_exact_is_304_with_etag_and_no_body,
    if_none_match_list_is_304,
    if_none_match_star_is_304,
    if_none_match_weak_tag_is_304,
    if_modified_since_not_modified_is_304,
    if_modified_since_older_date_is_200,
    if_match_mismatch_is_412,
    if_unmodified_since_before_mtime_is_412,
    if_range_matching_etag_gives_206,
    if_range_other_etag_gives_full_200,
    single_range_is_206_with_exact_bytes,
    open_range_runs_to_the_end,
    suffix_range_is_the_last_bytes,
    multi_range_is_multipart_byteranges,
    unsatisfiable_range_is_416_with_length,
    invalid_range_syntax_is_ignored,
    too_many_or_overlapping_ranges_are_ignored,
    head_with_range_has_get_headers_and_no_body,
    accept_encoding_br_serves_br_variant,
    q_values_pick_gzip_over_refused_br,
    star_q0_or_no_header_is_identity,
    vary_on_every_response_of_a_file_with_variants,
    no_vary_without_variants,
    range_on_encoded_variant_addresses_encoded_bytes,
    directory_without_slash_redirects_keeping_query,
    directory_with_slash_serves_index_html,
    index_flag_names_the_index_file,
    autoindex_lists_escaped_names_without_dotfiles,
    listings_sort_and_speak_json,
    a_long_listing_is_cut,
    dotfiles_denied_by_default_allowed_by_flag,
    symlinks_never_refuses_in_root_link,
    symlinks_follow_serves_outside_target_inside_refuses,
    cache_control_flag_is_sent,
    header_rule_applies_to_matching_paths_only,
    concurrent_random_ranges_of_a_50mib_file_are_exact,
    atomic_replace_is_seen_within_ttl_and_never_torn,
    truncated_file_never_overruns_content_length,
    big_file_is_sent_byte_exact,
    tiny_caches_still_serve_exact_bytes,
    slow_reader_does_not_block_the_worker,
    traversal_attempts_never_leak_outside_root,
}
