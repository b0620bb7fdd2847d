//! The concerns the flags are grouped by, and which flag belongs to which.
//!
//! Owns [`Topic`] (its name for `servery help NAME`, its heading in
//! `--help` and the man page, a paragraph on what it is about and the doc
//! that covers it) and [`FLAGS`], the one table from a setting's key to its
//! topic. Does not own the flags themselves (declared once in
//! `config/raw.rs`) nor how they are printed (`args`, `manual`).
//!
//! The table is keyed by the setting's key rather than written into each
//! declaration so that the settings stay one declaration each and a branch
//! adding a setting touches `raw.rs` and one line here. A flag missing from
//! the table still works and is listed under "Options"; the tests below fail
//! until it has a topic.

/// A concern a group of flags serves, in the order `--help` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topic {
    /// Where servery listens and how workers share the sockets.
    Listeners,
    /// How many workers, on which CPUs, with which I/O driver.
    Workers,
    /// Startup, drain, shutdown, isolation and crash restarts.
    Lifecycle,
    /// What one client or connection may hold or take.
    Limits,
    /// The static file handler.
    Files,
    /// On-the-fly compression of the static files.
    Compression,
    /// TLS listeners and their identity.
    Tls,
    /// Virtual hosts and their certificates by ACME.
    Sites,
    /// HTTP/2 negotiation and its per-connection limits.
    Http2,
    /// HTTP/3 over QUIC, its limits and how it is advertised.
    Http3,
    /// The admin listener.
    Admin,
    /// What servery writes about itself.
    Logging,
}

impl Topic {
    /// Every topic, in the order of `--help`, `servery help` and the man page.
    pub(crate) const ALL: [Topic; 12] = [
        Topic::Listeners,
        Topic::Workers,
        Topic::Lifecycle,
        Topic::Limits,
        Topic::Files,
        Topic::Compression,
        Topic::Tls,
        Topic::Sites,
        Topic::Http2,
        Topic::Http3,
        Topic::Admin,
        Topic::Logging,
    ];

    /// The word `servery help` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Topic::Listeners => "listeners",
            Topic::Workers => "workers",
            Topic::Lifecycle => "lifecycle",
            Topic::Limits => "limits",
            Topic::Files => "files",
            Topic::Compression => "compression",
            Topic::Tls => "tls",
            Topic::Sites => "sites",
            Topic::Http2 => "http2",
            Topic::Http3 => "http3",
            Topic::Admin => "admin",
            Topic::Logging => "logging",
        }
    }

    /// The topic `servery help` was given, if `name` is one.
    pub(crate) fn named(name: &str) -> Option<Topic> {
        Topic::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The clap help heading of its flags.
    pub(crate) fn heading(self) -> &'static str {
        match self {
            Topic::Listeners => "Listeners",
            Topic::Workers => "Workers",
            Topic::Lifecycle => "Lifecycle",
            Topic::Limits => "Limits",
            Topic::Files => "Files",
            Topic::Compression => "Compression",
            Topic::Tls => "TLS",
            Topic::Sites => "Sites",
            Topic::Http2 => "HTTP/2",
            Topic::Http3 => "HTTP/3",
            Topic::Admin => "Admin",
            Topic::Logging => "Logging",
        }
    }

    /// One line for the list of topics.
    pub(crate) fn summary(self) -> &'static str {
        match self {
            Topic::Listeners => "where servery listens and how workers share the sockets",
            Topic::Workers => "how many workers, on which CPUs, with which I/O driver",
            Topic::Lifecycle => "startup, drain and shutdown deadlines; isolation and restarts",
            Topic::Limits => "what one client or connection may hold or take, and for how long",
            Topic::Files => "the static file handler: symlinks, dotfiles, indexes, caches",
            Topic::Compression => {
                "br, zstd and gzip made on the fly, and the cache that keeps them"
            }
            Topic::Tls => "TLS listeners, their certificate and session tickets",
            Topic::Sites => "virtual hosts ([[site]]), unknown hosts, and ACME certificates",
            Topic::Http2 => "HTTP/2 by ALPN and h2c, and its per-connection limits",
            Topic::Http3 => "HTTP/3 over QUIC on the TLS ports, its limits and Alt-Svc",
            Topic::Admin => "the admin listener: /healthz, /readyz, /metrics",
            Topic::Logging => "what servery writes about itself, and where",
        }
    }

    /// What the concern is about, for `servery help NAME` and the man page:
    /// one paragraph, unwrapped.
    pub(crate) fn about(self) -> &'static str {
        match self {
            Topic::Listeners => {
                "Every worker accepts on every plain address given with --bind \
                 (loopback port 8080 unless one is given, or unless only TLS \
                 listeners are asked for). With --listener reuseport each \
                 worker has its own SO_REUSEPORT socket and the kernel spreads \
                 connections; with shared the supervisor binds one socket and \
                 each worker accepts on a copy of it. Under systemd socket \
                 activation (LISTEN_FDS) the inherited sockets are used \
                 instead and shared by all workers. TLS listeners are their \
                 own topic (tls)."
            }
            Topic::Workers => {
                "Each worker is a monoio runtime on a thread or process of its \
                 own, pinned to one CPU: --workers N starts N of them, \
                 --workers auto one per physical core of the process's CPU \
                 set (SMT siblings are skipped); --cpus chooses the CPUs and \
                 --no-pin leaves scheduling to the kernel. --driver auto uses \
                 io_uring where the kernel allows it and epoll otherwise; the \
                 ready line says which one runs."
            }
            Topic::Lifecycle => {
                "Startup is a barrier: the ready line is printed only once \
                 every worker is ready within --startup-timeout. SIGTERM or \
                 SIGINT drains: no new connections, in-flight responses \
                 finish within --drain-timeout, and workers still alive at \
                 --force-timeout are killed (processes) or abandoned \
                 (threads). With --isolation process each \
                 worker is a process of its own, watched by pidfd or \
                 SIGCHLD (--child-watch); a crashed worker is replaced on its \
                 slot, a wedged one is killed after two missed beats, and \
                 more than --max-restarts deaths of a slot within \
                 --restart-window stop the server."
            }
            Topic::Limits => {
                "Every wait and every buffer a client can cause is bounded: \
                 connections per worker and across workers, the time to send \
                 a request head, a body or to read a response, the idle time \
                 of a kept-alive connection, the size of a request head and \
                 body. After an error, or a close while the client is still \
                 sending, servery half-closes and discards input for a \
                 bounded time and amount (the lingering flags), so the client \
                 reads the answer instead of a reset."
            }
            Topic::Files => {
                "The file handler serves ROOT with ETags, conditional \
                 requests, ranges and precompressed .br/.zst/.gz siblings, \
                 and keeps requests inside ROOT (openat2 RESOLVE_BENEATH where \
                 the kernel has it; with --symlinks follow a link placed in \
                 ROOT may lead out). These flags choose which symlinks and \
                 dotfiles are served, the index files, directory listings, \
                 the Cache-Control value, and the per-worker caches of open \
                 files and small file bodies. Per-path header rules exist in \
                 the config file only ([[headers]])."
            }
            Topic::Compression => {
                "Text, JSON, JavaScript, SVG, XML and wasm files (--compress-types) \
                 that have no precompressed sibling are compressed with br, zstd \
                 or gzip as Accept-Encoding asks, once: each variant is kept in a \
                 cache of --compress-cache-bytes (one per process, keyed by the \
                 file's identity, so a changed file is never served stale) and \
                 has its own ETag. Files up to --compress-inline-max-bytes are \
                 compressed for the request that first asks; larger ones by a \
                 background thread, identity being sent meanwhile. Every such \
                 response says Vary: Accept-Encoding."
            }
            Topic::Tls => {
                "TLS listeners (--tls-bind) run beside the plain ones, on \
                 rustls. The identity is a PEM certificate chain and key \
                 (--tls-cert, --tls-key), re-read on reload, or a \
                 self-signed certificate made at start (--tls-self-signed). \
                 Every worker shares one identity and one set of \
                 session-ticket keys, rotated every --tls-ticket-rotate, so \
                 a session resumes on any worker. The ready line gives \
                 the certificate's SHA-256 fingerprint, and who seals TLS \
                 records: with --ktls auto the kernel (kTLS) seals those of \
                 TLS 1.3 over HTTP/1.1 where it has TLS, so files go out by \
                 sendfile; user space seals the rest."
            }
            Topic::Sites => {
                "A config file may declare sites ([[site]] with hosts, a root, \
                 file settings and a certificate); without any, ROOT is the one \
                 site and answers every Host. A request goes to the site with its \
                 exact Host, else the longest *.wildcard, else the default site, \
                 or 421 with --unknown-host 421. Over TLS the SNI picks the \
                 certificate by the same rules, and a Host naming another site \
                 than the SNI is 421. A site with acme = true gets its \
                 certificate from the --acme-directory CA, ordered and renewed \
                 (at two-thirds of its life) by the supervisor, answered by \
                 --acme-challenge on the plain or TLS listeners, and kept in \
                 --acme-state-dir; a new certificate reaches every worker \
                 without a restart."
            }
            Topic::Http2 => {
                "HTTP/2 is offered on TLS listeners by ALPN (--alpn, in \
                 order of preference) and on plain listeners by prior \
                 knowledge (--h2c), on the same workers and ports as \
                 HTTP/1.1. The h2 flags bound what one connection may ask \
                 for: open streams, the size of a decoded header list, the \
                 HPACK table, and how many streams a client may reset before \
                 it is sent GOAWAY. Body, send and keep-alive timeouts are \
                 the limits topic's, shared with HTTP/1.1."
            }
            Topic::Http3 => {
                "HTTP/3 is served over QUIC on the UDP port of every TLS \
                 listener (--h3 on, the default), by the same workers: each \
                 has its own UDP socket, and a classic BPF program sends every \
                 datagram to the worker its connection ID names. HTTP/1.1 and \
                 HTTP/2 answers on those listeners carry Alt-Svc so browsers \
                 find it (--alt-svc-max-age). The h3 flags bound what one \
                 connection may open and send ahead; a reload keeps every \
                 QUIC connection, the new workers handing the old ones their \
                 datagrams until they close."
            }
            Topic::Admin => {
                "--admin ADDR serves /healthz (200 while the process runs), \
                 /readyz (503 while starting or draining) and /metrics \
                 (Prometheus text, one line per worker and a sum) from a \
                 thread of its own, one request per connection. Keep it off \
                 public interfaces: it has no authentication."
            }
            Topic::Logging => {
                "The access log (off by default) writes one line per request, \
                 in nginx's combined format, as JSON, or from a template of \
                 $fields. Workers format lines into their own buffers and a \
                 thread writes them, so a slow disk never stalls serving: \
                 past --access-log-backlog lines are dropped and counted. \
                 SIGUSR1 reopens the file after logrotate. servery's own \
                 messages go to stderr at the warn level; RUST_LOG overrides \
                 the filter. The ready line goes to stdout once every worker \
                 is ready."
            }
        }
    }

    /// The document that covers the concern in full.
    pub(crate) fn docs(self) -> &'static str {
        match self {
            Topic::Listeners => "docs/operations.md (systemd) and docs/architecture.md",
            Topic::Workers => "docs/architecture.md",
            Topic::Lifecycle => "docs/operations.md (Signals, Deadlines, Crash restart)",
            Topic::Limits => "docs/operations.md (Connection limits, Memory per connection)",
            Topic::Files => "docs/static-files.md",
            Topic::Compression => {
                "docs/operations.md (Compression) and docs/decisions/0008-on-the-fly-compression.md"
            }
            Topic::Tls => "docs/tls.md",
            Topic::Sites => "docs/sites.md",
            Topic::Http2 => "docs/http2.md",
            Topic::Http3 => "docs/http3.md",
            Topic::Admin => "docs/operations.md (Admin endpoint and metrics)",
            Topic::Logging => "docs/operations.md (Access log)",
        }
    }

    /// The keys of its flags, in the order they are listed (a `prefix_*`
    /// line: every setting with the prefix, in the config table's order).
    pub(crate) fn keys(self) -> impl Iterator<Item = &'static str> {
        FLAGS
            .iter()
            .filter(move |(_, t)| *t == self)
            .flat_map(|(line, _)| {
                let prefix = line.strip_suffix('*');
                let table =
                    crate::config::keys().filter(move |k| prefix.is_some_and(|p| k.starts_with(p)));
                prefix.is_none().then_some(*line).into_iter().chain(table)
            })
    }
}

/// Every flag's topic, by its setting's key (as in the config file); within
/// a topic, flags are listed in this order. A new flag is one line here,
/// unless a `prefix_*` line covers it (`h2_*`: every HTTP/2 limit, so a new
/// one needs no line).
pub(crate) const FLAGS: &[(&str, Topic)] = &[
    ("bind", Topic::Listeners),
    ("listener", Topic::Listeners),
    ("workers", Topic::Workers),
    ("cpus", Topic::Workers),
    ("no_pin", Topic::Workers),
    ("driver", Topic::Workers),
    ("startup_timeout", Topic::Lifecycle),
    ("drain_timeout", Topic::Lifecycle),
    ("force_timeout", Topic::Lifecycle),
    ("isolation", Topic::Lifecycle),
    ("child_watch", Topic::Lifecycle),
    ("max_restarts", Topic::Lifecycle),
    ("restart_window", Topic::Lifecycle),
    ("beat_interval", Topic::Lifecycle),
    ("beat_timeout", Topic::Lifecycle),
    ("max_connections", Topic::Limits),
    ("max_connections_total", Topic::Limits),
    ("header_timeout", Topic::Limits),
    ("body_timeout", Topic::Limits),
    ("keepalive_timeout", Topic::Limits),
    ("send_timeout", Topic::Limits),
    ("output_buffer_bytes", Topic::Limits),
    ("worker_output_bytes", Topic::Limits),
    ("max_head_bytes", Topic::Limits),
    ("max_headers", Topic::Limits),
    ("max_body_bytes", Topic::Limits),
    ("lingering_time", Topic::Limits),
    ("lingering_timeout", Topic::Limits),
    ("lingering_bytes", Topic::Limits),
    ("symlinks", Topic::Files),
    ("dotfiles", Topic::Files),
    ("index", Topic::Files),
    ("autoindex", Topic::Files),
    ("autoindex_format", Topic::Files),
    ("fallback", Topic::Files),
    ("fallback_files", Topic::Files),
    ("auth_over_http", Topic::Files),
    ("cache_control", Topic::Files),
    ("cors_allow_origins", Topic::Files),
    ("cors_allow_methods", Topic::Files),
    ("cors_allow_headers", Topic::Files),
    ("cors_max_age", Topic::Files),
    ("cors_allow_credentials", Topic::Files),
    ("file_cache_ttl", Topic::Files),
    ("file_cache_entries", Topic::Files),
    ("small_file_max", Topic::Files),
    ("memory_cache_bytes", Topic::Files),
    ("tls_bind", Topic::Tls),
    ("tls_cert", Topic::Tls),
    ("tls_key", Topic::Tls),
    ("tls_self_signed", Topic::Tls),
    ("tls_handshake_timeout", Topic::Tls),
    ("tls_ticket_rotate", Topic::Tls),
    ("ktls", Topic::Tls),
    ("tls_handshake_buffer_bytes", Topic::Tls),
    ("unknown_host", Topic::Sites),
    ("acme_directory", Topic::Sites),
    ("acme_contact", Topic::Sites),
    ("acme_state_dir", Topic::Sites),
    ("acme_ca_roots", Topic::Sites),
    ("acme_challenge", Topic::Sites),
    ("acme_eab_kid", Topic::Sites),
    ("acme_eab_hmac_key_file", Topic::Sites),
    ("acme_retry", Topic::Sites),
    ("alpn", Topic::Http2),
    ("h2c", Topic::Http2),
    ("h2_*", Topic::Http2),
    ("h3", Topic::Http3),
    ("h3_*", Topic::Http3),
    ("alt_svc_max_age", Topic::Http3),
    ("admin", Topic::Admin),
    ("compress", Topic::Compression),
    ("compress_types", Topic::Compression),
    ("compress_min_bytes", Topic::Compression),
    ("compress_max_bytes", Topic::Compression),
    ("compress_inline_max_bytes", Topic::Compression),
    ("compress_streams", Topic::Compression),
    ("compress_cache_bytes", Topic::Compression),
    ("compress_level_br", Topic::Compression),
    ("compress_level_zstd", Topic::Compression),
    ("compress_level_gzip", Topic::Compression),
    ("access_log", Topic::Logging),
    ("access_log_format", Topic::Logging),
    ("access_log_buffer", Topic::Logging),
    ("access_log_flush", Topic::Logging),
    ("access_log_backlog", Topic::Logging),
];

/// The topic of the flag of setting `key`, if the table has it.
pub(crate) fn of(key: &str) -> Option<Topic> {
    FLAGS.iter().find(|(k, _)| covers(k, key)).map(|(_, t)| *t)
}

/// Whether the table line `line` is `key`'s: the key itself, or a
/// `prefix_*` line it starts with.
fn covers(line: &str, key: &str) -> bool {
    match line.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => line == key,
    }
}

/// `text` broken into lines of at most `width` columns (a word longer than
/// that stays whole): the paragraphs are stored unwrapped so the man page
/// can fill them itself.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if line > 0 && line + 1 + len > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command};

    use super::*;
    use crate::config::RawConfig;

    /// The ids (setting keys) of every flag `RawConfig` declares.
    fn flag_keys() -> Vec<String> {
        RawConfig::augment_args(Command::new("t"))
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect()
    }

    #[test]
    fn every_flag_has_exactly_one_topic() {
        for key in flag_keys() {
            let n = FLAGS.iter().filter(|(k, _)| covers(k, &key)).count();
            assert_eq!(
                n,
                1,
                "--{} is in the topic table {n} times; give it one line in cli/topic.rs FLAGS",
                key.replace('_', "-")
            );
        }
    }

    #[test]
    fn the_table_names_only_real_flags() {
        let keys = flag_keys();
        for (key, _) in FLAGS {
            assert!(keys.iter().any(|k| covers(key, k)), "{key} is no flag");
        }
    }

    #[test]
    fn every_topic_has_a_flag() {
        for topic in Topic::ALL {
            assert!(topic.keys().next().is_some(), "{topic:?} has no flag");
        }
    }

    #[test]
    fn topics_are_named_by_distinct_lowercase_words() {
        for topic in Topic::ALL {
            let name = topic.name();
            assert!(name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
            assert_eq!(Topic::named(name), Some(topic));
            assert!(topic.docs().starts_with("docs/"), "{topic:?}");
        }
        assert_eq!(Topic::named("nonsense"), None);
    }

    #[test]
    fn wrap_breaks_between_words_within_the_width() {
        let text = "one two three four five six seven";
        assert_eq!(wrap(text, 9), "one two\nthree\nfour five\nsix seven");
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            "averyveryverylongword\nx"
        );
        assert_eq!(wrap("  spaced   out  ", 80), "spaced out");
    }
}
