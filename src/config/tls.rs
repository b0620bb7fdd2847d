//! TLS listeners and their identity: `--tls-bind`, `--tls-cert`,
//! `--tls-key`, `--tls-self-signed`, the handshake and ticket timers, and
//! `--ktls`.
//!
//! Owns [`TlsConfig`], [`TlsSource`] and the cross-field rules: a listener
//! needs an identity and an identity a listener; cert and key come as a
//! pair, loadable now; self-signed excludes files; no TLS address is also a
//! plain one. Does not own loading or making certificates for serving
//! (`tls`, `supervisor`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::raw::{field, Checked};
use super::Error;
pub use crate::worker::KtlsChoice;

/// A slow or silent client gets this long to finish the TLS handshake.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT_S: f64 = 10.0;
/// Ticket keys rotate hourly; tickets stay valid for two periods.
pub const DEFAULT_TLS_TICKET_ROTATE_S: f64 = 3600.0;
/// What a worker's handshakes may hold beyond their pooled read buffers:
/// 16 MiB, room for 200 handshakes at rustls's longest message (64 KiB)
/// at once, where a browser's ClientHello (2 KiB) needs none.
pub const DEFAULT_TLS_HANDSHAKE_BUFFER_BYTES: usize = 16 * 1024 * 1024;
/// `--tls-handshake-buffer-bytes`: from 256 KiB (a few long handshakes)
/// to 4 GiB.
pub(crate) const TLS_HANDSHAKE_BUFFER_BYTES: std::ops::RangeInclusive<usize> =
    256 * 1024..=4 * 1024 * 1024 * 1024;
/// The kernel seals TLS records where it can (kTLS).
pub const DEFAULT_KTLS: KtlsChoice = KtlsChoice::Auto;
/// The longest TLS timer accepted: a week.
pub(crate) const WEEK: f64 = 7.0 * 86_400.0;
/// The form `--tls-bind` errors show.
pub(super) const TLS_BIND_EXAMPLE: &str = "127.0.0.1:8443";

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
    /// The top level's identity; each site's is in `Config::sites`.
    pub source: Option<TlsSource>,
    pub handshake_timeout: Duration,
    pub ticket_rotate: Duration,
}

/// The top level's identity: `--tls-cert` with `--tls-key` (loadable now),
/// or `--tls-self-signed`, or none (sites may have their own).
pub(super) fn source(c: &Checked) -> Result<Option<TlsSource>, Error> {
    match (&c.tls_cert, &c.tls_key, c.tls_self_signed) {
        (None, None, false) => Ok(None),
        (Some(_), _, true) | (_, Some(_), true) => Err(field::tls_self_signed
            .invalid("cannot be combined with --tls-cert/--tls-key; choose one")),
        (Some(_), None, _) => {
            Err(field::tls_key.invalid("missing: --tls-cert needs its --tls-key"))
        }
        (None, Some(_), _) => {
            Err(field::tls_cert.invalid("missing: --tls-key needs its --tls-cert"))
        }
        (Some(cert), Some(key), false) => {
            crate::tls::Material::load(cert, key)
                .map_err(|e| field::tls_cert.invalid(e.to_string()))?;
            Ok(Some(TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            }))
        }
        (None, None, true) => Ok(Some(TlsSource::SelfSigned)),
    }
}

/// The TLS settings, if any listener asks for TLS; `plain` are the
/// `--bind` addresses, `source` the top level's identity, `sites` whether
/// any site has an identity (its own or the top level's).
pub(super) fn config(
    c: &Checked,
    plain: &[SocketAddr],
    source: Option<TlsSource>,
    sites: bool,
) -> Result<Option<TlsConfig>, Error> {
    if let Some(a) = c
        .tls_bind
        .iter()
        .find(|a| a.port() != 0 && plain.contains(a))
    {
        return Err(field::tls_bind.invalid(format!("{a} is given twice")));
    }
    match (c.tls_bind.is_empty(), source.is_some() || sites) {
        (true, false) => Ok(None),
        (false, false) => Err(field::tls_bind.invalid(
            "needs --tls-cert and --tls-key, or --tls-self-signed (or a site's tls_cert or acme)",
        )),
        (true, true) => Err(field::tls_bind
            .invalid("missing: a certificate was given but no TLS listener; add --tls-bind ADDR")),
        (false, true) => Ok(Some(TlsConfig {
            binds: c.tls_bind.clone(),
            source,
            handshake_timeout: c.tls_handshake_timeout,
            ticket_rotate: c.tls_ticket_rotate,
        })),
    }
}

/// The TLS listeners of `tls`, none without TLS (effective config).
pub(super) fn binds(tls: &Option<TlsConfig>) -> Vec<SocketAddr> {
    tls.as_ref().map_or_else(Vec::new, |t| t.binds.clone())
}

/// The certificate file, if the identity is files (effective config).
pub(super) fn cert(tls: &Option<TlsConfig>) -> Option<PathBuf> {
    match tls.as_ref().and_then(|t| t.source.as_ref()) {
        Some(TlsSource::Files { cert, .. }) => Some(cert.clone()),
        _ => None,
    }
}

/// The key file, if the identity is files (effective config).
pub(super) fn key(tls: &Option<TlsConfig>) -> Option<PathBuf> {
    match tls.as_ref().and_then(|t| t.source.as_ref()) {
        Some(TlsSource::Files { key, .. }) => Some(key.clone()),
        _ => None,
    }
}

/// Whether the identity is self-signed (effective config).
pub(super) fn self_signed(tls: &Option<TlsConfig>) -> bool {
    matches!(
        tls.as_ref().and_then(|t| t.source.as_ref()),
        Some(TlsSource::SelfSigned)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, ok, raw};
    use crate::config::RawConfig;
    use crate::config::Seconds;

    fn tls(r: RawConfig) -> RawConfig {
        RawConfig {
            tls_bind: Some(vec!["127.0.0.1:8443".into()]),
            ..r
        }
    }

    #[test]
    fn a_listener_needs_an_identity_and_an_identity_a_listener() {
        assert_eq!(
            err(tls(raw())),
            "--tls-bind: needs --tls-cert and --tls-key, or --tls-self-signed (or a site's tls_cert or acme)"
        );
        let r = RawConfig {
            tls_self_signed: true,
            ..raw()
        };
        assert!(err(r).starts_with("--tls-bind: missing: a certificate was given"));
        let r = RawConfig {
            tls_cert: Some("c.pem".into()),
            ..tls(raw())
        };
        assert_eq!(err(r), "--tls-key: missing: --tls-cert needs its --tls-key");
    }

    #[test]
    fn self_signed_listeners_get_the_default_timers() {
        let r = RawConfig {
            tls_self_signed: true,
            ..tls(raw())
        };
        let t = ok(r).tls.unwrap();
        assert_eq!(t.source, Some(TlsSource::SelfSigned));
        assert_eq!(
            t.handshake_timeout.as_secs_f64(),
            DEFAULT_TLS_HANDSHAKE_TIMEOUT_S
        );
        assert_eq!(t.ticket_rotate.as_secs_f64(), DEFAULT_TLS_TICKET_ROTATE_S);
    }

    #[test]
    fn a_tls_address_may_not_be_a_plain_one() {
        let r = RawConfig {
            bind: Some(vec!["127.0.0.1:8443".into()]),
            tls_self_signed: true,
            ..tls(raw())
        };
        assert_eq!(err(r), "--tls-bind: 127.0.0.1:8443 is given twice");
    }

    #[test]
    fn timers_are_bounded_by_a_week() {
        let r = RawConfig {
            tls_self_signed: true,
            tls_ticket_rotate: Some(Seconds(WEEK + 1.0)),
            ..tls(raw())
        };
        assert_eq!(
            err(r),
            "--tls-ticket-rotate: 604801s is not a duration in (0, 7d]; write seconds, or with units: 500ms, 30s, 2m, 1h, 1m30s"
        );
    }
}
