//! The engine and validator against a scripted in-process server: counts must match what the
//! server saw, and every failure must land in its error class.

mod common;

use std::num::{NonZeroU64, NonZeroUsize};
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Behavior, TestServer};
use servery_bench::plan::{parse_sha256, Plan};
use servery_bench::report::Report;
use servery_bench::validate;
use servery_bench::{ErrorClass, Mode};
use sha2::{Digest, Sha256};

fn body() -> Vec<u8> {
    (0..1000u32).map(|i| (i % 251) as u8).collect()
}

/// A plan for `urls` with test-sized defaults: no warm-up, short window, short timeout.
fn plan(urls: &[String]) -> Plan {
    let mut plan = Plan::new(urls).expect("plan");
    plan.warmup = Duration::ZERO;
    plan.duration = Duration::from_secs(10);
    plan.timeout = Duration::from_secs(2);
    plan.connections = n(2);
    plan
}

fn n(v: usize) -> NonZeroUsize {
    NonZeroUsize::new(v).expect("nonzero")
}

fn budget(v: u64) -> Option<NonZeroU64> {
    NonZeroU64::new(v)
}

fn run(plan: &Plan) -> Report {
    servery_bench::run(plan).expect("run")
}

/// Errors in every class but `only` are zero.
fn assert_only_errors(report: &Report, only: ErrorClass) {
    for class in ErrorClass::ALL {
        if class != only {
            assert_eq!(
                report.errors.get(class),
                0,
                "{} errors: {report:#?}",
                class.name()
            );
        }
    }
    assert!(
        report.errors.get(only) > 0,
        "no {} errors: {report:#?}",
        only.name()
    );
}

#[test]
fn request_budget_is_exact_and_matches_the_server() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/f")]);
    plan.connections = n(4);
    plan.threads = n(2);
    plan.requests = budget(500);
    let report = run(&plan);
    assert_eq!(report.requests, 500, "{report:#?}");
    assert_eq!(report.errors.total, 0);
    assert_eq!(server.requests(), 500);
    assert!(report.duration_s < 5.0);
    assert!(report.latency_us.p50 > 0 && report.latency_us.max >= report.latency_us.p99);
    // Exactly the counted responses' bytes: the test server's head plus the 1000-byte body.
    let head = "HTTP/1.1 200 X\r\nContent-Length: 1000\r\n\r\n".len() as u64;
    assert_eq!(report.bytes, 500 * (head + 1000));
    assert_eq!(report.connects, 4);
}

#[test]
fn pipelined_batches_are_counted_exactly() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.pipeline = n(8);
    plan.requests = budget(400);
    let report = run(&plan);
    assert_eq!(report.requests, 400, "{report:#?}");
    assert_eq!(report.errors.total, 0);
    assert_eq!(server.requests(), 400);
    assert!(
        server.seen.max_batch.load(Ordering::SeqCst) > 1,
        "server never saw two requests in one read"
    );
}

#[test]
fn churn_opens_a_connection_per_request() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.churn = true;
    plan.requests = budget(50);
    let report = run(&plan);
    assert_eq!(report.requests, 50, "{report:#?}");
    assert_eq!(report.errors.total, 0);
    assert_eq!(report.connects, 50);
    assert_eq!(server.requests(), 50);
    assert_eq!(server.connections(), 50);
    assert_eq!(server.seen.close_requested.load(Ordering::SeqCst), 50);
}

#[test]
fn server_connection_close_is_not_an_error() {
    let server = TestServer::start(Behavior::CloseEach(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.requests = budget(100);
    let report = run(&plan);
    assert_eq!(report.requests, 100, "{report:#?}");
    assert_eq!(report.errors.total, 0);
    assert_eq!(server.requests(), 100);
    assert!(server.connections() >= 100);
}

#[test]
fn close_delimited_bodies_complete_on_eof() {
    let server = TestServer::start(Behavior::CloseDelimited(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.requests = budget(60);
    assert_eq!(validate::check(&plan).expect("validate")[0].length, 1000);
    let report = run(&plan);
    assert_eq!(report.requests, 60, "{report:#?}");
    assert_eq!(report.errors.total, 0);
    assert_eq!(
        report.bytes,
        60 * (b"HTTP/1.0 200 OK\r\n\r\n".len() as u64 + 1000)
    );
}

#[test]
fn pipelined_requests_after_a_close_are_resent() {
    let server = TestServer::start(Behavior::CloseEach(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.pipeline = n(4);
    plan.requests = budget(40);
    let report = run(&plan);
    assert_eq!(report.requests, 40, "{report:#?}");
    assert_eq!(report.errors.total, 0);
}

#[test]
fn chunked_responses_are_framed_and_validated() {
    let server = TestServer::start(Behavior::Chunked(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.requests = budget(200);
    let checked = validate::check(&plan).expect("validate");
    assert!(checked[0].chunked);
    assert_eq!(checked[0].length, 1000);
    let report = run(&plan);
    assert_eq!(report.requests, 200, "{report:#?}");
    assert_eq!(report.errors.total, 0);
}

#[test]
fn unexpected_status_is_a_status_error() {
    let server = TestServer::start(Behavior::Status(500));
    let mut plan = plan(&[server.url("/")]);
    plan.duration = Duration::from_millis(300);
    let report = run(&plan);
    assert_eq!(report.requests, 0);
    assert_only_errors(&report, ErrorClass::Status);
    // Connections stay up: a wrong status is not a broken connection.
    assert_eq!(report.connects, 2);
}

#[test]
fn close_mid_body_is_a_short_body() {
    let server = TestServer::start(Behavior::CloseMidBody);
    let mut plan = plan(&[server.url("/")]);
    plan.duration = Duration::from_millis(300);
    let report = run(&plan);
    assert_eq!(report.requests, 0);
    assert_only_errors(&report, ErrorClass::ShortBody);
}

#[test]
fn silent_server_is_a_timeout() {
    let server = TestServer::start(Behavior::NeverAnswer);
    let mut plan = plan(&[server.url("/")]);
    plan.timeout = Duration::from_millis(100);
    plan.duration = Duration::from_millis(550);
    let report = run(&plan);
    assert_eq!(report.requests, 0);
    assert_only_errors(&report, ErrorClass::Timeout);
    // Two connections, each timing out about every 100 ms.
    assert!(report.errors.timeout >= 4, "{report:#?}");
}

#[test]
fn nothing_listening_is_a_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let mut plan = plan(&[format!("http://127.0.0.1:{port}/")]);
    plan.duration = Duration::from_millis(200);
    let report = run(&plan);
    assert_eq!(report.requests, 0);
    assert_only_errors(&report, ErrorClass::Connect);
    assert!(matches!(
        validate::check(&plan),
        Err(validate::Error::Connect { .. })
    ));
}

#[test]
fn open_loop_latency_includes_queueing_delay() {
    let server = TestServer::start(Behavior::Sleep(Duration::from_millis(50), body()));
    let mut plan = plan(&[server.url("/")]);
    plan.connections = n(1);
    plan.timeout = Duration::from_secs(10);
    plan.duration = Duration::from_secs(1);

    // Control: closed loop sees only the server's 50 ms.
    let closed = run(&plan);
    assert!(closed.latency_us.p50 >= 50_000, "{closed:#?}");
    assert!(closed.latency_us.p50 < 120_000, "{closed:#?}");

    // Open loop at 100/s against a server that does 20/s: requests queue, and the queueing
    // counts. The k-th answer arrives ~50(k+1) ms in but was due at 10k ms.
    plan.mode = Mode::Open { rate: 100.0 };
    let open = run(&plan);
    assert!(open.requests >= 10, "{open:#?}");
    assert!(
        open.latency_us.p50 > 200_000,
        "p50 {} µs does not include queueing: {open:#?}",
        open.latency_us.p50
    );
    assert!(open.unsent > 0, "{open:#?}");
    assert_eq!(open.errors.total, 0);
}

#[test]
fn open_loop_holds_its_rate() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.connections = n(4);
    plan.threads = n(2);
    plan.duration = Duration::from_secs(1);
    plan.mode = Mode::Open { rate: 400.0 };
    let report = run(&plan);
    assert!(
        (360..=440).contains(&report.requests),
        "expected ~400: {report:#?}"
    );
    assert_eq!(report.errors.total, 0);
    assert_eq!(report.unsent, 0);
    assert_eq!(report.mode, "open");
}

#[test]
fn open_loop_budget_and_churn_are_exact() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.mode = Mode::Open { rate: 2000.0 };
    plan.churn = true;
    plan.requests = budget(100);
    let report = run(&plan);
    assert_eq!(report.requests, 100, "{report:#?}");
    assert_eq!(server.requests(), 100);
    assert_eq!(server.connections(), 100);
}

#[test]
fn warmup_requests_are_not_counted() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.warmup = Duration::from_millis(300);
    plan.duration = Duration::from_millis(300);
    let report = run(&plan);
    assert!(report.requests > 0);
    assert!(
        server.requests() > report.requests + report.unfinished + 10,
        "server saw {} but the report counts {}: warm-up leaked in",
        server.requests(),
        report.requests
    );
    // Warm-up connections carry over into the window.
    assert_eq!(report.connects, 0);
    assert!((report.duration_s - 0.3).abs() < 0.05, "{report:#?}");
}

#[test]
fn several_urls_are_used_round_robin() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/a"), server.url("/b?x=1")]);
    plan.connections = n(1);
    plan.requests = budget(100);
    run(&plan);
    let paths = server.seen.paths.lock().expect("paths").clone();
    assert_eq!(paths.len(), 100);
    assert_eq!(paths.iter().filter(|p| *p == "/a").count(), 50);
    assert_eq!(paths.iter().filter(|p| *p == "/b?x=1").count(), 50);
}

#[test]
fn pinned_worker_runs() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/")]);
    plan.cpus = Some("0".parse().expect("cpus"));
    plan.requests = budget(20);
    assert_eq!(run(&plan).requests, 20);
}

#[test]
fn request_bodies_are_sent_with_every_request() {
    let server = TestServer::start(Behavior::Digest);
    let upload: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
    let digest = servery_bench::plan::hex(&Sha256::digest(&upload));
    let mut plan = plan(&[server.url("/digest")]);
    plan.method = "POST".to_string();
    plan.body = Some(upload);
    plan.pipeline = n(3);
    plan.requests = budget(300);
    plan.expect.length = Some(64);
    plan.expect.sha256 = Some(Sha256::digest(digest.as_bytes()).into());
    let checked = validate::check(&plan).expect("the digest of the body we sent");
    assert_eq!(checked[0].length, 64);
    let report = run(&plan);
    assert_eq!(
        (report.requests, report.errors.total),
        (300, 0),
        "{report:#?}"
    );
    assert_eq!(report.request_body_bytes, Some(4096));
    // Validation's request plus the run's, each with the whole body.
    assert_eq!(server.requests(), 301);
    assert_eq!(server.seen.body_bytes.load(Ordering::SeqCst), 301 * 4096);
    let methods = server.seen.methods.lock().expect("methods");
    assert!(methods.iter().all(|m| m == "POST"), "{methods:?}");
}

#[test]
fn validation_catches_a_wrong_body() {
    let server = TestServer::start(Behavior::Ok(body()));
    let mut plan = plan(&[server.url("/")]);
    let checked = validate::check(&plan).expect("validate");
    assert_eq!(checked[0].status, 200);
    assert_eq!(checked[0].length, 1000);

    plan.expect.sha256 = Some(parse_sha256(&checked[0].sha256).expect("hex"));
    plan.expect.length = Some(1000);
    validate::check(&plan).expect("right body passes");

    plan.expect.sha256 = Some([0u8; 32]);
    assert!(matches!(
        validate::check(&plan),
        Err(validate::Error::Sha256 { .. })
    ));
    plan.expect.sha256 = None;
    plan.expect.length = Some(999);
    assert!(matches!(
        validate::check(&plan),
        Err(validate::Error::Length { .. })
    ));
}

#[test]
fn validation_catches_status_and_truncation() {
    let server = TestServer::start(Behavior::Status(404));
    let plan = plan(&[server.url("/")]);
    assert!(matches!(
        validate::check(&plan),
        Err(validate::Error::Status { got: 404, .. })
    ));
    let server = TestServer::start(Behavior::CloseMidBody);
    let plan = self::plan(&[server.url("/")]);
    assert!(matches!(
        validate::check(&plan),
        Err(validate::Error::ContentLength {
            declared: 100,
            got: 10,
            ..
        })
    ));
}
