//! HTTP/2 conformance: h2spec's 146 cases (RFC 9113 and HPACK) against the
//! real binary, over TLS (ALPN h2) and over h2c (prior knowledge), under
//! both drivers. Every case must pass.
//!
//! h2spec is a third-party binary kept at `../shared/tools/h2spec` (see
//! `../shared/tools/README.md`); `H2SPEC` points elsewhere. Where it is
//! absent the tests say so and pass, so a clone without `../shared` still
//! runs the suite. `scripts/h2spec.sh` runs the same against a release
//! build and keeps the reports.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::TestServer;

/// The h2spec binary, if this machine has it.
fn h2spec() -> Option<PathBuf> {
    let path = std::env::var_os("H2SPEC")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/h2spec")
        });
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("SKIPPED: no h2spec at {} (set H2SPEC)", path.display());
        None
    }
}

/// Run h2spec against `port` (`tls`: over TLS, self-signed accepted) and
/// return its summary line, failing with the failed cases.
fn conformance(h2spec: &PathBuf, port: u16, tls: bool) -> String {
    let mut cmd = Command::new(h2spec);
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-o", "5"]);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    let out = cmd.output().expect("run h2spec");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary = text.lines().last().unwrap_or_default().to_owned();
    let failures: Vec<&str> = text.lines().filter(|l| l.contains('×')).collect();
    assert!(
        out.status.success() && failures.is_empty(),
        "h2spec over {}: {summary}\n{}",
        if tls { "TLS" } else { "h2c" },
        failures.join("\n")
    );
    summary
}

fn passes_h2spec(driver: &str) {
    let Some(h2spec) = h2spec() else { return };
    let server = TestServer::builder()
        .file("index.html", "hello over HTTP/2\n")
        .tls_bind("127.0.0.1:0")
        .tls_self_signed()
        .driver(driver)
        .start();
    for (port, tls) in [(server.https().port(), true), (server.addr().port(), false)] {
        let summary = conformance(&h2spec, port, tls);
        assert!(summary.contains(" 0 failed"), "{summary}");
        assert!(summary.starts_with("146 tests, 146 passed"), "{summary}");
    }
}

#[test]
fn h2spec_passes_every_case_over_tls_and_h2c_on_io_uring() {
    passes_h2spec("uring");
}

#[test]
fn h2spec_passes_every_case_over_tls_and_h2c_on_epoll() {
    passes_h2spec("epoll");
}
