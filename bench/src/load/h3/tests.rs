//! The engine against the in-process HTTP/3 server (`http3::test_server`), on 127.0.0.1.

use std::num::NonZeroUsize;
use std::time::Duration;

use super::*;
use crate::http3::test_server::{TestServer, BODY_1K};
use crate::load::ErrorClass;

fn nonzero(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).expect("nonzero")
}

/// A closed-loop plan for `path`: 2 connections × 4 streams, 200 ms warm-up, `duration`.
fn plan(server: &TestServer, path: &str, duration: Duration) -> Plan {
    let mut plan = http3::plan(&[server.url(path)]).expect("plan");
    plan.connections = nonzero(2);
    plan.pipeline = nonzero(4);
    plan.warmup = Duration::from_millis(200);
    plan.duration = duration;
    plan
}

#[test]
fn counts_requests_and_body_bytes_over_http3() {
    let server = TestServer::start();
    let report = run(&plan(&server, "/1k", Duration::from_secs(1))).expect("run");
    assert!(report.requests > 0, "{report:?}");
    assert_eq!(report.errors.total, 0, "{report:?}");
    assert_eq!(report.bytes, report.requests * BODY_1K.len() as u64);
    assert_eq!((report.connections, report.pipeline), (2, 4));
    assert_eq!(report.connects, 0, "connections made in warm-up carry over");
    assert!(report.latency_us.p50 > 0 && report.latency_us.max >= report.latency_us.p99);
    assert_eq!(report.latency_cdf.len(), crate::report::CDF_QUANTILES.len());
    assert!(report.client_cpu_s > 0.0, "{report:?}");
    assert!(
        report.client_cpu_s <= report.duration_s * 1.1,
        "one thread cannot use more than its window: {report:?}"
    );
    assert!((0.9..1.2).contains(&report.duration_s), "{report:?}");
}

#[test]
fn a_request_budget_is_exact_and_ends_the_run() {
    let server = TestServer::start();
    let mut plan = plan(&server, "/1k", Duration::from_secs(10));
    plan.threads = nonzero(2);
    plan.requests = std::num::NonZeroU64::new(300);
    let report = run(&plan).expect("run");
    assert_eq!(report.requests, 300, "{report:?}");
    assert_eq!(report.errors.total + report.unfinished, 0);
    assert!(report.duration_s < 5.0, "{report:?}");
}

#[test]
fn wrong_status_truncated_and_reset_bodies_are_errors() {
    let server = TestServer::start();
    let short = Duration::from_millis(300);
    let report = run(&plan(&server, "/missing", short)).expect("run");
    assert_eq!(report.requests, 0);
    assert!(report.errors.get(ErrorClass::Status) > 0, "{report:?}");
    assert_eq!(report.errors.total, report.errors.status);
    for path in ["/short", "/reset"] {
        let report = run(&plan(&server, path, short)).expect("run");
        assert_eq!(report.requests, 0, "{path}: {report:?}");
        assert!(report.errors.short_body > 0, "{path}: {report:?}");
        assert_eq!(report.errors.total, report.errors.short_body, "{path}");
    }
}

#[test]
fn open_loop_keeps_the_schedule() {
    let server = TestServer::start();
    let mut plan = plan(&server, "/1k", Duration::from_secs(1));
    plan.mode = Mode::Open { rate: 500.0 };
    let report = run(&plan).expect("run");
    assert_eq!(report.mode, "open");
    assert_eq!(report.errors.total, 0, "{report:?}");
    // 500/s for 1 s: each due request is answered, or unsent or unfinished when the window
    // closes (a busy test machine can leave a few behind).
    let due = report.requests + report.unsent + report.unfinished;
    assert!((499..=501).contains(&due), "{report:?}");
    assert!(report.requests >= 400, "{report:?}");
}

#[test]
fn churn_handshakes_per_request_and_posts_carry_their_body() {
    let server = TestServer::start();
    let mut plan = plan(&server, "/1k", Duration::from_millis(500));
    plan.pipeline = nonzero(1);
    plan.churn = true;
    let report = run(&plan).expect("run");
    assert!(report.requests > 0, "{report:?}");
    assert_eq!(report.errors.total, 0, "{report:?}");
    assert!(
        report.connects >= report.requests,
        "a connection per request: {report:?}"
    );
    let mut plan = self::plan(&server, "/count", Duration::from_millis(300));
    plan.method = "POST".to_string();
    plan.body = Some(vec![7; 3000]);
    let report = run(&plan).expect("run");
    assert!(report.requests > 0, "{report:?}");
    assert_eq!(report.errors.total, 0, "{report:?}");
    assert_eq!(report.bytes, report.requests * "3000".len() as u64);
}

#[test]
fn a_dead_server_counts_connect_errors() {
    // A port nothing listens on: the handshake's packets are refused or dropped.
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = socket.local_addr().expect("addr");
    drop(socket);
    let mut plan = http3::plan(&[format!("https://{addr}/")]).expect("plan");
    plan.warmup = Duration::ZERO;
    plan.duration = Duration::from_millis(400);
    plan.timeout = Duration::from_millis(100);
    plan.connections = nonzero(1);
    let report = run(&plan).expect("run");
    assert_eq!(report.requests, 0);
    assert!(report.errors.connect > 0, "{report:?}");
}

#[test]
fn pins_threads_and_refuses_a_cpu_it_cannot_have() {
    let server = TestServer::start();
    let mut plan = plan(&server, "/1k", Duration::from_millis(200));
    let first = core_affinity::get_core_ids()
        .and_then(|ids| ids.first().map(|c| c.id))
        .unwrap_or(0);
    plan.cpus = crate::plan::CpuSet::from_ids(vec![first]);
    plan.threads = nonzero(2);
    let report = run(&plan).expect("run");
    assert!(report.requests > 0, "{report:?}");
    plan.cpus = crate::plan::CpuSet::from_ids(vec![1000]);
    assert!(matches!(run(&plan), Err(Error::Pin { cpu: 1000, .. })));
}

#[test]
fn the_check_validates_over_http3() {
    let server = TestServer::start();
    let mut plan = http3::plan(&[server.url("/1k")]).expect("plan");
    plan.expect.length = Some(1024);
    let checked = http3::check(&plan).expect("check");
    assert_eq!((checked[0].status, checked[0].length), (200, 1024));
    assert_eq!(checked[0].url, server.url("/1k"));
    plan.expect.length = Some(1000);
    assert!(matches!(
        http3::check(&plan),
        Err(http3::Error::Check(crate::validate::Error::Length {
            got: 1024,
            ..
        }))
    ));
    let plan = http3::plan(&[server.url("/short")]).expect("plan");
    assert!(matches!(
        http3::check(&plan),
        Err(http3::Error::Check(crate::validate::Error::ContentLength {
            declared: 2048,
            got: 1024,
            ..
        }))
    ));
    let plan = http3::plan(&[server.url("/missing")]).expect("plan");
    assert!(matches!(
        http3::check(&plan),
        Err(http3::Error::Check(crate::validate::Error::Status {
            got: 404,
            ..
        }))
    ));
}

/// Against Caddy (its HTTP/3 is quic-go) when it is installed, serving a 1 KiB file with a
/// fresh certificate for `localhost`: `cargo test -p servery-bench -- --ignored caddy`.
#[test]
#[ignore = "starts Caddy, if installed; run with --ignored"]
fn loads_caddy_over_http3() {
    let Some(caddy) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("caddy"))
            .find(|p| p.is_file())
    }) else {
        eprintln!("SKIPPED: caddy is not installed");
        return;
    };
    let dir = std::env::temp_dir().join(format!("servery-h3-caddy-{}", std::process::id()));
    let root = dir.join("root");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(root.join("1k.bin"), BODY_1K).expect("file");
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    std::fs::write(dir.join("cert.pem"), certified.cert.pem()).expect("cert");
    std::fs::write(dir.join("key.pem"), certified.signing_key.serialize_pem()).expect("key");
    // Caddy binds the port for TCP and UDP; a free UDP port is free enough for a test.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free port")
        .port();
    let d = dir.display();
    let conf = format!(
        "{{\n\tadmin off\n\tauto_https off\n\tservers {{\n\t\tprotocols h1 h2 h3\n\t}}\n}}\n\
         https://localhost:{port} {{\n\ttls {d}/cert.pem {d}/key.pem\n\
         \troot * {d}/root\n\tfile_server\n}}\n"
    );
    std::fs::write(dir.join("Caddyfile"), conf).expect("Caddyfile");
    let mut child = std::process::Command::new(caddy)
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(dir.join("Caddyfile"))
        // Caddy keeps its autosave and TLS storage under these: keep them in the temp dir.
        .env("HOME", &dir)
        .env("XDG_CONFIG_HOME", &dir)
        .env("XDG_DATA_HOME", &dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start caddy");
    // `localhost`: Caddy picks its certificate by SNI, and an IP literal sends none.
    let url = format!("https://localhost:{port}/1k.bin");
    let mut plan = http3::plan(&[&url]).expect("plan");
    plan.timeout = Duration::from_millis(500);
    let deadline = Instant::now() + Duration::from_secs(10);
    let ready = loop {
        match http3::check(&plan) {
            Ok(checked) => break Ok(checked),
            Err(e) if Instant::now() >= deadline => break Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let report = ready.map(|checked| {
        assert_eq!(checked[0].length, BODY_1K.len() as u64);
        plan.connections = nonzero(2);
        plan.pipeline = nonzero(4);
        plan.warmup = Duration::from_millis(200);
        plan.duration = Duration::from_secs(1);
        plan.timeout = Duration::from_secs(2);
        run(&plan)
    });
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let report = report.expect("caddy answered").expect("run");
    assert!(report.requests > 0, "{report:?}");
    assert_eq!(report.errors.total, 0, "{report:?}");
    assert_eq!(report.bytes, report.requests * BODY_1K.len() as u64);
}
