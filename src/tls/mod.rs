//! TLS with rustls: one identity and one ticket key set across all workers.
//!
//! Owns: loading certificate chains and keys (PEM; RSA, ECDSA, Ed25519),
//! the self-signed identity the supervisor makes once, the rustls
//! `ServerConfig` every worker serves with (TLS 1.3 and 1.2, ALPN as
//! `--alpn` orders it, any SNI), and the session ticketer. Does not own the
//! handshake or the connection (`worker::conn`) nor when material reloads
//! (a SIGHUP builds a new generation from the files on disk).
//!
//! Flow:
//! 1. `config` validates that `--tls-cert`/`--tls-key` load and match
//!    ([`Material::load`]) before anything binds.
//! 2. The supervisor's [`identity::Identity`] makes the [`Material`] once
//!    per generation (files) or once per server (`--tls-self-signed`), and
//!    one [`TicketSecret`] per server; thread workers share one `ServerConfig`, process workers get
//!    the material and secret over their control channel and build the same.
//! 3. `ticketer::Ticketer` derives the ticket keys from the secret and the
//!    time period, so every worker — thread or process, old or new
//!    generation — issues and accepts the same tickets: a client resumes on
//!    whichever worker the kernel hands it to.

pub mod identity;
mod resolver;

pub(crate) use resolver::without_sni;
mod ticketer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use serde::{Deserialize, Serialize};

/// The ALPN protocol of TLS-ALPN-01 (RFC 8737 §6.2): a server offered only
/// this protocol answers with the validation's certificate
/// (`acme::Answer::TlsAlpn01`).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// Why TLS material could not be used. Reported before anything binds.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey { path: PathBuf },
    #[error("{path}: {detail}")]
    BadPem { path: PathBuf, detail: String },
    #[error("the key in {key} does not belong to the certificate in {cert}")]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{what}: {source}")]
    Rustls {
        what: &'static str,
        source: rustls::Error,
    },
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
}

/// A certificate chain and its key, as PEM text (what crosses the control
/// channel to worker processes).
#[derive(Clone, Serialize, Deserialize)]
pub struct Material {
    pub chain_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("chain_pem", &self.chain_pem.len())
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl Material {
    /// Read and check a chain and key: both parse, and the key matches the
    /// leaf certificate.
    pub fn load(cert: &Path, key: &Path) -> Result<Material, Error> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| Error::Read {
                path: p.to_owned(),
                source,
            })
        };
        let m = Material {
            chain_pem: read(cert)?,
            key_pem: read(key)?,
        };
        let certified = m.certified_with(cert, key)?;
        certified.keys_match().map_err(|_| Error::KeyMismatch {
            cert: cert.to_owned(),
            key: key.to_owned(),
        })?;
        Ok(m)
    }

    /// An ECDSA P-256 certificate for `names` (DNS names or IP addresses).
    pub fn self_signed(names: &[String]) -> Result<Material, Error> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let params = rcgen::CertificateParams::new(names.to_vec())?;
        let cert = params.self_signed(&key)?;
        Ok(Material {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    fn parse(
        &self,
        cert_path: &Path,
        key_path: &Path,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.chain_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| Error::BadPem {
                    path: cert_path.to_owned(),
                    detail: e.to_string(),
                })?;
        if chain.is_empty() {
            return Err(Error::NoCertificate {
                path: cert_path.to_owned(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => Error::NoKey {
                path: key_path.to_owned(),
            },
            e => Error::BadPem {
                path: key_path.to_owned(),
                detail: e.to_string(),
            },
        })?;
        Ok((chain, key))
    }

    /// SHA-256 of the leaf certificate, as `AB:CD:...` (what `openssl x509
    /// -fingerprint -sha256` prints).
    pub fn fingerprint(&self) -> String {
        let leaf = CertificateDer::pem_slice_iter(self.chain_pem.as_bytes())
            .next()
            .and_then(Result::ok);
        match leaf {
            Some(der) => ring::digest::digest(&ring::digest::SHA256, der.as_ref())
                .as_ref()
                .iter()
                .map(|b| format!("{b:02X}"))
                .collect::<Vec<_>>()
                .join(":"),
            None => String::new(),
        }
    }

    /// The chain and key, ready to present.
    pub fn certified_key(&self) -> Result<Arc<rustls::sign::CertifiedKey>, Error> {
        self.certified_with(Path::new("certificate"), Path::new("key"))
            .map(Arc::new)
    }

    /// The chain and key as rustls signs with them; errors name the paths.
    fn certified_with(
        &self,
        cert_path: &Path,
        key_path: &Path,
    ) -> Result<rustls::sign::CertifiedKey, Error> {
        let (chain, key) = self.parse(cert_path, key_path)?;
        let signing = rustls::crypto::ring::default_provider()
            .key_provider
            .load_private_key(key)
            .map_err(|source| Error::Rustls {
                what: "unsupported private key",
                source,
            })?;
        Ok(rustls::sign::CertifiedKey::new(chain, signing))
    }
}

/// What a handshake asks of the sites, which sit above this module (they
/// hold `Material`, so TLS cannot name them): the site of a name, and what
/// ACME published to this process. `sites` implements it.
pub trait Lookup: Send + Sync + std::fmt::Debug {
    /// The site an SNI names (the router that also matches `Host`).
    fn route(&self, sni: &[u8]) -> Option<usize>;
    /// Site `site`'s certificate from ACME, if one was published.
    fn published_certificate(&self, site: &str) -> Option<Arc<rustls::sign::CertifiedKey>>;
    /// The TLS-ALPN-01 answer for `sni`, while an order is open.
    fn tls_alpn01(&self, sni: &str) -> Option<Arc<rustls::sign::CertifiedKey>>;
}

/// The sites as TLS sees them (made by `sites::SitesConfig::for_tls`).
#[derive(Debug, Clone)]
pub struct SiteNames {
    pub lookup: Arc<dyn Lookup>,
    /// The default site, whose certificate a client without SNI gets.
    pub default: usize,
    /// By site: the site's name when ACME publishes its certificate.
    pub acme: Vec<Option<String>>,
    /// Every host pattern of every site (the self-signed certificate names
    /// the exact ones).
    pub hosts: Vec<String>,
}

/// The rustls server configuration every worker uses: `identities` by site
/// (`None`: that site has no certificate), chosen by SNI through `sites`;
/// `alpn` the ALPN identifiers offered, in order of preference;
/// `acme_alpn` also offers `acme-tls/1` (TLS-ALPN-01).
pub fn server_config(
    identities: &[Option<Material>],
    sites: &SiteNames,
    acme_alpn: bool,
    tickets: &TicketSecret,
    rotate: Duration,
    alpn: &[&[u8]],
) -> Result<Arc<ServerConfig>, Error> {
    let resolver = resolver::Resolver::new(identities, sites)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|source| Error::Rustls {
            what: "protocol versions",
            source,
        })?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    if acme_alpn {
        // Last: rustls picks the first of ours the client offers, and only
        // a validation offers this one (alone, RFC 8737 §3).
        config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
    }
    config.ticketer = Arc::new(ticketer::Ticketer::new(tickets.0, rotate));
    // TLS 1.3 resumption is by ticket (above); 1.2 session ids use a
    // per-worker cache, tickets serve 1.2 across workers too.
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(4096);
    config.send_tls13_tickets = 2;
    // A TLS 1.3 connection's records are protected by the worker's own
    // record layer once the handshake is done, with the traffic keys
    // rustls hands over (worker::conn::transport::records).
    config.enable_secret_extraction = true;
    Ok(Arc::new(config))
}

/// The secret every worker derives its ticket keys from.
#[derive(Clone, Serialize, Deserialize)]
pub struct TicketSecret(pub [u8; 32]);

impl std::fmt::Debug for TicketSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TicketSecret(<redacted>)")
    }
}

impl TicketSecret {
    /// A fresh random secret (once per server life).
    pub fn generate() -> Result<TicketSecret, Error> {
        use ring::rand::SecureRandom;
        let mut s = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut s)
            .map_err(|_| Error::Rustls {
                what: "random ticket secret",
                source: rustls::Error::FailedToGetRandomBytes,
            })?;
        Ok(TicketSecret(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_material_builds_a_config_and_has_a_fingerprint() {
        let m = Material::self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        assert_eq!(m.fingerprint().len(), 32 * 3 - 1);
        let s = TicketSecret::generate().unwrap();
        let alpn: Vec<&[u8]> = (crate::config::http2::DEFAULT_ALPN.iter())
            .map(|p| p.id())
            .collect();
        let sites = crate::config::tests::ok(crate::config::tests::raw())
            .sites
            .for_tls();
        let hour = Duration::from_secs(3600);
        let c = server_config(&[Some(m)], &sites, false, &s, hour, &alpn).unwrap();
        assert_eq!(c.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    }

    #[test]
    fn mismatched_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = Material::self_signed(&["a".into()]).unwrap();
        let b = Material::self_signed(&["b".into()]).unwrap();
        let cert = dir.path().join("a.pem");
        let key = dir.path().join("b.key");
        std::fs::write(&cert, &a.chain_pem).unwrap();
        std::fs::write(&key, &b.key_pem).unwrap();
        let e = Material::load(&cert, &key).unwrap_err();
        assert!(matches!(e, Error::KeyMismatch { .. }), "{e}");
        std::fs::write(&key, &a.key_pem).unwrap();
        assert!(Material::load(&cert, &key).is_ok());
        std::fs::write(&key, "nothing").unwrap();
        assert!(matches!(
            Material::load(&cert, &key).unwrap_err(),
            Error::NoKey { .. }
        ));
    }
}
