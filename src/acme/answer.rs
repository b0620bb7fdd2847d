//! Challenge answers from a token and a key authorization (RFC 8555 §8.1:
//! `token || '.' || base64url(JWK thumbprint)`, computed by instant-acme).
//!
//! - HTTP-01 (RFC 8555 §8.3): the key authorization itself, served at
//!   `/.well-known/acme-challenge/{token}`.
//! - TLS-ALPN-01 (RFC 8737 §3): a self-signed certificate for the domain
//!   with the critical acmeIdentifier extension holding the SHA-256 of the
//!   key authorization, on a fresh P-256 key.

use super::{Answer, Challenge, Error};
use crate::tls::Material;

pub use crate::tls::ACME_TLS_ALPN;

/// The answer of `challenge` for `domain`.
pub(super) fn make(
    challenge: Challenge,
    domain: &str,
    token: &str,
    key_authorization: &str,
) -> Result<Answer, Error> {
    Ok(match challenge {
        Challenge::Http01 => Answer::Http01 {
            token: token.to_owned(),
            key_authorization: key_authorization.to_owned(),
        },
        Challenge::TlsAlpn01 => Answer::TlsAlpn01 {
            domain: domain.to_owned(),
            material: tls_alpn01(domain, key_authorization)?,
        },
    })
}

/// RFC 8737 §3: the acmeIdentifier certificate for `domain`.
fn tls_alpn01(domain: &str, key_authorization: &str) -> Result<Material, Error> {
    let key = |source| Error::Key {
        what: "a TLS-ALPN-01 certificate",
        source,
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, key_authorization.as_bytes());
    let mut params = rcgen::CertificateParams::new(vec![domain.to_owned()]).map_err(key)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest.as_ref())];
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(key)?;
    let cert = params.self_signed(&pair).map_err(key)?;
    Ok(Material {
        chain_pem: cert.pem(),
        key_pem: pair.serialize_pem(),
    })
}

impl Answer {
    /// The domain or token this answer is for, for logs.
    pub fn label(&self) -> &str {
        match self {
            Answer::Http01 { token, .. } => token,
            Answer::TlsAlpn01 { domain, .. } => domain,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    use x509_parser::extensions::GeneralName;

    const KEY_AUTH: &str = "tok-123.thumbprint-abc";

    #[test]
    fn http01_serves_the_key_authorization() {
        match make(Challenge::Http01, "a.test", "tok-123", KEY_AUTH).unwrap() {
            Answer::Http01 {
                token,
                key_authorization,
            } => {
                assert_eq!(token, "tok-123");
                assert_eq!(key_authorization, KEY_AUTH);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tls_alpn01_carries_the_critical_acme_identifier() {
        let Answer::TlsAlpn01 { domain, material } =
            make(Challenge::TlsAlpn01, "a.test", "tok-123", KEY_AUTH).unwrap()
        else {
            panic!("not a TLS-ALPN-01 answer");
        };
        assert_eq!(domain, "a.test");
        let der = CertificateDer::from_pem_slice(material.chain_pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();

        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier extension");
        assert!(ext.critical);
        // RFC 8737 §3: extnValue is the DER OCTET STRING of the digest.
        let digest = ring::digest::digest(&ring::digest::SHA256, KEY_AUTH.as_bytes());
        let mut want = vec![0x04, 0x20];
        want.extend_from_slice(digest.as_ref());
        assert_eq!(ext.value, want.as_slice());

        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert_eq!(san.value.general_names, [GeneralName::DNSName("a.test")]);
        // The key is the certificate's, in PKCS#8.
        assert!(material.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let pair = rcgen::KeyPair::from_pem(&material.key_pem).unwrap();
        assert_eq!(
            *cert.public_key().subject_public_key.data,
            *pair.public_key_raw()
        );
    }
}
