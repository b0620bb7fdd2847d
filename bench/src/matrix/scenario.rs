//! The workloads of the matrix: which request (method, path, headers, body), how many
//! connections, what a correct answer is, which servers take part, which one the others are
//! compared with, and the docroot that holds the static files.
//!
//! Every static scenario is served from the same docroot by servery, nginx, h2o and Caddy,
//! compared with nginx. `app-1k` is servery's `examples/hello` handler for servery; the peers
//! serve `hello.txt`, a static file with the very same 1 KiB body, which is the closest
//! like-for-like a static server has (the tables say so). `app-json` and `app-post-4k` have no
//! static stand-in: they compare servery's app API with the same axum Router on tokio
//! (`axum-tokio`, `examples/axum_tokio.rs`), which is the baseline there; the peers take no
//! part.
//!
//! `gzip-64k-js` asks for a 64 KiB JavaScript file with `Accept-Encoding: gzip`: servery
//! compresses it on the fly once and serves the cached variant; nginx compresses on every
//! request (`gzip on` at its default level 1, `gzip_static` off; `scripts/lib/nginx.sh`).
//! Each server's bytes differ (levels, framing), so the answer is checked by decoding it
//! ([`Encoded`], `matrix::encoded`), not by a digest of what was sent. h2o and Caddy take no
//! part (Caddy compresses only with an `encode` directive, which its benchmark config leaves
//! out like every other scenario's).
//!
//! This file is past 600 lines because each scenario's request, answer and servers are kept
//! together with the tests that pin them (half the file); splitting the tests away would
//! separate a scenario from its checks.
//!
//! The `h2-*` scenarios are HTTP/2 twins of `static-1k`, `static-64k`, `static-8m` and
//! `app-1k` ([`Scenario::twin`]): the same request, answer, servers and baseline, but loaded by
//! h2load over TLS (ALPN h2) or h2c with the run's h2 settings (`h2load::Settings`) instead of
//! `servery-load` over HTTP/1.1.
//!
//! The `h3-*` scenarios are HTTP/3 twins of `static-1k`, `static-64k` and `static-8m`: the
//! same request and answer, loaded over QUIC by this crate's own HTTP/3 client (`load::h3`,
//! `servery-load --h3`) with the run's h3 shape (`matrix::h3`). nginx 1.22 and h2o 2.2.5, the
//! Debian packages, have no HTTP/3, so only servery and Caddy serve them, and Caddy is their
//! baseline ([`Scenario::baseline`]).
//!
//! The `*-pipelined` scenarios are `static-1k` and `app-1k` with [`PIPELINE_DEPTH`] requests
//! in flight per connection, written in one batch ([`Scenario::base`]): the same request,
//! answer, servers and baseline, at a client cost per request low enough that the servers,
//! not the load generator, are the limit at 8 workers against 8 client cores (issue 15's
//! `--preset scaling`; the measurements are at [`PIPELINE_DEPTH`]).

use std::fs;
use std::io;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::probe;
use super::server::Server;
use crate::plan::hex;

/// Connections for the static scenarios: the seed's c256, enough to keep several workers busy.
pub const STATIC_CONNECTIONS: usize = 256;
/// Connections for the app scenario: the seed's c64.
pub const APP_CONNECTIONS: usize = 64;
/// Connections for the 8 MiB scenario. At c256, 2 GiB would be in flight: on loopback each
/// response then takes seconds, a connection completes zero or one timed response per short
/// window, and RPS measures the window's edges rather than the server. c16 keeps 128 MiB in
/// flight, the same as `scripts/bench-quick.sh --large`.
pub const LARGE_CONNECTIONS: usize = 16;
/// Requests in flight per connection in the `*-pipelined` scenarios, written in one batch.
/// Measured on the 2-core VM (servery, 1 worker on CPU 0; `servery-load -c 256 -t 1` on CPU 1,
/// 3 s after 1 s): depth 1 gave 125,073 req/s with the client core 89 % busy (7.1 µs of client
/// CPU a request, about what servery spends), depth 8 gave 446,901 req/s at 65 % (1.5 µs a
/// request, so a client core now feeds about 1.5 server cores), depth 32 gave 721,888 at 58 %
/// but a p99 of 17 ms against 9 ms. Of those, 8 is the shallowest that moves the limit to the
/// server; TechEmpower's plaintext test pipelines 16.
pub const PIPELINE_DEPTH: usize = 8;
/// Request timeout for most scenarios: wrk's default.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// Request timeout for 8 MiB bodies: a slow or contended loopback can take more than 2 s to
/// deliver one while the other connections' bodies compete for it.
pub const LARGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The hello example's body: "Hello from servery! " repeated to 1023 bytes, then a newline
/// (examples/hello.rs builds the same bytes).
pub fn hello_body() -> Vec<u8> {
    b"Hello from servery! "
        .iter()
        .copied()
        .cycle()
        .take(1023)
        .chain([b'\n'])
        .collect()
}

/// What `GET /json` of `examples/axum/routes.rs` answers, byte for byte (that file's tests pin
/// the same bytes, and a test here reads them there).
pub const JSON_BODY: &[u8] =
    br#"{"message":"Hello, World!","server":"servery","app":"axum","n":1}"#;

/// Size of the body `app-post-4k` sends.
pub const POST_BYTES: usize = 4 << 10;

/// The body `app-post-4k` POSTs: [`POST_BYTES`] pseudo-random bytes, the same on every run.
pub fn post_body() -> Vec<u8> {
    contents("post-4k", POST_BYTES)
}

/// What `/digest` answers for [`post_body`]: its SHA-256 as 64 lowercase hex digits, no
/// newline (examples/axum/routes.rs and examples/upload.rs answer the same).
pub fn post_digest() -> Vec<u8> {
    hex(&Sha256::digest(post_body())).into_bytes()
}

/// One workload; serialized as its [`Scenario::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// GET a 1 KiB file, keep-alive.
    Static1k,
    /// GET a 64 KiB file, keep-alive.
    Static64k,
    /// GET an 8 MiB file, keep-alive.
    Static8m,
    /// GET a 1 KiB file on a new connection each time (`Connection: close`).
    StaticChurn1k,
    /// GET 64 KiB from the middle of the 8 MiB file with `Range` (expect 206).
    StaticRange64k,
    /// GET the 1 KiB file with `If-None-Match` set to its `ETag` (expect 304).
    StaticNotModified,
    /// GET a 1 KiB response from an application handler (servery: examples/hello).
    App1k,
    /// GET a small JSON object from an axum Router (servery: examples/axum; axum-tokio).
    AppJson,
    /// POST a 4 KiB body, answered with its SHA-256 (servery: examples/upload; axum-tokio).
    AppPost4k,
    /// [`Scenario::Static1k`] over HTTP/2.
    H2Static1k,
    /// [`Scenario::Static64k`] over HTTP/2.
    H2Static64k,
    /// [`Scenario::Static8m`] over HTTP/2.
    H2Static8m,
    /// [`Scenario::App1k`] over HTTP/2 (servery: examples/hello).
    H2App1k,
    /// [`Scenario::Static1k`] over HTTP/3.
    H3Static1k,
    /// [`Scenario::Static64k`] over HTTP/3.
    H3Static64k,
    /// [`Scenario::Static8m`] over HTTP/3.
    H3Static8m,
    /// GET a 64 KiB JavaScript file with `Accept-Encoding: gzip`, keep-alive (expect gzip).
    Gzip64kJs,
    /// [`Scenario::Static1k`] with [`PIPELINE_DEPTH`] requests in flight per connection.
    Static1kPipelined,
    /// [`Scenario::App1k`] with [`PIPELINE_DEPTH`] requests in flight per connection.
    App1kPipelined,
}

/// The `Range` of [`Scenario::StaticRange64k`]: 64 KiB starting at 1 MiB, so the server must
/// seek, not just truncate.
pub const RANGE_START: u64 = 1 << 20;
pub const RANGE_LEN: u64 = 64 << 10;

/// The docroot's files: name and size. Contents are pseudo-random (nothing compresses), fixed
/// by a seed so digests are the same on every run.
const FILES: [(&str, usize); 3] = [
    ("1k.bin", 1 << 10),
    ("64k.bin", 64 << 10),
    ("8m.bin", 8 << 20),
];

/// The JavaScript file of [`Scenario::Gzip64kJs`] and its size.
pub const JS_FILE: (&str, usize) = ("64k.js", 64 << 10);

/// An encoded answer's check: its `Content-Encoding` and what it decodes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub coding: &'static str,
    pub length: u64,
    pub sha256: [u8; 32],
}

/// What a scenario asks for and expects, in load-plan terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: &'static str,
    pub path: &'static str,
    pub headers: Vec<(String, String)>,
    /// Sent with every request, with its `Content-Length`.
    pub body: Option<Vec<u8>>,
    pub churn: bool,
    /// Requests in flight per connection, written in one batch (1: no pipelining).
    pub pipeline: usize,
    pub connections: usize,
    pub timeout: Duration,
    pub status: u16,
    pub length: Option<u64>,
    pub sha256: Option<[u8; 32]>,
    /// The answer is content-coded: checked decoded (`length` and `sha256` are then `None`).
    pub encoded: Option<Encoded>,
}

impl Scenario {
    pub const ALL: [Scenario; 19] = [
        Scenario::Static1k,
        Scenario::Static64k,
        Scenario::Static8m,
        Scenario::StaticChurn1k,
        Scenario::StaticRange64k,
        Scenario::StaticNotModified,
        Scenario::App1k,
        Scenario::AppJson,
        Scenario::AppPost4k,
        Scenario::H2Static1k,
        Scenario::H2Static64k,
        Scenario::H2Static8m,
        Scenario::H2App1k,
        Scenario::H3Static1k,
        Scenario::H3Static64k,
        Scenario::H3Static8m,
        Scenario::Gzip64kJs,
        Scenario::Static1kPipelined,
        Scenario::App1kPipelined,
    ];

    /// What a matrix without `--scenarios` runs: all but the `*-pipelined` series, which only
    /// issue 15's `--preset scaling` needs (they add nothing at one worker that their depth-1
    /// twins do not show, and would lengthen every default run).
    pub fn default_set() -> Vec<Scenario> {
        Scenario::ALL
            .into_iter()
            .filter(|s| !s.is_pipelined())
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Static1k => "static-1k",
            Scenario::Static64k => "static-64k",
            Scenario::Static8m => "static-8m",
            Scenario::StaticChurn1k => "static-churn-1k",
            Scenario::StaticRange64k => "static-range-64k",
            Scenario::StaticNotModified => "static-not-modified",
            Scenario::App1k => "app-1k",
            Scenario::AppJson => "app-json",
            Scenario::AppPost4k => "app-post-4k",
            Scenario::H2Static1k => "h2-static-1k",
            Scenario::H2Static64k => "h2-static-64k",
            Scenario::H2Static8m => "h2-static-8m",
            Scenario::H2App1k => "h2-app-1k",
            Scenario::H3Static1k => "h3-static-1k",
            Scenario::H3Static64k => "h3-static-64k",
            Scenario::H3Static8m => "h3-static-8m",
            Scenario::Gzip64kJs => "gzip-64k-js",
            Scenario::Static1kPipelined => "static-1k-pipelined",
            Scenario::App1kPipelined => "app-1k-pipelined",
        }
    }

    /// The HTTP/1.1 scenario an h2 or h3 scenario is the twin of (itself for the HTTP/1.1
    /// ones).
    pub fn twin(self) -> Scenario {
        match self {
            Scenario::H2Static1k | Scenario::H3Static1k => Scenario::Static1k,
            Scenario::H2Static64k | Scenario::H3Static64k => Scenario::Static64k,
            Scenario::H2Static8m | Scenario::H3Static8m => Scenario::Static8m,
            Scenario::H2App1k => Scenario::App1k,
            other => other,
        }
    }

    /// Loaded over HTTP/2 by h2load.
    pub fn is_h2(self) -> bool {
        matches!(
            self,
            Scenario::H2Static1k | Scenario::H2Static64k | Scenario::H2Static8m | Scenario::H2App1k
        )
    }

    /// Loaded over HTTP/3 (QUIC) by `servery-load --h3`'s engine.
    pub fn is_h3(self) -> bool {
        matches!(
            self,
            Scenario::H3Static1k | Scenario::H3Static64k | Scenario::H3Static8m
        )
    }

    /// The depth-1 HTTP/1.1 scenario whose request, answer, servers and baseline this one
    /// shares: an h2 scenario's twin, a pipelined one's unpipelined self, else itself.
    pub fn base(self) -> Scenario {
        match self {
            Scenario::Static1kPipelined => Scenario::Static1k,
            Scenario::App1kPipelined => Scenario::App1k,
            other => other.twin(),
        }
    }

    /// Sends [`PIPELINE_DEPTH`] requests per connection at a time.
    pub fn is_pipelined(self) -> bool {
        matches!(self, Scenario::Static1kPipelined | Scenario::App1kPipelined)
    }

    pub fn parse(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Served by an application (servery's examples, axum-tokio) or a peer's static stand-in.
    pub fn is_app(self) -> bool {
        matches!(
            self.base(),
            Scenario::App1k | Scenario::AppJson | Scenario::AppPost4k
        )
    }

    /// The servers that can serve this workload, in table order. Static: servery and the
    /// static peers. `app-1k`: the same, the peers serving a file with the handler's body.
    /// `app-json`, `app-post-4k`: servery's app API and the same Router on tokio. An h2
    /// scenario: its twin's. An h3 scenario: servery and Caddy, the peer with HTTP/3.
    pub fn servers(self) -> &'static [Server] {
        const STATIC: &[Server] = &[
            Server::ServeryThread,
            Server::ServeryProcess,
            Server::Nginx,
            Server::H2o,
            Server::Caddy,
        ];
        const ROUTER: &[Server] = &[
            Server::ServeryThread,
            Server::ServeryProcess,
            Server::AxumTokio,
        ];
        const GZIP: &[Server] = &[Server::ServeryThread, Server::ServeryProcess, Server::Nginx];
        const H3: &[Server] = &[Server::ServeryThread, Server::ServeryProcess, Server::Caddy];
        if self.is_h3() {
            return H3;
        }
        match self.base() {
            Scenario::AppJson | Scenario::AppPost4k => ROUTER,
            Scenario::Gzip64kJs => GZIP,
            _ => STATIC,
        }
    }

    /// Whom the peer table's ratios are against: nginx, or axum-tokio where nginx takes no
    /// part (issue 11 measures servery's apps against the same Router on `axum::serve`), or
    /// Caddy over HTTP/3, where it is the only peer.
    pub fn baseline(self) -> Server {
        if self.is_h3() {
            return Server::Caddy;
        }
        match self.base() {
            Scenario::AppJson | Scenario::AppPost4k => Server::AxumTokio,
            _ => Server::Nginx,
        }
    }

    /// `server` serves a static file in place of this scenario's app (the tables say so).
    pub fn is_stand_in(self, server: Server) -> bool {
        self.base() == Scenario::App1k && !server.is_servery()
    }

    /// What a server is probed with while starting, expecting 200: a small file every static
    /// server has, or a request the scenario's app answers (for `app-post-4k`, the scenario's
    /// own POST: the upload app may answer nothing else). An h2 scenario: its twin's, sent
    /// over HTTP/2 (`curl`).
    pub fn probe(self) -> probe::Request {
        match self.base() {
            Scenario::App1k => probe::Request::get("/hello.txt"),
            Scenario::AppJson => probe::Request::get("/json"),
            Scenario::AppPost4k => probe::Request {
                method: "POST",
                path: "/digest",
                body: Some(post_body()),
            },
            _ => probe::Request::get("/1k.bin"),
        }
    }

    /// The request for this scenario. `etag` is the server's `ETag` for `/1k.bin`, needed by
    /// [`Scenario::StaticNotModified`] only. An h2 scenario: its twin's path and answer (its
    /// connections, churn and timeout do not apply; h2load's settings do). An h3 scenario:
    /// its twin's path, answer and timeout (its connections do not apply; the run's h3 shape
    /// does).
    pub fn request(self, etag: Option<&str>) -> Request {
        let file = |name: &str| {
            let (_, size) = FILES
                .iter()
                .find(|(n, _)| *n == name)
                .copied()
                .unwrap_or(("", 0));
            contents(name, size)
        };
        let whole = |path: &'static str, name: &str, churn: bool| {
            let bytes = file(name);
            Request {
                method: "GET",
                path,
                headers: Vec::new(),
                body: None,
                churn,
                pipeline: 1,
                connections: STATIC_CONNECTIONS,
                timeout: TIMEOUT,
                status: 200,
                length: Some(bytes.len() as u64),
                sha256: Some(Sha256::digest(&bytes).into()),
                encoded: None,
            }
        };
        match self {
            Scenario::Static1k | Scenario::H2Static1k | Scenario::H3Static1k => {
                whole("/1k.bin", "1k.bin", false)
            }
            Scenario::Static64k | Scenario::H2Static64k | Scenario::H3Static64k => {
                whole("/64k.bin", "64k.bin", false)
            }
            Scenario::Static8m | Scenario::H2Static8m | Scenario::H3Static8m => Request {
                timeout: LARGE_TIMEOUT,
                connections: LARGE_CONNECTIONS,
                ..whole("/8m.bin", "8m.bin", false)
            },
            Scenario::StaticChurn1k => whole("/1k.bin", "1k.bin", true),
            Scenario::StaticRange64k => {
                let bytes = file("8m.bin");
                let (lo, hi) = (RANGE_START as usize, (RANGE_START + RANGE_LEN) as usize);
                Request {
                    method: "GET",
                    path: "/8m.bin",
                    headers: vec![("Range".to_string(), format!("bytes={lo}-{}", hi - 1))],
                    body: None,
                    churn: false,
                    pipeline: 1,
                    connections: STATIC_CONNECTIONS,
                    timeout: TIMEOUT,
                    status: 206,
                    length: Some(RANGE_LEN),
                    sha256: Some(Sha256::digest(&bytes[lo..hi]).into()),
                    encoded: None,
                }
            }
            Scenario::StaticNotModified => Request {
                method: "GET",
                path: "/1k.bin",
                headers: etag
                    .map(|e| vec![("If-None-Match".to_string(), e.to_string())])
                    .unwrap_or_default(),
                body: None,
                churn: false,
                pipeline: 1,
                connections: STATIC_CONNECTIONS,
                timeout: TIMEOUT,
                status: 304,
                length: Some(0),
                sha256: None,
                encoded: None,
            },
            Scenario::App1k | Scenario::H2App1k => app("GET", "/hello.txt", None, &hello_body()),
            Scenario::AppJson => app("GET", "/json", None, JSON_BODY),
            Scenario::AppPost4k => app("POST", "/digest", Some(post_body()), &post_digest()),
            Scenario::Static1kPipelined | Scenario::App1kPipelined => Request {
                pipeline: PIPELINE_DEPTH,
                ..self.base().request(etag)
            },
            Scenario::Gzip64kJs => {
                let js = javascript(JS_FILE.1);
                Request {
                    headers: vec![("Accept-Encoding".to_string(), "gzip".to_string())],
                    length: None,
                    sha256: None,
                    encoded: Some(Encoded {
                        coding: "gzip",
                        length: js.len() as u64,
                        sha256: Sha256::digest(&js).into(),
                    }),
                    ..whole("/64k.js", "64k.bin", false)
                }
            }
        }
    }
}

/// An app scenario's keep-alive request at [`APP_CONNECTIONS`], expecting 200 and `answer`.
fn app(method: &'static str, path: &'static str, body: Option<Vec<u8>>, answer: &[u8]) -> Request {
    Request {
        method,
        path,
        headers: Vec::new(),
        body,
        churn: false,
        pipeline: 1,
        connections: APP_CONNECTIONS,
        timeout: TIMEOUT,
        status: 200,
        length: Some(answer.len() as u64),
        sha256: Some(Sha256::digest(answer).into()),
        encoded: None,
    }
}

impl Serialize for Scenario {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Writes every scenario's file into `root`; returns each file's name, length and SHA-256
/// (hex), in the order written.
pub fn write_docroot(root: &Path) -> io::Result<Vec<(&'static str, usize, String)>> {
    fs::create_dir_all(root)?;
    let files = FILES
        .iter()
        .map(|&(name, size)| (name, contents(name, size)))
        .chain([
            (JS_FILE.0, javascript(JS_FILE.1)),
            ("hello.txt", hello_body()),
        ]);
    let mut written = Vec::new();
    for (name, bytes) in files {
        fs::write(root.join(name), &bytes)?;
        written.push((name, bytes.len(), hex(&Sha256::digest(&bytes))));
    }
    Ok(written)
}

/// `size` bytes of made-up JavaScript, the same on every run: functions of statements over a
/// small vocabulary of names, numbers and strings, the way application code repeats itself
/// (it compresses about as much as unminified code: gzip -6 to roughly a quarter).
pub fn javascript(size: usize) -> Vec<u8> {
    const NAMES: [&str; 24] = [
        "value", "index", "length", "items", "result", "options", "element", "state", "props",
        "callback", "request", "response", "config", "count", "offset", "buffer", "node", "parent",
        "children", "target", "event", "handler", "cache", "key",
    ];
    const CALLS: [&str; 10] = [
        "push", "map", "filter", "forEach", "indexOf", "slice", "join", "reduce", "get", "set",
    ];
    let mut rng = name_seed("javascript");
    let mut next = |n: usize| {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    };
    let mut out = String::with_capacity(size + 256);
    let mut f = 0;
    while out.len() < size {
        let (a, b) = (NAMES[next(NAMES.len())], NAMES[next(NAMES.len())]);
        out.push_str(&format!("function {a}_{f}({a}, {b}) {{\n"));
        for _ in 0..2 + next(6) {
            let (x, y) = (NAMES[next(NAMES.len())], NAMES[next(NAMES.len())]);
            let line = match next(5) {
                0 => format!(
                    "  const {x}{} = {y}.{}({});\n",
                    next(9),
                    CALLS[next(10)],
                    next(100)
                ),
                1 => format!("  if ({x}.{y} === {}) {{ return null; }}\n", next(1000)),
                2 => format!("  {x}.{} = \"{y}-{}\";\n", CALLS[next(10)], next(50)),
                3 => format!("  for (let i = 0; i < {x}.length; i++) {{ {y}[i] += {x}[i]; }}\n"),
                _ => format!("  return {a}.{}({x}, {b}.{y});\n", CALLS[next(10)]),
            };
            out.push_str(&line);
        }
        out.push_str("}\n\n");
        f += 1;
    }
    let mut bytes = out.into_bytes();
    bytes.truncate(size);
    bytes
}

/// A generator's seed from a name.
fn name_seed(name: &str) -> u64 {
    name.bytes().fold(0x9E37_79B9_7F4A_7C15u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    })
}

/// `size` pseudo-random bytes (xorshift64*, seeded by the name), the same on every run.
fn contents(name: &str, size: usize) -> Vec<u8> {
    let mut state = name_seed(name);
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(size);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::parse(s.name()), Some(s));
        }
        assert_eq!(Scenario::parse("static-2k"), None);
        let json = serde_json::to_string(&Scenario::ALL).expect("json");
        assert!(
            json.contains("\"static-1k\"") && json.contains("\"app-1k\""),
            "{json}"
        );
        assert!(
            json.ends_with(
                r#""h2-app-1k","h3-static-1k","h3-static-64k","h3-static-8m","gzip-64k-js","static-1k-pipelined","app-1k-pipelined"]"#
            ),
            "{json}"
        );
    }

    #[test]
    fn h2_scenarios_are_their_twins_over_http2() {
        let h2 = [
            (Scenario::H2Static1k, Scenario::Static1k),
            (Scenario::H2Static64k, Scenario::Static64k),
            (Scenario::H2Static8m, Scenario::Static8m),
            (Scenario::H2App1k, Scenario::App1k),
        ];
        for (s, twin) in h2 {
            assert!(s.is_h2() && !twin.is_h2(), "{}", s.name());
            assert_eq!(s.twin(), twin);
            assert_eq!(s.request(None), twin.request(None));
            assert_eq!(s.probe(), twin.probe());
            assert_eq!(s.servers(), twin.servers());
            assert_eq!(s.baseline(), Server::Nginx);
            assert_eq!(s.is_app(), twin.is_app());
        }
        assert_eq!(Scenario::ALL.iter().filter(|s| s.is_h2()).count(), 4);
        assert!(Scenario::H2App1k.is_stand_in(Server::H2o));
        assert!(Scenario::H2Static8m.servers().contains(&Server::Caddy));
        assert!(Scenario::H2App1k.is_stand_in(Server::Caddy));
        assert!(!Scenario::H2App1k.is_stand_in(Server::ServeryProcess));
        assert!(!Scenario::H2Static1k.is_stand_in(Server::Nginx));
        assert_eq!(Scenario::parse("h2-static-8m"), Some(Scenario::H2Static8m));
        assert_eq!(Scenario::H2App1k.request(None).path, "/hello.txt");
    }

    #[test]
    fn h3_scenarios_are_the_static_ones_over_http3_on_servery_and_caddy() {
        let h3 = [
            (Scenario::H3Static1k, Scenario::Static1k, "h3-static-1k"),
            (Scenario::H3Static64k, Scenario::Static64k, "h3-static-64k"),
            (Scenario::H3Static8m, Scenario::Static8m, "h3-static-8m"),
        ];
        for (s, twin, name) in h3 {
            assert_eq!((s.name(), Scenario::parse(name)), (name, Some(s)));
            assert!(s.is_h3() && !s.is_h2() && !s.is_pipelined() && !s.is_app());
            assert!(!twin.is_h3());
            assert_eq!((s.twin(), s.base()), (twin, twin));
            assert_eq!(s.request(None), twin.request(None));
            assert_eq!(s.probe(), twin.probe());
            assert_eq!(
                s.servers(),
                [Server::ServeryThread, Server::ServeryProcess, Server::Caddy]
            );
            assert_eq!(s.baseline(), Server::Caddy);
            assert!(!s.is_stand_in(Server::Caddy));
            assert!(Scenario::default_set().contains(&s));
        }
        assert_eq!(Scenario::ALL.iter().filter(|s| s.is_h3()).count(), 3);
        assert_eq!(
            Scenario::H3Static8m.request(None).timeout,
            LARGE_TIMEOUT,
            "an 8 MiB answer keeps its longer timeout over QUIC"
        );
        assert!(!Scenario::H3Static1k.servers().contains(&Server::Nginx));
        assert!(!Scenario::H3Static1k.servers().contains(&Server::H2o));
    }

    #[test]
    fn pipelined_scenarios_are_their_bases_with_a_deeper_pipeline() {
        for (s, base) in [
            (Scenario::Static1kPipelined, Scenario::Static1k),
            (Scenario::App1kPipelined, Scenario::App1k),
        ] {
            assert!(s.is_pipelined() && !base.is_pipelined() && !s.is_h2());
            assert_eq!(s.base(), base);
            let (mine, theirs) = (s.request(None), base.request(None));
            assert_eq!((mine.pipeline, theirs.pipeline), (PIPELINE_DEPTH, 1));
            assert_eq!(
                Request {
                    pipeline: 1,
                    ..mine
                },
                theirs
            );
            assert_eq!(s.probe(), base.probe());
            assert_eq!(s.servers(), base.servers());
            assert_eq!(s.baseline(), Server::Nginx);
            assert_eq!(s.is_app(), base.is_app());
        }
        assert!(Scenario::App1kPipelined.is_stand_in(Server::Nginx));
        assert!(Scenario::ALL
            .iter()
            .all(|s| s.is_pipelined() || s.request(None).pipeline == 1));
        let default = Scenario::default_set();
        assert_eq!(default.len(), 17);
        assert!(!default.iter().any(|s| s.is_pipelined()));
        assert_eq!(Scenario::H2App1k.base(), Scenario::App1k);
        assert_eq!(Scenario::Gzip64kJs.base(), Scenario::Gzip64kJs);
    }

    #[test]
    fn hello_body_matches_the_example() {
        let body = hello_body();
        assert_eq!(body.len(), 1024);
        assert!(body.starts_with(b"Hello from servery! Hello"));
        assert_eq!(body.last(), Some(&b'\n'));
    }

    #[test]
    fn requests_carry_the_seed_settings() {
        let r = Scenario::Static1k.request(None);
        assert_eq!((r.connections, r.status, r.length), (256, 200, Some(1024)));
        assert_eq!(Scenario::App1k.request(None).connections, 64);
        assert_eq!(Scenario::Static8m.request(None).connections, 16);
        assert!(Scenario::StaticChurn1k.request(None).churn);
        let range = Scenario::StaticRange64k.request(None);
        assert_eq!(range.status, 206);
        assert_eq!(range.headers[0].1, "bytes=1048576-1114111");
        let nm = Scenario::StaticNotModified.request(Some("\"abc\""));
        assert_eq!(nm.status, 304);
        assert_eq!(
            nm.headers,
            [("If-None-Match".to_string(), "\"abc\"".to_string())]
        );
    }

    #[test]
    fn app_json_expects_the_routers_exact_bytes() {
        let r = Scenario::AppJson.request(None);
        assert_eq!((r.method, r.path, r.status), ("GET", "/json", 200));
        assert_eq!((r.connections, r.body), (APP_CONNECTIONS, None));
        assert_eq!(r.length, Some(65));
        assert_eq!(r.sha256, Some(Sha256::digest(JSON_BODY).into()));
        // One definition of the answer: the Router's own test pins the same bytes.
        let routes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/axum/routes.rs");
        let source = fs::read_to_string(&routes).expect("examples/axum/routes.rs");
        let literal = format!("r#\"{}\"#", std::str::from_utf8(JSON_BODY).expect("utf-8"));
        assert!(
            source.contains(&literal),
            "{routes:?} does not pin {literal}"
        );
        assert!(source.contains(".route(\"/json\", get(json))"));
    }

    #[test]
    fn app_post_4k_posts_a_fixed_body_and_expects_its_hex_digest() {
        let body = post_body();
        assert_eq!(body.len(), 4096);
        assert_eq!(body, post_body());
        assert!(body.iter().collect::<std::collections::HashSet<_>>().len() > 200);
        let r = Scenario::AppPost4k.request(None);
        assert_eq!((r.method, r.path, r.status), ("POST", "/digest", 200));
        assert_eq!(r.body.as_deref(), Some(&body[..]));
        assert!(r.headers.is_empty() && !r.churn);
        let digest = post_digest();
        assert_eq!(digest.len(), 64);
        assert!(digest
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(r.length, Some(64));
        assert_eq!(r.sha256, Some(Sha256::digest(&digest).into()));
        // The probe is the scenario's own POST, so a ready server has already digested it.
        let probe = Scenario::AppPost4k.probe();
        assert_eq!((probe.method, probe.path), ("POST", "/digest"));
        assert_eq!(probe.body, Some(body));
    }

    #[test]
    fn each_scenario_names_its_servers_and_baseline() {
        for s in Scenario::ALL {
            assert!(s.servers().contains(&s.baseline()), "{}", s.name());
            assert!(s.servers().contains(&Server::ServeryThread));
            assert!(s.servers().contains(&Server::ServeryProcess));
        }
        for s in [Scenario::AppJson, Scenario::AppPost4k] {
            assert_eq!(s.baseline(), Server::AxumTokio);
            assert!(
                !s.servers().iter().any(|server| server.is_peer()),
                "{}",
                s.name()
            );
            assert!(s.is_app() && !s.is_stand_in(Server::AxumTokio));
        }
        assert_eq!(Scenario::App1k.baseline(), Server::Nginx);
        assert!(!Scenario::App1k.servers().contains(&Server::AxumTokio));
        assert!(!Scenario::Static1k.servers().contains(&Server::AxumTokio));
        assert!(Scenario::App1k.is_stand_in(Server::Nginx));
        assert!(!Scenario::App1k.is_stand_in(Server::ServeryThread));
        assert!(!Scenario::Static1k.is_stand_in(Server::Nginx));
        assert_eq!(Scenario::Static8m.probe(), probe::Request::get("/1k.bin"));
        assert_eq!(Scenario::AppJson.probe(), probe::Request::get("/json"));
    }

    #[test]
    fn gzip_64k_js_asks_for_gzip_and_checks_the_decoded_file() {
        let r = Scenario::Gzip64kJs.request(None);
        assert_eq!(
            (r.path, r.status, r.length, r.sha256),
            ("/64k.js", 200, None, None)
        );
        assert_eq!(
            r.headers,
            [("Accept-Encoding".to_string(), "gzip".to_string())]
        );
        let js = javascript(JS_FILE.1);
        assert_eq!(js.len(), 64 << 10);
        assert_eq!(js, javascript(JS_FILE.1));
        assert!(js.starts_with(b"function "), "{:?}", &js[..40]);
        let e = r.encoded.expect("checked decoded");
        assert_eq!((e.coding, e.length), ("gzip", 64 << 10));
        assert_eq!(e.sha256, <[u8; 32]>::from(Sha256::digest(&js)));
        assert_eq!(
            Scenario::Gzip64kJs.servers(),
            [Server::ServeryThread, Server::ServeryProcess, Server::Nginx]
        );
        assert!(!Scenario::Gzip64kJs.is_h2() && !Scenario::Gzip64kJs.is_app());
    }

    #[test]
    fn the_javascript_compresses_like_javascript() {
        use std::io::Write;
        let js = javascript(JS_FILE.1);
        let gzip = |level| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            gz.write_all(&js).expect("gzip");
            gz.finish().expect("gzip").len()
        };
        let (fast, default) = (gzip(1), gzip(6));
        eprintln!("64k.js: gzip -1 {fast} bytes, gzip -6 {default} bytes");
        assert!((js.len() / 6..js.len() / 3).contains(&default), "{default}");
        assert!(fast > default, "{fast} {default}");
    }

    #[test]
    fn the_docroot_holds_what_the_requests_expect() {
        let root = std::env::temp_dir().join(format!("servery-docroot-{}", std::process::id()));
        let files = write_docroot(&root).expect("docroot");
        let names: Vec<&str> = files.iter().map(|f| f.0).collect();
        assert_eq!(
            names,
            ["1k.bin", "64k.bin", "8m.bin", "64k.js", "hello.txt"]
        );
        for (s, name) in [
            (Scenario::Static1k, "1k.bin"),
            (Scenario::Static64k, "64k.bin"),
            (Scenario::App1k, "hello.txt"),
        ] {
            let r = s.request(None);
            let (_, length, sha256) = files.iter().find(|f| f.0 == name).expect("file");
            assert_eq!(r.length, Some(*length as u64));
            assert_eq!(r.sha256.map(|d| hex(&d)).as_ref(), Some(sha256));
            assert_eq!(fs::read(root.join(name)).expect("read").len(), *length);
        }
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn file_contents_are_fixed_and_incompressible_looking() {
        let a = contents("1k.bin", 1024);
        assert_eq!(a, contents("1k.bin", 1024));
        assert_ne!(a, contents("64k.bin", 1024));
        let distinct: std::collections::HashSet<u8> = a.iter().copied().collect();
        assert!(distinct.len() > 200);
    }
}
