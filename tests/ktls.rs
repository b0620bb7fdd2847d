//! Kernel TLS (`--ktls auto|off`): who seals the records a TLS connection
//! sends.
//!
//! Everywhere: `--ktls auto` serves correctly whatever the kernel has, and
//! says once, in the ready line, who seals (`ktls on`, or `ktls
//! unavailable (…)` on a kernel without the `tls` ULP, such as the one CI
//! runs on); `--ktls off` seals in user space and says so. Where
//! `/proc/sys/net/ipv4/tcp_available_ulp` lists `tls`, the kernel path
//! itself: TLS 1.3 over HTTP/1.1 handed to the kernel (counted in
//! `servery_tls_ktls_total`), files of every size (large ones by
//! `sendfile`) and ranges byte for byte, pipelined answers, close_notify
//! at the end, a fatal alert for a record that does not open (sent by
//! control message through the kernel), a client's KeyUpdate request
//! (answered on Linux 6.14 and later, the connection closed before), and
//! TLS 1.2 left in user space. Elsewhere those print SKIPPED with the
//! reason; `scripts/ktls-tests.sh` runs them in a VM whose kernel has TLS.
//!
//! Each server listens on TLS only with its self-signed identity, pinned
//! by the clients; every case runs under both drivers (`driver_tests!`).

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::ClientConfig;

use common::tls::{self, pinned, Tls, TLS12, TLS13};
use common::{metric, Builder, TestServer};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Files served, by size: in memory (small), and above the 64 KiB
/// small-file bound, which go out by `sendfile` when the kernel seals.
const FILES: [(&str, usize); 5] = [
    ("1.bin", 1),
    ("1k.bin", KIB),
    ("100k.bin", 100 * KIB),
    ("1m.bin", MIB),
    ("5m.bin", 5 * MIB),
];

/// A byte pattern of `len` bytes: what every docroot file holds.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Why the kernel path cannot run here, if it cannot: the `tls` ULP is
/// not in the kernel's list.
fn kernel_without_tls() -> Option<String> {
    let path = "/proc/sys/net/ipv4/tcp_available_ulp";
    match std::fs::read_to_string(path) {
        Ok(list) if list.split_whitespace().any(|u| u == "tls") => None,
        Ok(list) => Some(format!(
            "this kernel has no TLS ({path}: {:?}); scripts/ktls-tests.sh runs it in a VM whose kernel has TLS",
            list.trim()
        )),
        Err(e) => Some(format!("cannot read {path}: {e}")),
    }
}

/// A TLS-only server on I/O `driver` with the files of [`FILES`], two
/// workers, and its admin listener.
fn server(driver: &str, extra: &[&str]) -> TestServer {
    let mut b: Builder = TestServer::builder()
        .no_bind()
        .driver(driver)
        .tls_self_signed()
        .admin()
        .args(&["--workers", "2"])
        .args(extra);
    for (name, len) in FILES {
        b = b.file(name, pattern(len));
    }
    b.start()
}

fn client(
    server: &TestServer,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    pinned(server.fingerprint(), versions)
}

/// Every file of [`FILES`] whole, two ranges, a HEAD and three pipelined
/// requests on one TLS connection, each checked byte for byte.
fn fetch_everything(s: &mut Tls, what: &str) {
    for (name, len) in FILES {
        let r = tls::get(s, &format!("/{name}"), "");
        assert_eq!(r.status, 200, "{what}: /{name}");
        assert!(
            r.body == pattern(len),
            "{what}: /{name}: {} bytes differ",
            r.body.len()
        );
    }
    let whole = pattern(5 * MIB);
    for (from, to) in [(0usize, 0usize), (1000, 3 * MIB + 17)] {
        let r = tls::get(s, "/5m.bin", &format!("Range: bytes={from}-{to}\r\n"));
        assert_eq!(r.status, 206, "{what}: range {from}-{to}");
        assert!(
            r.body == whole[from..=to],
            "{what}: range {from}-{to} differs"
        );
    }
    s.write_all(b"HEAD /1m.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("write HEAD");
    let head = common::read_response_head_only(s);
    assert_eq!(head.status, 200, "{what}: HEAD");
    assert_eq!(head.content_length(), Some(MIB as u64), "{what}: HEAD");
    let pipelined = "GET /1k.bin HTTP/1.1\r\nHost: localhost\r\n\r\n\
                     GET /100k.bin HTTP/1.1\r\nHost: localhost\r\n\r\n\
                     GET /1k.bin HTTP/1.1\r\nHost: localhost\r\n\r\n";
    s.write_all(pipelined.as_bytes()).expect("write pipelined");
    for len in [KIB, 100 * KIB, KIB] {
        let r = common::read_response(s);
        assert_eq!(r.status, 200, "{what}: pipelined");
        assert!(
            r.body == pattern(len),
            "{what}: pipelined {len} bytes differ"
        );
    }
}

/// `Connection: close` ends with the server's close_notify: the client
/// reads a clean end of stream, not a cut one.
fn closes_with_close_notify(s: &mut Tls, what: &str) {
    let r = tls::get(s, "/1k.bin", "Connection: close\r\n");
    assert_eq!(r.status, 200, "{what}");
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(0) => {}
        other => panic!("{what}: after the last answer, {other:?} (no close_notify?)"),
    }
}

/// How often `needle` appears in what the server printed.
fn said(server: &TestServer, needle: &str) -> usize {
    let all = format!("{}\n{}", server.stdout(), server.stderr()).to_lowercase();
    all.matches(needle).count()
}

fn ktls_connections(server: &TestServer) -> f64 {
    metric(&server.metrics(), "servery_tls_ktls_total").expect("servery_tls_ktls_total")
}

/// `--ktls auto` (the default) on whatever this kernel is: files served
/// right, and who seals said once, in the ready line.
fn ktls_auto_serves_and_says_once_who_seals(driver: &str) {
    let server = server(driver, &[]);
    let ready = server.ready_line().to_owned();
    let expected = match kernel_without_tls() {
        None => "ktls on",
        Some(_) => "ktls unavailable (",
    };
    assert!(ready.contains(expected), "{ready}");
    assert_eq!(
        said(&server, "ktls"),
        1,
        "said once, not per worker: {ready}"
    );
    let mut s = tls::connected(&client(&server, TLS13), server.https());
    fetch_everything(&mut s, "auto");
    closes_with_close_notify(&mut s, "auto");
    let handed = ktls_connections(&server);
    match kernel_without_tls() {
        None => assert_eq!(handed, 1.0, "the TLS 1.3 connection went to the kernel"),
        Some(_) => assert_eq!(handed, 0.0, "no kernel TLS here"),
    }
}

/// `--ktls off`: user space seals, and the ready line says so.
fn ktls_off_seals_in_user_space(driver: &str) {
    let server = server(driver, &["--ktls", "off"]);
    assert!(
        server.ready_line().contains("ktls off"),
        "{}",
        server.ready_line()
    );
    let mut s = tls::connected(&client(&server, TLS13), server.https());
    fetch_everything(&mut s, "off");
    closes_with_close_notify(&mut s, "off");
    assert_eq!(ktls_connections(&server), 0.0);
}

/// The kernel seals: TLS 1.3 over HTTP/1.1 handed over, TLS 1.2 not; both
/// served byte for byte, and closed with close_notify.
fn the_kernel_seals_tls13_and_user_space_tls12(driver: &str) {
    if let Some(why) = kernel_without_tls() {
        common::skipped(&why);
        return;
    }
    let server = server(driver, &[]);
    for i in 0..3 {
        let mut s = tls::connected(&client(&server, TLS13), server.https());
        fetch_everything(&mut s, &format!("TLS 1.3 #{i}"));
        closes_with_close_notify(&mut s, &format!("TLS 1.3 #{i}"));
    }
    assert_eq!(ktls_connections(&server), 3.0);
    let mut s = tls::connected(&client(&server, TLS12), server.https());
    fetch_everything(&mut s, "TLS 1.2");
    closes_with_close_notify(&mut s, "TLS 1.2");
    assert_eq!(
        ktls_connections(&server),
        3.0,
        "TLS 1.2 stays in user space"
    );
}

/// Where the kernel has TLS: a server on `driver` and a TLS 1.3
/// connection to it that has been answered once (so the kernel seals).
/// Elsewhere `None`, after saying SKIPPED and why.
fn kernel_sealed(driver: &str) -> Option<(TestServer, Tls)> {
    if let Some(why) = kernel_without_tls() {
        common::skipped(&why);
        return None;
    }
    let server = server(driver, &[]);
    let mut s = tls::connected(&client(&server, TLS13), server.https());
    assert_eq!(tls::get(&mut s, "/1k.bin", "").status, 200);
    Some((server, s))
}

/// A record that does not open: the fatal alert goes through the kernel
/// (a control message) and the connection closes; others are served.
fn a_bad_record_gets_its_alert_through_the_kernel(driver: &str) {
    let Some((server, mut s)) = kernel_sealed(driver) else {
        return;
    };
    let mut record = vec![23, 3, 3, 0, 40];
    record.extend((0..40u8).map(|i| i.wrapping_mul(37)));
    s.sock.write_all(&record).expect("write a forged record");
    let mut buf = [0u8; 64];
    let e = loop {
        match s.read(&mut buf) {
            Ok(0) => panic!("closed without an alert"),
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    let text = e.to_string();
    assert!(
        text.contains("BadRecordMac"),
        "expected the server's alert, got {text}"
    );
    let mut other = tls::connected(&client(&server, TLS13), server.https());
    closes_with_close_notify(&mut other, "after the alert");
}

/// A client asks for our KeyUpdate: on Linux 6.14 and later the kernel
/// takes our new keys and the connection goes on; before, it cannot, and
/// the connection ends with close_notify under the current keys rather
/// than with a record the client cannot open. Either way other connections
/// are served.
fn a_key_update_request_is_answered_or_the_connection_ends(driver: &str) {
    let Some((server, mut s)) = kernel_sealed(driver) else {
        return;
    };
    s.conn.refresh_traffic_keys().expect("ask for a key update");
    match tls::request(&mut s, "/1m.bin", "") {
        Ok(r) => {
            assert_eq!(r.status, 200);
            assert!(
                r.body == pattern(MIB),
                "under the new keys, the body differs"
            );
            eprintln!("the kernel took our new keys (Linux 6.14 or later)");
        }
        Err(e) => {
            // Ended with close_notify under the keys both sides share, not
            // with records the client can no longer open.
            let text = e.to_string();
            assert!(
                !text.contains("decrypt"),
                "the client got a record it cannot open: {text}"
            );
            eprintln!("the connection ended at the key update (kernel before 6.14): {text}");
        }
    }
    let mut other = tls::connected(&client(&server, TLS13), server.https());
    fetch_everything(&mut other, "after the key update");
}

driver_tests! {
    ktls_auto_serves_and_says_once_who_seals,
    ktls_off_seals_in_user_space,
    the_kernel_seals_tls13_and_user_space_tls12,
    a_bad_record_gets_its_alert_through_the_kernel,
    a_key_update_request_is_answered_or_the_connection_ends,
}
