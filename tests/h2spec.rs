//! HTTP/2 conformance: h2spec's 146 cases (RFC 9113 and HPACK) against the
//! real binary, over TLS (ALPN h2) and over h2c (prior knowledge), under
//! both drivers. Every case must pass.
//!
//! h2spec is a third-party binary kept at `../shared/tools/h2spec` (see
//! `../shared/tools/README.md`); `H2SPEC` points elsewhere. Where it is
//! absent when the tests are built, `build.rs` sets `no_h2spec` and both
//! tests are ignored with the reason (`cargo test` prints `ignored, no
//! h2spec …`), so a clone without `../shared` still runs the suite and sees
//! what it did not run. Gone after the build, it fails the test: rebuilding
//! looks again. `scripts/h2spec.sh` runs the same against a release build
//! and keeps the reports.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::TestServer;

/// The h2spec binary `build.rs` found, where `build.rs` looks.
fn h2spec() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = match std::env::var_os("H2SPEC") {
        Some(p) if !p.is_empty() => root.join(p),
        _ => root.join("../shared/tools/h2spec"),
    };
    assert!(
        path.is_file(),
        "no h2spec at {} (set H2SPEC; a build that finds none ignores these tests)",
        path.display()
    );
    path
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
    let h2spec = h2spec();
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
#[cfg_attr(
    no_h2spec,
    ignore = "no h2spec at ../shared/tools/h2spec or $H2SPEC when built (add it, then touch build.rs)"
)]
fn h2spec_passes_every_case_over_tls_and_h2c_on_io_uring() {
    passes_h2spec("uring");
}

#[test]
#[cfg_attr(
    no_h2spec,
    ignore = "no h2spec at ../shared/tools/h2spec or $H2SPEC when built (add it, then touch build.rs)"
)]
fn h2spec_passes_every_case_over_tls_and_h2c_on_epoll() {
    passes_h2spec("epoll");
}
