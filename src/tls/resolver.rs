//! Which certificate a handshake gets: SNI certificate selection across
//! sites.
//!
//! Flow of [`Resolver`]'s `resolve`, once per full handshake (a resumed
//! one presents no certificate):
//! 1. A client offering only ALPN `acme-tls/1` is a CA validating a
//!    TLS-ALPN-01 challenge (RFC 8737 §3): it gets the published answer for
//!    its SNI, or the handshake fails.
//! 2. Otherwise the SNI is matched by the sites' router (through
//!    [`Lookup`]), the same that matches `Host`, so a name picks the same
//!    site in both; no SNI (a
//!    client connecting by address) gets the default site's certificate.
//! 3. An ACME site presents the certificate the supervisor published for
//!    it, if any, else the one it started the generation with (stored on
//!    disk, or a self-signed placeholder until the first order completes).
//! 4. An unknown SNI under `unknown_host = "421"`, or a site without a
//!    certificate, fails the handshake (the client sees an alert).

use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::ACME_TLS_ALPN;
use super::{Error, Lookup, Material, SiteNames};

/// The certificates of one generation's sites.
#[derive(Debug)]
pub(super) struct Resolver {
    /// By site; `None`: the site has no certificate.
    keys: Vec<Option<Arc<CertifiedKey>>>,
    /// By site: the site's name when ACME publishes its certificate.
    acme: Vec<Option<String>>,
    lookup: Arc<dyn Lookup>,
    /// The site of a client without SNI.
    fallback: Option<usize>,
}

impl Resolver {
    pub(super) fn new(
        identities: &[Option<Material>],
        sites: &SiteNames,
    ) -> Result<Resolver, Error> {
        let keys = identities
            .iter()
            .map(|m| m.as_ref().map(Material::certified_key).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Resolver {
            fallback: without_sni(&keys, sites.default),
            keys,
            acme: sites.acme.clone(),
            lookup: sites.lookup.clone(),
        })
    }

    fn key(&self, site: usize) -> Option<Arc<CertifiedKey>> {
        if let Some(Some(name)) = self.acme.get(site) {
            if let Some(k) = self.lookup.published_certificate(name) {
                return Some(k);
            }
        }
        self.keys.get(site).cloned().flatten()
    }
}

/// The site whose certificate a client without SNI gets: the default site,
/// else the first with a certificate (`identities` by site).
pub(crate) fn without_sni<T>(identities: &[Option<T>], default: usize) -> Option<usize> {
    let has = |i: &usize| identities.get(*i).is_some_and(Option::is_some);
    Some(default)
        .filter(has)
        .or_else(|| (0..identities.len()).find(has))
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let sni = hello.server_name();
        if let Some(mut offered) = hello.alpn() {
            if offered.next() == Some(ACME_TLS_ALPN) && offered.next().is_none() {
                return self.lookup.tls_alpn01(sni?);
            }
        }
        let site = match sni {
            Some(name) => self.lookup.route(name.as_bytes())?,
            None => self.fallback?,
        };
        self.key(site)
    }
}
