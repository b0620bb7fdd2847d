//! Configuration: parse, merge, then validate into types that cannot be wrong.
//!
//! Owns: [`RawConfig`] (what an operator wrote, from a TOML file given with
//! `--config` and from flags of the same names), every default (a documented
//! `const` below), and [`Config`], the only form the rest of the server sees.
//! Does not own applying the config (supervisor, worker).
//!
//! Flow:
//! 1. `RawConfig::load(path)` reads the file (`deny_unknown_fields`).
//! 2. `file.merge(flags)`: a flag given on the command line wins.
//! 3. `raw.validate()` enforces every rule and cross-field rule, yielding
//!    `Duration`s, `NonZeroUsize`s, a CPU per worker and socket addresses.
//!    An error names the field (as its flag) and how to fix it; nothing has
//!    been bound yet when it is reported.

pub mod cpus;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::http::Limits;
pub use cpus::CpuSet;

/// Default listen address: loopback, so a first run exposes nothing.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
/// Whole-generation startup bound: runtimes build in milliseconds, so ten
/// seconds only trips on a wedged worker.
pub const DEFAULT_STARTUP_TIMEOUT_S: f64 = 10.0;
/// In-flight requests get this long to finish after SIGTERM (nginx's
/// `worker_shutdown_timeout` is unset by default; ours is bounded).
pub const DEFAULT_DRAIN_TIMEOUT_S: f64 = 30.0;
/// From the start of shutdown until workers still alive are abandoned and
/// reported; must exceed the drain timeout.
pub const DEFAULT_FORCE_TIMEOUT_S: f64 = 35.0;
/// Per-worker connection cap, like nginx's `worker_connections` order of size.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
/// Time to receive a whole request head (nginx `client_header_timeout` 60 s;
/// shorter here because slowloris clients hold memory per connection).
pub const DEFAULT_HEADER_TIMEOUT_S: f64 = 20.0;
/// Idle time between requests on a kept-alive connection (nginx uses 75 s).
pub const DEFAULT_KEEPALIVE_TIMEOUT_S: f64 = 75.0;
/// A client that takes no response bytes for this long is dropped (nginx
/// `send_timeout` is 60 s).
pub const DEFAULT_SEND_TIMEOUT_S: f64 = 60.0;
/// Longest lingering close in all (nginx `lingering_time` 30 s): time for a
/// client still sending after an error to stop and read the answer.
pub const DEFAULT_LINGERING_TIME_S: f64 = 30.0;
/// Silence that ends a lingering close early (nginx `lingering_timeout` 5 s).
pub const DEFAULT_LINGERING_TIMEOUT_S: f64 = 5.0;
/// Most bytes discarded by one lingering close: far above what a client has
/// in flight when it sees the answer (a few socket buffers), small enough
/// that a client streaming at line rate cannot keep a worker busy for the
/// whole lingering time.
pub const DEFAULT_LINGERING_BYTES: u64 = 16 * 1024 * 1024;
// The head limits are the protocol core's defaults; config only validates
// overrides of them.
pub use crate::http::parse::{
    DEFAULT_MAX_HEADERS, DEFAULT_MAX_HEAD_BYTES, DEFAULT_MAX_REQUEST_LINE_BYTES,
};
/// Most workers accepted (far above any core count we pin to).
const MAX_WORKERS: usize = 1024;

/// Why a configuration was refused. Reported before anything binds (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{field}: {problem}")]
    Invalid {
        field: &'static str,
        problem: String,
    },
}

fn invalid(field: &'static str, problem: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        problem: problem.into(),
    }
}

/// A worker count: a number, or one per physical core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WorkerCount {
    Count(u64),
    Word(String),
}

impl std::str::FromStr for WorkerCount {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.parse::<u64>() {
            Ok(n) => WorkerCount::Count(n),
            Err(_) => WorkerCount::Word(s.to_owned()),
        })
    }
}

/// The configuration as written: every field optional, merged file ← flags.
/// Field names are the flag names with `_` for `-`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Directory to serve.
    #[arg(skip)]
    pub root: Option<PathBuf>,
    /// Address to listen on; repeat for several.
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<Vec<String>>,
    /// Worker count, or `auto` for one per physical core.
    #[arg(long, value_name = "N|auto")]
    pub workers: Option<WorkerCount>,
    /// CPUs to pin workers to, e.g. `0,2,4-6`.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Do not pin workers to CPUs.
    #[arg(long = "no-pin", action = clap::ArgAction::SetTrue)]
    #[serde(default)]
    pub no_pin: bool,
    /// `reuseport` (a socket per worker) or `shared` (one socket, dup'ed).
    #[arg(long, value_name = "reuseport|shared")]
    pub listener: Option<String>,
    /// I/O driver: `auto` (io_uring, else epoll), `uring` or `epoll`.
    #[arg(long, value_name = "auto|uring|epoll")]
    pub driver: Option<String>,
    /// Seconds for every worker to become ready.
    #[arg(long, value_name = "SECONDS")]
    pub startup_timeout: Option<f64>,
    /// Seconds in-flight requests get after SIGTERM before being cut.
    #[arg(long, value_name = "SECONDS")]
    pub drain_timeout: Option<f64>,
    /// Seconds after SIGTERM when surviving workers are abandoned.
    #[arg(long, value_name = "SECONDS")]
    pub force_timeout: Option<f64>,
    /// Open connections per worker.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<u64>,
    /// Seconds to receive a request head.
    #[arg(long, value_name = "SECONDS")]
    pub header_timeout: Option<f64>,
    /// Seconds a kept-alive connection may idle.
    #[arg(long, value_name = "SECONDS")]
    pub keepalive_timeout: Option<f64>,
    /// Seconds a client may take to accept more response bytes.
    #[arg(long, value_name = "SECONDS")]
    pub send_timeout: Option<f64>,
    /// Seconds a lingering close may discard input in all.
    #[arg(long, value_name = "SECONDS")]
    pub lingering_time: Option<f64>,
    /// Seconds of client silence that end a lingering close.
    #[arg(long, value_name = "SECONDS")]
    pub lingering_timeout: Option<f64>,
    /// Most bytes a lingering close discards.
    #[arg(long, value_name = "BYTES")]
    pub lingering_bytes: Option<u64>,
    /// Largest request head in bytes.
    #[arg(long, value_name = "BYTES")]
    pub max_head_bytes: Option<u64>,
    /// Most header fields in a request.
    #[arg(long, value_name = "N")]
    pub max_headers: Option<u64>,
    /// Address of the admin listener (/healthz, /readyz, /metrics).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<String>,
    /// Symlinks: `inside` (links that stay under the root), `never`, `follow`.
    #[arg(long, value_name = "inside|never|follow")]
    pub symlinks: Option<String>,
    /// Dotfiles (`/.git/config`): `deny` (404) or `allow`.
    #[arg(long, value_name = "deny|allow")]
    pub dotfiles: Option<String>,
    /// Index file names tried for a directory, in order; repeatable.
    #[arg(long, value_name = "NAME")]
    pub index: Option<Vec<String>>,
    /// List directories without an index file.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    #[serde(default)]
    pub autoindex: bool,
    /// `Cache-Control` value sent with every file response.
    #[arg(long, value_name = "VALUE")]
    pub cache_control: Option<String>,
    /// Per-path header rules (config file only): `[[headers]] match = "/assets/**"`
    /// `set = { "Cache-Control" = "..." }`.
    #[arg(skip)]
    pub headers: Option<Vec<HeaderRuleRaw>>,
    /// Seconds before a cached file is checked against the disk again.
    #[arg(long, value_name = "SECONDS")]
    pub file_cache_ttl: Option<f64>,
    /// Open files cached per worker.
    #[arg(long, value_name = "N")]
    pub file_cache_entries: Option<u64>,
    /// Files up to this many bytes are kept in memory.
    #[arg(long, value_name = "BYTES")]
    pub small_file_max: Option<u64>,
    /// Memory for small files, per worker.
    #[arg(long, value_name = "BYTES")]
    pub memory_cache_bytes: Option<u64>,
    /// Workers as `thread`s of this process or as `process`es.
    #[arg(long, value_name = "thread|process")]
    pub isolation: Option<String>,
    /// How worker processes are watched: `auto`, `pidfd` or `sigchld`.
    #[arg(long, value_name = "auto|pidfd|sigchld")]
    pub child_watch: Option<String>,
    /// Crashed workers replaced within the restart window before giving up.
    #[arg(long, value_name = "N")]
    pub max_restarts: Option<u64>,
    /// Seconds over which `--max-restarts` is counted.
    #[arg(long, value_name = "SECONDS")]
    pub restart_window: Option<f64>,
    /// Seconds between health beats to each worker.
    #[arg(long, value_name = "SECONDS")]
    pub beat_interval: Option<f64>,
    /// Seconds a worker has to answer a beat; two misses and it is replaced.
    #[arg(long, value_name = "SECONDS")]
    pub beat_timeout: Option<f64>,
    /// Open connections across all workers (default: per-worker cap only).
    #[arg(long, value_name = "N")]
    pub max_connections_total: Option<u64>,
    /// Address of a TLS listener; repeatable, beside plain `--bind`s.
    #[arg(long, value_name = "ADDR")]
    pub tls_bind: Option<Vec<String>>,
    /// PEM certificate chain for the TLS listeners.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (RSA, ECDSA or Ed25519) of `--tls-cert`.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Make a self-signed certificate for localhost and the bound addresses.
    #[arg(long, action = clap::ArgAction::SetTrue)]
    #[serde(default)]
    pub tls_self_signed: bool,
    /// Seconds a client has to finish the TLS handshake.
    #[arg(long, value_name = "SECONDS")]
    pub tls_handshake_timeout: Option<f64>,
    /// Seconds between session-ticket key rotations.
    #[arg(long, value_name = "SECONDS")]
    pub tls_ticket_rotate: Option<f64>,
}

/// One `[[headers]]` table of the config file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HeaderRuleRaw {
    /// A path glob: `*` within a segment, `**` across segments, `?` one byte.
    #[serde(rename = "match")]
    pub pattern: String,
    /// Header fields to set on matching responses.
    pub set: std::collections::BTreeMap<String, String>,
}

macro_rules! merge_fields {
    ($base:ident, $over:ident; $($f:ident),*) => {
        $( if $over.$f.is_some() { $base.$f = $over.$f; } )*
    };
}

impl RawConfig {
    /// Read a TOML config file.
    pub fn load(path: &Path) -> Result<RawConfig, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| Error::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }

    /// Overlay `over` (the command line) on `self` (the file).
    pub fn merge(mut self, over: RawConfig) -> RawConfig {
        merge_fields!(self, over; root, bind, workers, cpus, listener, driver,
            startup_timeout, drain_timeout, force_timeout, max_connections,
            header_timeout, keepalive_timeout, send_timeout, lingering_time, lingering_timeout,
            lingering_bytes, max_head_bytes, max_headers, admin,
            symlinks, dotfiles, index, cache_control, headers, file_cache_ttl,
            file_cache_entries, small_file_max, memory_cache_bytes, isolation,
            child_watch, max_restarts, restart_window, beat_interval, beat_timeout,
            max_connections_total, tls_bind, tls_cert, tls_key, tls_handshake_timeout,
            tls_ticket_rotate);
        self.tls_self_signed |= over.tls_self_signed;
        self.no_pin |= over.no_pin;
        self.autoindex |= over.autoindex;
        self
    }

    /// Validate against this process's CPU set.
    pub fn validate(self) -> Result<Config, Error> {
        let allowed = crate::sys::affinity::allowed_cpus()
            .map_err(|e| invalid("--cpus", format!("cannot read this process's CPU set: {e}")))?;
        let physical = cpus::physical_cores(&allowed);
        self.validate_with(&allowed, &physical)
    }

    /// Validate with an explicit CPU set and physical-core list (tests).
    pub fn validate_with(self, allowed: &CpuSet, physical: &[usize]) -> Result<Config, Error> {
        let root = self.root.clone().unwrap_or_else(|| PathBuf::from("."));
        match std::fs::metadata(&root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(invalid(
                    "root",
                    format!(
                        "{} is not a directory; give the directory to serve",
                        root.display()
                    ),
                ))
            }
            Err(e) => {
                return Err(invalid(
                    "root",
                    format!(
                        "cannot open {}: {e}; give an existing directory",
                        root.display()
                    ),
                ))
            }
        }

        let tls_only = self.bind.as_ref().is_none_or(|b| b.is_empty())
            && self.tls_bind.as_ref().is_some_and(|b| !b.is_empty());
        let bind_texts = if tls_only {
            Vec::new()
        } else {
            self.bind
                .clone()
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| vec![DEFAULT_BIND.to_owned()])
        };
        let mut binds = Vec::new();
        for b in &bind_texts {
            let addr: SocketAddr = b.parse().map_err(|_| {
                invalid(
                    "--bind",
                    format!("{b:?} is not IP:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)"),
                )
            })?;
            if binds.contains(&addr) {
                return Err(invalid("--bind", format!("{addr} is given twice")));
            }
            binds.push(addr);
        }

        let listener = match self.listener.as_deref().unwrap_or("reuseport") {
            "reuseport" => ListenerMode::ReusePort,
            "shared" => ListenerMode::Shared,
            other => {
                return Err(invalid(
                    "--listener",
                    format!("{other:?} is not a listener mode; use reuseport or shared"),
                ))
            }
        };
        let driver = match self.driver.as_deref().unwrap_or("auto") {
            "auto" => DriverChoice::Auto,
            "uring" | "io_uring" => DriverChoice::Uring,
            "epoll" => DriverChoice::Epoll,
            other => {
                return Err(invalid(
                    "--driver",
                    format!("{other:?} is not a driver; use auto, uring or epoll"),
                ))
            }
        };

        let explicit_cpus = match &self.cpus {
            Some(list) => {
                let list = cpus::parse_list(list).map_err(|p| invalid("--cpus", p))?;
                for &c in &list {
                    if !allowed.0.contains(&c) {
                        return Err(invalid(
                            "--cpus",
                            format!("cpu {c} is not in this process's CPU set {allowed}"),
                        ));
                    }
                }
                Some(list)
            }
            None => None,
        };
        let pin = !self.no_pin;
        if !pin && explicit_cpus.is_some() {
            return Err(invalid(
                "--cpus",
                "--cpus and --no-pin contradict; drop one",
            ));
        }
        let default_cpus: Vec<usize> = {
            // Physical cores first, then SMT siblings if more workers are asked.
            let mut v = physical.to_vec();
            v.extend(allowed.0.iter().filter(|c| !physical.contains(c)));
            v
        };
        let workers = match &self.workers {
            None => 1,
            Some(WorkerCount::Word(w)) if w == "auto" => match &explicit_cpus {
                Some(list) => list.len(),
                None => physical.len().max(1),
            },
            Some(WorkerCount::Word(w)) => {
                return Err(invalid(
                    "--workers",
                    format!("{w:?} is not a count; use a number or auto"),
                ))
            }
            Some(WorkerCount::Count(0)) => {
                return Err(invalid(
                    "--workers",
                    "0 workers would serve nothing; use 1 or more",
                ))
            }
            Some(WorkerCount::Count(n)) if *n as usize > MAX_WORKERS => {
                return Err(invalid(
                    "--workers",
                    format!("{n} is above the limit of {MAX_WORKERS}"),
                ))
            }
            Some(WorkerCount::Count(n)) => *n as usize,
        };
        let cpu_plan = if pin {
            let pool = explicit_cpus.clone().unwrap_or(default_cpus);
            if pool.len() < workers {
                return Err(invalid(
                    "--workers",
                    format!(
                        "{workers} pinned workers need {workers} CPUs but only {} are available ({}); \
                         lower --workers, list more --cpus, or pass --no-pin",
                        pool.len(),
                        cpus::join(pool.iter())
                    ),
                ));
            }
            Some(pool[..workers].to_vec())
        } else {
            None
        };

        let secs = |field: &'static str, v: Option<f64>, default: f64| -> Result<Duration, Error> {
            let v = v.unwrap_or(default);
            if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
                return Err(invalid(
                    field,
                    format!("{v} is not a number of seconds in (0, 86400]"),
                ));
            }
            Ok(Duration::from_secs_f64(v))
        };
        let startup_timeout = secs(
            "--startup-timeout",
            self.startup_timeout,
            DEFAULT_STARTUP_TIMEOUT_S,
        )?;
        let drain_timeout = secs(
            "--drain-timeout",
            self.drain_timeout,
            DEFAULT_DRAIN_TIMEOUT_S,
        )?;
        let force_default = (self.drain_timeout.unwrap_or(DEFAULT_DRAIN_TIMEOUT_S)
            + (DEFAULT_FORCE_TIMEOUT_S - DEFAULT_DRAIN_TIMEOUT_S))
            .min(86_400.0);
        let force_timeout = secs("--force-timeout", self.force_timeout, force_default)?;
        if force_timeout <= drain_timeout {
            return Err(invalid(
                "--force-timeout",
                format!(
                    "{}s must be longer than --drain-timeout {}s (it counts from the same start)",
                    force_timeout.as_secs_f64(),
                    drain_timeout.as_secs_f64()
                ),
            ));
        }
        let header_timeout = secs(
            "--header-timeout",
            self.header_timeout,
            DEFAULT_HEADER_TIMEOUT_S,
        )?;
        let keepalive_timeout = secs(
            "--keepalive-timeout",
            self.keepalive_timeout,
            DEFAULT_KEEPALIVE_TIMEOUT_S,
        )?;
        let send_timeout = secs("--send-timeout", self.send_timeout, DEFAULT_SEND_TIMEOUT_S)?;
        let lingering_time = secs(
            "--lingering-time",
            self.lingering_time,
            DEFAULT_LINGERING_TIME_S,
        )?;
        let lingering_timeout = secs(
            "--lingering-timeout",
            self.lingering_timeout,
            DEFAULT_LINGERING_TIMEOUT_S,
        )?;
        let lingering_bytes = match self.lingering_bytes {
            None => DEFAULT_LINGERING_BYTES,
            Some(0) => {
                return Err(invalid(
                    "--lingering-bytes",
                    "must be at least 1; give the most bytes a lingering close may discard",
                ))
            }
            Some(n) => n,
        };

        let max_connections = positive(
            "--max-connections",
            self.max_connections,
            DEFAULT_MAX_CONNECTIONS,
        )?;
        let max_head_bytes = self
            .max_head_bytes
            .map_or(DEFAULT_MAX_HEAD_BYTES, |v| v as usize);
        if !(1024..=1024 * 1024).contains(&max_head_bytes) {
            return Err(invalid(
                "--max-head-bytes",
                format!("{max_head_bytes} is outside 1024..=1048576"),
            ));
        }
        let max_headers = self.max_headers.map_or(DEFAULT_MAX_HEADERS, |v| v as usize);
        if !(1..=crate::http::parse::MAX_HEADERS_CEILING).contains(&max_headers) {
            return Err(invalid(
                "--max-headers",
                format!(
                    "{max_headers} is outside 1..={}",
                    crate::http::parse::MAX_HEADERS_CEILING
                ),
            ));
        }
        let admin = match &self.admin {
            None => None,
            Some(a) => {
                let addr: SocketAddr = a.parse().map_err(|_| {
                    invalid(
                        "--admin",
                        format!("{a:?} is not IP:PORT (e.g. 127.0.0.1:9090)"),
                    )
                })?;
                if addr.port() != 0 && binds.contains(&addr) {
                    return Err(invalid(
                        "--admin",
                        format!("{addr} is also a --bind address; pick another port"),
                    ));
                }
                Some(addr)
            }
        };

        let files = self.validate_files()?;
        let tls = self.validate_tls(&binds)?;
        let isolation = match self.isolation.as_deref().unwrap_or("thread") {
            "thread" => Isolation::Thread,
            "process" => Isolation::Process,
            other => {
                return Err(invalid(
                    "--isolation",
                    format!("{other:?} is not a mode; use thread or process"),
                ))
            }
        };
        let child_watch = match self.child_watch.as_deref().unwrap_or("auto") {
            "auto" => ChildWatchChoice::Auto,
            "pidfd" => ChildWatchChoice::Pidfd,
            "sigchld" => ChildWatchChoice::Sigchld,
            other => {
                return Err(invalid(
                    "--child-watch",
                    format!("{other:?} is not a method; use auto, pidfd or sigchld"),
                ))
            }
        };
        let restart_window = secs(
            "--restart-window",
            self.restart_window,
            DEFAULT_RESTART_WINDOW_S,
        )?;
        let beat_interval = secs(
            "--beat-interval",
            self.beat_interval,
            DEFAULT_BEAT_INTERVAL_S,
        )?;
        let beat_timeout = secs("--beat-timeout", self.beat_timeout, DEFAULT_BEAT_TIMEOUT_S)?;
        let max_connections_total = match self.max_connections_total {
            Some(0) => {
                return Err(invalid(
                    "--max-connections-total",
                    "0 would admit nobody; use 1 or more",
                ))
            }
            other => other,
        };

        Ok(Config {
            tls,
            raw: RawConfig {
                root: Some(std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone())),
                ..self.clone()
            },
            isolation,
            child_watch,
            max_restarts: self.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS) as usize,
            restart_window,
            beat_interval,
            beat_timeout,
            max_connections_total,
            files,
            root,
            binds,
            workers: NonZeroUsize::new(workers).unwrap_or(NonZeroUsize::MIN),
            cpus: cpu_plan,
            listener,
            driver,
            startup_timeout,
            drain_timeout,
            force_timeout,
            max_connections,
            header_timeout,
            keepalive_timeout,
            send_timeout,
            lingering_time,
            lingering_timeout,
            lingering_bytes,
            limits: Limits {
                max_head_bytes,
                max_request_line_bytes: DEFAULT_MAX_REQUEST_LINE_BYTES.min(max_head_bytes),
                max_headers,
            },
            admin,
        })
    }
}

impl RawConfig {
    fn validate_tls(&self, plain: &[SocketAddr]) -> Result<Option<TlsConfig>, Error> {
        let binds: Vec<SocketAddr> = match &self.tls_bind {
            None => Vec::new(),
            Some(list) => {
                let mut out = Vec::new();
                for b in list {
                    let addr: SocketAddr = b.parse().map_err(|_| {
                        invalid(
                            "--tls-bind",
                            format!("{b:?} is not IP:PORT (e.g. 127.0.0.1:8443)"),
                        )
                    })?;
                    if out.contains(&addr) || (addr.port() != 0 && plain.contains(&addr)) {
                        return Err(invalid("--tls-bind", format!("{addr} is given twice")));
                    }
                    out.push(addr);
                }
                out
            }
        };
        let source = match (&self.tls_cert, &self.tls_key, self.tls_self_signed) {
            (None, None, false) => None,
            (Some(_), _, true) | (_, Some(_), true) => {
                return Err(invalid(
                    "--tls-self-signed",
                    "cannot be combined with --tls-cert/--tls-key; choose one",
                ))
            }
            (Some(_), None, _) => {
                return Err(invalid(
                    "--tls-key",
                    "missing: --tls-cert needs its --tls-key",
                ))
            }
            (None, Some(_), _) => {
                return Err(invalid(
                    "--tls-cert",
                    "missing: --tls-key needs its --tls-cert",
                ))
            }
            (Some(cert), Some(key), false) => {
                crate::tls::Material::load(cert, key)
                    .map_err(|e| invalid("--tls-cert", e.to_string()))?;
                Some(TlsSource::Files {
                    cert: cert.clone(),
                    key: key.clone(),
                })
            }
            (None, None, true) => Some(TlsSource::SelfSigned),
        };
        match (binds.is_empty(), source) {
            (true, None) => Ok(None),
            (false, None) => Err(invalid(
                "--tls-bind",
                "needs --tls-cert and --tls-key, or --tls-self-signed",
            )),
            (true, Some(_)) => Err(invalid(
                "--tls-bind",
                "missing: a certificate was given but no TLS listener; add --tls-bind ADDR",
            )),
            (false, Some(source)) => {
                let secs =
                    |field: &'static str, v: Option<f64>, d: f64| -> Result<Duration, Error> {
                        let v = v.unwrap_or(d);
                        if !(v.is_finite() && v > 0.0 && v <= 86_400.0 * 7.0) {
                            return Err(invalid(
                                field,
                                format!("{v} is not a number of seconds in (0, 604800]"),
                            ));
                        }
                        Ok(Duration::from_secs_f64(v))
                    };
                Ok(Some(TlsConfig {
                    binds,
                    source,
                    handshake_timeout: secs(
                        "--tls-handshake-timeout",
                        self.tls_handshake_timeout,
                        DEFAULT_TLS_HANDSHAKE_TIMEOUT_S,
                    )?,
                    ticket_rotate: secs(
                        "--tls-ticket-rotate",
                        self.tls_ticket_rotate,
                        DEFAULT_TLS_TICKET_ROTATE_S,
                    )?,
                }))
            }
        }
    }

    fn validate_files(&self) -> Result<FilesConfig, Error> {
        let symlinks = match self.symlinks.as_deref().unwrap_or("inside") {
            "inside" => Symlinks::Inside,
            "never" => Symlinks::Never,
            "follow" => Symlinks::Follow,
            other => {
                return Err(invalid(
                    "--symlinks",
                    format!("{other:?} is not a policy; use inside, never or follow"),
                ))
            }
        };
        let dotfiles = match self.dotfiles.as_deref().unwrap_or("deny") {
            "deny" => false,
            "allow" => true,
            other => {
                return Err(invalid(
                    "--dotfiles",
                    format!("{other:?} is not a policy; use deny or allow"),
                ))
            }
        };
        let index = self
            .index
            .clone()
            .unwrap_or_else(|| vec![DEFAULT_INDEX.to_owned()]);
        for name in &index {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(invalid(
                    "--index",
                    format!("{name:?} is not a file name; give a name like index.html"),
                ));
            }
        }
        let mut rules = Vec::new();
        if let Some(v) = &self.cache_control {
            check_field_value("--cache-control", v)?;
        }
        for rule in self.headers.iter().flatten() {
            if !rule.pattern.starts_with('/') {
                return Err(invalid(
                    "headers.match",
                    format!("{:?} must start with / (e.g. \"/assets/**\")", rule.pattern),
                ));
            }
            let mut set = Vec::new();
            for (name, value) in &rule.set {
                let token = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !token {
                    return Err(invalid(
                        "headers.set",
                        format!("{name:?} is not a header name"),
                    ));
                }
                let lower = name.to_ascii_lowercase();
                if RESERVED_FIELDS.contains(&lower.as_str()) {
                    return Err(invalid(
                        "headers.set",
                        format!("{name} is set by the server itself and cannot be overridden"),
                    ));
                }
                check_field_value("headers.set", value)?;
                set.push((name.clone(), value.clone()));
            }
            rules.push(HeaderRule {
                pattern: rule.pattern.clone(),
                set,
            });
        }
        let ttl = self.file_cache_ttl.unwrap_or(DEFAULT_FILE_CACHE_TTL_S);
        if !(ttl.is_finite() && (0.0..=3600.0).contains(&ttl)) {
            return Err(invalid(
                "--file-cache-ttl",
                format!("{ttl} is not in [0, 3600] seconds"),
            ));
        }
        let small_file_max = self.small_file_max.unwrap_or(DEFAULT_SMALL_FILE_MAX_BYTES);
        if small_file_max > 16 * 1024 * 1024 {
            return Err(invalid(
                "--small-file-max",
                format!("{small_file_max} is above 16 MiB; larger files are sent zero-copy"),
            ));
        }
        Ok(FilesConfig {
            symlinks,
            dotfiles,
            index,
            autoindex: self.autoindex,
            cache_control: self.cache_control.clone(),
            rules,
            file_cache_ttl: Duration::from_secs_f64(ttl),
            file_cache_entries: positive(
                "--file-cache-entries",
                self.file_cache_entries,
                DEFAULT_FILE_CACHE_ENTRIES,
            )?,
            small_file_max,
            memory_cache_bytes: self
                .memory_cache_bytes
                .map_or(DEFAULT_MEMORY_CACHE_BYTES, |v| v as usize),
        })
    }
}

/// Fields the server computes; a rule that set them would corrupt framing or
/// validators.
const RESERVED_FIELDS: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "content-range",
    "content-encoding",
    "etag",
    "last-modified",
    "date",
];

fn check_field_value(field: &'static str, v: &str) -> Result<(), Error> {
    if v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(invalid(
            field,
            format!("{v:?} contains a line break or NUL"),
        ));
    }
    Ok(())
}

/// Where the TLS identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// PEM files, re-read on every reload.
    Files { cert: PathBuf, key: PathBuf },
    /// Made once by the supervisor for localhost and the bound addresses.
    SelfSigned,
}

/// Validated TLS settings.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    pub binds: Vec<SocketAddr>,
    pub source: TlsSource,
    pub handshake_timeout: Duration,
    pub ticket_rotate: Duration,
}

/// A slow or silent client gets this long to finish the TLS handshake.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT_S: f64 = 10.0;
/// Ticket keys rotate hourly; tickets stay valid for two periods.
pub const DEFAULT_TLS_TICKET_ROTATE_S: f64 = 3600.0;

/// How the file handler treats symbolic links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symlinks {
    /// Links whose resolution stays under the root are followed (openat2
    /// RESOLVE_BENEATH); escaping ones are refused.
    Inside,
    /// No link is followed (RESOLVE_NO_SYMLINKS).
    Never,
    /// Links are followed anywhere (the request path itself still cannot
    /// climb above the root).
    Follow,
}

impl Symlinks {
    pub fn name(self) -> &'static str {
        match self {
            Symlinks::Inside => "inside",
            Symlinks::Never => "never",
            Symlinks::Follow => "follow",
        }
    }
}

/// A validated `[[headers]]` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRule {
    pub pattern: String,
    pub set: Vec<(String, String)>,
}

/// Settings of the static file handler.
#[derive(Debug, Clone)]
pub struct FilesConfig {
    pub symlinks: Symlinks,
    /// Serve paths with a segment starting with `.`.
    pub dotfiles: bool,
    pub index: Vec<String>,
    pub autoindex: bool,
    pub cache_control: Option<String>,
    pub rules: Vec<HeaderRule>,
    pub file_cache_ttl: Duration,
    pub file_cache_entries: NonZeroUsize,
    pub small_file_max: u64,
    pub memory_cache_bytes: usize,
}

/// nginx's default index name.
pub const DEFAULT_INDEX: &str = "index.html";
/// A replaced file is served new within this many seconds.
pub const DEFAULT_FILE_CACHE_TTL_S: f64 = 1.0;
/// Open-file cache entries per worker (nginx examples use 1000–10000).
pub const DEFAULT_FILE_CACHE_ENTRIES: usize = 4096;
/// Files up to 64 KiB are answered from memory with one write.
pub const DEFAULT_SMALL_FILE_MAX_BYTES: u64 = 64 * 1024;
/// Memory for small files per worker: about a thousand 64 KiB files.
pub const DEFAULT_MEMORY_CACHE_BYTES: usize = 64 * 1024 * 1024;

fn positive(field: &'static str, v: Option<u64>, default: usize) -> Result<NonZeroUsize, Error> {
    let v = v.map_or(default, |v| v as usize);
    NonZeroUsize::new(v).ok_or_else(|| invalid(field, "0 is not allowed; use 1 or more"))
}

/// How workers get their listening sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerMode {
    /// One SO_REUSEPORT socket per worker: the kernel spreads connections.
    ReusePort,
    /// One socket bound by the supervisor; each worker accepts on a dup.
    Shared,
}

impl ListenerMode {
    pub fn name(self) -> &'static str {
        match self {
            ListenerMode::ReusePort => "reuseport",
            ListenerMode::Shared => "shared",
        }
    }
}

/// Which I/O driver the operator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverChoice {
    /// io_uring, falling back to epoll where it cannot be set up.
    Auto,
    /// io_uring or fail.
    Uring,
    /// epoll (monoio's legacy driver).
    Epoll,
}

impl DriverChoice {
    pub fn name(self) -> &'static str {
        match self {
            DriverChoice::Auto => "auto",
            DriverChoice::Uring => "uring",
            DriverChoice::Epoll => "epoll",
        }
    }
}

/// Workers as threads or processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Thread,
    Process,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Thread => "thread",
            Isolation::Process => "process",
        }
    }
}

/// How worker processes are watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildWatchChoice {
    /// pidfds where the kernel has them, else SIGCHLD.
    Auto,
    Pidfd,
    Sigchld,
}

/// A crash loop gives up after this many restarts in the window.
pub const DEFAULT_MAX_RESTARTS: u64 = 5;
/// The crash-loop window.
pub const DEFAULT_RESTART_WINDOW_S: f64 = 60.0;
/// A beat a second finds a wedged worker within a few seconds.
pub const DEFAULT_BEAT_INTERVAL_S: f64 = 1.0;
/// A healthy event loop answers a beat in microseconds; a second is slack.
pub const DEFAULT_BEAT_TIMEOUT_S: f64 = 1.0;

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// TLS listeners and identity, if any.
    pub tls: Option<TlsConfig>,
    /// The raw settings this was validated from (root made absolute): what a
    /// worker process is sent to rebuild the same `Config`.
    pub raw: RawConfig,
    pub isolation: Isolation,
    pub child_watch: ChildWatchChoice,
    pub max_restarts: usize,
    pub restart_window: Duration,
    pub beat_interval: Duration,
    pub beat_timeout: Duration,
    pub max_connections_total: Option<u64>,
    /// Directory served by the file handler.
    pub root: PathBuf,
    /// The file handler's settings.
    pub files: FilesConfig,
    /// Listen addresses (every worker accepts on each).
    pub binds: Vec<SocketAddr>,
    pub workers: NonZeroUsize,
    /// The CPU of each worker, by index; `None` = not pinned.
    pub cpus: Option<Vec<usize>>,
    pub listener: ListenerMode,
    pub driver: DriverChoice,
    pub startup_timeout: Duration,
    /// From SIGTERM: connections still open then are cut.
    pub drain_timeout: Duration,
    /// From SIGTERM: workers still alive then are reported and abandoned.
    pub force_timeout: Duration,
    /// Per worker.
    pub max_connections: NonZeroUsize,
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub send_timeout: Duration,
    /// Lingering close bounds (see `worker::conn::linger`).
    pub lingering_time: Duration,
    pub lingering_timeout: Duration,
    pub lingering_bytes: u64,
    pub limits: Limits,
    pub admin: Option<SocketAddr>,
}

/// The effective configuration, printed by `check-config` in the file format.
#[derive(Debug, Serialize)]
struct Effective {
    root: String,
    bind: Vec<String>,
    workers: usize,
    cpus: Option<String>,
    no_pin: bool,
    listener: &'static str,
    driver: &'static str,
    startup_timeout: f64,
    drain_timeout: f64,
    force_timeout: f64,
    max_connections: usize,
    header_timeout: f64,
    keepalive_timeout: f64,
    send_timeout: f64,
    lingering_time: f64,
    lingering_timeout: f64,
    lingering_bytes: u64,
    max_head_bytes: usize,
    max_headers: usize,
    admin: Option<String>,
    symlinks: &'static str,
    dotfiles: &'static str,
    index: Vec<String>,
    autoindex: bool,
    cache_control: Option<String>,
    file_cache_ttl: f64,
    file_cache_entries: usize,
    small_file_max: u64,
    memory_cache_bytes: usize,
    headers: Vec<HeaderRuleRaw>,
    isolation: &'static str,
    child_watch: &'static str,
    max_restarts: usize,
    restart_window: f64,
    beat_interval: f64,
    beat_timeout: f64,
    max_connections_total: Option<u64>,
    tls_bind: Vec<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    tls_self_signed: bool,
}

impl Config {
    /// The TLS handshake bound (its default when there is no TLS).
    pub fn tls_handshake_timeout(&self) -> Duration {
        self.tls.as_ref().map_or(
            Duration::from_secs_f64(DEFAULT_TLS_HANDSHAKE_TIMEOUT_S),
            |t| t.handshake_timeout,
        )
    }

    /// The ticket-key rotation period (its default when there is no TLS).
    pub fn tls_ticket_rotate(&self) -> Duration {
        self.tls
            .as_ref()
            .map_or(Duration::from_secs_f64(DEFAULT_TLS_TICKET_ROTATE_S), |t| {
                t.ticket_rotate
            })
    }

    /// The effective configuration as TOML (same keys as the file).
    pub fn to_toml(&self) -> String {
        let e = Effective {
            root: self.root.display().to_string(),
            bind: self.binds.iter().map(ToString::to_string).collect(),
            workers: self.workers.get(),
            cpus: self.cpus.as_ref().map(|c| cpus::join(c.iter())),
            no_pin: self.cpus.is_none(),
            listener: self.listener.name(),
            driver: self.driver.name(),
            startup_timeout: self.startup_timeout.as_secs_f64(),
            drain_timeout: self.drain_timeout.as_secs_f64(),
            force_timeout: self.force_timeout.as_secs_f64(),
            max_connections: self.max_connections.get(),
            header_timeout: self.header_timeout.as_secs_f64(),
            keepalive_timeout: self.keepalive_timeout.as_secs_f64(),
            send_timeout: self.send_timeout.as_secs_f64(),
            lingering_time: self.lingering_time.as_secs_f64(),
            lingering_timeout: self.lingering_timeout.as_secs_f64(),
            lingering_bytes: self.lingering_bytes,
            max_head_bytes: self.limits.max_head_bytes,
            max_headers: self.limits.max_headers,
            admin: self.admin.map(|a| a.to_string()),
            symlinks: self.files.symlinks.name(),
            dotfiles: if self.files.dotfiles { "allow" } else { "deny" },
            index: self.files.index.clone(),
            autoindex: self.files.autoindex,
            cache_control: self.files.cache_control.clone(),
            file_cache_ttl: self.files.file_cache_ttl.as_secs_f64(),
            file_cache_entries: self.files.file_cache_entries.get(),
            small_file_max: self.files.small_file_max,
            memory_cache_bytes: self.files.memory_cache_bytes,
            headers: self
                .files
                .rules
                .iter()
                .map(|r| HeaderRuleRaw {
                    pattern: r.pattern.clone(),
                    set: r.set.iter().cloned().collect(),
                })
                .collect(),
            isolation: self.isolation.name(),
            child_watch: match self.child_watch {
                ChildWatchChoice::Auto => "auto",
                ChildWatchChoice::Pidfd => "pidfd",
                ChildWatchChoice::Sigchld => "sigchld",
            },
            max_restarts: self.max_restarts,
            restart_window: self.restart_window.as_secs_f64(),
            beat_interval: self.beat_interval.as_secs_f64(),
            beat_timeout: self.beat_timeout.as_secs_f64(),
            max_connections_total: self.max_connections_total,
            tls_bind: self
                .tls
                .iter()
                .flat_map(|t| t.binds.iter().map(ToString::to_string))
                .collect(),
            tls_cert: match self.tls.as_ref().map(|t| &t.source) {
                Some(TlsSource::Files { cert, .. }) => Some(cert.display().to_string()),
                _ => None,
            },
            tls_key: match self.tls.as_ref().map(|t| &t.source) {
                Some(TlsSource::Files { key, .. }) => Some(key.display().to_string()),
                _ => None,
            },
            tls_self_signed: matches!(
                self.tls.as_ref().map(|t| &t.source),
                Some(TlsSource::SelfSigned)
            ),
        };
        toml::to_string(&e).unwrap_or_else(|err| format!("# cannot render config: {err}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[usize]) -> CpuSet {
        CpuSet(v.iter().copied().collect())
    }

    fn raw() -> RawConfig {
        RawConfig {
            root: Some(std::env::temp_dir()),
            ..RawConfig::default()
        }
    }

    fn err(r: RawConfig) -> String {
        r.validate_with(&set(&[0, 1]), &[0, 1])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults_validate() {
        let c = raw().validate_with(&set(&[0, 1]), &[0, 1]).unwrap();
        assert_eq!(c.workers.get(), 1);
        assert_eq!(c.binds, vec![DEFAULT_BIND.parse::<SocketAddr>().unwrap()]);
        assert_eq!(c.cpus, Some(vec![0]));
        assert_eq!(c.listener, ListenerMode::ReusePort);
    }

    #[test]
    fn cpu_outside_set_names_the_set() {
        let r = RawConfig {
            cpus: Some("0,999".into()),
            ..raw()
        };
        assert_eq!(
            err(r),
            "--cpus: cpu 999 is not in this process's CPU set {0,1}"
        );
    }

    #[test]
    fn auto_workers_is_one_per_physical_core() {
        let r = RawConfig {
            workers: Some(WorkerCount::Word("auto".into())),
            ..raw()
        };
        // cpus 0-3 with 0/2 and 1/3 siblings: physical firsts are 0 and 1.
        let c = r.validate_with(&set(&[0, 1, 2, 3]), &[0, 1]).unwrap();
        assert_eq!(c.workers.get(), 2);
        assert_eq!(c.cpus, Some(vec![0, 1]));
    }

    #[test]
    fn too_many_pinned_workers_is_refused() {
        let r = RawConfig {
            workers: Some(WorkerCount::Count(3)),
            ..raw()
        };
        assert!(err(r).starts_with("--workers: 3 pinned workers need 3 CPUs"));
        let r = RawConfig {
            workers: Some(WorkerCount::Count(3)),
            no_pin: true,
            ..raw()
        };
        assert!(r
            .validate_with(&set(&[0, 1]), &[0, 1])
            .unwrap()
            .cpus
            .is_none());
    }

    #[test]
    fn force_must_exceed_drain() {
        let r = RawConfig {
            drain_timeout: Some(5.0),
            force_timeout: Some(5.0),
            ..raw()
        };
        assert!(err(r).starts_with("--force-timeout"));
        let r = RawConfig {
            drain_timeout: Some(1.0),
            ..raw()
        };
        let c = r.validate_with(&set(&[0]), &[0]).unwrap();
        assert!(c.force_timeout > c.drain_timeout);
    }

    #[test]
    fn bad_values_name_their_field() {
        for (r, field) in [
            (
                RawConfig {
                    bind: Some(vec!["nope".into()]),
                    ..raw()
                },
                "--bind",
            ),
            (
                RawConfig {
                    listener: Some("x".into()),
                    ..raw()
                },
                "--listener",
            ),
            (
                RawConfig {
                    driver: Some("kqueue".into()),
                    ..raw()
                },
                "--driver",
            ),
            (
                RawConfig {
                    workers: Some(WorkerCount::Count(0)),
                    ..raw()
                },
                "--workers",
            ),
            (
                RawConfig {
                    header_timeout: Some(-1.0),
                    ..raw()
                },
                "--header-timeout",
            ),
            (
                RawConfig {
                    max_connections: Some(0),
                    ..raw()
                },
                "--max-connections",
            ),
            (
                RawConfig {
                    max_headers: Some(0),
                    ..raw()
                },
                "--max-headers",
            ),
            (
                RawConfig {
                    max_head_bytes: Some(10),
                    ..raw()
                },
                "--max-head-bytes",
            ),
            (
                RawConfig {
                    admin: Some("x".into()),
                    ..raw()
                },
                "--admin",
            ),
            (
                RawConfig {
                    root: Some("/nonexistent/dir".into()),
                    ..RawConfig::default()
                },
                "root",
            ),
        ] {
            let e = err(r);
            assert!(e.starts_with(field), "{e}");
        }
    }

    #[test]
    fn file_keys_use_underscores_and_unknown_keys_fail() {
        let r: RawConfig =
            toml::from_str("workers = 2\ndrain_timeout = 1.5\nbind = [\"127.0.0.1:1\"]").unwrap();
        assert_eq!(r.workers, Some(WorkerCount::Count(2)));
        assert!(toml::from_str::<RawConfig>("drain-timeout = 1").is_err());
    }

    #[test]
    fn flags_override_file() {
        let file = RawConfig {
            workers: Some(WorkerCount::Count(2)),
            drain_timeout: Some(3.0),
            ..RawConfig::default()
        };
        let flags = RawConfig {
            drain_timeout: Some(4.0),
            ..RawConfig::default()
        };
        let m = file.merge(flags);
        assert_eq!(m.workers, Some(WorkerCount::Count(2)));
        assert_eq!(m.drain_timeout, Some(4.0));
    }
}
