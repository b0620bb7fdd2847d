//! Every setting, declared once: flag, TOML key, help, type as written,
//! default and own rule, and how the effective config shows it.
//!
//! Owns [`RawConfig`] (generated from the declarations below by `settings!`,
//! see `setting.rs`) and reading it from a file. Does not own the rules that
//! tie settings together (`listen`, `workers`, `supervision`, `files`,
//! `tls`) nor what the values mean.
//!
//! Reading a declaration `name: Raw => Checked = rule, shown |c| expr;`:
//! - `name` is the TOML key and, with `-` for `_`, the flag `--name`; its
//!   doc comment is the flag's help;
//! - `Raw` is what the file or the flag holds (an `Option` may be left out);
//! - `rule` makes it `Checked`: `or(DEFAULT, check)` supplies the default,
//!   `optional(check)` leaves it unset, `as_is` takes it as written;
//! - `expr` reads the value back from the validated `Config` `c` for the
//!   effective config, in the file's units.
//!
//! The order below is the order of `--help`, of the effective config, and
//! of the checks (the first error is reported).
//!
//! After the settings, the same table declares the rest of a `[[site]]`
//! table (`SiteRaw`: who the site is) and names `Http2Conn`; the settings marked
//! `per site` and `h2` fill their other fields (see `setting.rs`).
//!
//! The file is longer than 650 lines on purpose: every setting is declared
//! here once (docs/decisions/0002), so it grows by one declaration per
//! setting, and splitting the list would split the order `--help` shows.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::access_log::{
    self, LogTarget, BACKLOG_BYTES, BUFFER_BYTES, DEFAULT_ACCESS_LOG,
    DEFAULT_ACCESS_LOG_BACKLOG_BYTES, DEFAULT_ACCESS_LOG_BUFFER_BYTES, DEFAULT_ACCESS_LOG_FLUSH_S,
    DEFAULT_ACCESS_LOG_FORMAT, FLUSH_MAX_S,
};
use super::acme::{self, AcmeChallenge};
use super::auth::{self, AuthRaw};
use super::compression::{self, Compress, MimePatterns};
use super::cors;
use super::files::{
    self, AutoindexFormat, Dotfiles, ErrorPage, ErrorPageRaw, FilesConfig, HeaderRule,
    HeaderRuleRaw, Symlinks,
};
use super::limits::{
    self, DEFAULT_BODY_TIMEOUT_S, DEFAULT_HEADER_TIMEOUT_S, DEFAULT_KEEPALIVE_TIMEOUT_S,
    DEFAULT_LINGERING_BYTES, DEFAULT_LINGERING_TIMEOUT_S, DEFAULT_LINGERING_TIME_S,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADERS, DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_OUTPUT_BUFFER_BYTES, DEFAULT_SEND_TIMEOUT_S, DEFAULT_WORKER_OUTPUT_BYTES, HEADERS,
    HEAD_BYTES, OUTPUT_BUFFER_BYTES, WORKER_OUTPUT_BYTES,
};
use super::listen::{self, ListenerMode, ADMIN_EXAMPLE, BIND_EXAMPLE, DEFAULT_LISTENER};
use super::redirects::{self, RedirectRaw, RewriteRaw};
use super::setting::{as_is, as_usize, optional, or, positive, seconds, settings, within, DAY};
use super::sites::{UnknownHost, DEFAULT_UNKNOWN_HOST};
use super::supervision::{
    ChildWatchChoice, Isolation, DEFAULT_BEAT_INTERVAL_S, DEFAULT_BEAT_TIMEOUT_S,
    DEFAULT_CHILD_WATCH, DEFAULT_DRAIN_TIMEOUT_S, DEFAULT_ISOLATION, DEFAULT_MAX_RESTARTS,
    DEFAULT_RESTART_WINDOW_S, DEFAULT_STARTUP_TIMEOUT_S,
};
use super::tls::{
    self, KtlsChoice, DEFAULT_KTLS, DEFAULT_TLS_HANDSHAKE_BUFFER_BYTES,
    DEFAULT_TLS_HANDSHAKE_TIMEOUT_S, DEFAULT_TLS_TICKET_ROTATE_S, TLS_BIND_EXAMPLE,
    TLS_HANDSHAKE_BUFFER_BYTES, WEEK,
};
use super::units::{Seconds, Size};
use super::workers::{self, DriverChoice, WorkerCount, Workers, DEFAULT_DRIVER, DEFAULT_WORKERS};
use super::Error;
use super::{http2, http3};
use crate::auth::AuthRule;
use crate::static_files::redirects::{Redirect, Rewrite};

settings! {
    /// The configuration as written: every field optional, merged file ← flags.
    /// Field names are the flag names with `_` for `-`.
    #[derive(Debug, Clone, Default, Serialize, Deserialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    pub struct RawConfig {
        /// Directory to serve.
        #[arg(skip)]
        root: Option<PathBuf> => PathBuf = or(files::DEFAULT_ROOT.into(), files::root),
            shown |c| c.root;
        /// Address to listen on; repeat for several.
        #[arg(long = "bind", value_name = "ADDR")]
        bind: Option<Vec<String>> => Option<Vec<SocketAddr>> =
            optional(listen::addrs(BIND_EXAMPLE)),
            shown |c| c.binds;
        /// Worker count, or `auto` for one per physical core.
        #[arg(long, value_name = "N|auto")]
        workers: Option<WorkerCount> => Workers =
            or(WorkerCount::Word(DEFAULT_WORKERS.to_owned()), workers::count),
            shown |c| c.workers;
        /// CPUs to pin workers to, e.g. `0,2,4-6`.
        #[arg(long, value_name = "LIST")]
        cpus: Option<String> => Option<Vec<usize>> = optional(workers::cpu_list),
            shown |c| c.cpus;
        /// Do not pin workers to CPUs.
        #[arg(long = "no-pin", action = clap::ArgAction::SetTrue)]
        #[serde(default)]
        no_pin: bool => bool = as_is,
            shown |c| c.cpus.is_none();
        /// `reuseport` (a socket per worker) or `shared` (one socket, dup'ed).
        #[arg(long, value_name = "reuseport|shared", hide_possible_values = true)]
        listener: Option<ListenerMode> => ListenerMode = or(DEFAULT_LISTENER, as_is),
            shown |c| c.listener;
        /// I/O driver: `auto` (io_uring, else epoll), `uring` or `epoll`.
        #[arg(long, value_name = "auto|uring|epoll", hide_possible_values = true)]
        driver: Option<DriverChoice> => DriverChoice = or(DEFAULT_DRIVER, as_is),
            shown |c| c.driver;
        /// Time for every worker to become ready.
        #[arg(long, value_name = "DURATION")]
        startup_timeout: Option<Seconds> => Duration = or(DEFAULT_STARTUP_TIMEOUT_S, seconds(DAY)),
            shown |c| c.startup_timeout;
        /// Time in-flight requests get after SIGTERM before being cut.
        #[arg(long, value_name = "DURATION")]
        drain_timeout: Option<Seconds> => Duration = or(DEFAULT_DRAIN_TIMEOUT_S, seconds(DAY)),
            shown |c| c.conn.drain_timeout;
        /// Time after SIGTERM when surviving workers are abandoned.
        #[arg(long, value_name = "DURATION")]
        force_timeout: Option<Seconds> => Option<Duration> = optional(seconds(DAY)),
            shown |c| c.conn.force_timeout;
        /// Open connections, for the whole server (any worker may hold them).
        #[arg(long, value_name = "N")]
        max_connections: Option<u64> => NonZeroUsize = or(DEFAULT_MAX_CONNECTIONS as u64, positive),
            shown |c| c.conn.max_connections;
        /// Time to receive a request head.
        #[arg(long, value_name = "DURATION")]
        header_timeout: Option<Seconds> => Duration = or(DEFAULT_HEADER_TIMEOUT_S, seconds(DAY)),
            shown |c| c.conn.header_timeout;
        /// Longest wait between two reads of a request body (408 past it).
        #[arg(long, value_name = "DURATION")]
        body_timeout: Option<Seconds> => Duration = or(DEFAULT_BODY_TIMEOUT_S, seconds(DAY)),
            shown |c| c.conn.body_timeout;
        /// Time a kept-alive connection may idle.
        #[arg(long, value_name = "DURATION")]
        keepalive_timeout: Option<Seconds> => Duration = or(DEFAULT_KEEPALIVE_TIMEOUT_S, seconds(DAY)),
            shown |c| c.conn.keepalive_timeout;
        /// Time a client may take to accept more response bytes.
        #[arg(long, value_name = "DURATION")]
        send_timeout: Option<Seconds> => Duration = or(DEFAULT_SEND_TIMEOUT_S, seconds(DAY)),
            shown |c| c.conn.send_timeout;
        /// Response bytes one connection may hold prepared and unsent (all its HTTP/2 streams).
        #[arg(long, value_name = "SIZE")]
        output_buffer_bytes: Option<Size> => usize =
            or(DEFAULT_OUTPUT_BUFFER_BYTES as u64, within(OUTPUT_BUFFER_BYTES)),
            shown |c| c.conn.output_buffer_bytes;
        /// Response bytes all of a worker's connections may hold prepared and unsent.
        #[arg(long, value_name = "SIZE")]
        worker_output_bytes: Option<Size> => usize =
            or(DEFAULT_WORKER_OUTPUT_BYTES as u64, within(WORKER_OUTPUT_BYTES)),
            shown |c| c.conn.worker_output_bytes;
        /// Time a lingering close may discard input in all.
        #[arg(long, value_name = "DURATION")]
        lingering_time: Option<Seconds> => Duration = or(DEFAULT_LINGERING_TIME_S, seconds(DAY)),
            shown |c| c.conn.lingering_time;
        /// Client silence that ends a lingering close.
        #[arg(long, value_name = "DURATION")]
        lingering_timeout: Option<Seconds> => Duration = or(DEFAULT_LINGERING_TIMEOUT_S, seconds(DAY)),
            shown |c| c.conn.lingering_timeout;
        /// Most bytes a lingering close discards.
        #[arg(long, value_name = "SIZE")]
        lingering_bytes: Option<Size> => u64 = or(DEFAULT_LINGERING_BYTES, limits::lingering_bytes),
            shown |c| c.conn.lingering_bytes;
        /// Largest request head in bytes.
        #[arg(long, value_name = "SIZE")]
        max_head_bytes: Option<Size> => usize =
            or(DEFAULT_MAX_HEAD_BYTES as u64, within(HEAD_BYTES)),
            shown |c| c.conn.limits.max_head_bytes;
        /// Most header fields in a request.
        #[arg(long, value_name = "N")]
        max_headers: Option<u64> => usize = or(DEFAULT_MAX_HEADERS as u64, within(HEADERS)),
            shown |c| c.conn.limits.max_headers;
        /// Largest request body in bytes (a larger one is refused with 413).
        #[arg(long, value_name = "SIZE")]
        max_body_bytes: Option<Size> => u64 = or(DEFAULT_MAX_BODY_BYTES, as_is),
            shown |c| c.conn.max_body_bytes;
        /// Address of the admin listener (/healthz, /readyz, /metrics).
        #[arg(long, value_name = "ADDR")]
        admin: Option<String> => Option<SocketAddr> = optional(listen::addr(ADMIN_EXAMPLE)),
            shown |c| c.admin;
        /// Symlinks: `inside` (links that stay under the root), `never`, `follow`.
        #[arg(long, value_name = "inside|never|follow", hide_possible_values = true)]
        symlinks: Option<Symlinks> => Symlinks = or(files::DEFAULT_SYMLINKS, as_is),
            per site Option<Symlinks>, shown |f| f.symlinks,
            shown |c| c.files.symlinks;
        /// Dotfiles (`/.git/config`): `deny` (404) or `allow`.
        #[arg(long, value_name = "deny|allow", hide_possible_values = true)]
        dotfiles: Option<Dotfiles> => Dotfiles = or(files::DEFAULT_DOTFILES, as_is),
            per site Option<Dotfiles>, shown |f| Dotfiles::from(f),
            shown |c| Dotfiles::from(&c.files);
        /// Index file names tried for a directory, in order; repeatable.
        #[arg(long, value_name = "NAME")]
        index: Option<Vec<String>> => Vec<String> =
            or(vec![files::DEFAULT_INDEX.into()], files::index_names),
            per site Option<Vec<String>>, shown |f| f.index,
            shown |c| c.files.index;
        /// List directories without an index file.
        #[arg(long, action = clap::ArgAction::SetTrue)]
        #[serde(default)]
        autoindex: bool => bool = as_is,
            per site Option<bool>, shown |f| f.autoindex,
            shown |c| c.files.autoindex;
        /// What a directory listing is written as: `html` (sortable) or `json`.
        #[arg(long, value_name = "html|json", hide_possible_values = true)]
        autoindex_format: Option<AutoindexFormat> => AutoindexFormat =
            or(files::DEFAULT_AUTOINDEX_FORMAT, as_is),
            per site Option<AutoindexFormat>, shown |f| f.autoindex_format,
            shown |c| c.files.autoindex_format;
        /// Answer missing paths with this file (a single-page app's `/index.html`), 200.
        #[arg(long, value_name = "PATH")]
        fallback: Option<String> => Option<String> = optional(files::fallback),
            per site Option<String>, shown |f| f.fallback,
            shown |c| c.files.fallback;
        /// Use `--fallback` for missing paths that look like files (`/app.js`) too.
        #[arg(long, action = clap::ArgAction::SetTrue)]
        #[serde(default)]
        fallback_files: bool => bool = as_is,
            per site Option<bool>, shown |f| f.fallback_files,
            shown |c| c.files.fallback_files;
        /// `Cache-Control` value sent with every file response.
        #[arg(long, value_name = "VALUE")]
        cache_control: Option<String> => Option<String> = optional(files::cache_control),
            per site Option<String>, shown |f| f.cache_control,
            shown |c| c.files.cache_control;
        /// Time before a cached file is checked against the disk again.
        #[arg(long, value_name = "DURATION")]
        file_cache_ttl: Option<Seconds> => Duration =
            or(files::DEFAULT_FILE_CACHE_TTL_S, files::cache_ttl),
            shown |c| c.files.file_cache_ttl;
        /// Open files cached by the whole server (each worker holds its share).
        #[arg(long, value_name = "N")]
        file_cache_entries: Option<u64> => NonZeroUsize =
            or(files::DEFAULT_FILE_CACHE_ENTRIES as u64, positive),
            shown |c| c.files.file_cache_entries;
        /// Files up to this many bytes are kept in memory.
        #[arg(long, value_name = "SIZE")]
        small_file_max: Option<Size> => u64 =
            or(files::DEFAULT_SMALL_FILE_MAX_BYTES, files::small_file_max),
            shown |c| c.files.small_file_max;
        /// Memory for small files, for the whole server (each worker holds its share).
        #[arg(long, value_name = "SIZE")]
        memory_cache_bytes: Option<Size> => usize =
            or(files::DEFAULT_MEMORY_CACHE_BYTES as u64, as_usize),
            shown |c| c.files.memory_cache_bytes;
        /// Per-path header rules (config file only): `[[headers]] match = "/assets/**"`
        /// `set = { "Cache-Control" = "..." }`.
        #[arg(skip)]
        headers: Option<Vec<HeaderRuleRaw>> => Vec<HeaderRule> =
            or(Vec::new(), files::header_rules),
            per site Option<Vec<HeaderRuleRaw>>, shown |f| f.rules,
            shown |c| c.files.rules;
        /// Origins whose pages may read the files (CORS): `https://app.example,...`, or `*`.
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        cors_allow_origins: Option<Vec<String>> => Vec<String> = or(Vec::new(), cors::origins),
            per site Option<Vec<String>>, shown |f| f.cors.origins,
            shown |c| c.files.cors.origins;
        /// Methods a CORS preflight may ask for.
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        cors_allow_methods: Option<Vec<String>> => Vec<String> =
            or(cors::default_methods(), cors::methods),
            per site Option<Vec<String>>, shown |f| f.cors.methods,
            shown |c| c.files.cors.methods;
        /// Request header fields a CORS preflight may ask for.
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        cors_allow_headers: Option<Vec<String>> => Vec<String> = or(Vec::new(), cors::headers),
            per site Option<Vec<String>>, shown |f| f.cors.headers,
            shown |c| c.files.cors.headers;
        /// How long a browser may keep a CORS preflight's answer.
        #[arg(long, value_name = "DURATION")]
        cors_max_age: Option<Seconds> => Duration =
            or(cors::DEFAULT_CORS_MAX_AGE_S, seconds(cors::MAX_CORS_MAX_AGE_S)),
            shown |c| c.files.cors.max_age;
        /// Let cross-origin requests with cookies read the files (needs listed origins).
        #[arg(long, action = clap::ArgAction::SetTrue)]
        #[serde(default)]
        cors_allow_credentials: bool => bool = as_is,
            per site Option<bool>, shown |f| f.cors.credentials,
            shown |c| c.files.cors.credentials;
        /// Redirects (config file only): `[[redirect]] from = "/old/**"` `to = "/new/$1"`.
        #[arg(skip)]
        redirect: Option<Vec<RedirectRaw>> => Vec<Redirect> =
            or(Vec::new(), redirects::redirects),
            per site Option<Vec<RedirectRaw>>, shown |f| f.redirects,
            shown |c| c.files.redirects;
        /// Rewrites (config file only): `[[rewrite]] from = "/blog/*"` `to = "/posts/$1.html"`.
        #[arg(skip)]
        rewrite: Option<Vec<RewriteRaw>> => Vec<Rewrite> =
            or(Vec::new(), redirects::rewrites),
            per site Option<Vec<RewriteRaw>>, shown |f| f.rewrites,
            shown |c| c.files.rewrites;
        /// Error pages (config file only): `[[error_page]] status = [404]` `path = "/404.html"`.
        #[arg(skip)]
        error_page: Option<Vec<ErrorPageRaw>> => Vec<ErrorPage> =
            or(Vec::new(), files::error_pages),
            per site Option<Vec<ErrorPageRaw>>, shown |f| f.error_pages,
            shown |c| c.files.error_pages;
        /// Paths that need a user and password (config file only): `[[auth]] match = "/private/**"` `users_file = "..."`.
        #[arg(skip)]
        auth: Option<Vec<AuthRaw>> => Vec<AuthRule> = or(Vec::new(), auth::rules),
            per site Option<Vec<AuthRaw>>, shown |f| f.auth,
            shown |c| c.files.auth;
        /// Let `[[auth]]` credentials come over plain HTTP (behind a proxy that terminates TLS).
        #[arg(long, action = clap::ArgAction::SetTrue)]
        #[serde(default)]
        auth_over_http: bool => bool = as_is,
            per site Option<bool>, shown |f| f.auth_over_http,
            shown |c| c.files.auth_over_http;
        /// Compress text, scripts and data on the fly for clients that accept it: `on` or `off`.
        #[arg(long, value_name = "on|off", hide_possible_values = true)]
        compress: Option<Compress> => Compress = or(compression::DEFAULT_COMPRESS, as_is),
            per site Option<Compress>, shown |f| compression::shown(&f.compression),
            shown |c| compression::shown(&c.files.compression);
        /// MIME types compressed on the fly: `type/subtype`, `type/*`, `type/*+suffix`.
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        compress_types: Option<Vec<String>> => MimePatterns =
            or(compression::default_types(), compression::types),
            shown |c| c.files.compression.as_ref().map(|z| &z.types);
        /// Smallest file compressed on the fly, in bytes.
        #[arg(long, value_name = "SIZE")]
        compress_min_bytes: Option<Size> => u64 =
            or(compression::DEFAULT_COMPRESS_MIN_BYTES, compression::size),
            shown |c| c.files.compression.as_ref().map(|z| z.min_bytes);
        /// Largest file compressed on the fly, in bytes.
        #[arg(long, value_name = "SIZE")]
        compress_max_bytes: Option<Size> => u64 =
            or(compression::DEFAULT_COMPRESS_MAX_BYTES, compression::size),
            shown |c| c.files.compression.as_ref().map(|z| z.max_bytes);
        /// Largest file a worker compresses itself for the first request; larger ones in the background.
        #[arg(long, value_name = "SIZE")]
        compress_inline_max_bytes: Option<Size> => u64 =
            or(compression::DEFAULT_COMPRESS_INLINE_MAX_BYTES, compression::size),
            shown |c| c.files.compression.as_ref().map(|z| z.inline_max_bytes);
        /// Files a worker compresses at once as they are sent, above the inline limit until their variant is stored (0: identity meanwhile).
        #[arg(long, value_name = "N")]
        compress_streams: Option<u64> => u32 =
            or(compression::DEFAULT_COMPRESS_STREAMS, compression::streams),
            shown |c| c.files.compression.as_ref().map(|z| z.streams);
        /// Memory for compressed variants, for the whole server (split among worker processes).
        #[arg(long, value_name = "SIZE")]
        compress_cache_bytes: Option<Size> => u64 =
            or(compression::DEFAULT_COMPRESS_CACHE_BYTES, compression::cache_bytes),
            shown |c| c.files.compression.as_ref().map(|z| z.cache_bytes);
        /// Brotli quality of on-the-fly variants (0-11).
        #[arg(long, value_name = "N")]
        compress_level_br: Option<u64> => u32 =
            or(compression::DEFAULT_COMPRESS_LEVEL_BR, compression::level_br),
            shown |c| c.files.compression.as_ref().map(|z| z.level_br);
        /// zstd level of on-the-fly variants (1-19).
        #[arg(long, value_name = "N")]
        compress_level_zstd: Option<u64> => u32 =
            or(compression::DEFAULT_COMPRESS_LEVEL_ZSTD, compression::level_zstd),
            shown |c| c.files.compression.as_ref().map(|z| z.level_zstd);
        /// gzip level of on-the-fly variants (1-9).
        #[arg(long, value_name = "N")]
        compress_level_gzip: Option<u64> => u32 =
            or(compression::DEFAULT_COMPRESS_LEVEL_GZIP, compression::level_gzip),
            shown |c| c.files.compression.as_ref().map(|z| z.level_gzip);
        /// Workers as `thread`s of this process or as `process`es.
        #[arg(long, value_name = "thread|process", hide_possible_values = true)]
        isolation: Option<Isolation> => Isolation = or(DEFAULT_ISOLATION, as_is),
            shown |c| c.isolation;
        /// How worker processes are watched: `auto`, `pidfd` or `sigchld`.
        #[arg(long, value_name = "auto|pidfd|sigchld", hide_possible_values = true)]
        child_watch: Option<ChildWatchChoice> => ChildWatchChoice = or(DEFAULT_CHILD_WATCH, as_is),
            shown |c| c.child_watch;
        /// Crashed workers replaced within the restart window before giving up.
        #[arg(long, value_name = "N")]
        max_restarts: Option<u64> => usize = or(DEFAULT_MAX_RESTARTS, as_usize),
            shown |c| c.max_restarts;
        /// Window over which `--max-restarts` is counted.
        #[arg(long, value_name = "DURATION")]
        restart_window: Option<Seconds> => Duration = or(DEFAULT_RESTART_WINDOW_S, seconds(DAY)),
            shown |c| c.restart_window;
        /// Interval between health beats to each worker.
        #[arg(long, value_name = "DURATION")]
        beat_interval: Option<Seconds> => Duration = or(DEFAULT_BEAT_INTERVAL_S, seconds(DAY)),
            shown |c| c.beat_interval;
        /// Time a worker has to answer a beat; two misses and it is replaced.
        #[arg(long, value_name = "DURATION")]
        beat_timeout: Option<Seconds> => Duration = or(DEFAULT_BEAT_TIMEOUT_S, seconds(DAY)),
            shown |c| c.beat_timeout;
        /// Merged into `--max-connections` (now a total); refused with how to say it.
        #[arg(long, value_name = "N", hide = true)]
        max_connections_total: Option<u64> => Option<u64> = optional(limits::total_connections),
            shown |_c| None::<u64>;
        /// Address of a TLS listener; repeatable, beside plain `--bind`s.
        #[arg(long, value_name = "ADDR")]
        tls_bind: Option<Vec<String>> => Vec<SocketAddr> =
            or(Vec::new(), listen::addrs(TLS_BIND_EXAMPLE)),
            shown |c| tls::binds(&c.tls);
        /// PEM certificate chain for the TLS listeners.
        #[arg(long, value_name = "FILE")]
        tls_cert: Option<PathBuf> => Option<PathBuf> = as_is,
            shown |c| tls::cert(&c.tls);
        /// PEM private key (RSA, ECDSA or Ed25519) of `--tls-cert`.
        #[arg(long, value_name = "FILE")]
        tls_key: Option<PathBuf> => Option<PathBuf> = as_is,
            shown |c| tls::key(&c.tls);
        /// Make a self-signed certificate for localhost and the bound addresses.
        #[arg(long, action = clap::ArgAction::SetTrue)]
        #[serde(default)]
        tls_self_signed: bool => bool = as_is,
            shown |c| tls::self_signed(&c.tls);
        /// Time a client has to finish the TLS handshake.
        #[arg(long, value_name = "DURATION")]
        tls_handshake_timeout: Option<Seconds> => Duration =
            or(DEFAULT_TLS_HANDSHAKE_TIMEOUT_S, seconds(WEEK)),
            shown |c| c.tls_handshake_timeout();
        /// Who seals TLS records: `auto` (the kernel, kTLS, where it can) or `off` (user space).
        #[arg(long, value_name = "auto|off", hide_possible_values = true)]
        ktls: Option<KtlsChoice> => KtlsChoice = or(DEFAULT_KTLS, as_is),
            shown |c| c.conn.ktls;
        /// Handshake messages a worker's TLS connections may hold beyond their read buffers, together.
        #[arg(long, value_name = "SIZE")]
        tls_handshake_buffer_bytes: Option<Size> => usize =
            or(DEFAULT_TLS_HANDSHAKE_BUFFER_BYTES as u64, within(TLS_HANDSHAKE_BUFFER_BYTES)),
            shown |c| c.conn.tls_handshake_buffer_bytes;
        /// Interval between session-ticket key rotations.
        #[arg(long, value_name = "DURATION")]
        tls_ticket_rotate: Option<Seconds> => Duration = or(DEFAULT_TLS_TICKET_ROTATE_S, seconds(WEEK)),
            shown |c| c.tls_ticket_rotate();
        /// Sites (config file only): `[[site]] hosts = ["example.com"] root = "/srv/example"`,
        /// each with its own file settings and certificate.
        #[arg(skip)]
        site: Option<Vec<SiteRaw>> => Vec<SiteRaw> = or(Vec::new(), as_is),
            shown |c| c.sites;
        /// A Host no site has: the `default` site answers, or `421` (Misdirected Request).
        #[arg(long, value_name = "default|421", hide_possible_values = true)]
        unknown_host: Option<UnknownHost> => UnknownHost = or(DEFAULT_UNKNOWN_HOST, as_is),
            shown |c| c.sites.unknown;
        /// ACME directory URL the `acme = true` sites order certificates from.
        #[arg(long, value_name = "URL")]
        acme_directory: Option<String> => String =
            or(acme::DEFAULT_ACME_DIRECTORY.into(), acme::directory),
            shown |c| c.acme.directory;
        /// Contact for the ACME account, e.g. `mailto:ops@example.com`; repeatable.
        #[arg(long, value_name = "URI")]
        acme_contact: Option<Vec<String>> => Vec<String> = or(Vec::new(), acme::contacts),
            shown |c| c.acme.contact;
        /// Directory for the ACME account key and certificates (created 0700).
        #[arg(long, value_name = "DIR")]
        acme_state_dir: Option<PathBuf> => PathBuf = or(acme::DEFAULT_ACME_STATE_DIR.into(), as_is),
            shown |c| c.acme.state_dir;
        /// PEM roots trusted for the ACME directory's HTTPS instead of the system's (a private CA).
        #[arg(long, value_name = "FILE")]
        acme_ca_roots: Option<PathBuf> => Option<PathBuf> = optional(acme::ca_roots),
            shown |c| c.acme.ca_roots;
        /// How the CA checks a name: `http-01` (plain listeners) or `tls-alpn-01` (TLS listeners).
        #[arg(long, value_name = "http-01|tls-alpn-01", hide_possible_values = true)]
        acme_challenge: Option<AcmeChallenge> => AcmeChallenge =
            or(acme::DEFAULT_ACME_CHALLENGE, as_is),
            shown |c| c.acme.challenge;
        /// Key identifier of the CA's External Account Binding (ZeroSSL, Google).
        #[arg(long, value_name = "KID")]
        acme_eab_kid: Option<String> => Option<String> = optional(acme::eab_kid),
            shown |c| c.acme.eab.as_ref().map(|e| e.account.kid.clone());
        /// File holding the External Account Binding's HMAC key (base64url).
        #[arg(long, value_name = "FILE")]
        acme_eab_hmac_key_file: Option<PathBuf> => Option<PathBuf> = as_is,
            shown |c| c.acme.eab.as_ref().map(|e| e.key_file.clone());
        /// Wait before the first retry of a failed order (doubling up to a day).
        #[arg(long, value_name = "DURATION")]
        acme_retry: Option<Seconds> => Duration = or(acme::DEFAULT_ACME_RETRY_S, seconds(DAY)),
            shown |c| c.acme.retry;
        /// Protocols TLS listeners offer by ALPN, in order of preference: `h2`, `http/1.1`.
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        alpn: Option<Vec<String>> => Vec<http2::Protocol> =
            or(http2::DEFAULT_ALPN.iter().map(|p| p.name().to_owned()).collect(), http2::alpn),
            shown |c| c.http2.alpn;
        /// HTTP/2 on plain listeners: `prior-knowledge` (by its preface) or `off`.
        #[arg(long, value_name = "prior-knowledge|off", hide_possible_values = true)]
        h2c: Option<http2::H2c> => http2::H2c = or(http2::DEFAULT_H2C, as_is),
            h2 h2c,
            shown |c| c.conn.http2.h2c;
        /// Streams one HTTP/2 connection may have open (REFUSED_STREAM past it).
        #[arg(long, value_name = "N")]
        h2_max_concurrent_streams: Option<u64> => usize =
            or(http2::DEFAULT_H2_MAX_CONCURRENT_STREAMS, within(http2::CONCURRENT_STREAMS)),
            h2 max_concurrent_streams,
            shown |c| c.conn.http2.max_concurrent_streams;
        /// Largest decoded HTTP/2 header list of a request, in bytes.
        #[arg(long, value_name = "SIZE")]
        h2_max_header_list_bytes: Option<Size> => usize =
            or(http2::DEFAULT_H2_MAX_HEADER_LIST_BYTES, within(http2::HEADER_LIST_BYTES)),
            h2 max_header_list_bytes,
            shown |c| c.conn.http2.max_header_list_bytes;
        /// HPACK dynamic table a client may use, in bytes.
        #[arg(long, value_name = "SIZE")]
        h2_header_table_bytes: Option<Size> => usize =
            or(http2::DEFAULT_H2_HEADER_TABLE_BYTES, within(http2::HEADER_TABLE_BYTES)),
            h2 header_table_bytes,
            shown |c| c.conn.http2.header_table_bytes;
        /// Stream resets a client may send per HTTP/2 connection in 10 s (then GOAWAY).
        #[arg(long, value_name = "N")]
        h2_max_resets: Option<u64> => usize =
            or(http2::DEFAULT_H2_MAX_RESETS, within(http2::RESETS)),
            h2 max_resets,
            shown |c| c.conn.http2.max_resets;
        /// Request-body bytes a client may send an HTTP/2 connection ahead of what services read.
        #[arg(long, value_name = "SIZE")]
        h2_initial_window_bytes: Option<Size> => usize =
            or(65_535u64, within(65_535..=16 * 1024 * 1024)),
            h2 initial_window_bytes,
            shown |c| c.conn.http2.initial_window_bytes;
        /// HTTP/3 on the UDP ports of the TLS listeners: `on` or `off`.
        #[arg(long, value_name = "on|off", hide_possible_values = true)]
        h3: Option<http3::Switch> => http3::Switch = or(http3::DEFAULT_H3, as_is),
            h3 switch,
            shown |c| c.conn.http3.switch;
        /// Request streams one HTTP/3 connection may have open at once.
        #[arg(long, value_name = "N")]
        h3_max_streams: Option<u64> => usize =
            or(http3::DEFAULT_H3_MAX_STREAMS, within(http3::STREAMS)),
            h3 max_streams,
            shown |c| c.conn.http3.max_streams;
        /// Silence after which an HTTP/3 connection is closed.
        #[arg(long, value_name = "DURATION")]
        h3_idle_timeout: Option<Seconds> => Duration =
            or(http3::DEFAULT_H3_IDLE_TIMEOUT_S, seconds(DAY)),
            h3 idle_timeout,
            shown |c| c.conn.http3.idle_timeout;
        /// Request-body bytes a client may send one HTTP/3 stream ahead of what its service reads.
        #[arg(long, value_name = "SIZE")]
        h3_stream_window_bytes: Option<Size> => usize =
            or(http3::DEFAULT_H3_STREAM_WINDOW_BYTES, within(http3::STREAM_WINDOW_BYTES)),
            h3 stream_window_bytes,
            shown |c| c.conn.http3.stream_window_bytes;
        /// The same for all streams of one HTTP/3 connection together.
        #[arg(long, value_name = "SIZE")]
        h3_connection_window_bytes: Option<Size> => usize =
            or(http3::DEFAULT_H3_CONNECTION_WINDOW_BYTES, within(http3::CONNECTION_WINDOW_BYTES)),
            h3 connection_window_bytes,
            shown |c| c.conn.http3.connection_window_bytes;
        /// Requests a client may reset per HTTP/3 connection in 10 s (then it is closed, H3_EXCESSIVE_LOAD).
        #[arg(long, value_name = "N")]
        h3_max_resets: Option<u64> => usize =
            or(http3::DEFAULT_H3_MAX_RESETS, within(http3::RESETS)),
            h3 max_resets,
            shown |c| c.conn.http3.max_resets;
        /// QUIC handshakes in progress per worker past which new clients must prove their address (Retry).
        #[arg(long, value_name = "N")]
        h3_retry_threshold: Option<u64> => usize =
            or(http3::DEFAULT_H3_RETRY_THRESHOLD, within(http3::RETRY_THRESHOLD)),
            h3 retry_threshold,
            shown |c| c.conn.http3.retry_threshold;
        /// 0-RTT for resuming HTTP/3 clients: `on` or `off` (answered only once the handshake completes).
        #[arg(long = "h3-0rtt", value_name = "off|on", hide_possible_values = true)]
        h3_0rtt: Option<http3::ZeroRtt> => http3::ZeroRtt = or(http3::DEFAULT_H3_0RTT, as_is),
            h3 zero_rtt,
            shown |c| c.conn.http3.zero_rtt;
        /// How long browsers may remember the HTTP/3 port (`Alt-Svc`'s `ma`).
        #[arg(long, value_name = "DURATION")]
        alt_svc_max_age: Option<Seconds> => Duration =
            or(http3::DEFAULT_ALT_SVC_MAX_AGE_S, seconds(DAY * 365.0)),
            h3 alt_svc_max_age,
            shown |c| c.conn.http3.alt_svc_max_age;
        /// Access log: `off`, `stderr`, or a file (appended to; SIGUSR1 reopens it).
        #[arg(long, value_name = "PATH|stderr|off")]
        access_log: Option<String> => LogTarget =
            or(DEFAULT_ACCESS_LOG.into(), access_log::target),
            shown |c| c.access_log.target_shown();
        /// Access log line: `combined` (nginx's), `json`, or a template of `$field`s.
        #[arg(long, value_name = "combined|json|TEMPLATE")]
        access_log_format: Option<String> => crate::access_log::Format =
            or(DEFAULT_ACCESS_LOG_FORMAT.into(), access_log::format),
            shown |c| c.access_log.format;
        /// Bytes of lines a worker gathers before handing them to the log's writer.
        #[arg(long, value_name = "SIZE")]
        access_log_buffer: Option<Size> => usize =
            or(DEFAULT_ACCESS_LOG_BUFFER_BYTES, within(BUFFER_BYTES)),
            shown |c| c.access_log.buffer_bytes;
        /// Time a partial buffer of lines waits before it is written.
        #[arg(long, value_name = "DURATION")]
        access_log_flush: Option<Seconds> => Duration =
            or(DEFAULT_ACCESS_LOG_FLUSH_S, seconds(FLUSH_MAX_S)),
            shown |c| c.access_log.flush;
        /// Bytes of lines waiting for the disk past which new lines are dropped and counted.
        #[arg(long, value_name = "SIZE")]
        access_log_backlog: Option<Size> => usize =
            or(DEFAULT_ACCESS_LOG_BACKLOG_BYTES, within(BACKLOG_BYTES)),
            shown |c| c.access_log.backlog_bytes;
    }

    /// One `[[site]]` table of the config file: who the site is (below) and,
    /// after, every setting marked `per site` above. Unset settings and an
    /// unset identity are the top level's.
    #[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
    #[serde(deny_unknown_fields)]
    pub struct SiteRaw over FilesConfig {
        /// A name for logs and the ACME state directory (default: the first host).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        /// Exact names, IP addresses, or `*.example.com`.
        #[serde(default)]
        pub hosts: Vec<String>,
        /// Unknown hosts go to this site (default: the first site).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub default: bool,
        /// The directory this site serves (default: the top level's root).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub root: Option<PathBuf>,
        /// This site's certificate chain (with `tls_key`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub tls_cert: Option<PathBuf>,
        /// The private key of `tls_cert`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub tls_key: Option<PathBuf>,
        /// Obtain and renew this site's certificate by ACME.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub acme: bool,
    }

    // What each HTTP/2 connection applies: the settings marked `h2` above
    // fill the fields of the same names (the type is the workers').
    http2 = crate::worker::Http2Conn;
    // The same for HTTP/3 (`h3`).
    http3 = crate::worker::Http3Conn;
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
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command};

    use super::*;
    use crate::config::tests::{err, ok, raw};

    #[test]
    fn every_flag_is_its_key_in_kebab_case() {
        let cmd = RawConfig::augment_args(Command::new("t"));
        let longs: Vec<_> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        let flags: Vec<_> = FIELDS
            .iter()
            .filter(|f| {
                ![
                    "root",
                    "headers",
                    "error_page",
                    "redirect",
                    "rewrite",
                    "auth",
                    "site",
                ]
                .contains(&f.key)
            })
            .map(|f| f.flag.trim_start_matches("--"))
            .collect();
        assert_eq!(longs, flags);
        assert_eq!(field::drain_timeout.flag, "--drain-timeout");
        assert_eq!(field::no_pin.flag, "--no-pin");
    }

    #[test]
    fn every_default_is_in_the_effective_config() {
        let shown: toml::Table = ok(raw()).to_toml().parse().unwrap();
        // Durations and sizes are shown with units (`"30s"`, `"256KiB"`).
        let float = |k: &str| Seconds::deserialize(shown[k].clone()).unwrap().0;
        let bytes = |k: &str| Size::deserialize(shown[k].clone()).unwrap().0;
        let int = |k: &str| shown[k].as_integer().unwrap() as u64;
        let word = |k: &str| shown[k].as_str().unwrap().to_owned();
        assert_eq!(shown["bind"][0].as_str(), Some(crate::config::DEFAULT_BIND));
        // `auto`, shown as what it came to: two physical cores, two workers.
        assert_eq!(int("workers"), 2);
        assert_eq!(word("listener"), DEFAULT_LISTENER.name());
        assert_eq!(word("driver"), DEFAULT_DRIVER.name());
        assert_eq!(float("startup_timeout"), DEFAULT_STARTUP_TIMEOUT_S);
        assert_eq!(float("drain_timeout"), DEFAULT_DRAIN_TIMEOUT_S);
        assert_eq!(
            float("force_timeout"),
            crate::config::DEFAULT_FORCE_TIMEOUT_S
        );
        assert_eq!(int("max_connections"), DEFAULT_MAX_CONNECTIONS as u64);
        assert_eq!(float("header_timeout"), DEFAULT_HEADER_TIMEOUT_S);
        assert_eq!(float("keepalive_timeout"), DEFAULT_KEEPALIVE_TIMEOUT_S);
        assert_eq!(float("send_timeout"), DEFAULT_SEND_TIMEOUT_S);
        assert_eq!(float("lingering_time"), DEFAULT_LINGERING_TIME_S);
        assert_eq!(float("lingering_timeout"), DEFAULT_LINGERING_TIMEOUT_S);
        assert_eq!(bytes("lingering_bytes"), DEFAULT_LINGERING_BYTES);
        assert_eq!(bytes("max_head_bytes"), DEFAULT_MAX_HEAD_BYTES as u64);
        assert_eq!(int("max_headers"), DEFAULT_MAX_HEADERS as u64);
        assert_eq!(word("symlinks"), files::DEFAULT_SYMLINKS.name());
        assert_eq!(word("dotfiles"), files::DEFAULT_DOTFILES.name());
        assert_eq!(shown["index"][0].as_str(), Some(files::DEFAULT_INDEX));
        assert_eq!(float("file_cache_ttl"), files::DEFAULT_FILE_CACHE_TTL_S);
        assert_eq!(
            int("file_cache_entries"),
            files::DEFAULT_FILE_CACHE_ENTRIES as u64
        );
        assert_eq!(bytes("small_file_max"), files::DEFAULT_SMALL_FILE_MAX_BYTES);
        assert_eq!(
            bytes("memory_cache_bytes"),
            files::DEFAULT_MEMORY_CACHE_BYTES as u64
        );
        assert_eq!(word("compress"), compression::DEFAULT_COMPRESS.name());
        assert_eq!(
            shown["compress_types"].as_array().map(|a| a.len()),
            Some(compression::DEFAULT_COMPRESS_TYPES.len())
        );
        assert_eq!(
            bytes("compress_min_bytes"),
            compression::DEFAULT_COMPRESS_MIN_BYTES
        );
        assert_eq!(
            bytes("compress_max_bytes"),
            compression::DEFAULT_COMPRESS_MAX_BYTES
        );
        assert_eq!(
            bytes("compress_inline_max_bytes"),
            compression::DEFAULT_COMPRESS_INLINE_MAX_BYTES
        );
        assert_eq!(
            bytes("compress_cache_bytes"),
            compression::DEFAULT_COMPRESS_CACHE_BYTES
        );
        assert_eq!(
            int("compress_level_br"),
            compression::DEFAULT_COMPRESS_LEVEL_BR
        );
        assert_eq!(
            int("compress_level_zstd"),
            compression::DEFAULT_COMPRESS_LEVEL_ZSTD
        );
        assert_eq!(
            int("compress_level_gzip"),
            compression::DEFAULT_COMPRESS_LEVEL_GZIP
        );
        assert_eq!(word("isolation"), DEFAULT_ISOLATION.name());
        assert_eq!(word("child_watch"), DEFAULT_CHILD_WATCH.name());
        assert_eq!(int("max_restarts"), DEFAULT_MAX_RESTARTS);
        assert_eq!(float("restart_window"), DEFAULT_RESTART_WINDOW_S);
        assert_eq!(float("beat_interval"), DEFAULT_BEAT_INTERVAL_S);
        assert_eq!(float("beat_timeout"), DEFAULT_BEAT_TIMEOUT_S);
        assert_eq!(
            float("tls_handshake_timeout"),
            DEFAULT_TLS_HANDSHAKE_TIMEOUT_S
        );
        assert_eq!(float("tls_ticket_rotate"), DEFAULT_TLS_TICKET_ROTATE_S);
        for unset in [
            "admin",
            "cache_control",
            "max_connections_total",
            "tls_cert",
        ] {
            assert!(!shown.contains_key(unset), "{unset}");
        }
    }

    #[test]
    fn the_effective_config_reads_back_as_the_same_config() {
        let text = "workers = 2\nno_pin = true\ndrain_timeout = 0.1\nindex = [\"a.htm\"]\n\
                    admin = \"127.0.0.1:9\"\ndotfiles = \"allow\"\ndriver = \"io_uring\"\n\
                    [[headers]]\nmatch = \"/a/**\"\nset = { X-A = \"b\" }\n";
        let first = ok(RawConfig {
            root: raw().root,
            ..toml::from_str(text).unwrap()
        })
        .to_toml();
        let again = ok(toml::from_str(&first).unwrap()).to_toml();
        assert_eq!(again, first);
        assert!(first.contains("force_timeout = \"5.1s\"\n"), "{first}");
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
                    workers: Some(WorkerCount::Count(0)),
                    ..raw()
                },
                "--workers",
            ),
            (
                RawConfig {
                    header_timeout: Some(Seconds(-1.0)),
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
                    max_head_bytes: Some(Size(10)),
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
        // Words are refused while reading, naming the key.
        for (text, key) in [
            ("listener = \"x\"", "listener"),
            ("driver = \"kqueue\"", "driver"),
        ] {
            let e = toml::from_str::<RawConfig>(text).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("is not a choice"), "{e}");
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
            drain_timeout: Some(Seconds(3.0)),
            ..RawConfig::default()
        };
        let flags = RawConfig {
            drain_timeout: Some(Seconds(4.0)),
            ..RawConfig::default()
        };
        let m = file.merge(flags);
        assert_eq!(m.workers, Some(WorkerCount::Count(2)));
        assert_eq!(m.drain_timeout, Some(Seconds(4.0)));
    }

    #[test]
    fn a_switch_set_in_the_file_stays_set() {
        let file = RawConfig {
            no_pin: true,
            listener: Some(ListenerMode::Shared),
            ..RawConfig::default()
        };
        let m = file.merge(RawConfig {
            autoindex: true,
            ..RawConfig::default()
        });
        assert!(m.no_pin && m.autoindex);
        assert_eq!(m.listener, Some(ListenerMode::Shared));
    }
}
