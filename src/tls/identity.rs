//! The server's TLS identity across generations.
//!
//! Owns: what lives for the whole server (the ticket secret, so tickets
//! survive reloads; the `--tls-self-signed` certificate and the ACME
//! sites' placeholders, made once) and what each generation gets
//! ([`GenerationTls`]: each site's certificate files as they are on disk
//! when it starts, so a reload picks up swapped files, and the rustls
//! config built from them). Does not own when a generation
//! starts (the supervisor) nor the handshake (`worker::conn`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{Error, Material, TicketSecret};

/// Where a site's certificate comes from in a generation.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// PEM files, read now.
    Files { cert: &'a Path, key: &'a Path },
    /// The server's self-signed certificate.
    SelfSigned,
    /// Material the caller has (an ACME certificate, published or stored).
    Given(&'a Material),
    /// A self-signed certificate for `hosts`, made once and kept: what an
    /// ACME site presents until its first certificate arrives.
    Placeholder { hosts: &'a [String] },
}

/// One generation's TLS identities: the material by site (sent to worker
/// processes) and the config built from it (shared by worker threads).
pub struct GenerationTls {
    pub identities: Vec<Option<Material>>,
    pub secret: TicketSecret,
    pub config: Arc<rustls::ServerConfig>,
}

/// What the server keeps across generations.
#[derive(Debug, Default)]
pub struct Identity {
    self_signed: Option<Material>,
    placeholders: Vec<(Vec<String>, Material)>,
    ticket_secret: Option<TicketSecret>,
}

impl Identity {
    /// The identities of a new generation, `sources` by site. `addrs` are
    /// the TLS listeners' addresses (the self-signed certificate names
    /// them, `localhost` and the sites' exact hosts).
    pub fn for_generation(
        &mut self,
        sources: &[Option<Source<'_>>],
        sites: &super::SiteNames,
        acme_alpn: bool,
        addrs: &[SocketAddr],
        ticket_rotate: Duration,
        alpn: &[&[u8]],
    ) -> Result<GenerationTls, Error> {
        // Made on first use (at start, or by the reload that turns TLS on)
        // and kept for the life of the server.
        let secret = match &self.ticket_secret {
            Some(s) => s.clone(),
            None => self.ticket_secret.insert(TicketSecret::generate()?).clone(),
        };
        // Placeholders of hosts no site has any more go (a server reloaded
        // a thousand times with changing hosts keeps only today's).
        self.placeholders.retain(|(h, _)| {
            sources
                .iter()
                .any(|s| matches!(s, Some(Source::Placeholder { hosts }) if *hosts == &h[..]))
        });
        let mut identities = Vec::with_capacity(sources.len());
        for source in sources {
            identities.push(match source {
                None => None,
                Some(s) => Some(self.material(*s, sites, addrs)?),
            });
        }
        let config =
            super::server_config(&identities, sites, acme_alpn, &secret, ticket_rotate, alpn)?;
        Ok(GenerationTls {
            identities,
            secret,
            config,
        })
    }

    fn material(
        &mut self,
        source: Source<'_>,
        sites: &super::SiteNames,
        addrs: &[SocketAddr],
    ) -> Result<Material, Error> {
        Ok(match source {
            Source::Files { cert, key } => Material::load(cert, key)?,
            Source::Given(m) => m.clone(),
            Source::SelfSigned => match &self.self_signed {
                Some(m) => m.clone(),
                None => {
                    let mut names = vec!["localhost".to_owned()];
                    let hosts = sites.hosts.iter();
                    let ips = addrs.iter().map(|a| a.ip().to_string());
                    for n in hosts.cloned().chain(ips) {
                        let n = n.trim_matches(['[', ']']).to_owned();
                        if !names.contains(&n) {
                            names.push(n);
                        }
                    }
                    self.self_signed
                        .insert(Material::self_signed(&names)?)
                        .clone()
                }
            },
            Source::Placeholder { hosts } => {
                match self.placeholders.iter().find(|(h, _)| h == hosts) {
                    Some((_, m)) => m.clone(),
                    None => {
                        let m = Material::self_signed(hosts)?;
                        self.placeholders.push((hosts.to_vec(), m.clone()));
                        m
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

    #[test]
    fn the_self_signed_certificate_and_ticket_secret_outlive_a_generation() {
        let mut id = Identity::default();
        let addrs = ["127.0.0.1:0".parse().unwrap()];
        let hour = Duration::from_secs(3600);
        let sites = crate::config::tests::ok(crate::config::tests::raw())
            .sites
            .for_tls();
        let one = [Some(Source::SelfSigned)];
        let a = id
            .for_generation(&one, &sites, false, &addrs, hour, &ALPN)
            .unwrap();
        let b = id
            .for_generation(&one, &sites, false, &addrs, hour, &ALPN)
            .unwrap();
        let fingerprint = |g: &GenerationTls| g.identities[0].as_ref().unwrap().fingerprint();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(a.secret.0, b.secret.0);
    }

    #[test]
    fn a_placeholder_is_kept_while_a_site_needs_it_and_no_longer() {
        let mut id = Identity::default();
        let hour = Duration::from_secs(3600);
        let sites = crate::config::tests::ok(crate::config::tests::raw())
            .sites
            .for_tls();
        let (a, b) = (vec!["a.test".to_owned()], vec!["b.test".to_owned()]);
        let mut make = |hosts: &[String]| {
            let one = [Some(Source::Placeholder { hosts })];
            let g = id.for_generation(&one, &sites, false, &[], hour, &ALPN);
            g.unwrap().identities[0].as_ref().unwrap().fingerprint()
        };
        let first = make(&a);
        assert_eq!(make(&a), first, "made once");
        make(&b);
        assert_ne!(make(&a), first, "dropped while no site had it");
        assert_eq!(id.placeholders.len(), 1);
    }
}
