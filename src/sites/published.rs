//! What the supervisor's ACME has published to this process: HTTP-01 and
//! TLS-ALPN-01 challenge answers, and the certificates it obtained.
//!
//! One table per process, read by every worker of it: the static files
//! answer `/.well-known/acme-challenge/` from it (before any site is
//! chosen), and the TLS resolver presents its certificates. In thread
//! isolation the supervisor writes it directly; in process isolation each
//! worker process writes its own from the [`Update`]s on its control
//! channel (and gets everything already published, open answers included,
//! in its `Init`: [`Published::updates`]).
//! Reads take a read lock only when something is published, so a server
//! without ACME pays one atomic load per challenge-path request and per
//! handshake of an ACME site.
//!
//! Bounds: answers exist only while the supervisor's orders are pending (a
//! few per site); the table refuses more than [`MAX_ANSWERS`] of each kind,
//! and a certificate per site name replaces the last.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};

use crate::tls::Material;

/// The path prefix of HTTP-01 answers (RFC 8555 §8.3).
pub const HTTP01_PREFIX: &[u8] = b"/.well-known/acme-challenge/";
/// Most answers of one kind held at once.
pub const MAX_ANSWERS: usize = 1024;

/// One change the supervisor makes (what crosses the control channel).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Update {
    /// Answer `GET /.well-known/acme-challenge/{token}` with the key
    /// authorization.
    Http01 {
        token: String,
        key_authorization: String,
    },
    WithdrawHttp01 {
        token: String,
    },
    /// Present `material` to an `acme-tls/1` client naming `domain`.
    TlsAlpn01 {
        domain: String,
        material: Material,
    },
    WithdrawTlsAlpn01 {
        domain: String,
    },
    /// Site `site`'s new certificate.
    Certificate {
        site: String,
        material: Material,
    },
}

/// The process's table.
#[derive(Default)]
pub struct Published {
    any_answer: AtomicBool,
    any_certificate: AtomicBool,
    http: RwLock<HashMap<String, String>>,
    alpn: RwLock<HashMap<String, (Material, Arc<CertifiedKey>)>>,
    certificates: RwLock<HashMap<String, (Material, Arc<CertifiedKey>)>>,
}

/// This process's table.
pub fn global() -> &'static Published {
    static TABLE: OnceLock<Published> = OnceLock::new();
    TABLE.get_or_init(Published::default)
}

impl Published {
    /// Apply `update`. A certificate that does not parse is refused (and
    /// the one before it kept).
    pub fn apply(&self, update: &Update) -> Result<(), crate::tls::Error> {
        match update {
            Update::Http01 {
                token,
                key_authorization,
            } => {
                let mut t = self.http.write().unwrap_or_else(|p| p.into_inner());
                if t.len() < MAX_ANSWERS {
                    t.insert(token.clone(), key_authorization.clone());
                }
            }
            Update::WithdrawHttp01 { token } => {
                let mut t = self.http.write().unwrap_or_else(|p| p.into_inner());
                t.remove(token);
            }
            Update::TlsAlpn01 { domain, material } => {
                let key = material.certified_key()?;
                let mut t = self.alpn.write().unwrap_or_else(|p| p.into_inner());
                if t.len() < MAX_ANSWERS {
                    t.insert(domain.to_ascii_lowercase(), (material.clone(), key));
                }
            }
            Update::WithdrawTlsAlpn01 { domain } => {
                let mut t = self.alpn.write().unwrap_or_else(|p| p.into_inner());
                t.remove(&domain.to_ascii_lowercase());
            }
            Update::Certificate { site, material } => {
                let key = material.certified_key()?;
                let mut t = self.certificates.write().unwrap_or_else(|p| p.into_inner());
                t.insert(site.clone(), (material.clone(), key));
                self.any_certificate.store(true, Ordering::Release);
            }
        }
        let answers = !self.http.read().map_or(true, |t| t.is_empty())
            || !self.alpn.read().map_or(true, |t| t.is_empty());
        self.any_answer.store(answers, Ordering::Release);
        Ok(())
    }

    /// The HTTP-01 answer for a request path, if it is one.
    pub fn http01(&self, path: &[u8]) -> Option<String> {
        if !self.any_answer.load(Ordering::Acquire) {
            return None;
        }
        let token = std::str::from_utf8(path.strip_prefix(HTTP01_PREFIX)?).ok()?;
        self.http.read().ok()?.get(token).cloned()
    }

    /// The TLS-ALPN-01 certificate for `domain`.
    pub fn tls_alpn01(&self, domain: &str) -> Option<Arc<CertifiedKey>> {
        if !self.any_answer.load(Ordering::Acquire) {
            return None;
        }
        self.alpn
            .read()
            .ok()?
            .get(&domain.to_ascii_lowercase())
            .map(|(_, k)| k.clone())
    }

    /// Site `site`'s certificate from ACME, if one was published.
    pub fn certificate(&self, site: &str) -> Option<Arc<CertifiedKey>> {
        if !self.any_certificate.load(Ordering::Acquire) {
            return None;
        }
        self.certificates
            .read()
            .ok()?
            .get(site)
            .map(|(_, k)| k.clone())
    }

    /// Everything published, as the updates that would make it again (for
    /// a new worker process): the open answers, then the certificates.
    pub fn updates(&self) -> Vec<Update> {
        let mut out = Vec::new();
        let http = self.http.read().unwrap_or_else(|p| p.into_inner());
        out.extend(http.iter().map(|(t, k)| Update::Http01 {
            token: t.clone(),
            key_authorization: k.clone(),
        }));
        drop(http);
        let alpn = self.alpn.read().unwrap_or_else(|p| p.into_inner());
        out.extend(alpn.iter().map(|(d, (m, _))| Update::TlsAlpn01 {
            domain: d.clone(),
            material: m.clone(),
        }));
        drop(alpn);
        let certs = self.certificates.read().unwrap_or_else(|p| p.into_inner());
        out.extend(certs.iter().map(|(s, (m, _))| Update::Certificate {
            site: s.clone(),
            material: m.clone(),
        }));
        out
    }

    /// Site `site`'s certificate as material, if published.
    pub fn material(&self, site: &str) -> Option<Material> {
        let t = self.certificates.read().ok()?;
        t.get(site).map(|(m, _)| m.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_appear_and_go() {
        let p = Published::default();
        assert_eq!(p.http01(b"/.well-known/acme-challenge/t1"), None);
        p.apply(&Update::Http01 {
            token: "t1".into(),
            key_authorization: "t1.abc".into(),
        })
        .unwrap();
        assert_eq!(
            p.http01(b"/.well-known/acme-challenge/t1").as_deref(),
            Some("t1.abc")
        );
        assert_eq!(p.http01(b"/.well-known/acme-challenge/t2"), None);
        assert_eq!(p.http01(b"/t1"), None);
        p.apply(&Update::WithdrawHttp01 { token: "t1".into() })
            .unwrap();
        assert_eq!(p.http01(b"/.well-known/acme-challenge/t1"), None);
        assert!(!p.any_answer.load(Ordering::Acquire));
    }

    #[test]
    fn answers_are_bounded() {
        let p = Published::default();
        for i in 0..MAX_ANSWERS + 10 {
            p.apply(&Update::Http01 {
                token: format!("t{i}"),
                key_authorization: "k".into(),
            })
            .unwrap();
        }
        assert_eq!(p.http.read().unwrap().len(), MAX_ANSWERS);
    }

    #[test]
    fn a_certificate_replaces_the_last_and_a_bad_one_is_refused() {
        let p = Published::default();
        let a = Material::self_signed(&["a.test".into()]).unwrap();
        let b = Material::self_signed(&["a.test".into()]).unwrap();
        p.apply(&Update::Certificate {
            site: "a".into(),
            material: a,
        })
        .unwrap();
        p.apply(&Update::Certificate {
            site: "a".into(),
            material: b.clone(),
        })
        .unwrap();
        assert_eq!(p.material("a").unwrap().fingerprint(), b.fingerprint());
        let bad = Material {
            chain_pem: "x".into(),
            key_pem: "y".into(),
        };
        assert!(p
            .apply(&Update::Certificate {
                site: "a".into(),
                material: bad
            })
            .is_err());
        assert_eq!(p.material("a").unwrap().fingerprint(), b.fingerprint());
        assert!(p.certificate("a").is_some());
        assert!(p.certificate("b").is_none());
    }

    #[test]
    fn updates_replayed_make_the_same_table() {
        let p = Published::default();
        let cert = Material::self_signed(&["a.test".into()]).unwrap();
        let answer = Material::self_signed(&["b.test".into()]).unwrap();
        p.apply(&Update::Http01 {
            token: "t1".into(),
            key_authorization: "t1.abc".into(),
        })
        .unwrap();
        p.apply(&Update::TlsAlpn01 {
            domain: "B.test".into(),
            material: answer,
        })
        .unwrap();
        p.apply(&Update::Certificate {
            site: "a".into(),
            material: cert.clone(),
        })
        .unwrap();
        let q = Published::default();
        for u in p.updates() {
            q.apply(&u).unwrap();
        }
        assert_eq!(
            q.http01(b"/.well-known/acme-challenge/t1").as_deref(),
            Some("t1.abc")
        );
        assert!(q.tls_alpn01("b.test").is_some());
        assert_eq!(q.material("a").unwrap().fingerprint(), cert.fingerprint());
    }
}
