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

use super::raw::{field, Checked};
use super::setting::Field;
use super::Error;
use crate::choice::choice;

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
    /// The External Account Binding, when the CA requires one.
    pub eab: Option<Eab>,
}

/// `--acme-eab-kid` with the key read from `--acme-eab-hmac-key-file`:
/// the account binding as the ACME client takes it (its `Debug` redacts the
/// key), and where the key was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eab {
    pub account: crate::acme::ExternalAccount,
    /// Where the key was read (the effective config shows this, never the
    /// key).
    pub key_file: PathBuf,
}

/// The shortest HMAC key accepted: 128 bits (CAs issue 256).
const MIN_EAB_KEY_BYTES: usize = 16;

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
    let eab = match (&c.acme_eab_kid, &c.acme_eab_hmac_key_file) {
        (None, None) => None,
        (Some(_), None) => {
            return Err(field::acme_eab_hmac_key_file
                .invalid("missing: --acme-eab-kid needs the file with its HMAC key"))
        }
        (None, Some(_)) => {
            return Err(field::acme_eab_kid
                .invalid("missing: the HMAC key file needs the CA's key identifier"))
        }
        (Some(kid), Some(file)) => Some(Eab {
            account: crate::acme::ExternalAccount {
                kid: kid.clone(),
                hmac_key: eab_key(file)?,
            },
            key_file: file.clone(),
        }),
    };
    Ok(AcmeConfig {
        eab,
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

/// `--acme-eab-kid`: printable, one line.
pub(crate) fn eab_kid(field: Field, kid: String) -> Result<String, Error> {
    if kid.is_empty() || !kid.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(field.invalid(format!(
            "{kid:?} is not a key identifier; copy it from the CA"
        )));
    }
    Ok(kid)
}

/// The HMAC key in `file`: base64url as CAs show it (padding and the
/// standard alphabet accepted too), at least [`MIN_EAB_KEY_BYTES`].
fn eab_key(file: &std::path::Path) -> Result<Vec<u8>, Error> {
    use base64::Engine as _;
    let f = field::acme_eab_hmac_key_file;
    let text = std::fs::read_to_string(file)
        .map_err(|e| f.invalid(format!("cannot read {}: {e}", file.display())))?;
    let written: String = (text.trim().chars())
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    let written = written.trim_end_matches('=');
    let key = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(written)
        .map_err(|e| f.invalid(format!("{} is not base64url: {e}", file.display())))?;
    if key.len() < MIN_EAB_KEY_BYTES {
        return Err(f.invalid(format!(
            "{} holds a {}-byte key; the CA's key is at least {MIN_EAB_KEY_BYTES} bytes",
            file.display(),
            key.len()
        )));
    }
    Ok(key)
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
        assert!(ok(raw()).ordering().is_none());
        let a = ok(acme_site()).ordering().unwrap().clone();
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
    fn an_external_account_binding_needs_both_halves_and_a_real_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("eab.key");
        std::fs::write(
            &key,
            "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W\n",
        )
        .unwrap();
        let r = RawConfig {
            acme_eab_kid: Some("kid-1".into()),
            acme_eab_hmac_key_file: Some(key.clone()),
            ..acme_site()
        };
        let eab = ok(r).acme.eab.unwrap();
        let account = &eab.account;
        assert_eq!(
            (account.kid.as_str(), account.hmac_key.len()),
            ("kid-1", 48)
        );
        assert!(!format!("{eab:?}").contains("zWND"));
        let r = RawConfig {
            acme_eab_kid: Some("kid-1".into()),
            ..acme_site()
        };
        assert!(err(r).starts_with("--acme-eab-hmac-key-file: missing"));
        std::fs::write(&key, "c2hvcnQ").unwrap();
        let r = RawConfig {
            acme_eab_kid: Some("kid-1".into()),
            acme_eab_hmac_key_file: Some(key),
            ..acme_site()
        };
        let e = err(r);
        assert!(e.contains("holds a 5-byte key"), "{e}");
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
