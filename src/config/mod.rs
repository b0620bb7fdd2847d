//! Configuration: parse, merge, then validate into types that cannot be wrong.
//!
//! Owns [`RawConfig`] (what an operator wrote, from a TOML file given with
//! `--config` and from flags of the same names), every default (a documented
//! `const` with its concern), and [`Config`], the only form the rest of the
//! server sees. Does not own applying the config (supervisor, worker).
//!
//! # Layout
//! - `raw`: every setting declared once (flag, key, help, default, own
//!   rule, effective output), through `setting`'s `settings!` macro;
//! - `choice`: word-valued settings (`--driver epoll`) as `clap::ValueEnum`
//!   and serde enums;
//! - one module per concern for the rules that tie settings together and
//!   the types they yield: `listen`, `workers` (with `cpus`), `limits`,
//!   `supervision`, `files` (with `compression`), `tls`.
//!
//! # Flow
//! 1. `RawConfig::load(path)` reads the file (`deny_unknown_fields`; a word
//!    not on a setting's list is refused here).
//! 2. `file.merge(flags)`: a flag given on the command line wins.
//! 3. `raw.validate()`: each setting gets its default and its own rule, in
//!    declaration order; then the cross-field rules run (binds, CPU plan,
//!    force after drain, admin address, TLS), yielding `Duration`s,
//!    `NonZeroUsize`s, a CPU per worker and socket addresses. An error names
//!    the field (as its flag) and how to fix it; nothing has been bound yet
//!    when it is reported.
//! 4. `config.to_toml()` prints [`Config::effective`], the validated values
//!    in file form, for `check-config`.

pub mod access_log;
pub mod acme;
mod auth;
mod choice;
pub mod compression;
pub mod cors;
pub mod cpus;
mod files;
pub mod http2;
pub mod http3;
mod limits;
mod listen;
mod raw;
mod redirects;
mod setting;
pub mod sites;
mod supervision;
mod tls;
mod units;
mod workers;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

pub use access_log::AccessLogConfig;
pub use acme::{AcmeChallenge, AcmeConfig, ACME_RETRY_MAX};
pub use compression::{Compress, CompressConfig, MimePatterns};
pub use cpus::CpuSet;
pub use files::{
    Dotfiles, FilesConfig, HeaderRule, HeaderRuleRaw, Symlinks, DEFAULT_DOTFILES,
    DEFAULT_FILE_CACHE_ENTRIES, DEFAULT_FILE_CACHE_TTL_S, DEFAULT_INDEX,
    DEFAULT_MEMORY_CACHE_BYTES, DEFAULT_ROOT, DEFAULT_SMALL_FILE_MAX_BYTES, DEFAULT_SYMLINKS,
};
pub use limits::{
    ConnSettings, DEFAULT_BODY_TIMEOUT_S, DEFAULT_HEADER_TIMEOUT_S, DEFAULT_KEEPALIVE_TIMEOUT_S,
    DEFAULT_LINGERING_BYTES, DEFAULT_LINGERING_TIMEOUT_S, DEFAULT_LINGERING_TIME_S,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADERS, DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_MAX_REQUEST_LINE_BYTES, DEFAULT_SEND_TIMEOUT_S,
};
pub use listen::{ListenerMode, DEFAULT_BIND, DEFAULT_LISTENER};
pub use raw::RawConfig;

/// Every setting's TOML key, in the table's order.
pub(crate) fn keys() -> impl Iterator<Item = &'static str> {
    raw::FIELDS.iter().map(|f| f.key)
}
pub use sites::{SiteConfig, SiteRaw, SiteTls, SitesConfig, UnknownHost};
pub use supervision::{
    ChildWatchChoice, Isolation, DEFAULT_BEAT_INTERVAL_S, DEFAULT_BEAT_TIMEOUT_S,
    DEFAULT_CHILD_WATCH, DEFAULT_DRAIN_TIMEOUT_S, DEFAULT_FORCE_TIMEOUT_S, DEFAULT_ISOLATION,
    DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_WINDOW_S, DEFAULT_STARTUP_TIMEOUT_S,
};
pub use tls::{TlsConfig, TlsSource, DEFAULT_TLS_HANDSHAKE_TIMEOUT_S, DEFAULT_TLS_TICKET_ROTATE_S};
pub use units::{Seconds, Size, DURATION_FORMS, SIZE_FORMS};
pub use workers::{DriverChoice, WorkerCount, DEFAULT_DRIVER, DEFAULT_WORKERS};

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
    /// Directory served by the file handler.
    pub root: PathBuf,
    /// The file handler's settings at the top level (what sites inherit).
    pub files: FilesConfig,
    /// The sites (one, of the top level, without `[[site]]`).
    pub sites: SitesConfig,
    /// The ACME settings as validated, whether or not a site orders (the
    /// effective config shows them; [`Config::ordering`] says whether any does).
    pub acme: AcmeConfig,
    /// Listen addresses (every worker accepts on each).
    pub binds: Vec<SocketAddr>,
    pub workers: NonZeroUsize,
    /// The CPU of each worker, by index; `None` = not pinned.
    pub cpus: Option<Vec<usize>>,
    pub listener: ListenerMode,
    pub driver: DriverChoice,
    pub startup_timeout: Duration,
    /// What every worker applies to its connections (limits, timeouts,
    /// output budgets, HTTP/2's limits, the shutdown deadlines): the
    /// workers take it as it is.
    pub conn: ConnSettings,
    pub admin: Option<SocketAddr>,
    /// HTTP/2: what TLS listeners offer by ALPN (its limits are in `conn`).
    pub http2: http2::Http2Config,
    pub access_log: AccessLogConfig,
}

impl RawConfig {
    /// Validate against this process's CPU set.
    pub fn validate(self) -> Result<Config, Error> {
        let allowed = crate::sys::affinity::allowed_cpus().map_err(|e| {
            raw::field::cpus.invalid(format!("cannot read this process's CPU set: {e}"))
        })?;
        let physical = cpus::physical_cores(&allowed);
        self.validate_with(&allowed, &physical)
    }

    /// Validate with an explicit CPU set and physical-core list (tests).
    pub fn validate_with(self, allowed: &CpuSet, physical: &[usize]) -> Result<Config, Error> {
        let mut raw = self.clone();
        let drain_written = self.drain_timeout.map(f64::from);
        // Each setting on its own, then the rules that tie settings together.
        let mut c = self.check()?;
        let written_sites = std::mem::take(&mut c.site);
        let binds = listen::binds(&c)?;
        let (workers, cpus) = workers::plan(&c, allowed, physical)?;
        let force_timeout =
            supervision::force_timeout(c.force_timeout, drain_written, c.drain_timeout)?;
        let admin = listen::admin(&c, &binds)?;
        let source = tls::source(&c)?;
        let files = files::settings(&c)?;
        let sites = sites::config(&c, &written_sites, &files, source.as_ref())?;
        let identified = sites.list.iter().any(|s| s.tls.is_some());
        let tls = tls::config(&c, &binds, source, identified)?;
        let ordering = sites.list.iter().any(SiteConfig::by_acme);
        let acme = acme::config(&c, ordering, !binds.is_empty(), tls.is_some())?;
        let conn = limits::conn(&c, force_timeout)?;
        let access_log = AccessLogConfig::new(
            &c.access_log,
            &c.access_log_format,
            c.access_log_buffer,
            c.access_log_flush,
            c.access_log_backlog,
        )?;
        raw.root = Some(sites::canonical(&c.root));
        if let Some(list) = raw.site.as_mut() {
            for s in list {
                s.root = s.root.as_deref().map(sites::canonical);
            }
        }
        Ok(Config {
            tls,
            raw,
            isolation: c.isolation,
            child_watch: c.child_watch,
            max_restarts: c.max_restarts,
            restart_window: c.restart_window,
            beat_interval: c.beat_interval,
            beat_timeout: c.beat_timeout,
            files,
            sites,
            acme,
            binds,
            workers,
            cpus,
            listener: c.listener,
            driver: c.driver,
            startup_timeout: c.startup_timeout,
            conn,
            admin,
            http2: http2::settings(&c),
            access_log,
            root: c.root,
        })
    }
}

impl Config {
    /// The ACME settings, when a site orders its certificate by ACME.
    pub fn ordering(&self) -> Option<&AcmeConfig> {
        let any = self.sites.list.iter().any(SiteConfig::by_acme);
        any.then_some(&self.acme)
    }

    /// Whether TLS listeners answer TLS-ALPN-01 (and offer `acme-tls/1`).
    pub fn answers_tls_alpn01(&self) -> bool {
        self.ordering()
            .is_some_and(|a| a.challenge == AcmeChallenge::TlsAlpn01)
    }

    /// Each worker's share of the server's file caches: `--file-cache-entries`
    /// (at least one) and `--memory-cache-bytes` divided among the workers
    /// (each then splits its share among the sites).
    pub fn file_cache_shares(&self) -> (usize, usize) {
        let workers = self.workers.get();
        (
            (self.files.file_cache_entries.get() / workers).max(1),
            self.files.memory_cache_bytes / workers,
        )
    }

    /// How many worker processes share what one process would hold alone
    /// (the compression cache): the workers in process isolation, else 1.
    pub fn worker_processes(&self) -> usize {
        match self.isolation {
            Isolation::Thread => 1,
            Isolation::Process => self.workers.get(),
        }
    }

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
        toml::to_string(&self.effective())
            .unwrap_or_else(|err| format!("# cannot render config: {err}\n"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn set(v: &[usize]) -> CpuSet {
        CpuSet(v.iter().copied().collect())
    }

    /// The defaults, serving the temp directory.
    pub(crate) fn raw() -> RawConfig {
        RawConfig {
            root: Some(std::env::temp_dir()),
            ..RawConfig::default()
        }
    }

    /// `r` validated on CPUs 0 and 1, both physical.
    pub(crate) fn ok(r: RawConfig) -> Config {
        r.validate_with(&set(&[0, 1]), &[0, 1]).unwrap()
    }

    /// Why `r` is refused on CPUs 0 and 1.
    pub(crate) fn err(r: RawConfig) -> String {
        r.validate_with(&set(&[0, 1]), &[0, 1])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults_validate() {
        let c = raw().validate_with(&set(&[0, 1]), &[0, 1]).unwrap();
        assert_eq!(c.workers.get(), 2, "one worker per physical core");
        assert_eq!(c.binds, vec![DEFAULT_BIND.parse::<SocketAddr>().unwrap()]);
        assert_eq!(c.cpus, Some(vec![0, 1]));
        // SMT siblings are not counted: CPUs 0-3 on two physical cores.
        let c = raw().validate_with(&set(&[0, 1, 2, 3]), &[0, 1]).unwrap();
        assert_eq!(c.workers.get(), 2);
        assert_eq!(c.listener, ListenerMode::ReusePort);
    }
}
