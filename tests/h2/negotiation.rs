//! Which protocol a connection speaks, and what the admin listener counts
//! of HTTP/2: on a plain port HTTP/1.1 and h2c by prior knowledge side by
//! side; `--h2c off` keeps the preface out; over TLS, ALPN picks h2 when
//! the client offers it and `--alpn` lets it. The real binary, under both
//! drivers.

use std::io::Write;
use std::time::Duration;

use crate::common::h2::{assert_same, tls_config, Client, Exchange, View};
use crate::common::tls::{connected, get, pinned, TLS13};
use crate::common::{metric, read_until_close, Framed, TestServer, IO_TIMEOUT};

/// The one file every server here serves.
const SMALL: &[u8] = b"small\n";
/// The client connection preface (RFC 9113 §3.4) and an empty SETTINGS.
const PREFACE_AND_SETTINGS: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

fn serve(driver: &str, args: &[&str]) -> TestServer {
    TestServer::builder()
        .driver(driver)
        .file("small.txt", SMALL)
        .args(args)
        .start()
}

/// One port, both protocols at once: an h2c connection stays open while
/// HTTP/1.1 connections come and go, and each gets the same answer.
fn http1_and_h2c_share_the_plain_port(driver: &str) {
    let server = serve(driver, &[]);
    let ex = Exchange::get("/small.txt");
    let mut h2 = Client::connect(server.addr());
    let first = View::h2(&h2.send(&ex));
    // HTTP/1.1 while the h2c connection is open, two requests on one
    // connection.
    let mut s = server.connect();
    for _ in 0..2 {
        s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: test\r\n\r\n")
            .expect("write");
        let framed = crate::common::read_framed(&mut s, false);
        assert_same(&ex, &View::h1(&framed), &first);
    }
    assert_same(&ex, &View::h1(&ex.h1(server.addr())), &first);
    // The h2c connection still serves.
    let again = View::h2(&h2.send(&ex));
    assert_same(&ex, &first, &again);
    assert_eq!(again.body, SMALL);
}

/// `--h2c off`: the preface is not HTTP/2's to the server. It answers no
/// SETTINGS (at most an HTTP/1.1 refusal) and closes; an h2 client's
/// request fails; HTTP/1.1 is served as before.
fn h2c_off_refuses_prior_knowledge(driver: &str) {
    let server = serve(driver, &["--h2c", "off"]);
    let mut s = server.connect();
    s.write_all(PREFACE_AND_SETTINGS)
        .expect("write the preface");
    let got = read_until_close(&mut s, IO_TIMEOUT)
        .unwrap_or_else(|open| panic!("still open after {} bytes", open.len()));
    assert!(
        got.is_empty() || got.starts_with(b"HTTP/1.1 4"),
        "not an HTTP/1.1 refusal: {:?}",
        String::from_utf8_lossy(&got[..got.len().min(200)])
    );
    // An HTTP/2 frame header: 3 bytes of length, type 0x4 for SETTINGS.
    assert!(got.len() < 9 || got[3] != 0x04, "a SETTINGS frame: {got:?}");

    match Client::try_connect(server.addr()) {
        Err(_) => {}
        Ok(mut client) => {
            let sent = client.try_send(&Exchange::get("/small.txt"));
            assert!(sent.is_err(), "answered over HTTP/2: {sent:?}");
        }
    }
    assert_eq!(server.get("/small.txt").body, SMALL);
}

/// Over TLS, a client offering h2 and http/1.1 gets h2 by default, and its
/// answer is the HTTP/1.1 one; `--alpn http/1.1` chooses http/1.1 for the
/// same offer.
fn tls_alpn_chooses_h2_by_default(driver: &str) {
    let server = TestServer::builder()
        .driver(driver)
        .file("small.txt", SMALL)
        .tls_self_signed()
        .start();
    let fp = server.fingerprint().to_owned();
    let offer: &[&[u8]] = &[b"h2", b"http/1.1"];
    let mut h2 = Client::tls(server.https(), tls_config(&fp, offer))
        .unwrap_or_else(|alpn| panic!("ALPN chose {alpn:?}, not h2"));
    let ex = Exchange::get("/small.txt");
    let answer = h2.send(&ex);
    let mut s = connected(&pinned(&fp, TLS13), server.https());
    let h1 = get(&mut s, "/small.txt", "");
    let h1 = Framed {
        response: h1,
        delimit: crate::common::Delimit::Length,
        chunks: Vec::new(),
        trailers: Vec::new(),
    };
    assert_same(&ex, &View::h1(&h1), &View::h2(&answer));
    assert_eq!(answer.body, SMALL);

    let server = TestServer::builder()
        .driver(driver)
        .file("small.txt", SMALL)
        .tls_self_signed()
        .args(&["--alpn", "http/1.1"])
        .start();
    let fp = server.fingerprint().to_owned();
    match Client::tls(server.https(), tls_config(&fp, offer)) {
        Ok(_) => panic!("--alpn http/1.1 chose h2"),
        Err(alpn) => assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..])),
    }
}

/// `/metrics` counts HTTP/2 connections and their streams, over h2c and
/// TLS alike, and no HTTP/1.1 request among them.
fn metrics_count_h2_connections_and_streams(driver: &str) {
    let server = TestServer::builder()
        .driver(driver)
        .file("small.txt", SMALL)
        .tls_self_signed()
        .admin()
        .start();
    let ex = Exchange::get("/small.txt");
    let mut a = Client::connect(server.addr());
    for _ in 0..3 {
        assert_eq!(a.send(&ex).status, 200);
    }
    let offer: &[&[u8]] = &[b"h2"];
    let mut b = Client::tls(server.https(), tls_config(server.fingerprint(), offer))
        .unwrap_or_else(|alpn| panic!("ALPN chose {alpn:?}, not h2"));
    for _ in 0..2 {
        assert_eq!(b.send(&ex).status, 200);
    }
    assert_eq!(server.get("/small.txt").status, 200);
    let counts = |t: &str| {
        (
            metric(t, "servery_h2_connections_total"),
            metric(t, "servery_h2_streams_total"),
        )
    };
    let text = server.wait_metrics(Duration::from_secs(3), |t| {
        counts(t) == (Some(2.0), Some(5.0))
    });
    assert_eq!(counts(&text), (Some(2.0), Some(5.0)), "{text}");
}

driver_tests! {
    http1_and_h2c_share_the_plain_port,
    h2c_off_refuses_prior_knowledge,
    tls_alpn_chooses_h2_by_default,
    metrics_count_h2_connections_and_streams,
}
