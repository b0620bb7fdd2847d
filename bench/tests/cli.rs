//! The `servery-load` binary end to end: exit codes, JSON output, the `validate` subcommand.

mod common;

use std::process::{Command, Output};

use common::{Behavior, TestServer};

fn servery_load(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servery-load"))
        .args(args)
        .output()
        .expect("run servery-load")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const BODY: &[u8] = b"hello, servery\n";
/// `printf 'hello, servery\n' | sha256sum`
const BODY_SHA256: &str = "278ff5d604eea1526bbc924067e15cd94054f38fa8355086beb5dbf064170dbc";

#[test]
fn json_to_stdout_carries_the_schema_and_exact_counts() {
    let server = TestServer::start(Behavior::Ok(BODY.to_vec()));
    let url = server.url("/hello");
    let out = servery_load(&[
        "-c", "2", "-n", "50", "--warmup", "0", "-d", "5s", "--json", "-", &url,
    ]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(json["schema"], "servery-load/1");
    assert_eq!(json["mode"], "closed");
    assert_eq!(json["requests"], 50);
    assert_eq!(json["connections"], 2);
    assert_eq!(json["threads"], 1);
    assert_eq!(json["pipeline"], 1);
    for key in ["p50", "p90", "p99", "p999", "max"] {
        assert!(json["latency_us"][key].is_u64(), "latency_us.{key}");
    }
    for key in [
        "connect",
        "read",
        "timeout",
        "status",
        "short_body",
        "total",
    ] {
        assert_eq!(json["errors"][key], 0, "errors.{key}");
    }
    for key in ["rps", "bytes_per_sec", "duration_s", "client_cpu_s"] {
        assert!(json[key].is_f64(), "{key}");
    }
    // Validation's one request plus the 50 timed ones.
    assert_eq!(server.requests(), 51);
    // With JSON on stdout the summary moves to stderr.
    assert!(text(&out.stderr).contains("req/s"));
}

#[test]
fn json_file_and_summary() {
    let server = TestServer::start(Behavior::Ok(BODY.to_vec()));
    let dir = std::env::temp_dir().join(format!("servery-load-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("report.json");
    let out = servery_load(&[
        "-n",
        "20",
        "--warmup",
        "0",
        "--json",
        path.to_str().expect("utf-8 path"),
        &server.url("/"),
    ]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("req/s"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("report written")).expect("JSON");
    assert_eq!(json["requests"], 20);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn right_sha_passes_validation() {
    let server = TestServer::start(Behavior::Ok(BODY.to_vec()));
    let out = servery_load(&[
        "--expect-sha256",
        BODY_SHA256,
        "--expect-length",
        "15",
        "-n",
        "5",
        "--warmup",
        "0",
        "-q",
        &server.url("/"),
    ]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
}

#[test]
fn wrong_body_fails_validation_with_exit_1() {
    let server = TestServer::start(Behavior::Ok(BODY.to_vec()));
    let out = servery_load(&["--expect-sha256", &"00".repeat(32), &server.url("/")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("validation failed"), "{stderr}");
    assert!(stderr.contains("SHA-256"), "{stderr}");
    // Only the validation request was sent: no load after a failed check.
    assert_eq!(server.requests(), 1);
}

#[test]
fn wrong_status_fails_validation_with_exit_1() {
    let server = TestServer::start(Behavior::Status(404));
    let out = servery_load(&[&server.url("/missing")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("status 404, expected 200"));
}

#[test]
fn validate_subcommand_prints_status_length_and_sha() {
    let server = TestServer::start(Behavior::Ok(BODY.to_vec()));
    let out = servery_load(&["validate", &server.url("/")]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("status 200"), "{stdout}");
    assert!(
        stdout.contains(&format!("{} bytes", BODY.len())),
        "{stdout}"
    );
    assert!(stdout.contains(BODY_SHA256), "{stdout}");
    assert_eq!(server.requests(), 1);
}

#[test]
fn a_body_file_is_posted_and_its_digest_comes_back() {
    let server = TestServer::start(Behavior::Digest);
    let file = std::env::temp_dir().join(format!("servery-load-cli-body-{}", std::process::id()));
    std::fs::write(&file, BODY).expect("write body file");
    let body_file = file.display().to_string();
    // The test server answers the hex SHA-256 of the body it read: 64 bytes.
    let out = servery_load(&[
        "--body-file",
        &body_file,
        "--expect-length",
        "64",
        "-n",
        "20",
        "--warmup",
        "0",
        "--json",
        "-",
        &server.url("/digest"),
    ]);
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["method"], "POST");
    assert_eq!(json["request_body_bytes"], BODY.len());
    assert_eq!(json["requests"], 20);
    assert_eq!(server.requests(), 21);
    let methods = server.seen.methods.lock().expect("methods");
    assert!(methods.iter().all(|m| m == "POST"), "{methods:?}");
    assert_eq!(
        servery_load(&["--body-file", "/nonexistent/body", &server.url("/")])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(servery_load(&[]).status.code(), Some(2));
    assert_eq!(
        servery_load(&["-d", "soon", "http://127.0.0.1:9/"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn invalid_combinations_exit_1_with_the_fix() {
    let out = servery_load(&["--churn", "-p", "4", "http://127.0.0.1:9/"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--pipeline must be 1"));
}
