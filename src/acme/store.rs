//! The engine's files: the state dir, the account, the certificates.
//!
//! Layout under `state_dir` (0700, owned by this process's uid):
//! - `account.json` (0600): the directory URL and the account credentials.
//! - `sites/<site>/cert.pem` (0644): the chain as the CA returned it.
//! - `sites/<site>/key.pem` (0600): its PKCS#8 key.
//!
//! Every file is written whole to a temp file beside it, fsynced, renamed
//! over the old one, and the directory fsynced: a reader sees the old file or
//! the new one. The key is renamed before the chain, so a crash between the
//! two leaves a pair that does not match; [`stored`] reports it and the engine
//! orders afresh at once.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde::{Deserialize, Serialize};

use super::{Certificate, Error};
use crate::tls::Material;

const ACCOUNT: &str = "account.json";
const CERT: &str = "cert.pem";
const KEY: &str = "key.pem";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Create `state_dir` (0700) if missing, and refuse one that another user
/// owns or that its group or the world may write.
pub(super) fn prepare(state_dir: &Path) -> Result<(), Error> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(io(state_dir))?;
    check_dir(state_dir)
}

fn check_dir(dir: &Path) -> Result<(), Error> {
    let meta = fs::metadata(dir).map_err(io(dir))?;
    let uid = nix::unistd::Uid::effective().as_raw();
    if meta.uid() != uid {
        return Err(Error::StateDirOwner {
            path: dir.to_owned(),
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Error::StateDirMode {
            path: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// A site name is one path component: not empty, no `/`, not `.` or `..`,
/// no NUL, no leading dot (no hidden or temp-file lookalikes).
pub(super) fn check_site(site: &str) -> Result<(), Error> {
    let reason = if site.is_empty() {
        Some("is empty")
    } else if site.contains('/') || site.contains('\0') {
        Some("contains '/' or NUL: it names a directory")
    } else if site.starts_with('.') {
        Some("starts with '.' (no '.', '..' or hidden names)")
    } else if site.len() > 200 {
        Some("is longer than 200 bytes")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::Site {
            site: site.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

fn site_dir(state_dir: &Path, site: &str) -> Result<PathBuf, Error> {
    check_site(site)?;
    Ok(state_dir.join("sites").join(site))
}

/// What is on disk for `site`: `None` if nothing is stored yet.
pub fn stored(state_dir: &Path, site: &str) -> Result<Option<Certificate>, Error> {
    let dir = site_dir(state_dir, site)?;
    let (cert, key) = (dir.join(CERT), dir.join(KEY));
    let chain_pem = match fs::read_to_string(&cert) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&cert)(e)),
    };
    let key_pem = fs::read_to_string(&key).map_err(io(&key))?;
    let material = Material { chain_pem, key_pem };
    certificate(material, &cert.display().to_string()).map(Some)
}

/// Store `material` for `site` (the key first, then the chain).
pub(super) fn save(state_dir: &Path, site: &str, material: &Material) -> Result<(), Error> {
    let dir = site_dir(state_dir, site)?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(io(&dir))?;
    write_atomic(&dir.join(KEY), material.key_pem.as_bytes(), 0o600)?;
    write_atomic(&dir.join(CERT), material.chain_pem.as_bytes(), 0o644)
}

/// The dates of `material`'s leaf, after checking that the chain parses and
/// that the key is the leaf's. `origin` names where it came from.
pub(super) fn certificate(material: Material, origin: &str) -> Result<Certificate, Error> {
    let bad = |detail: String| Error::BadCertificate {
        origin: origin.to_owned(),
        detail,
    };
    let leaf = CertificateDer::pem_slice_iter(material.chain_pem.as_bytes())
        .next()
        .ok_or_else(|| bad("no PEM certificate".into()))?
        .map_err(|e| bad(format!("PEM: {e}")))?;
    let (_, x509) =
        x509_parser::parse_x509_certificate(&leaf).map_err(|e| bad(format!("X.509: {e}")))?;
    let key = rcgen::KeyPair::from_pem(&material.key_pem)
        .map_err(|e| bad(format!("private key: {e}")))?;
    if *x509.public_key().subject_public_key.data != *key.public_key_raw() {
        return Err(bad("the key does not belong to the leaf certificate".into()));
    }
    let time = |t: i64| UNIX_EPOCH + Duration::from_secs(u64::try_from(t).unwrap_or(0));
    let validity = x509.validity();
    Ok(Certificate {
        not_before: time(validity.not_before.timestamp()),
        not_after: time(validity.not_after.timestamp()),
        material,
    })
}

/// Whether the leaf of `material` names every one of `domains` (a site whose
/// domains changed needs a new certificate, whatever its dates).
pub(super) fn covers(material: &Material, domains: &[String]) -> bool {
    let Some(Ok(leaf)) = CertificateDer::pem_slice_iter(material.chain_pem.as_bytes()).next()
    else {
        return false;
    };
    let Ok((_, x509)) = x509_parser::parse_x509_certificate(&leaf) else {
        return false;
    };
    let Ok(Some(san)) = x509.subject_alternative_name() else {
        return false;
    };
    let names: Vec<&str> = san
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(*d),
            _ => None,
        })
        .collect();
    domains
        .iter()
        .all(|d| names.iter().any(|n| n.eq_ignore_ascii_case(d)))
}

/// `account.json`: the credentials and the directory they belong to.
#[derive(Serialize, Deserialize)]
struct AccountFile {
    directory: String,
    credentials: instant_acme::AccountCredentials,
}

/// The stored account for `directory`; `None` if there is none, or it
/// belongs to another directory (a new one then replaces it).
pub(super) fn account(
    state_dir: &Path,
    directory: &str,
) -> Result<Option<instant_acme::AccountCredentials>, Error> {
    let path = state_dir.join(ACCOUNT);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let file: AccountFile =
        serde_json::from_slice(&bytes).map_err(|source| Error::Account { path, source })?;
    if file.directory != directory {
        tracing::warn!(
            stored = %file.directory, directory,
            "the stored ACME account belongs to another directory; creating a new one"
        );
        return Ok(None);
    }
    Ok(Some(file.credentials))
}

/// Store the account's credentials (0600).
pub(super) fn save_account(
    state_dir: &Path,
    directory: &str,
    credentials: instant_acme::AccountCredentials,
) -> Result<(), Error> {
    let path = state_dir.join(ACCOUNT);
    let file = AccountFile {
        directory: directory.to_owned(),
        credentials,
    };
    let json = serde_json::to_vec_pretty(&file).map_err(|source| Error::Account {
        path: path.clone(),
        source,
    })?;
    write_atomic(&path, &json, 0o600)
}

/// Write `bytes` to `path` through a temp file, fsync, rename and a fsync of
/// the directory: `path` holds the old bytes or the new ones, never a part.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let _ = fs::remove_file(&tmp);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // The umask may have narrowed `mode`; the file gets exactly `mode`.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()
    })();
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, path)) {
        let _ = fs::remove_file(&tmp);
        return Err(io(path)(e));
    }
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// Seconds since the epoch, for logs.
pub(super) fn epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed pair valid for `days` (1..=27) from 2025-01-01.
    fn material(days: u8) -> Material {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a.test".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2025, 1, 1 + days);
        let cert = params.self_signed(&key).unwrap();
        Material {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn makes_a_private_state_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        prepare(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        prepare(&dir).unwrap();
    }

    #[test]
    fn refuses_a_group_or_world_writable_state_dir() {
        let tmp = tempfile::tempdir().unwrap();
        for m in [0o770, 0o707, 0o777] {
            fs::set_permissions(tmp.path(), fs::Permissions::from_mode(m)).unwrap();
            let err = prepare(tmp.path()).unwrap_err();
            assert!(
                matches!(err, Error::StateDirMode { mode, .. } if mode == m),
                "{err}"
            );
        }
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        prepare(tmp.path()).unwrap();
    }

    #[test]
    fn refuses_a_state_dir_of_another_user() {
        // `/` is root's; as root this process owns it, so the check is moot.
        if nix::unistd::Uid::effective().is_root() {
            return;
        }
        assert!(matches!(
            check_dir(Path::new("/")),
            Err(Error::StateDirOwner { .. })
        ));
    }

    #[test]
    fn site_names_are_one_safe_component() {
        for ok in ["www", "example.com", "a_b-c"] {
            check_site(ok).unwrap();
        }
        for bad in ["", "a/b", "..", ".", ".hidden", "/abs", "a\0b"] {
            assert!(
                matches!(check_site(bad), Err(Error::Site { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn saves_and_reads_back_with_private_key_mode() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(stored(tmp.path(), "www").unwrap().is_none());
        let m = material(20);
        save(tmp.path(), "www", &m).unwrap();
        let dir = tmp.path().join("sites/www");
        assert_eq!(mode(&dir.join(KEY)), 0o600);
        assert_eq!(mode(&dir.join(CERT)), 0o644);
        let c = stored(tmp.path(), "www").unwrap().unwrap();
        assert_eq!(c.material.chain_pem, m.chain_pem);
        let life = c.not_after.duration_since(c.not_before).unwrap();
        assert!(life.as_secs().abs_diff(20 * 86_400) < 5, "{life:?}");
    }

    #[test]
    fn replaces_atomically_and_leaves_no_temp_files() {
        let tmp = tempfile::tempdir().unwrap();
        save(tmp.path(), "www", &material(1)).unwrap();
        let new = material(2);
        save(tmp.path(), "www", &new).unwrap();
        let c = stored(tmp.path(), "www").unwrap().unwrap();
        assert_eq!(c.material.key_pem, new.key_pem);
        let names: Vec<_> = fs::read_dir(tmp.path().join("sites/www"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_key_of_another_certificate_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (material(1), material(1));
        let mixed = Material {
            chain_pem: a.chain_pem,
            key_pem: b.key_pem,
        };
        save(tmp.path(), "www", &mixed).unwrap();
        let err = stored(tmp.path(), "www").unwrap_err();
        assert!(matches!(err, Error::BadCertificate { .. }), "{err}");
    }

    #[test]
    fn coverage_needs_every_domain_in_the_sans() {
        let m = material(1);
        assert!(covers(&m, &["a.test".into()]));
        assert!(covers(&m, &["A.Test".into()]));
        assert!(!covers(&m, &["a.test".into(), "b.test".into()]));
    }

    #[test]
    fn account_file_is_private_and_bound_to_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(account(tmp.path(), "https://ca/dir").unwrap().is_none());
        fs::write(tmp.path().join(ACCOUNT), b"{}").unwrap();
        assert!(matches!(
            account(tmp.path(), "https://ca/dir"),
            Err(Error::Account { .. })
        ));
    }
}
