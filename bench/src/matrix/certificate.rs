//! The TLS identity nginx, h2o and Caddy present in the h2 scenarios: one self-signed ECDSA
//! P-256 certificate for `localhost` and `127.0.0.1`, made once per run with openssl(1) in the
//! run's temp directory. servery makes its own with `--tls-self-signed`, of the same key type
//! (rcgen, ECDSA P-256; docs/tls.md), so every server signs its handshakes with the same
//! algorithm.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

/// The PEM files of the run's certificate and key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Certificate {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot run {openssl:?}: {source}")]
    Spawn { openssl: PathBuf, source: io::Error },
    #[error("`openssl req` failed ({status}): {stderr}")]
    Failed {
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// `openssl req` arguments that write a self-signed P-256 certificate and its unencrypted key.
/// Two days of validity outlast any run; `-addext` needs OpenSSL 1.1.1.
pub fn args(cert: &Path, key: &Path) -> Vec<String> {
    [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-keyout",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([key.display().to_string(), "-out".into()])
    .chain([cert.display().to_string()])
    .collect()
}

/// Makes `dir/cert.pem` and `dir/key.pem` with `openssl`.
pub fn make(openssl: &Path, dir: &Path) -> Result<Certificate, Error> {
    let certificate = Certificate {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    let out = Command::new(openssl)
        .args(args(&certificate.cert, &certificate.key))
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            openssl: openssl.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Failed {
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(certificate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_for_a_p256_certificate_for_the_loopback_address() {
        let a = args(Path::new("/w/cert.pem"), Path::new("/w/key.pem"));
        assert_eq!(a[..4], ["req", "-x509", "-newkey", "ec"]);
        assert!(a.contains(&"ec_paramgen_curve:P-256".to_string()));
        assert!(a.contains(&"subjectAltName=DNS:localhost,IP:127.0.0.1".to_string()));
        assert_eq!(
            a[a.len() - 4..],
            ["-keyout", "/w/key.pem", "-out", "/w/cert.pem"]
        );
    }

    #[test]
    fn makes_pem_files_when_openssl_is_installed() {
        let Some(openssl) = super::super::programs::which("openssl") else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("servery-cert-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let c = make(&openssl, &dir).expect("openssl");
        let cert = std::fs::read_to_string(&c.cert).expect("cert");
        let key = std::fs::read_to_string(&c.key).expect("key");
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        assert!(key.contains("PRIVATE KEY-----"), "{key}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
