//! The HTTP/3 client side of the interop tests (issue 27): two third-party
//! clients run as child processes against `https://127.0.0.1:PORT`, their
//! answers read back as [`H3Response`]s.
//!
//! Owns, by client:
//! - [`aioquic`]: `tests/support/h3get.py` on aioquic, run with the venv's
//!   python (`target/tools/aioquic`, made by `scripts/install-h3-clients.sh`;
//!   `AIOQUIC_VENV` names another). It sends any method, fields and body,
//!   repeats the paths on the one connection, checks the certificate
//!   against a CA file or not at all, and prints each response as a JSON
//!   line, which [`AioquicClient::fetch`] parses.
//! - [`ngtcp2`]: `gtlsclient`, ngtcp2's example client (Debian package
//!   `ngtcp2-client` 0.12; `GTLSCLIENT` names another binary). It sends GET,
//!   HEAD or POST with a body, several paths on one connection, but no
//!   request fields of ours (it has no option for them), and it never
//!   checks the certificate. It saves each body under its path's last
//!   segment (`--download`), so two paths with one last segment, or a
//!   repeat, cannot be told apart and are refused. Status and fields come
//!   from its log on stderr (`http: stream 0x0 [:status: 200]`), the body
//!   from its file, hashed here; its exit status says nothing (a failed
//!   handshake exits 0), so a path with no `:status` is the failure.
//!
//! Does not own a server, nor install anything: a missing client is an
//! `Err` naming the script, for the test to say [`skipped`] with.
//! Only 127.0.0.1 is spoken to. Every run is bounded by [`Fetch::timeout`]
//! (both clients are also told it) and killed past it.
//!
//! Flow of a test:
//! 1. `let Ok(client) = h3::aioquic().map_err(|why| common::skipped(&why)) else { return };`
//! 2. `client.fetch(port, &Fetch::get(&["/big.bin", "/small.txt"]).header("range", "bytes=0-99"))`
//! 3. Compare [`H3Response::status`], [`H3Response::header`],
//!    [`H3Response::body_sha256`] with what the docroot holds; every
//!    response of one fetch has the same [`H3Response::local_port`] (one
//!    connection).
//!
//! Checked against Caddy 2.6.2 (Debian's `caddy`, which serves HTTP/3 on
//! its HTTPS port) with aioquic 1.7.2 and ngtcp2-client 0.12.1, by a
//! throwaway crate including this file. Caddy ran `caddy run --adapter
//! caddyfile` on `{ admin off  auto_https disable_redirects
//! skip_install_trust }  https://127.0.0.1:PORT { bind 127.0.0.1  tls
//! internal  handle /app/* { reverse_proxy APP }  handle { root * DIR
//! file_server { precompressed gzip } } }`. aioquic: a 1 MiB random file
//! and a small one (200, hashes equal to `sha256sum`'s), `Range: bytes=0-99`
//! (206, 100 bytes), `If-None-Match` with the ETag (304), `Accept-Encoding:
//! gzip` (the `.gz` variant, decoding to the file), HEAD, a 1 MiB POST to an
//! app behind Caddy (which saw the same SHA-256), ten requests on one
//! connection (one client port in Caddy's access log), Caddy's root as
//! `--cafile`, and an unknown CA refused. ngtcp2: the same GETs, HEAD and
//! POST, and a 404. By hand: `target/tools/aioquic/bin/python
//! tests/support/h3get.py --insecure https://127.0.0.1:PORT/big.bin` and
//! `gtlsclient --exit-on-all-streams-close --no-quic-dump --no-http-dump
//! --download DIR 127.0.0.1 PORT https://127.0.0.1:PORT/big.bin`.
//!
//! [`skipped`]: super::skipped

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::hex;
use super::process::{capture, settle, text};

/// How long one client run may take by default: a handshake, and a few
/// MiB over loopback, take well under a second; a loaded CI machine
/// starting Python takes a few.
pub const H3_TIMEOUT: Duration = Duration::from_secs(30);

/// H3_NO_ERROR (RFC 9114 §8.1), the code of a stream that ended cleanly.
const H3_NO_ERROR: u64 = 0x100;

/// One response as a client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H3Response {
    /// The path it answered (as given to [`Fetch`]).
    pub path: String,
    pub status: u16,
    /// The response's fields in the order received, names lowercase,
    /// pseudo-headers, interim (1xx) responses and trailers left out.
    pub headers: Vec<(String, String)>,
    pub body_len: usize,
    /// SHA-256 of the body, lowercase hex.
    pub body_sha256: String,
    /// The body itself, when [`Fetch::keep_bodies`] asked for it.
    pub body: Option<Vec<u8>>,
    /// The client's UDP port: equal for responses that shared a connection.
    pub local_port: u16,
}

impl H3Response {
    /// The first value of `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the server's certificate is checked (aioquic; ngtcp2's client
/// never checks it).
#[derive(Debug, Clone)]
pub enum Trust {
    /// Not at all (a self-signed test server).
    Insecure,
    /// Against the PEM roots in this file.
    CaFile(PathBuf),
}

/// What one client run asks: paths on one connection to 127.0.0.1.
#[derive(Debug, Clone)]
pub struct Fetch {
    paths: Vec<String>,
    method: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    repeat: usize,
    parallel: usize,
    keep_bodies: bool,
    trust: Trust,
    timeout: Duration,
}

impl Fetch {
    /// GET each of `paths` (each starting with `/`), once, in order.
    pub fn get(paths: &[&str]) -> Fetch {
        Fetch::new("GET", paths, None)
    }

    /// HEAD each of `paths`.
    pub fn head(paths: &[&str]) -> Fetch {
        Fetch::new("HEAD", paths, None)
    }

    /// POST `body` (with its content-length) to each of `paths`.
    pub fn post(paths: &[&str], body: Vec<u8>) -> Fetch {
        Fetch::new("POST", paths, Some(body))
    }

    fn new(method: &str, paths: &[&str], body: Option<Vec<u8>>) -> Fetch {
        Fetch {
            paths: paths.iter().map(|p| p.to_string()).collect(),
            method: method.into(),
            headers: Vec::new(),
            body,
            repeat: 1,
            parallel: 1,
            keep_bodies: false,
            trust: Trust::Insecure,
            timeout: H3_TIMEOUT,
        }
    }

    /// Add a request field to every request (aioquic only).
    pub fn header(mut self, name: &str, value: &str) -> Fetch {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Ask for the paths `n` times over, on the same connection (aioquic
    /// only).
    pub fn repeat(mut self, n: usize) -> Fetch {
        self.repeat = n;
        self
    }

    /// Keep up to `n` requests in flight at once (aioquic; ngtcp2's client
    /// sends them all at once).
    pub fn parallel(mut self, n: usize) -> Fetch {
        self.parallel = n;
        self
    }

    /// Return each body in [`H3Response::body`] too.
    pub fn keep_bodies(mut self) -> Fetch {
        self.keep_bodies = true;
        self
    }

    /// How the certificate is checked (default [`Trust::Insecure`]).
    pub fn trust(mut self, trust: Trust) -> Fetch {
        self.trust = trust;
        self
    }

    /// The bound of the whole run (default [`H3_TIMEOUT`]).
    pub fn timeout(mut self, limit: Duration) -> Fetch {
        self.timeout = limit;
        self
    }

    fn url(&self, port: u16, path: &str) -> String {
        format!("https://127.0.0.1:{port}{path}")
    }

    /// The request body in a temp file, for the clients' `--data-file`/`-d`.
    fn body_file(&self, dir: &Path) -> Result<Option<PathBuf>, String> {
        let Some(body) = &self.body else {
            return Ok(None);
        };
        let path = dir.join("request-body");
        std::fs::write(&path, body).map_err(|e| format!("write {}: {e}", path.display()))?;
        Ok(Some(path))
    }
}

/// aioquic's client: the venv's python and `h3get.py`.
#[derive(Debug, Clone)]
pub struct AioquicClient {
    python: PathBuf,
    script: PathBuf,
}

/// The aioquic client, or why there is none (found once per test binary).
pub fn aioquic() -> Result<AioquicClient, String> {
    static FOUND: OnceLock<Result<AioquicClient, String>> = OnceLock::new();
    FOUND.get_or_init(find_aioquic).clone()
}

fn find_aioquic() -> Result<AioquicClient, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = std::env::var_os("AIOQUIC_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/tools/aioquic"));
    let python = venv.join("bin/python");
    let script = root.join("tests/support/h3get.py");
    let install = "run scripts/install-h3-clients.sh";
    if !python.is_file() {
        return Err(format!("no aioquic venv at {} ({install})", venv.display()));
    }
    if !script.is_file() {
        return Err(format!("no {}", script.display()));
    }
    let mut check = Command::new(&python);
    check.args(["-c", "import aioquic"]);
    let out = run_limited(&mut check, Duration::from_secs(20))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let last = why.lines().last().unwrap_or("no output");
        return Err(format!(
            "{} cannot import aioquic: {last} ({install})",
            python.display()
        ));
    }
    Ok(AioquicClient { python, script })
}

impl AioquicClient {
    /// Run `tests/support/h3hostile.py`'s `mode` against
    /// https://127.0.0.1:`port``path` with `extra` arguments: the JSON
    /// lines it printed, or why it failed.
    #[allow(dead_code)]
    pub fn hostile(
        &self,
        port: u16,
        mode: &str,
        path: &str,
        extra: &[&str],
        limit: Duration,
    ) -> Result<Vec<String>, String> {
        let script = self.script.with_file_name("h3hostile.py");
        let mut cmd = Command::new(&self.python);
        cmd.arg(&script)
            .arg(mode)
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .args(extra)
            .arg("--timeout")
            .arg(format!("{}", limit.as_secs().saturating_sub(2).max(1)));
        let out = run_limited(&mut cmd, limit)?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "{mode}: {}\nstdout:\n{stdout}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(stdout.lines().map(str::to_string).collect())
    }

    /// Run `fetch` against 127.0.0.1:`port`: one response per request, in
    /// request order (paths × repeat), or why the run failed (the
    /// connection, a stream reset, a length mismatch, the timeout), with
    /// what the client printed.
    pub fn fetch(&self, port: u16, fetch: &Fetch) -> Result<Vec<H3Response>, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a temp dir: {e}"))?;
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.script)
            .arg("--method")
            .arg(&fetch.method)
            .arg("--repeat")
            .arg(fetch.repeat.to_string())
            .arg("--parallel")
            .arg(fetch.parallel.to_string())
            .arg("--timeout")
            .arg(fetch.timeout.as_secs_f64().to_string());
        match &fetch.trust {
            Trust::Insecure => cmd.arg("--insecure"),
            Trust::CaFile(path) => cmd.arg("--cafile").arg(path),
        };
        for (name, value) in &fetch.headers {
            cmd.arg("--header").arg(format!("{name}: {value}"));
        }
        if let Some(body) = fetch.body_file(dir.path())? {
            cmd.arg("--data-file").arg(body);
        }
        if fetch.keep_bodies {
            cmd.arg("--save-dir").arg(dir.path());
        }
        cmd.args(fetch.paths.iter().map(|p| fetch.url(port, p)));
        // Python's own start-up counts too: a little past the script's bound.
        let out = run_limited(&mut cmd, fetch.timeout + Duration::from_secs(5))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "h3get.py failed ({}): {}\nresponses before:\n{stdout}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let prefix = format!("https://127.0.0.1:{port}");
        let mut responses = Vec::new();
        for (i, line) in stdout.lines().enumerate() {
            let mut r = parse_line(line, &prefix)?;
            if fetch.keep_bodies {
                let path = dir.path().join(i.to_string());
                r.body = Some(std::fs::read(&path).map_err(|e| format!("read {path:?}: {e}"))?);
            }
            responses.push(r);
        }
        let want = fetch.paths.len() * fetch.repeat;
        if responses.len() != want {
            return Err(format!(
                "h3get.py printed {} responses, not {want}",
                responses.len()
            ));
        }
        Ok(responses)
    }
}

/// One JSON line of h3get.py.
fn parse_line(line: &str, prefix: &str) -> Result<H3Response, String> {
    let bad = |what: &str| format!("h3get.py line without {what}: {line}");
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("h3get.py printed {line:?}: {e}"))?;
    let url = v["url"].as_str().ok_or_else(|| bad("url"))?;
    let headers = v["headers"].as_array().ok_or_else(|| bad("headers"))?;
    let headers = headers
        .iter()
        .map(|pair| match (pair[0].as_str(), pair[1].as_str()) {
            (Some(n), Some(v)) => Ok((n.to_owned(), v.to_owned())),
            _ => Err(bad("[name, value] headers")),
        })
        .collect::<Result<_, _>>()?;
    let number = |key: &str| v[key].as_u64().ok_or_else(|| bad(key));
    Ok(H3Response {
        path: url.strip_prefix(prefix).unwrap_or(url).to_owned(),
        status: number("status")? as u16,
        headers,
        body_len: number("body_len")? as usize,
        body_sha256: v["body_sha256"]
            .as_str()
            .ok_or_else(|| bad("body_sha256"))?
            .to_owned(),
        body: None,
        local_port: number("local_port")? as u16,
    })
}

/// ngtcp2's example client, `gtlsclient`.
#[derive(Debug, Clone)]
pub struct Ngtcp2Client {
    bin: PathBuf,
}

/// ngtcp2's client, or why there is none (found once per test binary).
pub fn ngtcp2() -> Result<Ngtcp2Client, String> {
    static FOUND: OnceLock<Result<Ngtcp2Client, String>> = OnceLock::new();
    FOUND.get_or_init(find_ngtcp2).clone()
}

fn find_ngtcp2() -> Result<Ngtcp2Client, String> {
    if let Some(bin) = std::env::var_os("GTLSCLIENT").map(PathBuf::from) {
        if bin.is_file() {
            return Ok(Ngtcp2Client { bin });
        }
        return Err(format!("GTLSCLIENT={} is no file", bin.display()));
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("gtlsclient"))
        .find(|bin| bin.is_file())
        .map(|bin| Ngtcp2Client { bin })
        .ok_or_else(|| {
            "no gtlsclient (ngtcp2-client) on PATH (run scripts/install-h3-clients.sh)".into()
        })
}

/// What gtlsclient's `--download` names the body of `path`: its last
/// segment, query included, `index.html` when that is empty.
fn download_name(path: &str) -> &str {
    match path.rsplit('/').next() {
        Some("") | None => "index.html",
        Some(last) => last,
    }
}

impl Ngtcp2Client {
    /// Run `fetch` against 127.0.0.1:`port` on one connection: one
    /// response per path, in order, or why not (a field or repeat it
    /// cannot send, two paths saving to one file, a path with no answer, a
    /// stream that ended in error, the timeout), with the client's log.
    pub fn fetch(&self, port: u16, fetch: &Fetch) -> Result<Vec<H3Response>, String> {
        if !fetch.headers.is_empty() || fetch.repeat != 1 {
            return Err("gtlsclient cannot send request fields or repeat a path".into());
        }
        let names: Vec<&str> = fetch.paths.iter().map(|p| download_name(p)).collect();
        if let Some(dup) = names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
        {
            return Err(format!(
                "two paths would be saved as {}: ask them apart",
                dup.1
            ));
        }
        let dir = tempfile::tempdir().map_err(|e| format!("a temp dir: {e}"))?;
        let bodies = dir.path().join("bodies");
        std::fs::create_dir(&bodies).map_err(|e| format!("mkdir {bodies:?}: {e}"))?;
        let secs = fetch.timeout.as_secs().max(1);
        let mut cmd = Command::new(&self.bin);
        cmd.args([
            "--exit-on-all-streams-close",
            "--no-quic-dump",
            "--no-http-dump",
        ])
        .arg(format!("--timeout={secs}s"))
        .arg(format!("--handshake-timeout={secs}s"))
        .arg("--download")
        .arg(&bodies)
        .arg("-m")
        .arg(&fetch.method);
        if let Some(body) = fetch.body_file(dir.path())? {
            cmd.arg("-d").arg(body);
        }
        cmd.args(["127.0.0.1", &port.to_string()]);
        cmd.args(fetch.paths.iter().map(|p| fetch.url(port, p)));
        let out = run_limited(&mut cmd, fetch.timeout + Duration::from_secs(5))?;
        let log = String::from_utf8_lossy(&out.stderr);
        let tail = || {
            let lines: Vec<&str> = log.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        };
        if !out.status.success() {
            return Err(format!("gtlsclient failed ({}):\n{}", out.status, tail()));
        }
        let streams = parse_ngtcp2_log(&log);
        let mut responses = Vec::new();
        for (i, (path, name)) in fetch.paths.iter().zip(&names).enumerate() {
            let id = 4 * i as u64; // client bidi streams 0, 4, 8, … in URL order
            let stream = streams.streams.get(&id);
            let Some(status) = stream.and_then(|s| s.status) else {
                return Err(format!("no response for {path} (stream {id}):\n{}", tail()));
            };
            let stream = stream.expect("a stream with a status");
            if let Some(code) = stream.closed.filter(|&c| c != H3_NO_ERROR) {
                return Err(format!("{path}: stream {id} closed with error {code:#x}"));
            }
            let file = bodies.join(name);
            let body = std::fs::read(&file).unwrap_or_default();
            responses.push(H3Response {
                path: path.clone(),
                status,
                headers: stream.headers.clone(),
                body_len: body.len(),
                body_sha256: hex(&Sha256::digest(&body)),
                body: fetch.keep_bodies.then_some(body),
                local_port: streams.local_port.unwrap_or(0),
            });
        }
        Ok(responses)
    }
}

/// What gtlsclient's log says of one stream.
#[derive(Debug, Default)]
struct StreamLog {
    /// The final (non-1xx) `:status`.
    status: Option<u16>,
    headers: Vec<(String, String)>,
    /// The application error code it closed with.
    closed: Option<u64>,
}

/// gtlsclient's log, by stream id, and the local port it sent from.
#[derive(Debug, Default)]
struct Ngtcp2Log {
    streams: std::collections::BTreeMap<u64, StreamLog>,
    local_port: Option<u16>,
}

/// Read the lines that matter (ngtcp2 0.12's examples/client.cc):
/// `http: stream 0x4 [name: value]`, `HTTP stream 4 closed with error code
/// 256`, `Sent packet: local=[127.0.0.1]:39499 remote=…`.
fn parse_ngtcp2_log(log: &str) -> Ngtcp2Log {
    let mut out = Ngtcp2Log::default();
    for line in log.lines() {
        if let Some(rest) = line.strip_prefix("http: stream 0x") {
            let Some((id, field)) = rest.split_once(' ') else {
                continue;
            };
            let (Ok(id), Some(field)) = (u64::from_str_radix(id, 16), field.strip_prefix('['))
            else {
                continue;
            };
            let field = field.strip_suffix(']').unwrap_or(field);
            // A pseudo-header's name starts with ':': split after it.
            let Some((name, value)) = field
                .get(1..)
                .and_then(|f| f.split_once(": "))
                .map(|(n, v)| (format!("{}{n}", &field[..1]), v))
            else {
                continue;
            };
            let stream = out.streams.entry(id).or_default();
            if name == ":status" {
                match value.parse::<u16>() {
                    Ok(s) if s >= 200 => {
                        stream.status = Some(s);
                        stream.headers.clear();
                    }
                    _ => {}
                }
            } else if !name.starts_with(':') && stream.status.is_some() {
                stream
                    .headers
                    .push((name.to_ascii_lowercase(), value.to_owned()));
            }
        } else if let Some(rest) = line.strip_prefix("HTTP stream ") {
            let mut words = rest.split(' ');
            let id = words.next().and_then(|w| w.parse().ok());
            let code = words.next_back().and_then(|w| w.parse().ok());
            if let (Some(id), Some(code)) = (id, code) {
                out.streams.entry(id).or_default().closed = Some(code);
            }
        } else if let Some(rest) = line.strip_prefix("Sent packet: local=") {
            if out.local_port.is_none() {
                out.local_port = rest
                    .split(' ')
                    .next()
                    .and_then(|a| a.rsplit(':').next())
                    .and_then(|p| p.parse().ok());
            }
        }
    }
    out
}

/// Run `cmd` with stdout and stderr captured, killing it past `limit`.
fn run_limited(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {cmd:?}: {e}"))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("{cmd:?}: no pipes"));
    };
    let (out, err) = (capture(stdout), capture(stderr));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            waited => {
                let _ = child.kill();
                let _ = child.wait();
                let why = match waited {
                    Err(e) => format!("wait: {e}"),
                    _ => format!("still running after {limit:?}, killed"),
                };
                settle(&err);
                return Err(format!("{cmd:?}: {why}\nstderr:\n{}", text(&err)));
            }
        }
    };
    settle(&out);
    settle(&err);
    let take = |b: std::sync::Arc<std::sync::Mutex<Vec<u8>>>| {
        std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()))
    };
    Ok(Output {
        status,
        stdout: take(out),
        stderr: take(err),
    })
}
