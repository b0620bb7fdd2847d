//! What a result must carry to be reproducible and comparable: the source (git commit and
//! whether the tree was dirty), the binaries (SHA-256), the peers' versions, the machine
//! (kernel, CPU model, topology) and the exact command.

use std::fs;
use std::io;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::plan::hex;

/// The identity block of a matrix artifact.
#[derive(Clone, Debug, Serialize)]
pub struct Identity {
    /// When the run started, UTC, RFC 3339.
    pub started_utc: String,
    /// The command line, shell-quoted, as it could be pasted back.
    pub command: String,
    /// `git rev-parse HEAD` of the repository, if it is one.
    pub git_commit: Option<String>,
    /// Tracked files differ from the commit (`git status --porcelain --untracked-files=no`).
    pub git_dirty: Option<bool>,
    /// SHA-256 of each program of this checkout the run used (`None`: not used).
    pub servery_sha256: Option<String>,
    pub hello_sha256: Option<String>,
    pub axum_sha256: Option<String>,
    pub upload_sha256: Option<String>,
    pub axum_tokio_sha256: Option<String>,
    /// `nginx -v`, `h2o --version` (first line), `caddy version` (first line: Debian's
    /// 2.6.2 prints the bare number), `wrk --version` (first line).
    pub nginx_version: Option<String>,
    pub h2o_version: Option<String>,
    pub caddy_version: Option<String>,
    pub wrk_version: Option<String>,
    /// `h2load --version`, `curl --version`, `openssl version` (first lines): the h2
    /// scenarios' load generator, answer checker and certificate maker.
    pub h2load_version: Option<String>,
    pub curl_version: Option<String>,
    pub openssl_version: Option<String>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: Option<String>,
    /// The first `model name` of `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    pub logical_cpus: usize,
    pub physical_cores: usize,
}

/// SHA-256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    Ok(hex(&Sha256::digest(fs::read(path)?)))
}

/// The first line `program args` prints on stdout or stderr, if it runs at all.
pub fn first_line(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = [out.stdout, out.stderr].concat();
    String::from_utf8_lossy(&text)
        .lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

pub fn git_commit(repo: &Path) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn git_dirty(repo: &Path) -> Option<bool> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()?;
    out.status.success().then_some(!out.stdout.is_empty())
}

pub fn kernel() -> Option<String> {
    Some(
        fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()?
            .trim()
            .to_string(),
    )
}

pub fn cpu_model() -> Option<String> {
    fs::read_to_string("/proc/cpuinfo")
        .ok()?
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// `args` joined for a POSIX shell: words that need it are single-quoted.
pub fn shell_quote(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Now, UTC, as `2026-11-29T15:04:05Z`, and as a file-name stamp `20261129T150405Z`.
pub fn utc_now() -> (String, String) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d, h, mi, s) = civil(secs);
    (
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
        format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z"),
    )
}

/// Unix seconds to (year, month, day, hour, minute, second), proleptic Gregorian, using
/// Howard Hinnant's days-to-civil algorithm.
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil(1_700_000_000), (2023, 11, 14, 22, 13, 20));
    }

    #[test]
    fn quotes_what_the_shell_would_split() {
        let args: Vec<String> = ["servery-load", "matrix", "--quick", "a b", "it's", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            shell_quote(&args),
            r"servery-load matrix --quick 'a b' 'it'\''s' ''"
        );
    }

    #[test]
    fn reads_this_machine() {
        assert!(kernel().is_some());
        let sh = Path::new("/bin/sh");
        assert_eq!(sha256_file(sh).map(|h| h.len()).ok(), Some(64));
    }
}
