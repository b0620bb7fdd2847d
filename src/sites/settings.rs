//! The validated sites: what every worker serves and what the TLS layer
//! picks certificates from.
//!
//! Owns [`SitesConfig`] (every site, the default, and the [`Router`] that
//! matches names), [`SiteConfig`], where a site's certificate comes from
//! ([`SiteTls`]), [`UnknownHost`], and the view of them the TLS resolver
//! reads ([`SitesConfig::for_tls`]). Does not own reading `[[site]]` tables
//! or their rules (`config::sites`, which builds these).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::sign::CertifiedKey;

use super::published;
use super::router::{Router, SiteIndex};
use crate::choice::choice;
use crate::static_files::FilesConfig;

choice! {
    /// What a request for a host no site has gets.
    pub enum UnknownHost {
        /// The default site answers it.
        Default = "default",
        /// 421 Misdirected Request; over TLS an unknown SNI fails the
        /// handshake (nginx's `ssl_reject_handshake`).
        Misdirected = "421",
    }
}

/// Where a site's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteTls {
    /// PEM files (the site's own or the top level's), re-read on reload.
    Files { cert: PathBuf, key: PathBuf },
    /// The server's self-signed certificate (`--tls-self-signed`).
    SelfSigned,
    /// Ordered and renewed by the supervisor for the site's hosts.
    Acme,
}

/// A validated site.
#[derive(Debug, Clone)]
pub struct SiteConfig {
    pub name: String,
    /// Normalized patterns (lower case, no trailing dot).
    pub hosts: Vec<String>,
    /// The directory it serves (absolute when it exists).
    pub root: PathBuf,
    pub files: FilesConfig,
    /// `None`: no certificate; a TLS client naming it is refused.
    pub tls: Option<SiteTls>,
}

impl SiteConfig {
    /// Whether ACME orders and renews its certificate.
    pub fn by_acme(&self) -> bool {
        self.tls == Some(SiteTls::Acme)
    }
}

/// Every site, and how names find them.
#[derive(Debug, Clone)]
pub struct SitesConfig {
    pub list: Vec<SiteConfig>,
    pub unknown: UnknownHost,
    /// The default site (also the certificate of a client without SNI);
    /// with `unknown_host = "421"`, the first site with a certificate.
    pub default: SiteIndex,
    pub router: Arc<Router>,
    /// Whether the sites came from `[[site]]` tables (the effective config
    /// then shows them).
    pub written: bool,
}

impl SitesConfig {
    /// The site names ACME orders certificates for, with their DNS names.
    pub fn acme_orders(&self) -> Vec<(String, Vec<String>)> {
        let acme = self.list.iter().filter(|s| s.by_acme());
        acme.map(|s| (s.name.clone(), s.hosts.clone())).collect()
    }

    /// What the TLS layer picks a certificate with: this router for SNI,
    /// the table ACME publishes to, the default site, which sites ACME
    /// serves, and every host (the self-signed certificate names them).
    pub fn for_tls(&self) -> crate::tls::SiteNames {
        crate::tls::SiteNames {
            lookup: Arc::new(Lookup(self.router.clone())),
            default: self.default,
            acme: (self.list.iter())
                .map(|s| s.by_acme().then(|| s.name.clone()))
                .collect(),
            hosts: self.list.iter().flat_map(|s| s.hosts.clone()).collect(),
        }
    }
}

/// The sites as a handshake sees them: names by the same router as Host,
/// certificates and answers from the process's published table.
#[derive(Debug)]
struct Lookup(Arc<Router>);

impl crate::tls::Lookup for Lookup {
    fn route(&self, sni: &[u8]) -> Option<SiteIndex> {
        self.0.route(sni)
    }

    fn published_certificate(&self, site: &str) -> Option<Arc<CertifiedKey>> {
        published::global().certificate(site)
    }

    fn tls_alpn01(&self, sni: &str) -> Option<Arc<CertifiedKey>> {
        published::global().tls_alpn01(sni)
    }
}
