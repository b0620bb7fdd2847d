//! HTTP/3 (issue 27): third-party clients fetch what HTTP/1.1 and HTTP/2
//! serve, with the same bytes and answers; an app reads a request body
//! over QUIC; a thousand connections each reach their worker; a datagram
//! read by the wrong worker is handed to its owner; servery-load's HTTP/3
//! engine runs over 200 connections without an error. Under both drivers
//! (the UDP path differs: io_uring's poll, epoll's readiness).
//!
//! The scripted clients (aioquic, ngtcp2-client) are installed by
//! `scripts/install-h3-clients.sh`; a test whose client is missing prints
//! SKIPPED with the reason. The in-process client (`quic`) is quinn's.

#[macro_use]
mod common;
#[path = "common/quic.rs"]
mod quic;

use std::io::Read;
use std::time::Duration;

use common::h3::{self, Fetch, H3Response};
use common::http::metric;
use common::{skipped, AppServer, TestServer};
use servery::app::{Alpn, Body, MakeError, Request, Response, Service};
use sha2::{Digest, Sha256};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A site: a 1 MiB file, a small one, a script that compresses, an index.
fn site() -> (tempfile::TempDir, Vec<u8>, Vec<u8>) {
    let dir = common::docroot(0);
    let big: Vec<u8> = (0..1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    let script: Vec<u8> = (0..3000)
        .flat_map(|i| format!("function f{i}(a) {{ return a + {i}; }}\n").into_bytes())
        .take(48 * 1024)
        .collect();
    std::fs::write(dir.path().join("app.js"), &script).unwrap();
    // Above the inline limit: compressed as it is sent on its first request.
    let bundle: Vec<u8> = script.iter().copied().cycle().take(200 * 1000).collect();
    std::fs::write(dir.path().join("bundle.js"), &bundle).unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/index.html"), b"<p>docs</p>\n").unwrap();
    (dir, big, script)
}

fn h3_server(driver: &str, root: &std::path::Path, extra: &[&str]) -> TestServer {
    TestServer::builder()
        .root(root)
        .driver(driver)
        .tls_self_signed()
        .admin()
        .args(extra)
        .start()
}

fn one<'a>(rs: &'a [H3Response], path: &str) -> &'a H3Response {
    rs.iter()
        .find(|r| r.path == path)
        .unwrap_or_else(|| panic!("no answer for {path}: {rs:?}"))
}

/// aioquic fetches files with their exact bytes, a range, a 304, a
/// compressed variant, HEAD, an index redirect and a 404, all on one
/// connection; the access log says HTTP/3.0; the TLS listener's HTTP/1.1
/// answer advertises the port.
fn aioquic_gets_what_the_other_protocols_get(driver: &str) {
    let Ok(client) = h3::aioquic().map_err(|why| skipped(&why)) else {
        return;
    };
    let (root, big, script) = site();
    let log = root.path().join("access.log");
    let log_arg = log.to_str().unwrap().to_string();
    let server = h3_server(
        driver,
        root.path(),
        &["--access-log", &log_arg, "--access-log-flush", "0.1"],
    );
    let port = server.https().port();
    assert!(
        server.ready_line().contains(&format!("h3 on udp :{port}")),
        "{}",
        server.ready_line()
    );

    let got = client
        .fetch(
            port,
            &Fetch::get(&["/big.bin", "/small.txt", "/docs", "/docs/", "/nope"]),
        )
        .unwrap();
    let file = one(&got, "/big.bin");
    assert_eq!(file.status, 200);
    assert_eq!(file.body_sha256, sha(&big));
    assert_eq!(file.header("content-length"), Some("1048576"));
    assert_eq!(one(&got, "/small.txt").body_sha256, sha(b"small\n"));
    assert_eq!(one(&got, "/docs").status, 301);
    assert_eq!(one(&got, "/docs/").body_sha256, sha(b"<p>docs</p>\n"));
    assert_eq!(one(&got, "/nope").status, 404);
    assert!(
        got.iter().all(|r| r.local_port == got[0].local_port),
        "one connection: {got:?}"
    );
    assert!(got.iter().all(|r| r.header("alt-svc").is_none()));

    let etag = file.header("etag").unwrap().to_string();
    let range = client
        .fetch(
            port,
            &Fetch::get(&["/big.bin"]).header("range", "bytes=100-199"),
        )
        .unwrap();
    assert_eq!(range[0].status, 206);
    assert_eq!(range[0].body_sha256, sha(&big[100..200]));
    assert_eq!(
        range[0].header("content-range"),
        Some("bytes 100-199/1048576")
    );
    let not_modified = client
        .fetch(
            port,
            &Fetch::get(&["/big.bin"]).header("if-none-match", &etag),
        )
        .unwrap();
    assert_eq!(not_modified[0].status, 304);
    assert_eq!(not_modified[0].body_len, 0);
    let head = client.fetch(port, &Fetch::head(&["/big.bin"])).unwrap();
    assert_eq!(head[0].status, 200);
    assert_eq!(head[0].header("content-length"), Some("1048576"));
    assert_eq!(head[0].body_len, 0);

    let gz = client
        .fetch(
            port,
            &Fetch::get(&["/app.js"])
                .header("accept-encoding", "gzip")
                .keep_bodies(),
        )
        .unwrap();
    assert_eq!(gz[0].status, 200);
    assert_eq!(gz[0].header("content-encoding"), Some("gzip"), "{gz:?}");
    assert_eq!(gz[0].header("vary"), Some("Accept-Encoding"));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(gz[0].body.as_deref().unwrap())
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, script);
    // A 200 KB script on its very first request: compressed as it is sent,
    // the stream's end its end.
    let first = client
        .fetch(
            port,
            &Fetch::get(&["/bundle.js"])
                .header("accept-encoding", "gzip")
                .keep_bodies(),
        )
        .unwrap();
    assert_eq!(
        first[0].header("content-encoding"),
        Some("gzip"),
        "{first:?}"
    );
    assert_eq!(first[0].header("content-length"), None);
    assert!(first[0].header("etag").unwrap().starts_with("W/"));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(first[0].body.as_deref().unwrap())
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain.len(), 200 * 1000);
    assert!(plain.iter().zip(script.iter().cycle()).all(|(a, b)| a == b));

    // HTTP/1.1 on the same TLS port says where HTTP/3 is.
    let mut tls = common::tls::connected(
        &common::tls::pinned(server.fingerprint(), common::tls::TLS13),
        server.https(),
    );
    std::io::Write::write_all(&mut tls, b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let answer = common::http::read_response(&mut tls);
    assert_eq!(
        answer.header("alt-svc"),
        Some(format!("h3=\":{port}\"; ma=86400").as_str()),
        "{answer:?}"
    );

    let metrics = server.metrics();
    assert_eq!(
        metric(&metrics, "servery_requests_total{protocol=\"http3\"}"),
        Some(10.0),
        "{metrics}"
    );
    let seen = common::wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.matches("HTTP/3.0").count() == 10)
    });
    assert!(seen, "{:?}", std::fs::read_to_string(&log));
}

/// ngtcp2's client: GET with exact bytes, HEAD, and a POST to a file (405).
fn ngtcp2_gets_files(driver: &str) {
    let Ok(client) = h3::ngtcp2().map_err(|why| skipped(&why)) else {
        return;
    };
    let (root, big, _) = site();
    let server = h3_server(driver, root.path(), &[]);
    let port = server.https().port();
    let got = client
        .fetch(port, &Fetch::get(&["/big.bin", "/small.txt"]))
        .unwrap();
    assert_eq!(one(&got, "/big.bin").body_sha256, sha(&big));
    assert_eq!(one(&got, "/small.txt").status, 200);
    let head = client.fetch(port, &Fetch::head(&["/big.bin"])).unwrap();
    assert_eq!(head[0].header("content-length"), Some("1048576"));
    let post = client
        .fetch(port, &Fetch::post(&["/small.txt"], b"x".to_vec()))
        .unwrap();
    assert_eq!(post[0].status, 405);
}

struct Digesting;

impl Service for Digesting {
    type Body = Body;
    async fn call(&self, req: Request) -> Response<Body> {
        match req.uri().path() {
            "/digest" => {
                let mut body = req.into_body();
                let mut digest = Sha256::new();
                while let Some(chunk) = body.chunk().await {
                    match chunk {
                        Ok(b) => digest.update(&b),
                        Err(e) => {
                            let mut r = Response::new(Body::from(e.to_string()));
                            *r.status_mut() = http::StatusCode::BAD_REQUEST;
                            return r;
                        }
                    }
                }
                let hex: String = digest
                    .finalize()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                Response::new(Body::from(hex))
            }
            "/facts" => {
                let tls = req.connection().tls;
                let h3 = tls.and_then(|t| t.alpn) == Some(Alpn::H3);
                Response::new(Body::from(format!("h3={h3}")))
            }
            "/trailers" => Response::new(Body::stream(TwoThenTrailers(0))),
            _ => Response::new(Body::from("?")),
        }
    }
}

/// Two data frames, then the trailer `x-chunks: 2`.
struct TwoThenTrailers(u8);

impl http_body::Body for TwoThenTrailers {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        self.0 += 1;
        let frame = match self.0 {
            1 | 2 => http_body::Frame::data(bytes::Bytes::from(format!("chunk {}\n", self.0))),
            3 => {
                let mut t = http::HeaderMap::new();
                t.insert("x-chunks", http::HeaderValue::from_static("2"));
                http_body::Frame::trailers(t)
            }
            _ => return std::task::Poll::Ready(None),
        };
        std::task::Poll::Ready(Some(Ok(frame)))
    }
}

/// An app's streamed body over HTTP/3: its pieces as DATA frames, its
/// trailers a HEADERS frame after them.
fn an_apps_trailers_follow_its_body(driver: &str) {
    let app = AppServer::builder()
        .driver(driver)
        .tls()
        .start(|_worker: usize| Ok::<_, MakeError>(Digesting));
    let (addr, _) = app.tls();
    let client = quic::Client::new();
    client.rt.block_on(async {
        let mut c = client.connect_async(addr).await.unwrap();
        let req = http::Request::get("https://localhost/trailers")
            .body(())
            .unwrap();
        let mut s = c.send_only(req).await.unwrap();
        let head = s.recv_response().await.unwrap();
        assert_eq!(head.status(), 200);
        let mut body = Vec::new();
        while let Some(mut chunk) = s.recv_data().await.unwrap() {
            use bytes::Buf;
            while chunk.has_remaining() {
                let n = chunk.chunk().len();
                body.extend_from_slice(chunk.chunk());
                chunk.advance(n);
            }
        }
        assert_eq!(body, b"chunk 1\nchunk 2\n");
        let trailers = s.recv_trailers().await.unwrap().expect("trailers");
        assert_eq!(trailers.get("x-chunks").unwrap(), "2");
        c.close();
    });
}

/// An app reads a 1 MiB POST over HTTP/3, and knows the request came so.
fn an_app_reads_a_mebibyte_posted_over_h3(driver: &str) {
    let Ok(client) = h3::aioquic().map_err(|why| skipped(&why)) else {
        return;
    };
    let app = AppServer::builder()
        .driver(driver)
        .tls()
        .start(|_worker: usize| Ok::<_, MakeError>(Digesting));
    let (addr, _) = app.tls();
    let body: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    let posted = client
        .fetch(
            addr.port(),
            &Fetch::post(&["/digest"], body.clone()).keep_bodies(),
        )
        .unwrap();
    assert_eq!(posted[0].status, 200, "{posted:?}");
    assert_eq!(posted[0].body.as_deref(), Some(sha(&body).as_bytes()));
    let facts = client
        .fetch(addr.port(), &Fetch::get(&["/facts"]).keep_bodies())
        .unwrap();
    assert_eq!(facts[0].body.as_deref(), Some(&b"h3=true"[..]));
}

/// A request body that stops coming: past `--body-timeout` the app's read
/// fails and the answer is 408, the stream's credit and state freed; the
/// connection serves on.
fn a_body_that_stops_is_408_at_the_body_timeout(driver: &str) {
    let app = AppServer::builder()
        .driver(driver)
        .tls()
        .body_timeout(Duration::from_secs(1))
        .start(|_worker: usize| Ok::<_, MakeError>(Digesting));
    let (addr, _) = app.tls();
    let client = quic::Client::new();
    client.rt.block_on(async {
        let mut c = client.connect_async(addr).await.unwrap();
        let req = http::Request::post("https://localhost/digest")
            .header("content-length", "100000")
            .body(())
            .unwrap();
        let started = std::time::Instant::now();
        let mut stream = c
            .send_partial(req, bytes::Bytes::from_static(&[b'x'; 1000]))
            .await
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), stream.recv_response())
            .await
            .expect("an answer within 10 s")
            .unwrap();
        let waited = started.elapsed();
        assert_eq!(resp.status(), 408);
        assert!(
            waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
            "answered after {waited:?}"
        );
        drop(stream);
        let facts = c.get("/facts", &[]).await.unwrap();
        assert_eq!(facts.body, b"h3=true");
        c.close();
    });
}

/// 1,000 connections to two workers: each is answered, both workers serve,
/// and no datagram is read by a worker that does not own it.
fn a_thousand_connections_each_reach_their_owner(driver: &str) {
    let root = common::docroot(0);
    let server = h3_server(driver, root.path(), &["--workers", "2"]);
    let addr = server.https();
    let client = quic::Client::new();
    for i in 0..1000 {
        // A port of its own, as separate clients have.
        client.rebind();
        let a = quic::get_once(&client, addr, "/small.txt")
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        assert_eq!(a.status, 200);
    }
    let metrics = server.metrics();
    let get = |s: &str| metric(&metrics, s).unwrap_or_else(|| panic!("{s}: {metrics}"));
    assert_eq!(get("servery_h3_connections_total"), 1000.0, "{metrics}");
    for w in ["0", "1"] {
        let n = get(&format!("servery_h3_connections_total{{worker=\"{w}\"}}"));
        assert!(n > 100.0, "worker {w} served {n} of 1000: {metrics}");
    }
    assert_eq!(get("servery_quic_misrouted_total"), 0.0);
    assert_eq!(get("servery_quic_lost_total"), 0.0);
}

/// Requests on one connection whose client moves to a new UDP port between
/// them (a NAT rebinding, RFC 9000 §9.3): the connection goes on.
async fn wander(client: &quic::Client, addr: std::net::SocketAddr, moves: usize) {
    let mut c = client.connect_async(addr).await.unwrap();
    for i in 0..=moves {
        let a = c
            .get("/big.bin", &[])
            .await
            .unwrap_or_else(|e| panic!("after {i} moves: {e}"));
        assert_eq!(a.status, 200);
        assert_eq!(a.body.len(), 1024 * 1024);
        client.rebind();
    }
    c.close();
}

/// With the steering program, a client that moves to another port still
/// reaches the worker that owns its connection: no datagram is misrouted.
fn a_client_that_moves_ports_still_reaches_its_owner(driver: &str) {
    let (root, _, _) = site();
    let server = h3_server(driver, root.path(), &["--workers", "2"]);
    let client = quic::Client::new();
    client.rt.block_on(wander(&client, server.https(), 16));
    let metrics = server.metrics();
    let get = |s: &str| metric(&metrics, s).unwrap_or_else(|| panic!("{s}: {metrics}"));
    assert_eq!(get("servery_requests_total{protocol=\"http3\"}"), 17.0);
    assert_eq!(get("servery_quic_misrouted_total"), 0.0, "{metrics}");
}

/// Without the steering program, a client that moves to another port lands
/// on either worker's socket (the kernel hashes its new address): the
/// datagrams are handed to the worker its connection ID names, and every
/// request is answered.
fn unsteered_datagrams_are_handed_to_their_owner(driver: &str) {
    let (root, _, _) = site();
    let server = TestServer::builder()
        .root(root.path())
        .driver(driver)
        .tls_self_signed()
        .admin()
        .args(&["--workers", "2"])
        .fault("unsteered-quic=1")
        .start();
    assert!(
        server.ready_line().contains("not steered"),
        "{}",
        server.ready_line()
    );
    let client = quic::Client::new();
    // 16 moves: each lands on the other worker's socket half the time.
    client.rt.block_on(wander(&client, server.https(), 16));
    let metrics = server.metrics();
    let get = |s: &str| metric(&metrics, s).unwrap_or_else(|| panic!("{s}: {metrics}"));
    assert_eq!(get("servery_requests_total{protocol=\"http3\"}"), 17.0);
    assert!(get("servery_quic_misrouted_total") > 0.0, "{metrics}");
    assert_eq!(get("servery_quic_lost_total"), 0.0, "{metrics}");
}

/// servery-load's HTTP/3 engine (what `servery-load --h3` runs, called as
/// a library): its validation pass checks the body's SHA-256, then 200
/// connections of 4 streams each make 4,000 requests to two workers, none
/// failing, every datagram read by its owner.
fn servery_load_over_many_connections(driver: &str) {
    let root = common::docroot(16 * 1024);
    let body = std::fs::read(root.path().join("big.bin")).unwrap();
    let server = h3_server(driver, root.path(), &["--workers", "2"]);
    let url = format!("https://127.0.0.1:{}/big.bin", server.https().port());
    let mut plan = servery_bench::http3::plan(&[url]).expect("a plan");
    plan.connections = std::num::NonZeroUsize::new(200).unwrap();
    plan.pipeline = std::num::NonZeroUsize::new(4).unwrap();
    plan.warmup = Duration::ZERO;
    plan.duration = Duration::from_secs(120);
    plan.timeout = Duration::from_secs(10);
    plan.requests = std::num::NonZeroU64::new(4000);
    plan.expect.sha256 = Some(Sha256::digest(&body).into());
    plan.expect.length = Some(body.len() as u64);
    servery_bench::http3::check(&plan).expect("the validation pass");
    let report = servery_bench::load::h3::run(&plan).expect("the run");
    assert_eq!(report.requests, 4000, "{report:#?}");
    assert_eq!(report.errors.total + report.unfinished, 0, "{report:#?}");
    assert_eq!(report.bytes, 4000 * body.len() as u64);
    let metrics = server.metrics();
    let get = |s: &str| metric(&metrics, s).unwrap_or_else(|| panic!("{s}: {metrics}"));
    assert!(get("servery_h3_connections_total") >= 200.0, "{metrics}");
    for w in ["0", "1"] {
        let n = get(&format!("servery_h3_streams_total{{worker=\"{w}\"}}"));
        assert!(n > 0.0, "worker {w} served no stream: {metrics}");
    }
    assert_eq!(get("servery_quic_misrouted_total"), 0.0, "{metrics}");
}

/// `[[auth]]` over HTTP/3 (QUIC is TLS: no `--auth-over-http` needed):
/// missing credentials are 401 with the challenge, the right ones get the
/// file, private.
fn aioquic_meets_basic_auth(driver: &str) {
    use base64::Engine as _;
    let Ok(client) = h3::aioquic().map_err(|why| skipped(&why)) else {
        return;
    };
    let (root, _, _) = site();
    std::fs::create_dir(root.path().join("staff")).unwrap();
    std::fs::write(root.path().join("staff/plan.txt"), b"plan\n").unwrap();
    let users = root.path().join("users");
    let hash = bcrypt::hash("secret", 4).unwrap();
    std::fs::write(&users, format!("alice:{hash}\n")).unwrap();
    let config = root.path().join("servery.toml");
    std::fs::write(
        &config,
        format!(
            "[[auth]]\nmatch = \"/staff/**\"\nusers_file = {:?}\n",
            users.display().to_string()
        ),
    )
    .unwrap();
    let server = h3_server(driver, root.path(), &["--config", config.to_str().unwrap()]);
    let port = server.https().port();
    let missing = client
        .fetch(port, &Fetch::get(&["/staff/plan.txt"]))
        .unwrap();
    assert_eq!(missing[0].status, 401, "{missing:?}");
    assert_eq!(
        missing[0].header("www-authenticate"),
        Some("Basic realm=\"restricted\", charset=\"UTF-8\"")
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode("alice:secret");
    let right = client
        .fetch(
            port,
            &Fetch::get(&["/staff/plan.txt"]).header("authorization", &format!("Basic {b64}")),
        )
        .unwrap();
    assert_eq!(right[0].status, 200, "{right:?}");
    assert_eq!(right[0].body_sha256, sha(b"plan\n"));
    assert_eq!(right[0].header("cache-control"), Some("private"));
}

driver_tests!(
    an_apps_trailers_follow_its_body,
    a_body_that_stops_is_408_at_the_body_timeout,
    servery_load_over_many_connections,
    aioquic_gets_what_the_other_protocols_get,
    aioquic_meets_basic_auth,
    ngtcp2_gets_files,
    an_app_reads_a_mebibyte_posted_over_h3,
    a_thousand_connections_each_reach_their_owner,
    a_client_that_moves_ports_still_reaches_its_owner,
    unsteered_datagrams_are_handed_to_their_owner,
);
