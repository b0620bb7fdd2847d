//! On-the-fly compression (`src/static_files/compress`) end to end:
//! negotiation by q-values, `Vary` on every response of a compressible
//! file, an ETag per variant and 304s against it, ranges of a cached variant
//! or of identity, the small-file / type / size rules, files changed on
//! disk, the cache's byte budget in thread and process isolation, a flood of
//! large files against the compressor's bounds, and HTTP/2.
//!
//! Raw bytes over std `TcpStream`s to the real binary; the answers are
//! decoded here with the same crates (flate2, brotli, zstd) and compared
//! with the files. The cases that touch the connection (whole bodies,
//! ranges, HEAD) run under both drivers (`driver_tests!` at the bottom).
//!
//! One file past 600 lines on purpose: every case shares the fixtures, the
//! request helper and the decoders above, and most of its length is tables
//! of requests and the answers they must get.

#[macro_use]
mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use common::{metric, read_response, read_response_head_only, rss_bytes, Response, TestServer};

/// The size of `app.js`: at most `--compress-inline-max-bytes`, so the
/// request that first asks gets it compressed.
const JS_LEN: usize = 48 * 1024;
/// The size of `big.js`: above the inline maximum, so compressed in the
/// background.
const BIG_LEN: usize = 1024 * 1024;

/// Text that compresses like source code, different for each `seed`.
fn js(len: usize, seed: u64) -> Vec<u8> {
    let words = [
        "function", "return", "const", "let", "this.", "value", "index", "=>", "{", "}", "(", ")",
        ";", "=", "+", "null", "true", "false", "if", "else", "for",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(words[(state % words.len() as u64) as usize].as_bytes());
        if state & 0xf00 == 0 {
            out.extend_from_slice(format!("v{}", (state >> 20) % 500).as_bytes());
        }
        out.push(if state & 0x3f000 == 0 { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

/// A docroot: `app.js` (inline size), `big.js` (background size),
/// `tiny.txt` (540 bytes, below the minimum), `pic.png` (not a compressible type),
/// `data.json`.
fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("app.js"), js(JS_LEN, 1)).unwrap();
    fs::write(dir.path().join("big.js"), js(BIG_LEN, 2)).unwrap();
    fs::write(
        dir.path().join("tiny.txt"),
        b"below the minimum ".repeat(30),
    )
    .unwrap();
    fs::write(dir.path().join("pic.png"), js(8192, 3)).unwrap();
    fs::write(dir.path().join("data.json"), js(4096, 4)).unwrap();
    dir
}

fn serve(driver: &str, root: &Path, args: &[&str]) -> TestServer {
    TestServer::builder()
        .root(root)
        .driver(driver)
        .admin()
        .args(args)
        .start()
}

/// One request on its own connection (`Connection: close`).
fn fetch(server: &TestServer, method: &str, path: &str, fields: &[(&str, &str)]) -> Response {
    fetch_at(server.addr(), method, path, fields)
}

fn fetch_at(addr: SocketAddr, method: &str, path: &str, fields: &[(&str, &str)]) -> Response {
    let mut s = common::connect(addr);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (n, v) in fields {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write request");
    if method == "HEAD" {
        read_response_head_only(&mut s)
    } else {
        read_response(&mut s)
    }
}

fn get(server: &TestServer, path: &str, fields: &[(&str, &str)]) -> Response {
    fetch(server, "GET", path, fields)
}

/// `GET path` with `Accept-Encoding: ae`.
fn get_ae(server: &TestServer, path: &str, ae: &str) -> Response {
    get(server, path, &[("Accept-Encoding", ae)])
}

/// The body as sent, decoded by its `Content-Encoding`.
fn decoded(resp: &Response) -> Vec<u8> {
    decode(resp.header("content-encoding"), &resp.body)
}

fn decode(coding: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        None => out.extend_from_slice(body),
        Some("gzip") => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .expect("gunzip");
        }
        Some("br") => {
            brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut out)
                .expect("unbrotli");
        }
        Some("zstd") => out = zstd::stream::decode_all(body).expect("unzstd"),
        Some(other) => panic!("unexpected coding {other}"),
    }
    out
}

fn metrics_value(server: &TestServer, name: &str) -> u64 {
    metric(&server.metrics(), name).unwrap_or_else(|| panic!("no {name}")) as u64
}

fn negotiation_follows_q_values(driver: &str) {
    let site = site();
    let server = serve(driver, site.path(), &[]);
    let file = js(JS_LEN, 1);
    for (ae, want) in [
        ("gzip", Some("gzip")),
        ("br", Some("br")),
        ("zstd", Some("zstd")),
        ("gzip, deflate, br, zstd", Some("br")),
        ("gzip, zstd", Some("zstd")),
        ("br;q=0, gzip", Some("gzip")),
        ("gzip;q=0.5, zstd;q=0.8, br;q=0.1", Some("zstd")),
        ("x-gzip", Some("gzip")),
        ("*", Some("br")),
        ("br;q=0, *", Some("zstd")),
        ("*;q=0", None),
        ("br;q=0, zstd;q=0, gzip;q=0", None),
        ("identity", None),
        ("gzip;q=0.5, identity", None),
        ("deflate, compress", None),
        ("", None),
    ] {
        let resp = get_ae(&server, "/app.js", ae);
        assert_eq!(resp.status, 200, "{ae:?}: {resp:?}");
        assert_eq!(resp.header("content-encoding"), want, "{ae:?}");
        assert_eq!(decoded(&resp), file, "{ae:?}: the body decodes to the file");
        assert_eq!(resp.content_length(), Some(resp.body.len() as u64));
        if want.is_some() {
            assert!(
                resp.body.len() < file.len() / 2,
                "{ae:?}: {}",
                resp.body.len()
            );
        }
    }
    let resp = get(&server, "/app.js", &[]);
    assert_eq!(resp.header("content-encoding"), None, "no header: identity");
    assert_eq!(resp.body, file);
}

/// A request's header fields.
type Fields<'a> = Vec<(&'a str, &'a str)>;

fn vary_on_every_response_of_a_compressible_file(driver: &str) {
    let site = site();
    let server = serve(driver, site.path(), &[]);
    let identity_tag = get(&server, "/app.js", &[])
        .header("etag")
        .unwrap()
        .to_owned();
    let gzip_tag = get_ae(&server, "/app.js", "gzip")
        .header("etag")
        .unwrap()
        .to_owned();
    let cases: Vec<(&str, Fields, u16)> = vec![
        ("GET", vec![], 200),
        ("GET", vec![("Accept-Encoding", "gzip")], 200),
        ("GET", vec![("Accept-Encoding", "*;q=0")], 200),
        ("HEAD", vec![("Accept-Encoding", "br")], 200),
        ("HEAD", vec![], 200),
        ("GET", vec![("If-None-Match", &identity_tag)], 304),
        (
            "GET",
            vec![("If-None-Match", &gzip_tag), ("Accept-Encoding", "gzip")],
            304,
        ),
        ("GET", vec![("Range", "bytes=0-9")], 206),
        (
            "GET",
            vec![("Range", "bytes=0-9"), ("Accept-Encoding", "gzip")],
            206,
        ),
        (
            "GET",
            vec![("Range", "bytes=999999-"), ("Accept-Encoding", "zstd")],
            416,
        ),
    ];
    for (method, fields, status) in cases {
        let resp = fetch(&server, method, "/app.js", &fields);
        assert_eq!(resp.status, status, "{method} {fields:?}: {resp:?}");
        assert_eq!(
            resp.header_all("vary"),
            ["Accept-Encoding"],
            "{method} {fields:?}"
        );
    }
}

fn each_variant_has_its_own_etag_and_304s_against_it(driver: &str) {
    let site = site();
    let server = serve(driver, site.path(), &[]);
    let tag = |ae: &str| {
        get_ae(&server, "/app.js", ae)
            .header("etag")
            .unwrap()
            .to_owned()
    };
    let identity = tag("identity");
    let (br, zstd, gzip) = (tag("br"), tag("zstd"), tag("gzip"));
    let all = [&identity, &br, &zstd, &gzip];
    for (i, a) in all.iter().enumerate() {
        assert!(a.starts_with('"') && !a.starts_with("W/"), "strong: {a}");
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // The variant's tag is the identity's with its coding and level.
    let base = identity.trim_end_matches('"');
    assert_eq!(gzip, format!("{base}+gzip.6\""));
    assert_eq!(br, format!("{base}+br.6\""));
    assert_eq!(zstd, format!("{base}+zstd.3\""));

    let with = |ae: &str, inm: &str| {
        get(
            &server,
            "/app.js",
            &[("Accept-Encoding", ae), ("If-None-Match", inm)],
        )
    };
    let resp = with("gzip", &gzip);
    assert_eq!(resp.status, 304, "{resp:?}");
    assert_eq!(resp.header("etag"), Some(gzip.as_str()));
    assert_eq!(resp.header("content-encoding"), Some("gzip"));
    assert!(resp.body.is_empty());
    // The variant's tag does not validate identity, nor another coding.
    let resp = with("identity", &gzip);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("etag"), Some(identity.as_str()));
    let resp = with("br", &gzip);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-encoding"), Some("br"));
    // Nor does the identity's validate a variant.
    let resp = with("gzip", &identity);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-encoding"), Some("gzip"));
    // A list naming it is a 304 too (RFC 9110 §13.1.2).
    let resp = with("zstd", &format!("\"nope\", {zstd}"));
    assert_eq!(resp.status, 304);
    // If-Match names the selected representation's tag.
    let resp = get(
        &server,
        "/app.js",
        &[("Accept-Encoding", "gzip"), ("If-Match", &identity)],
    );
    assert_eq!(resp.status, 412, "{resp:?}");
}

fn a_304_against_a_variant_needs_no_compression(driver: &str) {
    let site = site();
    let gzip_tag = {
        let first = serve(driver, site.path(), &[]);
        get_ae(&first, "/app.js", "gzip")
            .header("etag")
            .unwrap()
            .to_owned()
    };
    // A new server, its cache empty: the tag is known without the bytes.
    let server = serve(driver, site.path(), &[]);
    let resp = get(
        &server,
        "/app.js",
        &[("Accept-Encoding", "gzip"), ("If-None-Match", &gzip_tag)],
    );
    assert_eq!(resp.status, 304, "{resp:?}");
    assert_eq!(resp.header("etag"), Some(gzip_tag.as_str()));
    assert_eq!(metrics_value(&server, "servery_compress_inline_total"), 0);
    assert_eq!(metrics_value(&server, "servery_compress_cache_entries"), 0);
}

fn head_has_the_get_fields_and_no_body(driver: &str) {
    let site = site();
    let server = serve(driver, site.path(), &[]);
    // HEAD first: it is answered as the GET would be, cold cache and all.
    let head = fetch(&server, "HEAD", "/app.js", &[("Accept-Encoding", "br")]);
    let get = get_ae(&server, "/app.js", "br");
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-encoding"), Some("br"));
    assert_eq!(head.content_length(), Some(get.body.len() as u64));
    assert_eq!(head.header("etag"), get.header("etag"));
    assert_eq!(decoded(&get), js(JS_LEN, 1));
}

fn ranges_of_a_cached_variant_have_its_length_and_etag(driver: &str) {
    let site = site();
    let server = serve(driver, site.path(), &[]);
    let whole = get_ae(&server, "/app.js", "gzip");
    let gz = whole.body.clone();
    let tag = whole.header("etag").unwrap().to_owned();
    let resp = get(
        &server,
        "/app.js",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=10-99")],
    );
    assert_eq!(resp.status, 206, "{resp:?}");
    assert_eq!(resp.header("content-encoding"), Some("gzip"));
    assert_eq!(resp.header("etag"), Some(tag.as_str()));
    assert_eq!(
        resp.header("content-range"),
        Some(format!("bytes 10-99/{}", gz.len()).as_str())
    );
    assert_eq!(resp.body, &gz[10..100]);
    // Two ranges: multipart of the variant's bytes.
    let resp = get(
        &server,
        "/app.js",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=0-4,-5")],
    );
    assert_eq!(resp.status, 206);
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    assert!(text.contains(&format!("bytes 0-4/{}", gz.len())), "{text}");
    // If-Range with the identity's tag does not match the variant: all of it.
    let identity_tag = get(&server, "/app.js", &[])
        .header("etag")
        .unwrap()
        .to_owned();
    let resp = get(
        &server,
        "/app.js",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", "bytes=10-99"),
            ("If-Range", &identity_tag),
        ],
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, gz);
    // Resuming with the variant's own tag gets the range.
    let resp = get(
        &server,
        "/app.js",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", "bytes=100-"),
            ("If-Range", &tag),
        ],
    );
    assert_eq!(resp.status, 206);
    assert_eq!(resp.body, &gz[100..]);
    // Past the variant's end (inside the identity's length): 416 with its length.
    let past = format!("bytes={}-", gz.len());
    let resp = get(
        &server,
        "/app.js",
        &[("Accept-Encoding", "gzip"), ("Range", &past)],
    );
    assert_eq!(resp.status, 416);
    assert_eq!(
        resp.header("content-range"),
        Some(format!("bytes */{}", gz.len()).as_str())
    );
}

fn a_large_file_is_compressed_from_its_first_answer(driver: &str) {
    let site = site();
    let server = serve(driver, site.path(), &[]);
    let file = js(BIG_LEN, 2);
    // The first answer: compressed as it is sent, no length, the stored
    // variant's tag made weak.
    let first = get_ae(&server, "/big.js", "gzip");
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-encoding"), Some("gzip"), "{first:?}");
    assert_eq!(first.header("transfer-encoding"), Some("chunked"));
    assert_eq!(first.content_length(), None);
    assert_eq!(first.header_all("vary"), ["Accept-Encoding"]);
    let weak = first.header("etag").unwrap().to_owned();
    assert!(
        weak.starts_with("W/\"") && weak.ends_with("+gzip.6\""),
        "{weak}"
    );
    assert_eq!(decoded(&first), file);
    assert!(first.body.len() < file.len() / 2, "{}", first.body.len());
    // A HEAD says the same, with no body.
    let head = fetch(&server, "HEAD", "/big.js", &[("Accept-Encoding", "gzip")]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-encoding"), Some("gzip"));
    assert_eq!(head.content_length(), None);
    // A range is never of a stream: of identity until the variant is stored,
    // then of the variant, each saying which.
    let resp = get(
        &server,
        "/big.js",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=1000-1999")],
    );
    assert_eq!(resp.status, 206, "{resp:?}");
    assert!(!resp.header("etag").unwrap().starts_with("W/"));
    if resp.header("content-encoding").is_none() {
        assert_eq!(resp.body, &file[1000..2000]);
        assert_eq!(
            resp.header("content-range"),
            Some(format!("bytes 1000-1999/{}", file.len()).as_str())
        );
    }
    // If-Range compares strongly: the weak tag never splices a range.
    let resp = get(
        &server,
        "/big.js",
        &[
            ("Accept-Encoding", "gzip"),
            ("Range", "bytes=0-9"),
            ("If-Range", &weak),
        ],
    );
    assert_ne!(resp.status, 206, "{resp:?}");
    // The background compressor stores the variant; later requests get it,
    // with its length and strong tag.
    let deadline = Instant::now() + Duration::from_secs(20);
    let variant = loop {
        let resp = get_ae(&server, "/big.js", "gzip");
        assert_eq!(resp.header("content-encoding"), Some("gzip"));
        if resp.content_length().is_some() {
            break resp;
        }
        assert!(Instant::now() < deadline, "never stored");
        assert_eq!(decoded(&resp), file);
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(decoded(&variant), file);
    let strong = variant.header("etag").unwrap();
    assert_eq!(format!("W/{strong}"), weak);
    // A revalidation with the first answer's tag: 304 (weak comparison).
    let resp = get(
        &server,
        "/big.js",
        &[("Accept-Encoding", "gzip"), ("If-None-Match", &weak)],
    );
    assert_eq!(resp.status, 304, "{resp:?}");
    assert!(metrics_value(&server, "servery_compress_streams_total") >= 1);
    assert!(metrics_value(&server, "servery_compress_background_total") >= 1);
    assert_eq!(metrics_value(&server, "servery_compress_inline_total"), 0);
}

/// The acceptance case: a 200 KB script, its very first request, over
/// HTTP/1.1 (chunked), HTTP/1.0 (ended by the close) and HTTP/2, each
/// coding.
fn a_200_kb_script_is_compressed_on_the_very_first_request(driver: &str) {
    use common::h2::{Client, Exchange};
    let dir = tempfile::tempdir().unwrap();
    let script = js(200 * 1000, 7);
    for name in ["a.js", "b.js", "c.js", "d.js"] {
        fs::write(dir.path().join(name), &script).unwrap();
    }
    let server = serve(driver, dir.path(), &[]);
    for (path, coding) in [("/a.js", "br"), ("/b.js", "zstd")] {
        let resp = get_ae(&server, path, coding);
        assert_eq!(resp.header("content-encoding"), Some(coding), "{resp:?}");
        assert_eq!(decoded(&resp), script, "{coding}");
    }
    // HTTP/1.0 has no chunks: the body ends with the connection.
    let mut s = common::connect(server.addr());
    s.write_all(b"GET /c.js HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(
        !head.contains("content-length") && !head.contains("chunked"),
        "{head}"
    );
    assert_eq!(decode(Some("gzip"), &raw[split..]), script);
    // HTTP/2: the stream ends the body.
    let mut client = Client::connect(server.addr());
    let answer = client.send(&Exchange::get("/d.js").field("accept-encoding", "gzip"));
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-encoding"), Some("gzip"));
    assert_eq!(answer.header("content-length"), None);
    assert!(answer.header("etag").unwrap().starts_with("W/"));
    assert_eq!(decode(Some("gzip"), &answer.body), script);
    assert_eq!(metrics_value(&server, "servery_compress_streams_total"), 4);
    assert_eq!(metrics_value(&server, "servery_compress_inline_total"), 0);
}

/// `--compress-streams` bounds the worker's streams, in number and so in
/// memory: clients that ask and never read hold at most that many encoders
/// (each under 3 MiB, measured from /proc); past it, identity; a stream
/// whose client goes away gives its place back. The file compresses badly
/// (random base64), so no stream can end into the sockets' buffers while
/// its client reads nothing.
#[test]
fn stalled_streams_are_bounded_in_number_and_memory() {
    const STREAMS: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x1234_5678_9abc_def1u64;
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let noise: Vec<u8> = (0..8 * 1000 * 1000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            alphabet[(state % 64) as usize]
        })
        .collect();
    fs::write(dir.path().join("noise.txt"), &noise).unwrap();
    // Its variant would not fit the cache, so it is never stored: every
    // answer is a stream or identity.
    let streams = STREAMS.to_string();
    let server = serve(
        "uring",
        dir.path(),
        &[
            "--workers",
            "1",
            "--compress-streams",
            &streams,
            "--compress-cache-bytes",
            "1048576",
        ],
    );
    let stalled = |coding: &str| -> std::net::TcpStream {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4 * 1024).expect("SO_RCVBUF");
        sock.connect(&server.addr().into()).unwrap();
        let mut s: std::net::TcpStream = sock.into();
        let req =
            format!("GET /noise.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: {coding}\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        s
    };
    let head = || {
        let mut s = common::connect(server.addr());
        s.write_all(b"HEAD /noise.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n")
            .unwrap();
        read_response_head_only(&mut s)
    };
    // Warm the worker (its file cache, its first connection).
    assert_eq!(head().status, 200);
    let before = rss_bytes(server.pid());
    let codings = ["gzip", "br", "zstd"];
    let held: Vec<_> = (0..STREAMS).map(|i| stalled(codings[i % 3])).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while metrics_value(&server, "servery_compress_streams_total") < STREAMS as u64 {
        assert!(Instant::now() < deadline, "the streams never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let held_rss = rss_bytes(server.pid());
    let per_stream = held_rss.saturating_sub(before) / STREAMS as u64;
    eprintln!(
        "RSS before {} KiB, with {STREAMS} stalled streams {} KiB: {} KiB a stream",
        before >> 10,
        held_rss >> 10,
        per_stream >> 10
    );
    assert!(
        per_stream < 3 * 1024 * 1024,
        "{} KiB a stream",
        per_stream >> 10
    );
    // Every place taken: more clients get identity, its length said, and
    // hold no encoder.
    let more: Vec<_> = (0..STREAMS).map(|i| stalled(codings[i % 3])).collect();
    let resp = head();
    assert_eq!(resp.header("content-encoding"), None, "{resp:?}");
    assert_eq!(resp.content_length(), Some(noise.len() as u64));
    assert!(metrics_value(&server, "servery_compress_streams_busy_total") > STREAMS as u64);
    assert_eq!(
        metrics_value(&server, "servery_compress_streams_total"),
        STREAMS as u64
    );
    // The stalled clients leave; their places come back.
    drop(held);
    drop(more);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let resp = head();
        if resp.header("content-encoding") == Some("gzip") {
            assert_eq!(resp.content_length(), None);
            break;
        }
        assert!(Instant::now() < deadline, "the places never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    // And a whole stream decodes to the file.
    let resp = get_ae(&server, "/noise.txt", "gzip");
    assert_eq!(resp.header("content-encoding"), Some("gzip"));
    assert!(decoded(&resp) == noise, "the stream decodes to the file");
}

#[test]
fn no_streams_keeps_identity_until_the_variant_is_stored() {
    let site = site();
    let server = serve("uring", site.path(), &["--compress-streams", "0"]);
    let first = get_ae(&server, "/big.js", "gzip");
    assert_eq!(first.header("content-encoding"), None, "{first:?}");
    assert!(first.body == js(BIG_LEN, 2), "identity, whole");
    assert_eq!(metrics_value(&server, "servery_compress_streams_total"), 0);
}

fn small_untyped_and_oversized_files_are_untouched(driver: &str) {
    let site = site();
    let server = serve(driver, site.path(), &["--compress-max-bytes", "100000"]);
    for path in ["/tiny.txt", "/pic.png", "/big.js"] {
        let resp = get_ae(&server, path, "gzip, br, zstd");
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("content-encoding"), None, "{path}");
        assert!(resp.header("vary").is_none(), "{path}: never varies");
    }
    let resp = get_ae(&server, "/data.json", "gzip");
    assert_eq!(
        resp.header("content-encoding"),
        Some("gzip"),
        "json is compressed"
    );
    drop(server);
    // The type list and the minimum are settings.
    let server = serve(
        driver,
        site.path(),
        &[
            "--compress-types",
            "image/png,text/plain",
            "--compress-min-bytes",
            "10",
        ],
    );
    for (path, coded) in [("/tiny.txt", true), ("/pic.png", true), ("/app.js", false)] {
        let resp = get_ae(&server, path, "gzip");
        assert_eq!(resp.header("content-encoding").is_some(), coded, "{path}");
        assert_eq!(resp.header("vary").is_some(), coded, "{path}");
    }
    drop(server);
    let server = serve(driver, site.path(), &["--compress", "off"]);
    let resp = get_ae(&server, "/app.js", "gzip");
    assert_eq!(resp.header("content-encoding"), None);
    assert!(resp.header("vary").is_none());
}

fn a_file_changed_on_disk_is_never_served_stale(driver: &str) {
    let site = site();
    let ttl = 0.2;
    let server = serve(driver, site.path(), &["--file-cache-ttl", &ttl.to_string()]);
    let path = site.path().join("app.js");
    let old = js(JS_LEN, 1);
    let first = get_ae(&server, "/app.js", "br");
    assert_eq!(decoded(&first), old);
    // Same length, other bytes, another mtime.
    let new = js(JS_LEN, 99);
    fs::write(&path, &new).unwrap();
    let mtime = SystemTime::now() + Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    std::thread::sleep(Duration::from_secs_f64(ttl + 0.3));
    for ae in ["br", "br", "gzip", "identity"] {
        let resp = get_ae(&server, "/app.js", ae);
        assert_eq!(decoded(&resp), new, "{ae}: the new file");
        assert_ne!(resp.header("etag"), first.header("etag"));
    }
}

fn the_budget_is_never_exceeded(isolation: &str) {
    let dir = tempfile::tempdir().unwrap();
    let files = 12;
    for i in 0..files {
        fs::write(dir.path().join(format!("f{i}.js")), js(JS_LEN, 10 + i)).unwrap();
    }
    let budget = 60_000u64;
    let workers = if isolation == "process" { 2 } else { 1 };
    let per_cache = budget / workers;
    let server = TestServer::builder()
        .root(dir.path())
        .isolation(isolation)
        .admin()
        .args(&[
            "--compress-cache-bytes",
            &budget.to_string(),
            "--workers",
            &workers.to_string(),
            "--beat-interval",
            "0.1",
        ])
        .start();
    let mut made = 0;
    for round in 0..2 {
        for i in 0..files {
            let resp = get_ae(&server, &format!("/f{i}.js"), "gzip");
            assert_eq!(resp.header("content-encoding"), Some("gzip"));
            assert_eq!(decoded(&resp), js(JS_LEN, 10 + i), "f{i}, round {round}");
            made += 1;
            if isolation == "thread" {
                let held = metrics_value(&server, "servery_compress_cache_bytes");
                assert!(held <= per_cache, "{held} > {per_cache} after f{i}");
            }
        }
    }
    // Process workers report with their beats: wait for every request.
    let text = server.wait_metrics(Duration::from_secs(10), |t| {
        let got = |n| metric(t, n).unwrap_or(0.0) as u64;
        got("servery_compress_inline_total") + got("servery_compress_hits_total") >= made
    });
    let got = |n| metric(&text, n).unwrap_or(0.0) as u64;
    assert!(got("servery_compress_cache_bytes") <= budget, "{text}");
    assert!(got("servery_compress_evictions_total") > 0, "{text}");
    // Each variant is ~15 KB: four do not fit one cache, so the second round
    // missed what the first had evicted.
    assert!(got("servery_compress_inline_total") > files, "{text}");
    assert!(got("servery_compress_cache_entries") >= 1, "{text}");
}

#[test]
fn the_budget_is_never_exceeded_by_threads() {
    the_budget_is_never_exceeded("thread");
}

#[test]
fn the_budget_is_split_among_worker_processes() {
    the_budget_is_never_exceeded("process");
}

/// Many distinct large files at once: the queue refuses past its bounds, the
/// cache stays within its budget, and the server's memory within the budget
/// plus the compressor's bound (one file in, one out, the encoder's state).
#[test]
fn a_flood_of_large_files_stays_within_the_budget_and_the_compressor_bound() {
    let dir = tempfile::tempdir().unwrap();
    let files = 48usize;
    let len = 4 * 1024 * 1024;
    for i in 0..files {
        fs::write(dir.path().join(format!("l{i}.js")), js(len, 100 + i as u64)).unwrap();
    }
    let budget: u64 = 8 * 1024 * 1024;
    let server = TestServer::builder()
        .root(dir.path())
        .admin()
        .args(&[
            "--compress-cache-bytes",
            &budget.to_string(),
            "--compress-streams",
            "2",
        ])
        .start();
    let (pid, addr) = (server.pid(), server.addr());
    let before = rss_bytes(pid);
    let peak = std::sync::atomic::AtomicU64::new(before);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss_bytes(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let clients: Vec<_> = (0..8)
            .map(|c| {
                s.spawn(move || {
                    for round in 0..3 {
                        for i in (c..files).step_by(8) {
                            let coding = ["br", "zstd", "gzip"][(i + round) % 3];
                            let path = format!("/l{i}.js");
                            let resp = fetch_at(addr, "GET", &path, &[("Accept-Encoding", coding)]);
                            assert_eq!(resp.status, 200);
                            match resp.content_length() {
                                Some(n) => assert_eq!(resp.body.len() as u64, n),
                                // Compressed as sent: whole, as its last
                                // chunk said.
                                None => assert!(!resp.body.is_empty()),
                            }
                        }
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        // Let the compressor make at least one of what it admitted: a 4 MiB
        // brotli pass takes seconds on a loaded machine, so wait on the
        // counter rather than a fixed sleep (the peak keeps being sampled).
        let deadline = Instant::now() + Duration::from_secs(120);
        while metrics_value(&server, "servery_compress_background_total") == 0
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let text = server.metrics();
    let got = |n| metric(&text, n).unwrap_or(0.0) as u64;
    assert!(got("servery_compress_cache_bytes") <= budget, "{text}");
    assert!(
        got("servery_compress_skipped_total") > 0,
        "the queue refused some: {text}"
    );
    assert_eq!(got("servery_compress_inline_total"), 0);
    let peak = peak.into_inner();
    eprintln!(
        "RSS before {} MiB, peak {} MiB; skipped {}, background {}, cache {} bytes",
        before >> 20,
        peak >> 20,
        got("servery_compress_skipped_total"),
        got("servery_compress_background_total"),
        got("servery_compress_cache_bytes")
    );
    // Budget + one 4 MiB file and its output + brotli's state (a 4 MiB
    // window, its hash tables) + two streams a worker (each under 3 MiB,
    // `stalled_streams_are_bounded_in_number_and_memory`) + allocator slack.
    let streams = 2 * 2 * 3 * 1024 * 1024;
    let bound = before + budget + 2 * len as u64 + streams + 48 * 1024 * 1024;
    assert!(
        peak <= bound,
        "peak RSS {} MiB > {} MiB (before {} MiB)",
        peak >> 20,
        bound >> 20,
        before >> 20
    );
    // A variant made by the compressor is served.
    let cached = (0..files).any(|i| {
        ["br", "zstd", "gzip"].iter().any(|c| {
            let resp = get_ae(&server, &format!("/l{i}.js"), c);
            resp.header("content-encoding").is_some() && decoded(&resp) == js(len, 100 + i as u64)
        })
    });
    assert!(cached, "{text}");
}

#[test]
fn http2_gets_the_same_variants() {
    use common::h2::{Client, Exchange};
    let site = site();
    let server = serve("uring", site.path(), &[]);
    let mut client = Client::connect(server.addr());
    let answer = client.send(&Exchange::get("/app.js").field("accept-encoding", "gzip"));
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-encoding"), Some("gzip"));
    assert_eq!(answer.header("vary"), Some("Accept-Encoding"));
    assert_eq!(decode(Some("gzip"), &answer.body), js(JS_LEN, 1));
    let h1 = get_ae(&server, "/app.js", "gzip");
    assert_eq!(answer.header("etag"), h1.header("etag"));
    assert_eq!(answer.body, h1.body);
    let answer = client.send(
        &Exchange::get("/app.js")
            .field("accept-encoding", "br")
            .field("range", "bytes=5-14"),
    );
    assert_eq!(answer.status, 206);
    assert_eq!(answer.header("content-encoding"), Some("br"));
    let br = get_ae(&server, "/app.js", "br").body;
    assert_eq!(answer.body, &br[5..15]);
}

#[test]
fn bad_compression_settings_are_refused_naming_the_flag() {
    for (args, flag) in [
        (vec!["--compress-level-gzip", "10"], "--compress-level-gzip"),
        (vec!["--compress-types", "json"], "--compress-types"),
        (
            vec![
                "--compress-min-bytes",
                "9000",
                "--compress-max-bytes",
                "8000",
            ],
            "--compress-min-bytes",
        ),
        (
            vec!["--compress-cache-bytes", "0"],
            "--compress-cache-bytes",
        ),
        (vec!["--compress", "maybe"], "--compress"),
        (vec!["--compress-streams", "5000"], "--compress-streams"),
    ] {
        let out = std::process::Command::new(common::BIN)
            .arg("check-config")
            .arg(std::env::temp_dir())
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("servery: {flag}: ")),
            "{args:?}: {err}"
        );
    }
}

driver_tests! {
    negotiation_follows_q_values,
    vary_on_every_response_of_a_compressible_file,
    each_variant_has_its_own_etag_and_304s_against_it,
    a_304_against_a_variant_needs_no_compression,
    head_has_the_get_fields_and_no_body,
    ranges_of_a_cached_variant_have_its_length_and_etag,
    a_large_file_is_compressed_from_its_first_answer,
    a_200_kb_script_is_compressed_on_the_very_first_request,
    small_untyped_and_oversized_files_are_untouched,
    a_file_changed_on_disk_is_never_served_stale,
}
