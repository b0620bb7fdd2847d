//! What a load run should do, as types that cannot be wrong once [`Plan::check`] passed.
//!
//! Owns: the run's shape ([`Plan`]), the server it targets ([`Target`], parsed from `http://`
//! URLs), what a good response looks like ([`Expect`]), CPU lists ([`CpuSet`]) and every
//! default, each a documented `const`.
//! Does not own: command-line syntax (`cli`) or running anything (`load`, `validate`).
//!
//! Flow:
//! 1. [`Plan::new`] parses the URLs into a [`Target`] and fills in the defaults.
//! 2. The caller (the CLI, a test, a future `matrix` driver) adjusts the public fields.
//! 3. [`Plan::check`] enforces the cross-field rules; `load::run` and `validate::check` call it
//!    again, so a plan that skipped it still cannot run wrong.

mod cpus;
mod target;

use std::num::{NonZeroU64, NonZeroUsize};
use std::time::Duration;

pub use cpus::CpuSet;
pub use target::Target;

/// wrk's default, so a run with no flags is comparable to a plain `wrk URL`.
pub const DEFAULT_CONNECTIONS: NonZeroUsize = nonzero(10);
/// One thread: the point of this tool is to measure the server, not to out-thread it.
pub const DEFAULT_THREADS: NonZeroUsize = nonzero(1);
/// Long enough for a stable p99 at loopback rates, short enough for a benchmark matrix.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Lets connection setup, the server's caches and the client's page faults settle before the
/// clock starts. Connections made during warm-up are carried into the timed window.
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(1);
/// wrk's default request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
/// A static file server answering a GET for an existing file.
pub const DEFAULT_EXPECT_STATUS: u16 = 200;
/// What a load run asks for unless told otherwise: a static file server's request.
pub const DEFAULT_METHOD: &str = "GET";

/// A complete description of one load run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The server and the request paths, used round-robin.
    pub target: Target,
    /// Connections in total, spread as evenly as possible over the threads.
    pub connections: NonZeroUsize,
    /// Worker threads, each with its own event loop.
    pub threads: NonZeroUsize,
    /// CPUs to pin worker `i` to (`cpus[i % len]`); `None` leaves scheduling to the kernel.
    pub cpus: Option<CpuSet>,
    /// The timed window (upper bound when `requests` is set).
    pub duration: Duration,
    /// Untimed warm-up before the window; its requests are not counted.
    pub warmup: Duration,
    /// Requests in flight per connection. Closed loop: written together as one batch, and the
    /// next batch goes once all are answered. Open loop: the most outstanding at once.
    pub pipeline: NonZeroUsize,
    /// A new connection per request, sending `Connection: close`.
    pub churn: bool,
    /// The request method, a token (RFC 9110 §9.1); [`DEFAULT_METHOD`] unless set.
    pub method: String,
    /// Extra request headers, in order.
    pub headers: Vec<(String, String)>,
    /// Sent with every request, after the head, with its `Content-Length`; `None` sends no
    /// body and no `Content-Length`. Serialized into the request once, like the head.
    pub body: Option<Vec<u8>>,
    /// Longest a request may wait for its complete response before it counts as a timeout.
    pub timeout: Duration,
    /// Closed loop, or open loop at a fixed rate.
    pub mode: Mode,
    /// Stop after exactly this many timed requests have been sent and answered.
    pub requests: Option<NonZeroU64>,
    /// What every response must look like.
    pub expect: Expect,
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Each connection sends its next batch as soon as the previous one is answered.
    Closed,
    /// Requests are scheduled at `rate` per second in total, whether or not the server keeps
    /// up; latency counts from the scheduled time, so queueing delay is included.
    Open { rate: f64 },
}

impl Mode {
    /// `"closed"` or `"open"`, as written in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Closed => "closed",
            Mode::Open { .. } => "open",
        }
    }
}

/// What a correct response is; checked by validation, and `status` on every timed response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect {
    pub status: u16,
    /// SHA-256 of the (de-chunked) body, checked by validation only.
    pub sha256: Option<[u8; 32]>,
    /// Body length, checked by validation only.
    pub length: Option<u64>,
}

/// A plan that cannot run, naming the field and the fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no URL given: pass at least one http://host:port/path")]
    NoUrls,
    #[error("bad URL {url:?}: {reason}")]
    Url { url: String, reason: &'static str },
    #[error("cannot resolve {authority:?}: {source}")]
    Resolve {
        authority: String,
        source: std::io::Error,
    },
    #[error("all URLs must name the same host and port: {first:?} vs {other:?}")]
    MixedHosts { first: String, other: String },
    #[error(
        "--threads {threads} exceeds --connections {connections}: every thread needs a connection"
    )]
    ThreadsExceedConnections { threads: usize, connections: usize },
    #[error("--churn sends one request per connection, so --pipeline must be 1 (got {pipeline})")]
    ChurnWithPipeline { pipeline: usize },
    #[error("--rate must be a positive number of requests per second (got {rate})")]
    Rate { rate: f64 },
    #[error("--duration must be greater than zero")]
    Duration,
    #[error("--timeout must be greater than zero")]
    Timeout,
    #[error("bad header {header:?}: expected 'Name: value' without CR or LF")]
    Header { header: String },
    #[error("bad method {method:?}: expected a token such as GET or POST")]
    Method { method: String },
    #[error("-H {name} conflicts with the request body: the generator frames the body itself (Content-Length), so leave that header out")]
    BodyFraming { name: String },
    #[error("bad CPU list {spec:?}: expected e.g. '1' or '2-3,8'")]
    Cpus { spec: String },
    #[error("bad SHA-256 {hex:?}: expected 64 hex digits")]
    Sha256 { hex: String },
}

impl Plan {
    /// A closed-loop plan against `urls` with every default.
    pub fn new<S: AsRef<str>>(urls: &[S]) -> Result<Plan, Error> {
        Ok(Plan {
            target: Target::parse(urls)?,
            connections: DEFAULT_CONNECTIONS,
            threads: DEFAULT_THREADS,
            cpus: None,
            duration: DEFAULT_DURATION,
            warmup: DEFAULT_WARMUP,
            pipeline: nonzero(1),
            churn: false,
            method: DEFAULT_METHOD.to_string(),
            headers: Vec::new(),
            body: None,
            timeout: DEFAULT_TIMEOUT,
            mode: Mode::Closed,
            requests: None,
            expect: Expect {
                status: DEFAULT_EXPECT_STATUS,
                sha256: None,
                length: None,
            },
        })
    }

    /// Enforces the rules that span fields.
    pub fn check(&self) -> Result<(), Error> {
        if self.threads > self.connections {
            return Err(Error::ThreadsExceedConnections {
                threads: self.threads.get(),
                connections: self.connections.get(),
            });
        }
        if self.churn && self.pipeline.get() > 1 {
            return Err(Error::ChurnWithPipeline {
                pipeline: self.pipeline.get(),
            });
        }
        if let Mode::Open { rate } = self.mode {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(Error::Rate { rate });
            }
        }
        if self.duration.is_zero() {
            return Err(Error::Duration);
        }
        if self.timeout.is_zero() {
            return Err(Error::Timeout);
        }
        for (name, value) in &self.headers {
            check_header(name, value)?;
            let framing = ["content-length", "transfer-encoding"];
            if self.body.is_some() && framing.iter().any(|f| name.eq_ignore_ascii_case(f)) {
                return Err(Error::BodyFraming { name: name.clone() });
            }
        }
        if !is_token(&self.method) {
            return Err(Error::Method {
                method: self.method.clone(),
            });
        }
        Ok(())
    }

    /// The serialized request for each path, in `target.paths` order.
    pub(crate) fn requests(&self) -> Vec<Vec<u8>> {
        self.target
            .paths
            .iter()
            .map(|path| {
                let shape = crate::http::request::Shape {
                    method: &self.method,
                    path,
                    headers: &self.headers,
                    body: self.body.as_deref(),
                    close: self.churn,
                };
                crate::http::request::serialize(&shape, &self.target.authority)
            })
            .collect()
    }
}

/// Parses `Name: value` as given to `-H`.
pub fn parse_header(header: &str) -> Result<(String, String), Error> {
    let bad = || Error::Header {
        header: header.to_string(),
    };
    let (name, value) = header.split_once(':').ok_or_else(bad)?;
    let (name, value) = (name.trim(), value.trim());
    check_header(name, value).map_err(|_| bad())?;
    Ok((name.to_string(), value.to_string()))
}

/// RFC 9110 §5.6.2: `token = 1*tchar`; field names (§5.1) and methods (§9.1) are tokens.
fn is_token(text: &str) -> bool {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !text.is_empty() && text.bytes().all(tchar)
}

fn check_header(name: &str, value: &str) -> Result<(), Error> {
    if !is_token(name) || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(Error::Header {
            header: format!("{name}: {value}"),
        });
    }
    Ok(())
}

/// Parses 64 hex digits into a SHA-256 digest.
pub fn parse_sha256(hex: &str) -> Result<[u8; 32], Error> {
    let bad = || Error::Sha256 {
        hex: hex.to_string(),
    };
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let digit = |b: u8| (b as char).to_digit(16).ok_or_else(bad);
        *byte = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).map_err(|_| bad())?;
    }
    Ok(out)
}

/// Lower-case hex of a digest, as `sha256sum` prints it.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const fn nonzero(n: usize) -> NonZeroUsize {
    match NonZeroUsize::new(n) {
        Some(n) => n,
        None => NonZeroUsize::MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_check() {
        let plan = Plan::new(&["http://127.0.0.1:8080/"]).expect("plan");
        plan.check().expect("valid");
        assert_eq!(plan.connections, DEFAULT_CONNECTIONS);
    }

    #[test]
    fn rejects_cross_field_mistakes() {
        let mut plan = Plan::new(&["http://127.0.0.1:8080/"]).expect("plan");
        plan.threads = NonZeroUsize::new(20).expect("nonzero");
        assert!(matches!(
            plan.check(),
            Err(Error::ThreadsExceedConnections { .. })
        ));
        plan.threads = NonZeroUsize::MIN;
        plan.churn = true;
        plan.pipeline = NonZeroUsize::new(2).expect("nonzero");
        assert!(matches!(plan.check(), Err(Error::ChurnWithPipeline { .. })));
        plan.pipeline = NonZeroUsize::MIN;
        plan.mode = Mode::Open { rate: 0.0 };
        assert!(matches!(plan.check(), Err(Error::Rate { .. })));
    }

    #[test]
    fn a_body_is_serialized_after_every_head_and_frames_itself() {
        let mut plan = Plan::new(&["http://127.0.0.1:8080/digest"]).expect("plan");
        plan.method = "POST".to_string();
        plan.body = Some(vec![7u8; 4096]);
        plan.check().expect("valid");
        let requests = plan.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert!(request.starts_with(b"POST /digest HTTP/1.1\r\n"));
        assert!(request.ends_with(&[7u8; 4096]));
        let head = String::from_utf8_lossy(&request[..request.len() - 4096]).to_string();
        assert!(head.contains("Content-Length: 4096\r\n") && head.ends_with("\r\n\r\n"));
        plan.headers = vec![("content-length".to_string(), "1".to_string())];
        assert!(matches!(plan.check(), Err(Error::BodyFraming { .. })));
        plan.headers = vec![("Transfer-Encoding".to_string(), "chunked".to_string())];
        assert!(matches!(plan.check(), Err(Error::BodyFraming { .. })));
        plan.body = None;
        plan.check()
            .expect("framing headers without a body are the caller's business");
    }

    #[test]
    fn rejects_a_method_that_is_not_a_token() {
        let mut plan = Plan::new(&["http://127.0.0.1:8080/"]).expect("plan");
        assert_eq!(plan.method, "GET");
        for bad in ["", "GE T", "POST\r\n", "A(B)"] {
            plan.method = bad.to_string();
            assert!(matches!(plan.check(), Err(Error::Method { .. })), "{bad:?}");
        }
        plan.method = "PROPFIND".to_string();
        plan.check().expect("extension methods are tokens too");
    }

    #[test]
    fn parses_headers() {
        assert_eq!(
            parse_header("Accept:  text/html ").expect("ok"),
            ("Accept".to_string(), "text/html".to_string())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("Bad Name: x").is_err());
        assert!(parse_header("X: a\r\nInjected: 1").is_err());
    }

    #[test]
    fn sha256_round_trips_through_hex() {
        let text = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(hex(&parse_sha256(text).expect("hex")), text);
        assert!(parse_sha256("abc").is_err());
        assert!(parse_sha256(&"zz".repeat(32)).is_err());
    }
}
