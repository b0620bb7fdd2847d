//! ACME settings: `--acme-directory`, `--acme-contact`, `--acme-state-dir`,
//! `--acme-ca-roots`, `--acme-challenge` and `--acme-retry`.
//!
//! Owns [`AcmeConfig`] (present only when a site has `acme = true`), the
//! defaults, and the rules: the directory is an `https://` URL, a contact
//! a URI (`mailto:`), the CA roots a readable PEM file, and the listeners
//! the challenge needs exist (plain ones for HTTP-01, TLS ones for
//! TLS-ALPN-01). Does not own ordering or storing certificates (`acme`).

use std::path::PathBuf;
use std::time::Duration;

use super::choice::choice;
use super::raw::{field, Checked};
use super::setting::Field;
use super::Error;

/// Let's Encrypt's production directory.
pub const DEFAULT_ACME_DIRECTORY: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Where systemd's `StateDirectory=servery` puts state, one folder for ACME.
pub const DEFAULT_ACME_STATE_DIR: &str = "/var/lib/servery/acme";
/// HTTP-01: what every CA offers, answered on the plain listeners (port 80).
pub const DEFAULT_ACME_CHALLENGE: AcmeChallenge = AcmeChallenge::Http01;
/// A failed order is tried again after a minute, then after twice as long
/// each time, up to a day (Let's Encrypt limits failed validations to 5 an
/// hour per name).
pub const DEFAULT_ACME_RETRY_S: f64 = 60.0;
/// The longest wait between retries.
pub const ACME_RETRY_MAX: Duration = Duration::from_secs(86_400);

choice! {
    /// How the CA checks that the server answers for a name.
    pub enum AcmeChallenge {
        /// A token at `/.well-known/acme-challenge/` on the plain listeners (RFC 8555 §8.3).
        Http01 = "http-01",
        /// A certificate presented for ALPN `acme-tls/1` on the TLS listeners (RFC 8737).
        TlsAlpn01 = "tls-alpn-01",
    }
}

/// Validated ACME settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcmeConfig {
    pub directory: String,
    pub contact: Vec<String>,
    pub state_dir: PathBuf,
    pub ca_roots: Option<PathBuf>,
    pub challenge: AcmeChallenge,
    /// The first retry after a failure; doubled up to [`ACME_RETRY_MAX`].
    pub retry: Duration,
}

/// The ACME settings when some site orders by ACME; `plain` and `tls` say
/// which listeners exist.
pub(super) fn config(
    c: &Checked,
    wanted: bool,
    plain: bool,
    tls: bool,
) -> Result<AcmeConfig, Error> {
    match c.acme_challenge {
        _ if !wanted => {}
        AcmeChallenge::Http01 if !plain => {
            return Err(field::acme_challenge.invalid(
                "http-01 is answered on a plain listener and there is none; add --bind ADDR:80 or use tls-alpn-01",
            ))
        }
        AcmeChallenge::TlsAlpn01 if !tls => {
            return Err(field::acme_challenge.invalid(
                "tls-alpn-01 is answered on a TLS listener and there is none; add --tls-bind ADDR:443",
            ))
        }
        _ => {}
    }
    if wanted && !tls {
        return Err(field::tls_bind.invalid(
            "missing: a site orders its certificate by ACME but there is no TLS listener; add --tls-bind ADDR:443",
        ));
    }
    let state_dir = if c.acme_state_dir.is_absolute() {
        c.acme_state_dir.clone()
    } else {
        std::env::current_dir()
            .map(|d| d.join(&c.acme_state_dir))
            .unwrap_or_else(|_| c.acme_state_dir.clone())
    };
    Ok(AcmeConfig {
        directory: c.acme_directory.clone(),
        contact: c.acme_contact.clone(),
        state_dir,
        ca_roots: c.acme_ca_roots.clone(),
        challenge: c.acme_challenge,
        retry: c.acme_retry,
    })
}

/// `--acme-directory`: an `https://` URL (ACME runs over HTTPS, RFC 8555 §6.1).
pub(crate) fn directory(field: Field, url: String) -> Result<String, Error> {
    let ok = url.strip_prefix("https://").is_some_and(|rest| {
        !rest.is_empty()
            && !rest
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    });
    if !ok {
        return Err(field.invalid(format!(
            "{url:?} is not an https:// URL; give the CA's directory, e.g. {DEFAULT_ACME_DIRECTORY}"
        )));
    }
    Ok(url)
}

/// `--acme-contact`: URIs such as `mailto:ops@example.com`.
pub(crate) fn contacts(field: Field, list: Vec<String>) -> Result<Vec<String>, Error> {
    for c in &list {
        let scheme = c.split_once(":");
        let ok = matches!(scheme, Some((s, rest)) if !s.is_empty() && !rest.is_empty()
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)))
            && !c
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
        if !ok {
            return Err(field.invalid(format!("{c:?} is not a URI; write mailto:ops@example.com")));
        }
    }
    Ok(list)
}

/// `--acme-ca-roots`: a readable file.
pub(crate) fn ca_roots(field: Field, path: PathBuf) -> Result<PathBuf, Error> {
    match std::fs::read_to_string(&path) {
        Ok(text) if text.contains("-----BEGIN CERTIFICATE-----") => Ok(path),
        Ok(_) => Err(field.invalid(format!("{} holds no PEM certificate", path.display()))),
        Err(e) => Err(field.invalid(format!("cannot read {}: {e}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{err, ok, raw};
    use crate::config::{RawConfig, SiteRaw};

    fn acme_site() -> RawConfig {
        RawConfig {
            site: Some(vec![SiteRaw {
                hosts: vec!["a.test".into()],
                acme: true,
                ..SiteRaw::default()
            }]),
            bind: Some(vec!["127.0.0.1:0".into()]),
            tls_bind: Some(vec!["127.0.0.1:0".into()]),
            ..raw()
        }
    }

    #[test]
    fn acme_settings_exist_only_when_a_site_orders() {
        assert!(ok(raw()).acme.is_none());
        let a = ok(acme_site()).acme.unwrap();
        assert_eq!(a.directory, DEFAULT_ACME_DIRECTORY);
        assert_eq!(a.challenge, AcmeChallenge::Http01);
        assert_eq!(a.retry, Duration::from_secs(60));
    }

    #[test]
    fn the_challenge_needs_its_listener() {
        let r = RawConfig {
            bind: None,
            ..acme_site()
        };
        assert!(err(r).starts_with("--acme-challenge: http-01 is answered on a plain listener"));
        let r = RawConfig {
            tls_bind: None,
            acme_challenge: Some(AcmeChallenge::TlsAlpn01),
            ..acme_site()
        };
        assert!(err(r).starts_with("--tls-bind: missing: a certificate was given"));
    }

    #[test]
    fn urls_and_contacts_are_checked() {
        let r = RawConfig {
            acme_directory: Some("http://ca.test/dir".into()),
            ..acme_site()
        };
        assert!(
            err(r).starts_with("--acme-directory: \"http://ca.test/dir\" is not an https:// URL")
        );
        let r = RawConfig {
            acme_contact: Some(vec!["ops@example.com".into()]),
            ..acme_site()
        };
        assert!(err(r).starts_with("--acme-contact: \"ops@example.com\" is not a URI"));
    }
}
