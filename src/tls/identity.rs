//! The server's TLS identity across generations.
//!
//! Owns: what lives for the whole server (the ticket secret, so tickets
//! survive reloads; the `--tls-self-signed` certificate, made once) and
//! what each generation gets ([`GenerationTls`]: the certificate files as
//! they are on disk when it starts, so a reload picks up swapped files, and
//! the rustls config built from them). Does not own when a generation
//! starts (the supervisor) nor the handshake (`worker::conn`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{Error, Material, TicketSecret};

/// Where a generation's certificate comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// PEM files, read now.
    Files { cert: &'a Path, key: &'a Path },
    /// The server's self-signed certificate.
    SelfSigned,
}

/// One generation's TLS identity: the material (sent to worker processes)
/// and the config built from it (shared by worker threads).
pub struct GenerationTls {
    pub material: Material,
    pub secret: TicketSecret,
    pub config: Arc<rustls::ServerConfig>,
}

/// What the server keeps across generations.
#[derive(Debug, Default)]
pub struct Identity {
    self_signed: Option<Material>,
    ticket_secret: Option<TicketSecret>,
}

impl Identity {
    /// The identity of a new generation. `addrs` are the TLS listeners'
    /// addresses (the self-signed certificate names them and `localhost`).
    pub fn for_generation(
        &mut self,
        source: Source<'_>,
        addrs: &[SocketAddr],
        ticket_rotate: Duration,
        alpn: &[crate::config::http2::Protocol],
    ) -> Result<GenerationTls, Error> {
        // Made on first use (at start, or by the reload that turns TLS on)
        // and kept for the life of the server.
        let secret = match &self.ticket_secret {
            Some(s) => s.clone(),
            None => self.ticket_secret.insert(TicketSecret::generate()?).clone(),
        };
        let material = match source {
            Source::Files { cert, key } => Material::load(cert, key)?,
            Source::SelfSigned => match &self.self_signed {
                Some(m) => m.clone(),
                None => {
                    let mut names = vec!["localhost".to_owned()];
                    for a in addrs {
                        let ip = a.ip().to_string();
                        if !names.contains(&ip) {
                            names.push(ip);
                        }
                    }
                    self.self_signed
                        .insert(Material::self_signed(&names)?)
                        .clone()
                }
            },
        };
        let config = material.server_config(&secret, ticket_rotate, alpn)?;
        Ok(GenerationTls {
            material,
            secret,
            config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::http2::DEFAULT_ALPN;

    #[test]
    fn the_self_signed_certificate_and_ticket_secret_outlive_a_generation() {
        let mut id = Identity::default();
        let addrs = ["127.0.0.1:0".parse().unwrap()];
        let hour = Duration::from_secs(3600);
        let a = id
            .for_generation(Source::SelfSigned, &addrs, hour, &DEFAULT_ALPN)
            .unwrap();
        let b = id
            .for_generation(Source::SelfSigned, &addrs, hour, &DEFAULT_ALPN)
            .unwrap();
        assert_eq!(a.material.fingerprint(), b.material.fingerprint());
        assert_eq!(a.secret.0, b.secret.0);
    }
}
